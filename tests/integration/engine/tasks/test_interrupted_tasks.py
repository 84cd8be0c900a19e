"""A task that Spark interrupts mid-stream commits nothing more, on the in-process (local) route.

When one task fails for good, Spark aborts the job and interrupts the others: their Python
workers see their stream of records end a moment before Spark destroys them, exactly as when
the input ended. Here partition 0's task fails in every attempt, 2 s after it started, while
partition 1's streams a large range and commits part of it; the independent checker, before any retry, must find every
committed input published, and partition 1's committed position short of its window end (the
end of a stream that was cut is not the end of its input). The retry then completes the window
exactly. The same on a Spark Connect server whose client is killed: tests/lab/faults/test_connect_kills.py.
"""

from __future__ import annotations

import threading
import time

import pytest
from pyspark.sql import functions as F

from eos_etl.checker import check_shop, read_topic
from eos_etl.engine.tasks.runner import run_window
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.group_offsets import GroupOffsetsReader
from eos_etl.shop.generator import generate
from eos_etl.shop.pipeline import run_shop_window

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: Spark destroys an interrupted task's Python worker this long after the interrupt at the latest
#: (its monitor polls every 2 s, then waits spark.python.task.killTimeout, 2 s), with a margin.
WORKER_KILL_S = 10
ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"


def _slow_on_the_jvm(transform, partition: int):
    """``transform`` with about 0.3 ms of JVM work added to each record of ``partition`` (a SHA-512 of
    its outputs' text repeated 150 times), inside the outputs column so that Spark cannot prune it."""

    def slow(df):
        out = transform(df)
        work = F.length(F.sha2(F.repeat(F.col("outputs").cast("string"), 150), 512))
        return out.withColumn("outputs", F.when((F.col("partition") != partition) | (work > 0), F.col("outputs")))

    return slow


def _committed(shop, partitions):
    with GroupOffsetsReader(shop.connection.client_config(), shop.group) as reader:
        return reader.unstable(shop.topics.purchases, partitions, 10)


def _touch_when_committed_past(shop, partition: int, start: int, path, timeout_s: float = 120.0) -> None:
    """Create ``path`` once the group's committed offset of ``partition`` is past ``start``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        committed = _committed(shop, [partition])[partition]
        if committed is not None and committed > start:
            path.touch()
            return
        time.sleep(0.1)


def test_a_job_aborted_by_another_partitions_failure_commits_no_unread_input(spark, shop_factory, request, tmp_path):
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 160_000, invalid_share=0.0, seed=41,
                     transaction_size=5000)
    window = shop.plan()
    batch = spark.conf.get(ARROW_BATCH)
    spark.conf.set(ARROW_BATCH, "1000")  # the first batch early, not after 10,000 slow records
    request.addfinalizer(lambda: spark.conf.set(ARROW_BATCH, batch))
    landed = tmp_path / "partition-1-committed"
    watcher = threading.Thread(target=_touch_when_committed_past, daemon=True,
                               args=(shop, 1, window.ranges[1].start, landed))
    watcher.start()
    with pytest.raises(Exception) as raised:
        # Partition 0's first attempt waits until partition 1 has committed part of its range (a timed
        # wait left it with nothing committed under load: a worker over a Unix socket sees its stream end
        # at once), then it and its three retries fail at once and Spark aborts the job. Partition 1's task
        # streams meanwhile, its Python worker waiting on a JVM made slow for its records, as it waits on
        # Spark's read and transform at full size. When the job is aborted, its worker is between batches
        # and reaches the end of its cut stream.
        failpoints = f"after_init=await:{landed},partition=0;after_committed_read=raise,partition=0"
        run_window(spark, shop.pipeline(chunk_records=5000, failpoints=failpoints), window,
                   _slow_on_the_jvm(shop.transform(), partition=1))
    assert landed.exists(), "partition 1 never committed a transaction before the job ended"
    t_aborted = time.monotonic()
    assert "failpoint after_committed_read" in str(raised.value)
    # The fault landed on work in progress: when the job was aborted, partition 1's task had produced
    # some of its records (committed or not) and had more to come.
    produced = [r for r in read_topic(shop.connection, shop.topics.invoices, isolation="read_uncommitted")
                if r.headers.get("source_partition") == b"1"]
    span = window.ranges[1].end - window.ranges[1].start  # its records and a few transaction markers
    assert 0 < len(produced) < span * 0.9, f"partition 1 produced {len(produced)} of ~{span}"
    # Whatever the interrupted worker still does, it does before Spark destroys it.
    time.sleep(max(0.0, t_aborted + WORKER_KILL_S - time.monotonic()))
    report = check_shop(shop)  # before any retry: every committed input has its outputs
    assert report.ok, report.violations
    committed = _committed(shop, [0, 1])
    assert committed[1] is not None and committed[1] < window.ranges[1].end, committed
    # The retry publishes the rest exactly once and reaches the window end.
    summary = run_shop_window(spark, shop, window, chunk_records=5000)
    assert summary.records_skipped > 0
    ends = {p: o.last_stable for p, o in ClusterAdmin(shop.connection).settled_offsets(
        shop.topics.purchases, timeout_s=30).items()}
    report = check_shop(shop, expected_ends=ends)
    assert report.ok, report.violations
    assert len(read_topic(shop.connection, shop.topics.invoices)) == stats.valid
