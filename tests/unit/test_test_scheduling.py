"""The suite's xdist groups hold: tests of one group run on one worker.

The suite relies on it (the three-node cluster, the Spark cluster and a module's own broker start
once, not once per worker), and it broke silently before: pytest 9.2's structured node ids end
pytest-xdist 3.8's ``--dist loadgroup`` (pytest-xdist#1386), and marks a conftest adds after xdist's
own collection hook ran are never read. This runs a tiny suite the way ``make test`` runs this one,
with this suite's conftest hook and grouping rules, and asserts where each test ran.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

FIXTURES = '''

@pytest.fixture(scope="session")
def kafka_cluster():
    return "cluster"


@pytest.fixture(scope="module")
def own_broker():
    return "broker"
'''

TESTS = {
    "test_marked.py": 'import pytest\npytestmark = [pytest.mark.xdist_group("marked")]\n'
                      '@pytest.mark.parametrize("i", range(4))\ndef test_marked(i): pass\n',
    "test_cluster.py": '@__import__("pytest").mark.parametrize("i", range(4))\n'
                       'def test_cluster(kafka_cluster, i): pass\n',
    "test_module.py": '@__import__("pytest").mark.parametrize("i", range(4))\ndef test_module(own_broker, i): pass\n',
    "test_free.py": '@__import__("pytest").mark.parametrize("i", range(12))\ndef test_free(i): pass\n',
}


def test_groups_run_on_one_worker_each(tmp_path: Path):
    source = (ROOT / "tests" / "conftest.py").read_text()
    # The suite's grouping rules and its collection hook as its conftest defines them, nothing else of it.
    start = source.index("SHARED_CLUSTER_FIXTURES = ")
    end = source.index('@pytest.fixture(scope="session", autouse=True)\ndef _logging()')
    (tmp_path / "conftest.py").write_text("import pytest\n\n" + source[start:end] + FIXTURES)
    for name, text in TESTS.items():
        (tmp_path / name).write_text(text)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadgroup",
                           "-v", "-o", "addopts=", "-W", "ignore::pytest.PytestUnknownMarkWarning", "--rootdir",
                           str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    workers: dict[str, set[str]] = {}
    for worker, test in re.findall(r"\[(gw\d)\] \[\s*\d+%\] PASSED (\S+)", proc.stdout):
        workers.setdefault(test.split("::")[0], set()).add(worker)
    assert set(workers) == set(TESTS), proc.stdout[-3000:]
    for grouped in ("test_marked.py", "test_cluster.py", "test_module.py"):
        assert len(workers[grouped]) == 1, (grouped, workers, proc.stdout[-3000:])
    # and the rest is spread: the run really had several workers
    assert len(workers["test_free.py"]) > 1, workers


@pytest.mark.parametrize("name, group", [("t.py::test_x[1]@shared", "shared"), ("t.py::test_x[a@b]", None)])
def test_the_loop_script_reads_junit_names_with_or_without_a_group(tmp_path: Path, name: str, group: str | None):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from loop_tests import outcomes
    finally:
        sys.path.pop(0)
    junit = tmp_path / "j.xml"
    test = name.split("::")[1]
    junit.write_text(f'<testsuites><testsuite><testcase classname="tests.t" name="{test}"/></testsuite></testsuites>')
    expected = test[:test.rfind("@")] if group else test
    assert outcomes(junit) == {f"tests.t::{expected}": "passed"}
