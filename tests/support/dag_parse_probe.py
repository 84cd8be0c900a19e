"""Parse one DAG or plugin file as Airflow's DAG processor would, in this fresh interpreter, and
print (JSON) what the parse cost: its seconds (after Airflow's own import), the top-level modules
loaded, the Variables and Connections it read. Run by tests/unit/orchestration/test_dag_parse.py."""

from __future__ import annotations

import json
import runpy
import sys
import time

import airflow.sdk as sdk

reads: list[str] = []
_variable_get, _connection_get = sdk.Variable.get, sdk.BaseHook.get_connection.__func__


def _read_variable(key, *args, **kwargs):
    reads.append(f"Variable {key}")
    return _variable_get(key, *args, **kwargs)


def _read_connection(cls, conn_id, *args, **kwargs):
    reads.append(f"Connection {conn_id}")
    return _connection_get(cls, conn_id, *args, **kwargs)


sdk.Variable.get = staticmethod(_read_variable)
sdk.BaseHook.get_connection = classmethod(_read_connection)
before = set(sys.modules)
t0 = time.perf_counter()
runpy.run_path(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t0, "reads": reads,
                  "modules": sorted({m.split(".")[0] for m in set(sys.modules) - before}),
                  "eos_etl_modules": sum(m.startswith("eos_etl") for m in sys.modules)}))
