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

from tests.support import ROOT

SCRIPTS = ROOT / "scripts"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


code_structure = _load("code_structure")
GRAPH = code_structure.import_graph()

#: What each package may not import. The machine (host), the jars and the JVMs' options stand below
#: everything; the Kafka client library and the Spark runtime below the engine; the engine is generic;
#: the launchers of the embedded stack (embedded) stand on the runtime, which never imports them; the
#: reports web app knows nothing of the DAGs.
_TOP = ("shop", "quality", "orchestration", "reports", "cli", "demo")
FORBIDDEN = {
    "host": ("jars", "jvm", "kafka", "spark", "embedded", "engine", *_TOP),
    "jars": ("jvm", "kafka", "spark", "embedded", "engine", *_TOP),
    "jvm": ("kafka", "spark", "embedded", "engine", *_TOP),
    "kafka": ("spark", "jvm", "embedded", "engine", *_TOP),
    "spark": ("kafka", "embedded", "engine", *_TOP),
    "engine": ("spark", "jvm", "jars", "host", "embedded", *_TOP),
    "embedded": ("engine", *_TOP),
    "shop": ("embedded", "quality", "orchestration", "reports", "cli", "demo"),
    "quality": ("embedded", "shop", "orchestration", "reports", "cli", "demo"),
    "reports": ("embedded", "engine", "orchestration", "cli", "demo"),
}
#: The one import of a launcher from the runtime: the run task supervises the project's own Spark
#: Connect server when ``EOS_ETL_SPARK_CONNECT_HOME`` names one (deferred to that case).
RUNTIME_REACHES_LAUNCHER = {("eos_etl.orchestration.operators", "eos_etl.embedded.spark_connect")}
#: The engine's wings, each importing only those before it (and the engine's shared modules).
WINGS = ("publishing", "planning", "tasks")


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "eos_etl" and len(parts) > 1 else ""


def _wing(module: str) -> str | None:
    """The engine wing of an engine module ("" for the engine's shared modules), None outside the engine."""
    parts = module.split(".")
    if parts[:2] != ["eos_etl", "engine"]:
        return None
    return parts[2] if len(parts) > 3 and parts[2] in WINGS else ""


def test_the_graph_is_read_from_the_code():
    assert len(GRAPH) > 50
    assert "eos_etl.errors" in GRAPH["eos_etl.kafka.errors"]  # a relative import, resolved
    assert "eos_etl.kafka.connection" in GRAPH["eos_etl.embedded.kafka_cluster"]  # stack/ stands on kafka/
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


def test_the_product_never_imports_its_lab():
    """Fault injection and benchmarks live in ``eos_etl_lab``: no module of the product, no DAG, plugin
    or job imports it (the lab imports the product, never the reverse)."""
    assert {m.split(".")[1] for m in GRAPH if m.startswith("eos_etl_lab.")} >= {"faults", "bench"}
    assert any(t.startswith("eos_etl.") for t in GRAPH["eos_etl_lab.faults.soak"])  # the lab stands on the product
    wrong = [f"{m} -> {t}" for m, targets in GRAPH.items() if not m.startswith("eos_etl_lab")
             for t in sorted(targets) if t.split(".")[0] == "eos_etl_lab"]
    assert wrong == []


def test_the_runtime_reaches_the_embedded_stack_in_one_place_only():
    """What the DAG tasks and a run import (engine, kafka, spark, jvm, jars, host, shop, quality,
    orchestration, reports) never imports a launcher, but for the run task's supervision of the
    project's own Connect server, which imports it only when that server is the route."""
    runtime = ("engine", "kafka", "spark", "jvm", "jars", "host", "shop", "quality", "orchestration", "reports")
    reaching = {(m, t) for m, targets in GRAPH.items() if _package(m) in runtime
                for t in targets if _package(t) == "embedded"}
    assert reaching == RUNTIME_REACHES_LAUNCHER
    deferred = code_structure.deferred_imports(code_structure.checked_files())
    assert any(m == "eos_etl.orchestration.operators" for m, _line, _why in deferred)


def test_the_engine_wings_stand_in_order():
    """The engine's shared modules import no wing; publishing imports neither planning nor the tasks;
    planning not the tasks."""
    wrong = []
    for module, targets in GRAPH.items():
        wing = _wing(module)
        if wing is None:
            continue
        allowed = ("",) + WINGS[: WINGS.index(wing) + 1] if wing else ("",)
        wrong += [f"{module} -> {t}" for t in sorted(targets) if _wing(t) is not None and _wing(t) not in allowed]
    assert wrong == []
    assert {_wing(m) for m in GRAPH if _wing(m) is not None} == {"", *WINGS}


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
    assert "engine/planning/planner" in tests_by_module.table()
