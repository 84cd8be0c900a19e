"""Bounded reads of whole records: given offset ranges per partition, everything visible in them.

For checks, tests and small downstream summaries (the records come back as a
list, so callers keep the ranges bounded); the pipeline itself reads through Spark.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from .connection import KafkaConnection

log = logging.getLogger(__name__)


class RangeDeletedError(LookupError):
    """A bounded read started below the partition's log start: the records it was to read are gone."""


#: What librdkafka reports for a read below the log start when ``auto.offset.reset`` is ``error``.
_OUT_OF_RANGE = {KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE}


@dataclass
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]
    timestamp_ms: int = -1


def _assign(consumer: Consumer, topic: str, positions: list[TopicPartition], timeout_s: float) -> None:
    """``consumer.assign(positions)``, fetching at once: a consumer that has not read ``topic`` before
    learns its partitions' leaders only at librdkafka's next scan of unknown topics (once a second),
    so its first fetch waited up to a second (measured in publishing tasks: 0.1-1.0 s for one marker);
    asking for the topic's metadata right after the assignment gives them in one round trip. Only a
    speed-up: unanswered (a broker lost), the read goes on and librdkafka's own scan finds the leaders."""
    consumer.assign(positions)
    try:
        consumer.list_topics(topic, timeout=max(1.0, min(timeout_s, 10.0)))
    except KafkaException as exc:
        log.info("no metadata for %s right after the assignment (%s): the read learns the leaders itself", topic, exc)


def iter_ranges(connection: KafkaConnection, topic: str, ranges: dict[int, tuple[int, int]], *,
                isolation: str = "read_committed", timeout_s: float = 60.0) -> Iterator[ConsumedRecord]:
    """The records of ``topic`` at offsets [start, end) per partition, as a consumer with ``isolation``
    sees them (read_committed: nothing aborted, no transaction markers), as they arrive (in offset
    order within a partition): callers that aggregate hold nothing per record.

    ``end`` must be at most what the partition holds for that isolation (its last stable offset for
    read_committed): reading stops when the consumer's position reaches it, which skips over
    aborted records and markers. Raises TimeoutError when the read makes no progress (no record, no
    position moved) for ``timeout_s``: a bound on a stalled read, not on a long one (a read of millions of
    records on a loaded machine takes as long as it takes, and it is not a fault).
    """
    todo = {p for p, (start, end) in ranges.items() if end > start}
    positions: dict[int, int] = {}
    conf = connection.client_config()
    conf.update({"group.id": f"eos-etl-reader-{time.monotonic_ns()}", "isolation.level": isolation,
                 "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 3,
                 "fetch.max.bytes": 52_428_800})
    consumer = Consumer(conf)
    deadline = time.monotonic() + timeout_s
    try:
        _assign(consumer, topic, [TopicPartition(topic, p, ranges[p][0]) for p in todo], timeout_s)
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} ({isolation}) did not reach {ranges}: no progress for "
                                   f"{timeout_s}s (at {positions})")
            # consume() returns at its timeout when fewer records come: the read's last call always
            # waits it out, so it is short (a two-record read took 0.56 s at 0.5 s); each call still
            # takes every record already fetched, up to the batch.
            for msg in consumer.consume(10_000, 0.05):
                if msg.error() or msg.partition() not in todo or msg.offset() >= ranges[msg.partition()][1]:
                    continue
                yield ConsumedRecord(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                                     dict(msg.headers() or []), msg.timestamp()[1])
            for tp in consumer.position([TopicPartition(topic, p) for p in list(todo)]):
                if tp.offset > positions.get(tp.partition, -1):
                    positions[tp.partition] = tp.offset
                    deadline = time.monotonic() + timeout_s
                if tp.offset >= ranges[tp.partition][1]:
                    todo.discard(tp.partition)
    finally:
        consumer.close()


def iter_partition(consumer: Consumer, topic: str, partition: int, start: int, end: int, *,
                   timeout_s: float = 30.0) -> Iterator[ConsumedRecord]:
    """The records of ``topic[partition]`` at offsets [start, end) as ``consumer`` sees them (its isolation),
    on a consumer of the caller's (assigned for the read only, as :func:`first_visible_offset`): short
    polls and a position check after each, so a read whose last offsets are markers ends one poll after its
    last record, not after a long consume timeout. Raises TimeoutError past ``timeout_s``."""
    if end <= start:
        return
    deadline = time.monotonic() + timeout_s
    try:
        _assign(consumer, topic, [TopicPartition(topic, partition, start)], timeout_s)
        while True:
            for msg in consumer.consume(1000, 0.01):
                if msg.error() is None and msg.partition() == partition and msg.offset() < end:
                    yield ConsumedRecord(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                                         dict(msg.headers() or []), msg.timestamp()[1])
            if consumer.position([TopicPartition(topic, partition)])[0].offset >= end:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}[{partition}] from {start} did not reach {end} "
                                   f"within {timeout_s:.0f}s")
    finally:
        consumer.unassign()


#: A tail read slower than this is logged with its number of polls (one fetch takes ~20 ms).
SLOW_TAIL_READ_S = 0.1


def first_visible_offset(consumer: Consumer, topic: str, partition: int, start: int, end: int, *,
                         timeout_s: float = 30.0) -> int | None:
    """The offset of the first record in [start, end) of ``topic[partition]`` that ``consumer`` sees
    (its isolation: read_committed skips aborted records and markers), or None when there is none.

    A proof that a range holds nothing to publish: reading stops at the first visible record, or as
    soon as the consumer's position reaches ``end`` (librdkafka moves it past aborted records and
    markers too), so a range of markers costs one fetch. ``consumer`` is assigned the partition for
    the read only and must not commit (``enable.auto.commit`` off). Raises TimeoutError when the
    position does not reach ``end`` within ``timeout_s`` (a range beyond what the partition holds), and
    :class:`RangeDeletedError` when ``start`` lies below the log start: ``consumer`` must have
    ``auto.offset.reset=error``, or librdkafka moves it to the log end and the range reads as empty.
    """
    if end <= start:
        return None
    tp = TopicPartition(topic, partition, start)
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    polls = 0
    try:
        _assign(consumer, topic, [tp], timeout_s)
        while True:
            polls += 1
            for msg in consumer.consume(100, 0.02):
                if (error := msg.error()) is not None:
                    if error.code() in _OUT_OF_RANGE:
                        raise RangeDeletedError(f"{topic}[{partition}] no longer holds offset {start}: {error.str()}")
                    continue
                if msg.partition() == partition:
                    return msg.offset() if msg.offset() < end else None
            if consumer.position([TopicPartition(topic, partition)])[0].offset >= end:
                return None
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}[{partition}] from {start} did not reach {end} "
                                   f"within {timeout_s:.0f}s")
    finally:
        consumer.unassign()
        if (took := time.monotonic() - t0) > SLOW_TAIL_READ_S:  # one fetch should do; say what took longer
            log.info("reading %s[%d] [%d,%d) took %.3fs over %d polls", topic, partition, start, end, took, polls)


def read_ranges(connection: KafkaConnection, topic: str, ranges: dict[int, tuple[int, int]], *,
                isolation: str = "read_committed", timeout_s: float = 60.0) -> list[ConsumedRecord]:
    """:func:`iter_ranges` as a list in partition/offset order (for bounded ranges: checks and tests)."""
    records = list(iter_ranges(connection, topic, ranges, isolation=isolation, timeout_s=timeout_s))
    records.sort(key=lambda r: (r.partition, r.offset))
    return records
