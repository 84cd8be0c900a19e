"""The package's structure rules, checked on the source (broker-free).

scripts/code_structure.py computes the figures; these tests keep the rules from slipping:
no import cycles, the layers import downwards only, and the engine knows nothing of the shop.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("code_structure", ROOT / "scripts" / "code_structure.py")
code_structure = importlib.util.module_from_spec(_spec)
sys.modules["code_structure"] = code_structure
_spec.loader.exec_module(code_structure)

MODULES = code_structure.modules()
GRAPH = code_structure.imports(MODULES)

#: What each package may not import: the Kafka client library sits below the processes (stack),
#: the engine is generic, the reports web app knows nothing of the DAGs, and fault tests and
#: benchmarks sit on top of everything.
FORBIDDEN = {
    "kafka": ("stack", "engine", "shop", "quality", "orchestration", "faults", "bench"),
    "engine": ("shop", "quality", "orchestration", "faults", "bench"),
    "stack": ("engine", "shop", "quality", "orchestration", "faults", "bench"),
    "quality": ("orchestration", "faults", "bench"),
    "shop": ("orchestration", "faults", "bench"),
    "reports": ("orchestration", "faults", "bench"),
}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_scanner_sees_the_package():
    assert len(MODULES) > 50
    assert "eos_etl.errors" in GRAPH["eos_etl.kafka.errors"]  # a relative import, resolved
    assert code_structure.cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def test_no_import_cycles():
    assert code_structure.cycles(GRAPH) == []


def test_layers_import_downwards_only():
    wrong = []
    for module, targets in GRAPH.items():
        banned = FORBIDDEN.get(_package(module), ())
        wrong += [f"{module} -> {t}" for t in sorted(targets) if _package(t) in banned]
    assert wrong == []
