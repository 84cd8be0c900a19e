"""The project's DAGs import cleanly, and the local Airflow's settings and start-up failures
(eos_etl.embedded.airflow), without a running Airflow. One that starts, logs in and stops:
tests/integration/embedded/test_airflow.py.

Airflow is never imported into the pytest process: its configuration is read
once at import time (and written to ``$AIRFLOW_HOME/airflow.cfg``), which would
leak into other tests. Every Airflow call runs in a subprocess with
:meth:`EmbeddedAirflow.env`, pointed at a temporary home, so neither
``~/airflow`` nor the project's ``var/airflow`` is touched.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eos_etl import paths
from eos_etl.embedded.airflow import AirflowStartError, EmbeddedAirflow
from eos_etl.host.errors import PortInUseError
from eos_etl.host.ports import free_port
from tests.support.embedded_airflow import _free_ports_airflow

DAGS = paths.project_root() / "dags"

# Parses each folder given on the command line with the DagBag the DAG
# processor uses (Airflow 3: airflow.dag_processing.dagbag.DagBag, also
# reachable as airflow.models.DagBag; example DAGs are excluded through
# [core] load_examples=False in env(), there is no include_examples argument).
_PARSE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from airflow.models import DagBag

    out = {}
    for folder in sys.argv[1:]:
        bag = DagBag(dag_folder=folder, bundle_path=Path(folder))
        out[folder] = {
            "dag_folder": str(bag.dag_folder),
            "dag_ids": sorted(bag.dag_ids),
            "import_errors": dict(bag.import_errors),
        }
    print("RESULT " + json.dumps(out))
    """
)

_GOOD_DAG = textwrap.dedent(
    """
    from airflow.sdk import DAG

    with DAG(dag_id="good", schedule=None):
        pass
    """
)

_BROKEN_DAG = textwrap.dedent(
    """
    from airflow.sdk import DAG
    import eos_etl_module_that_does_not_exist  # noqa: F401

    with DAG(dag_id="broken"):
        pass
    """
)


@pytest.fixture(scope="module")
def parsed(tmp_path_factory) -> dict[str, dict]:
    """DagBag results for the project's dags/ and for a folder with a known-broken DAG."""
    tmp = tmp_path_factory.mktemp("dagbag")
    broken = tmp / "broken_dags"
    broken.mkdir()
    (broken / "broken_dag.py").write_text(_BROKEN_DAG)
    good = tmp / "good_dags"
    good.mkdir()
    (good / "good_dag.py").write_text(_GOOD_DAG)
    af = EmbeddedAirflow(home=tmp / "airflow")
    proc = subprocess.run(
        [sys.executable, "-c", _PARSE, str(DAGS), str(broken), str(good)],
        env=af.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"parsing DAGs failed:\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(lines[-1][len("RESULT ") :])
    return {"project": result[str(DAGS)], "broken": result[str(broken)], "good": result[str(good)]}


def test_dagbag_loads_dags_and_reports_import_errors(parsed):
    # Guards against a vacuous pass below: the same parse loads a good DAG and
    # reports a broken one.
    assert parsed["good"] == {"dag_folder": parsed["good"]["dag_folder"], "dag_ids": ["good"], "import_errors": {}}
    broken = parsed["broken"]
    assert list(broken["import_errors"]) == ["broken_dag.py"], broken
    assert "eos_etl_module_that_does_not_exist" in broken["import_errors"]["broken_dag.py"]
    assert broken["dag_ids"] == []


def test_project_dags_import_without_errors(parsed):
    project = parsed["project"]
    assert Path(project["dag_folder"]) == DAGS
    errors = project["import_errors"]
    assert errors == {}, "DAG import errors in %s:\n%s" % (
        DAGS,
        "\n\n".join(f"--- {path}\n{err}" for path, err in errors.items()),
    )


def test_airflow_cmd_uses_the_given_home(tmp_path):
    af = EmbeddedAirflow(home=tmp_path / "airflow", port=free_port(), parallelism=2)
    proc = af.airflow_cmd("config", "get-value", "api", "port", check=True, timeout=300)
    assert proc.stdout.strip().splitlines()[-1] == str(af.port)
    proc = af.airflow_cmd("config", "get-value", "core", "dags_folder", check=True, timeout=300)
    assert proc.stdout.strip().splitlines()[-1] == str(DAGS)
    # Airflow wrote its config into our home, not ~/airflow.
    assert (tmp_path / "airflow" / "airflow.cfg").is_file()


def test_password_not_in_repr(tmp_path):
    af = EmbeddedAirflow(home=tmp_path, password="s3cret-pw")
    assert "s3cret-pw" not in repr(af)
    assert "s3cret-pw" not in af.status().describe()
    assert af.login == ("admin", "s3cret-pw")
    # What make demo and status print: where the password is, never the password (terminals and CI logs keep it).
    assert "s3cret-pw" not in af.describe() and str(af.passwords_file) in af.describe()


def test_no_default_password(tmp_path, monkeypatch):
    """Without EOS_ETL_AIRFLOW_PASSWORD the login gets a random password, kept (0600) for later starts."""
    monkeypatch.delenv("EOS_ETL_AIRFLOW_PASSWORD", raising=False)
    first = EmbeddedAirflow(home=tmp_path)
    other_home = EmbeddedAirflow(home=tmp_path / "other")
    assert first.password != other_home.password and len(first.password) >= 20
    assert first.password not in ("admin", "airflow", "")
    first._write_passwords_file()
    assert oct(first.passwords_file.stat().st_mode & 0o777) == "0o600"
    assert EmbeddedAirflow(home=tmp_path).password == first.password  # a restart keeps the login
    monkeypatch.setenv("EOS_ETL_AIRFLOW_PASSWORD", "chosen-by-operator")
    assert EmbeddedAirflow(home=tmp_path).password == "chosen-by-operator"


def test_start_fails_fast_when_the_port_is_taken(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        af = _free_ports_airflow(tmp_path / "airflow")
        af.port = port
        with pytest.raises(PortInUseError, match=f"port {port} .*Airflow API server"):
            af.start()
    assert not af.pid_file.exists()


def test_start_reports_the_log_when_a_component_cannot_start(tmp_path):
    af = _free_ports_airflow(tmp_path / "airflow", overrides={"AIRFLOW__CORE__EXECUTOR": "NoSuchExecutor"})
    try:
        with pytest.raises(AirflowStartError, match="(?s)exited during start-up.*NoSuchExecutor"):
            af.start(timeout=120)
    finally:
        af.stop()
    assert af.pid() is None


def test_the_projects_airflow_runs_windows_on_its_spark_connect_server(tmp_path, monkeypatch):
    """make up / the demo: the DAGs get the server's connection (token as password) and the route switch;
    without a server (EOS_ETL_SPARK_CONNECT=off) they keep spark-submit."""
    from eos_etl.embedded.spark_connect import SparkConnectServer, start_for_windows

    server = SparkConnectServer(home=tmp_path / "spark-connect", port=15999)
    af = EmbeddedAirflow.local(spark_connect=server)
    assert af.connections["spark_connect_default"] == {
        "conn_type": "spark_connect", "host": "localhost", "port": 15999, "password": server.token()}
    # The run task supervises that server (ensure_running before each window): it knows its home.
    assert af.overrides == {"EOS_ETL_SPARK_CONNECT_CONN_ID": "spark_connect_default",
                            "EOS_ETL_SPARK_CONNECT_HOME": str(server.home)}
    plain = EmbeddedAirflow.local()
    assert "spark_connect_default" not in plain.connections and not plain.overrides
    assert plain.connections["spark_default"] == af.connections["spark_default"]
    monkeypatch.setenv("EOS_ETL_SPARK_CONNECT", "off")
    assert start_for_windows() is None
