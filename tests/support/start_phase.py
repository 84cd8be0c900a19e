"""The CLI as tests/unit/kafka/test_start_phase.py and tests/integration/kafka/test_start_phase.py
run it, and its ``error:`` lines."""

from __future__ import annotations

import os
import subprocess
import sys


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eos_etl", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]
