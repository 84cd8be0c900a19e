"""The package's layers hold: no import cycle between modules or packages, and kafka/ (the client
library) imports nothing of stack/ (the processes), which stands above it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "draw_import_graph.py"


def _graph_module():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import draw_import_graph
    finally:
        sys.path.pop(0)
    return draw_import_graph


def test_no_import_cycle_between_modules_or_packages():
    res = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cycles between modules: 0; between packages: 0" in res.stdout, res.stdout


def test_the_client_library_stands_below_the_processes():
    graph_of = _graph_module()
    modules = graph_of.read_modules()
    kafka = {m: graph_of.imports_of(m, p, modules) for m, p in modules.items() if m.startswith("eos_etl.kafka")}
    assert len(kafka) > 5
    assert not {m: sorted(t for t in targets if t.startswith("eos_etl.stack")) for m, targets in kafka.items()
                if any(t.startswith("eos_etl.stack") for t in targets)}
    stack = graph_of.imports_of("eos_etl.stack.kafka_cluster", modules["eos_etl.stack.kafka_cluster"], modules)
    assert "eos_etl.kafka.connection" in stack  # the arrow between them runs from stack/ down to kafka/


def test_the_check_sees_a_cycle():
    graph_of = _graph_module()
    assert graph_of.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert graph_of.cycles({"a": {"b"}, "b": set()}) == []
