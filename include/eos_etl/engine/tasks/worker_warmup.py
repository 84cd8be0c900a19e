"""Start the executors' Python workers while the driver still builds the query.

A window's publishing tasks run Python: the first task on each executor slot waits for Spark to
start the Python worker daemon, fork a worker and import pyarrow, confluent_kafka and the engine
before it asks for its first batch. None of that needs the query. A tiny Arrow job, one task per
slot the window can use, started on its own thread as the run begins, does it while the driver
builds and plans the query; Spark keeps the workers for the window's tasks
(``spark.python.worker.reuse``, on by default). What that saves a window: docs/performance-history.md,
"What every window pays before its first record".

Only an optimisation: its job has its own job group (the run's task attempts never count it),
the run waits for it at most :data:`WAIT_S` once the query is built, and whatever goes wrong in it
is logged and the run goes on as it would have. ``EOS_ETL_WORKER_WARMUP=off`` switches it off.
A Spark Connect client never starts it (why: ``engine.tasks.connect_route``).
"""

from __future__ import annotations

import importlib
import logging
import threading
import time

from ...arguments import switch_on
from .connect_route import is_connect

log = logging.getLogger(__name__)

SWITCH_ENV = "EOS_ETL_WORKER_WARMUP"

#: What a publishing task imports before its first record.
TASK_MODULES = ("pyarrow.compute", "confluent_kafka", "eos_etl.engine.tasks.publish_task",
                "eos_etl.engine.publishing.publisher", "eos_etl.engine.tasks.watchdog", "eos_etl.logging_setup")

#: The longest the run waits for the warm-up after building its query (its tasks would queue behind it).
WAIT_S = 10.0

JOB_GROUP = "eos-etl-python-worker-warmup"


def _import_modules(modules: tuple[str, ...]):
    def warm(batches):
        for name in modules:
            importlib.import_module(name)
        for _ in batches:
            pass
        return iter(())

    return warm


class PythonWorkerWarmup:
    """``start()`` the warm-up job on a thread; ``wait()`` for it, bounded."""

    def __init__(self, spark, tasks: int, modules: tuple[str, ...] = TASK_MODULES):
        self._spark = spark
        self._connect = is_connect(spark)
        # No more workers than the window has tasks, nor than the application has slots.
        self.tasks = tasks if self._connect else max(1, min(tasks, spark.sparkContext.defaultParallelism))
        self._modules = modules
        self._thread: threading.Thread | None = None
        self.seconds: float | None = None

    @staticmethod
    def enabled() -> bool:
        return switch_on(SWITCH_ENV)

    def start(self) -> "PythonWorkerWarmup":
        if self.enabled() and not self._connect:
            self._thread = threading.Thread(target=self._run, name="eos-etl-worker-warmup", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        t0 = time.monotonic()
        try:
            self._spark.sparkContext.setJobGroup(JOB_GROUP, "eos-etl: start the Python workers", False)
            (self._spark.range(self.tasks, numPartitions=self.tasks)
             .mapInArrow(_import_modules(self._modules), "id long").collect())
            self.seconds = round(time.monotonic() - t0, 3)
        except Exception as exc:  # noqa: BLE001 - an optimisation: the run's own job reports real failures
            log.warning("starting the Python workers ahead of the run failed (the run goes on): %s", exc)

    def wait(self) -> None:
        if self._thread is None:
            return
        self._thread.join(WAIT_S)
        if self._thread.is_alive():
            log.info("Python worker warm-up still running after %.0fs; not waiting for it", WAIT_S)
        else:
            log.debug("Python workers started in %ss (%d tasks)", self.seconds, self.tasks)
