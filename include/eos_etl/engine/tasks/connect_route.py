"""What changes when a run's session is a Spark Connect client (``embedded.spark_connect``).

The engine drives Spark through the DataFrame API, which a classic session and a
Connect client share; the publishing tasks run on the server's executors
exactly as under spark-submit. Three things reach for the application itself
(``spark.sparkContext``), which a client has no handle on:

* how the run's task attempts ended (``engine.tasks.task_attempts``): read from the
  driver's status store; a client tags its operations instead and cannot tell;
* cancelling the run's jobs (``engine.tasks.replica_guard``): a client interrupts the
  operations tagged with the run's tag, never the whole session, which the
  pipeline's other clients (a replay, a validation) share;
* starting Python workers ahead of the run (``engine.tasks.worker_warmup``): not
  done. The server keeps its workers for the next window less than a minute
  away (and their daemon for an hour); one after a longer pause starts them with
  its first tasks, of which a warm-up could hide only the 0.25 s the client
  spends before its job (docs/performance-history.md, "Python workers kept for
  the next task").
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os

#: Spark's own: the secret a Spark Connect server and its clients share.
SPARK_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
#: The prefix of :func:`pooled_reader_group`'s ids.
READER_GROUP_PREFIX = "eos-etl-reader-"


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


def pooled_reader_group(spark, kafka_options: dict[str, str]) -> str | None:
    """The ``kafka.group.id`` of a window's Kafka read on a Spark Connect server, or None (Spark's own id).

    Spark keys its executors' pool of Kafka consumers by group id and topic partition; with its default,
    a group id of its own per query, a long-lived server builds every partition's consumer again for
    every window (a connection, a metadata round trip and a first fetch each). A fixed id lets the next
    window take them from the pool. The id names ``kafka_options`` (every ``kafka.*`` option of the read)
    by an HMAC keyed with the server's token: Spark refuses a consumer for a key whose options differ from
    the first one's (a changed password would fail every read until the server restarted), and the id,
    which Spark logs, must not let anyone test a guess of the password. The consumers never join the group
    nor commit (they are assigned their partitions and seek). None for a classic session, whose executors
    live for one application, and without a token.
    """
    token = os.environ.get(SPARK_TOKEN_ENV)
    if not token or not is_connect(spark):
        return None
    canonical = json.dumps(sorted(kafka_options.items())).encode()
    return READER_GROUP_PREFIX + hmac.new(token.encode(), canonical, hashlib.sha256).hexdigest()[:32]



def concurrently(spark, calls: list) -> list:
    """Each of ``calls`` (no arguments) in a thread of its own, results in order; the first failure is
    raised once every call has ended. For Spark jobs that wait on I/O more than they compute (small Kafka
    reads: a consumer's connection, metadata and fetches), which run side by side on the executors.

    A thread runs as part of this thread's operations: a Connect client's tags are thread-local (what
    ``end_on_sigterm`` and :func:`cancel_jobs` interrupt), so each thread takes this thread's; a classic
    session's local properties (its job group) are inherited the same way.
    """
    from concurrent.futures import ThreadPoolExecutor  # only a validation's reads use threads

    if is_connect(spark):
        tags = spark.getTags()

        def inherit(call):
            def run():
                for tag in tags:
                    spark.addTag(tag)
                return call()
            return run
    else:
        # Classic: pyspark's own copy of the tags and local properties, which are per thread only in its
        # pinned-thread mode (the default; without it they are the JVM's, shared by every thread).
        from py4j.clientserver import ClientServer
        from pyspark import SparkContext
        from pyspark.util import inheritable_thread_target

        pinned = isinstance(SparkContext._gateway, ClientServer)
        inherit = inheritable_thread_target(spark) if pinned else (lambda call: call)
    runs = [inherit(call) for call in calls]
    with ThreadPoolExecutor(max_workers=max(1, len(runs)), thread_name_prefix="spark-job") as pool:
        futures = [pool.submit(run) for run in runs]
    return [future.result() for future in futures]
