"""The Makefile: every target it declares parses and has a recipe (``make -n``, nothing runs)."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.support import ROOT

PHONY = re.search(r"^\.PHONY:(.*)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()


def test_the_makefile_declares_its_commands():
    assert {"setup", "test", "demo", "bench", "bench-breakdown", "bench-partitions"} <= set(PHONY)


@pytest.mark.parametrize("target", PHONY)
def test_every_declared_target_has_a_rule(target):
    proc = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip(), f"make {target} would do nothing"
