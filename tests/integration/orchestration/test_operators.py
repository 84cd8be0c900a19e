"""The DAG's spark-submit route (eos_etl.orchestration.operators) with a real spark-submit: the task
ends with the job's own exit code.

How the operator hands the Kafka password to the driver and refuses deploy mode cluster:
tests/unit/orchestration/test_operators.py. Airflow runs in a subprocess: it is never imported
into the test process.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import ROOT


@pytest.mark.spark
def test_spark_submit_exits_with_the_jobs_own_exit_code():
    """The operator tells bad configuration (2, not retried) from a runtime failure (1, retried) by
    spark-submit's exit code: in client mode it is the Python driver's own."""
    from eos_etl.spark.config import spark_home

    proc = subprocess.run([str(spark_home() / "bin" / "spark-submit"), "--master", "local[1]",
                           str(ROOT / "jobs" / "run_window.py"), "run-window", "--no-such-option"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    assert proc.returncode == 2, proc.stderr[-3000:]
    # spark-submit hands the driver's own output on through its stdout.
    output = proc.stdout + proc.stderr
    assert [line for line in output.splitlines() if line.startswith("error:")], output[-3000:]
