"""Run a selection of the suite several times, as CI runs it (``make test``'s workers), and table each test's passes.

A flaky test is a defect whose trigger nobody found yet: this finds the tests that fail some of the time,
so each failure can be traced to its root. Every round keeps its JUnit file and output under ``--out``::

    .venv/bin/python scripts/loop_tests.py --runs 5 -m "slow or spark"      # every slow and Spark test
    .venv/bin/python scripts/loop_tests.py --runs 5 tests/integration/orchestration    # the DAG and UI tests

``--tabulate`` tables JUnit files of earlier runs instead (say whole ``make test`` runs of fresh clones,
``PYTEST_ADDOPTS=--junitxml=...``), with ``-m`` choosing which of their tests to list::

    .venv/bin/python scripts/loop_tests.py -m "slow or spark" --tabulate /tmp/fresh*-junit.xml
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def outcomes(junit: Path) -> dict[str, str]:
    """test id -> passed | failed | error | skipped, from one JUnit file."""
    out = {}
    for case in ET.parse(junit).iter("testcase"):
        name = case.get("name")
        if name.rfind("@") > name.rfind("]"):  # xdist's loadgroup suffix: name@group
            name = name[:name.rfind("@")]
        test = f"{case.get('classname')}::{name}"
        kinds = {child.tag for child in case}
        out[test] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                     else "skipped" if "skipped" in kinds else "passed")
    return out


def selected(marker: str | None, paths: list[str]) -> set[str] | None:
    """The test ids (as JUnit names them) that pytest collects for ``-m marker`` and ``paths``."""
    if not marker and not paths:
        return None
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                           *(["-m", marker] if marker else []), *paths], capture_output=True, text=True)
    ids = set()
    for line in proc.stdout.splitlines():
        path, sep, name = line.partition("::")
        if sep and path.endswith(".py"):
            ids.add(f"{path[:-3].replace('/', '.')}::{name}")
    return ids


def table(passes: dict[str, int], seen: dict[str, int]) -> None:
    print("\n| test | passed |\n|---|--:|")
    for test in sorted(seen, key=lambda t: (passes[t] - seen[t], t)):
        print(f"| `{test}` | {passes[test]}/{seen[test]} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", default="3")
    parser.add_argument("--tabulate", nargs="+", type=Path, metavar="JUNIT", help="table these runs instead")
    parser.add_argument("--out", type=Path, default=Path("var/test-loops"))
    parser.add_argument("-m", dest="marker", help="pytest's -m expression")
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args()
    passes: dict[str, int] = defaultdict(int)
    seen: dict[str, int] = defaultdict(int)
    if args.tabulate:
        wanted = selected(args.marker, args.paths)
        for junit in args.tabulate:
            for test, result in outcomes(junit).items():
                if wanted is None or test in wanted:
                    seen[test] += 1
                    passes[test] += result == "passed"
        print(f"{len(args.tabulate)} runs, {len(seen)} tests")
        table(passes, seen)
        return 0 if all(passes[t] == seen[t] for t in seen) else 1
    args.out.mkdir(parents=True, exist_ok=True)
    for run in range(1, args.runs + 1):
        junit = args.out / f"round-{run}.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", args.workers, "--dist",
               "loadgroup", f"--junitxml={junit}", *(["-m", args.marker] if args.marker else []), *args.paths]
        started = time.monotonic()
        with open(args.out / f"round-{run}.log", "w") as log:
            code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
        results = outcomes(junit)
        for test, result in results.items():
            seen[test] += 1
            passes[test] += result == "passed"
        failed = sorted(t for t, r in results.items() if r in ("failed", "error"))
        print(f"round {run}: exit {code}, {len(results)} tests, {len(failed)} failed, "
              f"{time.monotonic() - started:.0f} s {failed}", flush=True)
    table(passes, seen)
    return 0 if all(passes[t] == seen[t] for t in seen) else 1


if __name__ == "__main__":
    sys.exit(main())
