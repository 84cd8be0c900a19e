"""Helpers the test files share (fixtures stay in tests/conftest.py).

One module per topic: helpers that both halves of a split topic use (its broker-free tests under
tests/unit/, its real-component tests under tests/integration/), the CLI helpers most integration
tests use, and the scripts the tests run in a fresh interpreter (dag_runner.py, dag_parse_probe.py).
"""

from pathlib import Path

#: The repository's root (tests/support/ is two levels below it).
ROOT = Path(__file__).resolve().parents[2]
