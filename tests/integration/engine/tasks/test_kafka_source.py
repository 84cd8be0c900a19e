"""Spark's Kafka source, read_committed, over explicit offset ranges of a transactional topic.

The engine reads each window with ``startingOffsets``/``endingOffsets`` taken
from committed group offsets and last stable offsets. On a transactional
topic those ranges contain aborted records and transaction markers, so
offsets are not contiguous; Spark must skip the gaps (without calling them
data loss under ``failOnDataLoss=true``) and return exactly the committed
records.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import (
    Producer,
)

from eos_etl.engine.pipeline import PipelineConfig
from eos_etl.engine.tasks.kafka_source import read_window
from eos_etl.engine.window import OffsetRange, Window
from tests.conftest import TXN_TIMEOUT_S, Rec, read_all, unique

pytestmark = pytest.mark.spark

def spark_read(spark, connection, topic: str, starting: dict[int, int], ending: dict[int, int]) -> list[Rec]:
    reader = spark.read.format("kafka")
    for key, value in connection.spark_options().items():
        reader = reader.option(key, value)
    df = (
        reader.option("assign", json.dumps({topic: sorted(starting)}))
        .option("startingOffsets", json.dumps({topic: {str(p): o for p, o in starting.items()}}))
        .option("endingOffsets", json.dumps({topic: {str(p): o for p, o in ending.items()}}))
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "true")
        .load()
    )
    return collect(df)


def collect(df) -> list[Rec]:
    rows = df.selectExpr("partition", "offset", "CAST(value AS STRING) AS value").collect()
    return sorted((Rec(r["partition"], r["offset"], r["value"]) for r in rows), key=lambda r: (r.partition, r.offset))


@pytest.fixture
def interleaved(connection, admin, topic_factory):
    """A 2-partition topic: per partition committed, aborted, committed, aborted, committed transactions.

    Returns (topic, committed values, aborted values, last stable offsets).
    """
    topic = topic_factory("spark-txn", partitions=2)
    conf = connection.client_config()
    conf.update({"transactional.id": unique("spark-txn"), "linger.ms": 5, "log_level": 0})
    producer = Producer(conf)
    producer.init_transactions(TXN_TIMEOUT_S)
    committed: set[str] = set()
    aborted: set[str] = set()
    # Sizes differ per transaction so gaps sit at different places in each partition.
    plan = [("c", 3), ("a", 2), ("c", 4), ("a", 3), ("c", 2)]
    for n, (kind, size) in enumerate(plan):
        producer.begin_transaction()
        for p in (0, 1):
            for i in range(size + p):
                value = f"{kind}{n}-p{p}-{i}"
                producer.produce(topic, value=value.encode(), partition=p)
                (committed if kind == "c" else aborted).add(value)
        if kind == "c":
            producer.commit_transaction(TXN_TIMEOUT_S)
        else:
            assert producer.flush(30) == 0  # librdkafka #4849, and the records must be in the log
            producer.abort_transaction(TXN_TIMEOUT_S)
    # commit_transaction returns once the coordinator decided; the markers follow within
    # milliseconds. Wait until the last stable offset caught up with the log end.
    offsets = admin.settled_offsets(topic, [0, 1])
    assert all(o.settled for o in offsets.values()), f"last stable offsets never reached the log end: {offsets}"
    ends = {p: o.last_stable for p, o in offsets.items()}
    return topic, committed, aborted, ends


def test_spark_reads_exactly_the_committed_records(spark, connection, interleaved):
    topic, committed, aborted, ends = interleaved

    got = spark_read(spark, connection, topic, {0: 0, 1: 0}, ends)

    assert {r.value for r in got} == committed
    assert len(got) == len(committed)  # no duplicates either
    assert not {r.value for r in got} & aborted
    for p in (0, 1):
        assert all(f"-p{p}-" in r.value for r in got if r.partition == p)
        offs = [r.offset for r in got if r.partition == p]
        # Markers and aborted records leave holes: the range spans more offsets than records.
        assert offs != list(range(offs[0], offs[0] + len(offs)))
        # Per partition: 5 records for every transaction of size s + p, plus 5 markers.
        assert ends[p] == sum(s + p for s in (3, 2, 4, 3, 2)) + 5

    # The Python reference reader agrees record by record (same offsets).
    assert got == read_all(connection, topic, isolation="read_committed")


def test_spark_reads_a_sub_range_with_gaps(spark, connection, interleaved):
    topic, committed, aborted, _ends = interleaved
    rc = read_all(connection, topic, isolation="read_committed")
    ru = read_all(connection, topic, isolation="read_uncommitted")
    assert {r.value for r in rc} == committed

    # Partition 0: from the 2nd record of txn c0 up to (exclusive) the 2nd record of txn c4,
    # so the range holds aborted txns a1 and a3 and several markers.
    # Partition 1: from the last record of txn c0 to (exclusive) the 2nd record of txn c2,
    # across a commit marker, aborted txn a1 and its abort marker.
    by_value = {r.value: r for r in rc}
    start = {0: by_value["c0-p0-1"].offset, 1: by_value["c0-p1-3"].offset}
    end = {0: by_value["c4-p0-1"].offset, 1: by_value["c2-p1-1"].offset}

    got = spark_read(spark, connection, topic, start, end)

    expected = [r for r in rc if start[r.partition] <= r.offset < end[r.partition]]
    assert got == expected
    assert [r.value for r in got if r.partition == 0] == (
        ["c0-p0-1", "c0-p0-2"] + [f"c2-p0-{i}" for i in range(4)] + ["c4-p0-0"]
    )
    assert [r.value for r in got if r.partition == 1] == ["c0-p1-3", "c2-p1-0"]
    assert end[1] - start[1] == 1 + 1 + 3 + 1 + 1  # record, marker, 3 aborted, marker, record
    # The sub-range really crosses aborted records (in the log, skipped by Spark).
    for p, n_aborted in ((0, 2 + 3), (1, 3)):
        skipped = [r for r in ru if r.partition == p and start[p] <= r.offset < end[p] and r.value in aborted]
        assert len(skipped) == n_aborted


def test_read_window_reads_the_window_read_committed(spark, connection, interleaved):
    topic, committed, aborted, ends = interleaved
    rc = read_all(connection, topic, isolation="read_committed")
    first_c2 = min(r.offset for r in rc if r.partition == 1 and r.value.startswith("c2-"))
    # Partition 0 empty (start == end): read_window must leave it out entirely.
    window = Window(
        topic=topic,
        group=unique("spark-window"),
        ranges={0: OffsetRange(ends[0], ends[0]), 1: OffsetRange(first_c2, ends[1])},
    )
    config = PipelineConfig(
        connection=connection,
        input_topic=topic,
        group=window.group,
        output_topics=(topic,),
        transactional_id_prefix=unique("spark-window"),
    )

    got = collect(read_window(spark, config, window))

    assert got == [r for r in rc if r.partition == 1 and r.offset >= first_c2]
    assert [r.value for r in got] == [f"c2-p1-{i}" for i in range(5)] + [f"c4-p1-{i}" for i in range(3)]
    assert not {r.value for r in got} & aborted
