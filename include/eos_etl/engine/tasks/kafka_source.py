"""Spark's Kafka source over one window: what the transform reads.

:func:`read_window` is Spark's batch Kafka source assigned exactly the window's partitions
and offset ranges, with ``isolation.level=read_committed`` (records of open or aborted
transactions are never read) and ``failOnDataLoss`` (a range Kafka no longer holds fails the
run instead of shrinking it). It yields one Spark partition per Kafka partition, rows in offset
order: ``key, value, topic, partition, offset, timestamp, timestampType`` (a read with
``includeHeaders`` adds ``headers``: :data:`KAFKA_SOURCE_DDL`). The data-quality checks read
inputs and outputs through the same reader (:func:`kafka_batch_reader`).
"""

from __future__ import annotations

import json
from dataclasses import replace

from ...kafka.connection import KafkaConnection
from ..pipeline import PipelineConfig
from ..slots import AS_COMMITTED
from ..window import Window
from .connect_route import pooled_reader_group

#: Consumer settings of every bounded batch read. After each poll Spark's consumer has a fetch of the
#: partition in flight (the Java consumer asks for the next records before it returns the last), and a
#: fetch that finds nothing, past the range's end, is held by the broker for ``fetch.max.wait.ms`` (500 ms
#: by default). A pooled consumer seeking to its next range waits for that fetch to come back first, and a
#: range can also end just after a transaction marker, which the consumer fetches once more to pass.
#: Within a range there is always data to answer at once, and a range never ends past the last stable
#: offset (the plan's end), so no wait helps: 0. Measured, 2 tasks on local[2] reading pooled consumers,
#: 4 partitions of 50,000 records: 1.17 s at 10 ms, 0.96 s at 0; 1,024 partitions of one record: 8.0-8.7 s
#: at 10 ms, 2.7-3.2 s at 0 (consumers not pooled: 13.5-15.3 s and 10.0 s). Before 10 ms, 500: 3.1 s ->
#: 0.75 s to read 9 partitions of 4,000 records.
BATCH_READ_OPTIONS = {"kafka.fetch.max.wait.ms": "0"}


# The schema of Spark's Kafka source with includeHeaders=true (for rows made without a read).
KAFKA_SOURCE_DDL = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, "
    "timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)


def kafka_batch_reader(spark, connection: KafkaConnection):
    """``spark.read.format("kafka")`` with the connection's options and :data:`BATCH_READ_OPTIONS`."""
    return _reader(spark, {**BATCH_READ_OPTIONS, **connection.spark_options()})


def committed_read_options(spark, connection: KafkaConnection) -> dict[str, str]:
    """A read_committed batch read's options; on a Spark Connect server its consumers come from the
    executors' pool (:func:`~.connect_route.pooled_reader_group`)."""
    options = {**BATCH_READ_OPTIONS, **connection.spark_options(), **WINDOW_READ_OPTIONS}
    if group := pooled_reader_group(spark, options):
        options["kafka.group.id"] = group
    return options


def committed_batch_reader(spark, connection: KafkaConnection):
    """``spark.read.format("kafka")`` with :func:`committed_read_options`."""
    return _reader(spark, committed_read_options(spark, connection))


def _reader(spark, options: dict[str, str]):
    reader = spark.read.format("kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


#: The window read's own consumer settings: records of open or aborted transactions are never read.
WINDOW_READ_OPTIONS = {"kafka.isolation.level": "read_committed"}

#: Spark's SQL setting that makes a union of children with one partitioning keep it (their partitions zipped).
UNION_OUTPUT_PARTITIONING = "spark.sql.unionOutputPartitioning"


def read_window(spark, config: PipelineConfig, window: Window):
    """Spark's Kafka source over exactly the window, read_committed, failing on data loss: one Spark
    partition per input partition, or with writer slots one per slot (:mod:`.slots`). On a Spark Connect
    server its consumers come from the executors' pool (:func:`~.connect_route.pooled_reader_group`)."""
    kafka_options = committed_read_options(spark, config.connection)
    # The grouping its plan decided, which the publishing tasks check; a window no plan decided (a quality
    # check's read, which publishes nothing) is read a Spark partition per input partition.
    undecided = window.writer_slots == config.writer_slots == AS_COMMITTED
    config = replace(config, writer_slots=None if undecided else config.grouping_for(window))
    if config.grouping is None:
        return _read(spark, window, list(window.nonempty()), kafka_options)
    slots: dict[int, list[int]] = {}
    for p in window.nonempty():
        slots.setdefault(config.slot_of(p), []).append(p)
    # Per slot its partitions' read, coalesced into one Spark partition (a narrow dependency: one task
    # iterates the slot's Kafka partitions one after another, each in offset order, no shuffle), and the
    # slots' reads side by side in one DataFrame, a Spark partition each. Spark 4 would zip the partitions
    # of union children that share one partitioning (all single partitions here) into one: off for this
    # session, so each slot stays a task of its own (a slot's task refuses another slot's records anyway).
    spark.conf.set(UNION_OUTPUT_PARTITIONING, "false")
    reads = [_read(spark, window, partitions, kafka_options).coalesce(1) for _slot, partitions in sorted(slots.items())]
    frame = reads[0]
    for read in reads[1:]:
        frame = frame.union(read)
    return frame


def _read(spark, window: Window, partitions: list[int], kafka_options: dict[str, str]):
    return (
        _reader(spark, kafka_options).option("assign", json.dumps({window.topic: partitions}))
        .option("startingOffsets", window.spark_starting_offsets(partitions))
        .option("endingOffsets", window.spark_ending_offsets(partitions))
        .option("failOnDataLoss", "true")
        .load()
    )
