"""engine.tasks.worker_warmup: the run's Python workers are started, with the task's imports done, before its job.

(That the warm-up's tasks never count as the run's task attempts: test_window_job asserts one attempt
for a one-partition window.)"""

from __future__ import annotations

import json
import subprocess
import sys

# A fresh application with one slot, so one Python worker: a probe job tells whether that worker
# has imported a module that nothing else imports, before and after the warm-up.
SCRIPT = r"""
import json, os, sys
from eos_etl.spark.session import spark_session
from eos_etl.engine.tasks.worker_warmup import PythonWorkerWarmup

spark = spark_session("warmup-test", master="local[1]")

def probe(batches):
    import os, sys
    import pyarrow as pa
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "warm": ["colorsys" in sys.modules]})

def ask():
    return spark.range(1, numPartitions=1).mapInArrow(probe, "pid long, warm boolean").collect()[0]

before = ask()
warmup = PythonWorkerWarmup(spark, tasks=4, modules=("colorsys",))
warmup.start().wait()
after = ask()
groups = list(spark.sparkContext._jsc.sc().statusTracker().getJobIdsForGroup("eos-etl-python-worker-warmup"))
print("RESULT " + json.dumps({"before": before["warm"], "after": after["warm"],
                              "same_worker": before["pid"] == after["pid"],
                              "tasks": warmup.tasks, "seconds": warmup.seconds, "warmup_jobs": len(groups)}))
spark.stop()
"""


def test_the_warmup_imports_in_the_worker_the_run_then_gets() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=240)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    got = json.loads(lines[0].removeprefix("RESULT "))
    assert got["before"] is False  # a fresh worker has not imported it
    assert got["after"] is True and got["same_worker"], got  # the next job's task reuses the warmed worker
    assert got["tasks"] == 1  # no more tasks than the application has slots
    assert got["seconds"] is not None and got["warmup_jobs"] == 1, got  # ran, under its own job group


def test_switched_off_it_starts_nothing(monkeypatch) -> None:
    from eos_etl.engine.tasks.worker_warmup import SWITCH_ENV, PythonWorkerWarmup

    class NoSpark:  # any use of Spark would fail
        class sparkContext:  # noqa: N801 - mimics SparkSession.sparkContext
            defaultParallelism = 2

    monkeypatch.setenv(SWITCH_ENV, "off")
    warmup = PythonWorkerWarmup(NoSpark(), tasks=8).start()
    warmup.wait()
    assert warmup.tasks == 2 and warmup.seconds is None
