"""Run one DAG with ``dag.test()`` in a fresh process (used by tests/integration/orchestration/test_dag.py).

    python tests/support/dag_runner.py <dag_id> '<run_conf json>'

Prints ``DAGRUN_STATE=<state>`` and ``DAGRUN_ID=<run id>`` on the last lines.
"""

import importlib.util
import json
import sys
from pathlib import Path

dag_id, conf = sys.argv[1], json.loads(sys.argv[2] if len(sys.argv) > 2 else "{}")
dags = Path(__file__).resolve().parents[2] / "dags"
spec = importlib.util.spec_from_file_location(dag_id, dags / f"{dag_id}.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
run = module.dag.test(run_conf=conf)
print(f"DAGRUN_STATE={run.state}")
print(f"DAGRUN_ID={run.run_id}")
