"""The package's structure rules, checked on the source (broker-free).

scripts/draw_import_graph.py reads the imports (and draws docs/import-graph.png);
scripts/code_structure.py computes the figures. These tests keep the rules from slipping: no
import cycle between modules or packages, the layers import downwards only, the engine knows
nothing of the shop.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


code_structure = _load("code_structure")
GRAPH = code_structure.import_graph()

#: What each package may not import: the Kafka client library sits below the processes (stack),
#: the engine is generic, the reports web app knows nothing of the DAGs, and fault tests and
#: benchmarks sit on top of everything.
FORBIDDEN = {
    "kafka": ("stack", "engine", "shop", "quality", "orchestration", "reports", "faults", "bench", "cli"),
    "stack": ("engine", "shop", "quality", "orchestration", "reports", "faults", "bench", "cli"),
    "engine": ("shop", "quality", "orchestration", "reports", "faults", "bench", "cli"),
    "quality": ("orchestration", "faults", "bench", "cli"),
    "shop": ("orchestration", "faults", "bench", "cli"),
    "reports": ("orchestration", "faults", "bench", "cli"),
}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "eos_etl" and len(parts) > 1 else ""


def test_the_graph_is_read_from_the_code():
    assert len(GRAPH) > 50
    assert "eos_etl.errors" in GRAPH["eos_etl.kafka.errors"]  # a relative import, resolved
    assert "eos_etl.kafka.connection" in GRAPH["eos_etl.stack.kafka_cluster"]  # stack/ stands on kafka/
    assert code_structure.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert code_structure.cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules_or_packages():
    res = subprocess.run([sys.executable, str(SCRIPTS / "draw_import_graph.py"), "--check"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cycles between modules: 0; between packages: 0" in res.stdout, res.stdout


def test_layers_import_downwards_only():
    wrong = []
    for module, targets in GRAPH.items():
        banned = FORBIDDEN.get(_package(module), ())
        wrong += [f"{module} -> {t}" for t in sorted(targets) if _package(t) in banned]
    assert wrong == []


def test_every_deferred_import_says_why():
    """An import inside a function is a choice (a heavy optional dependency, or one the DAG parse or a
    Spark worker must not pay); a comment on it, or heading its block, says which. The DAG, plugin
    and job files too."""
    assert code_structure.figures()["deferred_imports_without_reason"] == []
    assert "dags/shop_invoicing" in code_structure.checked_files()
    assert "plugins/eos_etl_reports" in code_structure.checked_files()


def test_no_function_is_longer_than_80_lines():
    mods = code_structure.checked_files()
    assert [f"{name} ({n} lines)" for n, name in code_structure.functions(mods) if n > 80] == []


def test_the_tests_by_module_table_is_current():
    tests_by_module = _load("tests_by_module")
    assert tests_by_module.main(["--check"]) == 0, "run python scripts/tests_by_module.py"
    assert "engine/planner" in tests_by_module.table()
