"""How the DAG's spark-submit hands the Kafka password to the driver (eos_etl.orchestration.operators,
broker-free).

The provider turns ``env_vars`` into ``--conf spark.yarn.appMasterEnv.*`` /
``spark.kubernetes.driverEnv.*`` on spark-submit's command line for YARN and
Kubernetes masters, so the operator never uses it: the driver (deploy mode
client) reads a private file, and deploy mode cluster is refused before
anything is read or submitted. The file route itself runs for real in
tests/integration/orchestration/test_dag.py's DAG runs over SASL_SSL, a real spark-submit in
tests/integration/orchestration/test_operators.py. Airflow runs in a subprocess: it is
never imported into the test process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SECRET = "s3cret-never-shown"

ROUTE_CHECK = """
import json, stat
from airflow.sdk.exceptions import AirflowFailException
from eos_etl.errors import ConfigurationError
from eos_etl.orchestration.operators import WindowSparkSubmitOperator, check_deploy_mode, private_connection_file

out = {}
for name, kwargs in {"cluster connection": {"conn_id": "spark_cluster"},
                     "cluster override": {"conn_id": "spark_client", "deploy_mode": "cluster"}}.items():
    op = WindowSparkSubmitOperator(task_id="run_window", application="jobs/run_window.py", **kwargs)
    try:
        op.execute({})  # an empty context: anything past the check would fail differently
        out[name] = "submitted"
    except AirflowFailException as exc:  # bad configuration: the try fails for good, never retried
        out[name] = str(exc) if isinstance(exc.__cause__, ConfigurationError) else f"not configuration: {exc!r}"
check_deploy_mode("spark_client")
out["client"] = "accepted"
with private_connection_file('{"sasl_password": "%s"}') as path:
    out["file"] = {"mode": oct(stat.S_IMODE(path.stat().st_mode)), "dir": oct(stat.S_IMODE(path.parent.stat().st_mode)),
                   "text": path.read_text()}
out["removed"] = not path.exists() and not path.parent.exists()
try:
    with private_connection_file("{}") as path:
        raise RuntimeError("the submission failed")
except RuntimeError:
    out["removed after a failure"] = not path.parent.exists()
print(json.dumps(out))
""" % SECRET


def test_cluster_deploy_mode_is_refused_and_the_connection_file_is_private():
    env = {
        **os.environ,
        "AIRFLOW_CONN_SPARK_CLUSTER": json.dumps({"conn_type": "spark", "host": "yarn",
                                                  "extra": {"deploy-mode": "cluster"}}),
        "AIRFLOW_CONN_SPARK_CLIENT": json.dumps({"conn_type": "spark", "host": "yarn",
                                                 "extra": {"deploy-mode": "client"}}),
        "AIRFLOW_CONN_KAFKA_PURCHASES": json.dumps({"conn_type": "generic", "host": "127.0.0.1", "port": 9,
                                                    "login": "etl", "password": SECRET}),
    }
    proc = subprocess.run([sys.executable, "-c", ROUTE_CHECK], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for case in ("cluster connection", "cluster override"):
        assert "deploy mode 'cluster'" in out[case] and "--connection-json-file" in out[case], out[case]
        assert "not retried" in out[case], out[case]
        assert SECRET not in out[case]
    assert out["client"] == "accepted"
    assert out["file"] == {"mode": "0o600", "dir": "0o700", "text": json.dumps({"sasl_password": SECRET})}
    assert out["removed"] and out["removed after a failure"]
    assert SECRET not in proc.stderr
