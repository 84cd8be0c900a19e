"""What changes when a run's session is a Spark Connect client (``stack.spark_connect``).

The engine drives Spark through the DataFrame API, which a classic session and a
Connect client share; the publishing tasks run on the server's executors
exactly as under spark-submit. Three things reach for the application itself
(``spark.sparkContext``), which a client has no handle on:

* how the run's task attempts ended (``engine.task_attempts``): read from the
  driver's status store; a client tags its operations instead and cannot tell;
* cancelling the run's jobs (``engine.replica_guard``): a client interrupts the
  operations tagged with the run's tag, never the whole session, which the
  pipeline's other clients (a replay, a validation) share;
* starting Python workers ahead of the run (``engine.worker_warmup``): not
  done. The server keeps its workers for the next window less than a minute
  away (and their daemon for an hour); one after a longer pause starts them with
  its first tasks, of which a warm-up could hide only the 0.25 s the client
  spends before its job (docs/performance-history.md, "Python workers kept for
  the next task").
"""

from __future__ import annotations


def is_connect(spark) -> bool:
    """True for a Spark Connect client session (``pyspark.sql.connect``), False for a classic one."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def cancel_jobs(spark, group: str) -> None:
    """Cancel what this run started and nothing else: the operations tagged ``group`` (Spark Connect; the
    session is shared by the pipeline's clients) or the jobs of job group ``group`` (a classic application,
    which may run other work beside the run)."""
    if is_connect(spark):
        spark.interruptTag(group)
    else:
        spark.sparkContext.cancelJobGroup(group)
