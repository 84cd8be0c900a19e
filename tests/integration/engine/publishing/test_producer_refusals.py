"""A produce librdkafka refuses, on a real broker: classified as the transactional state says.

Once a transaction failed, librdkafka refuses new messages with a bare ``_FATAL`` (the producer
was fenced) or ``_STATE`` (the transaction is abortable) code, without the ``fatal()`` /
``txn_requires_abort()`` flags its transactional API sets. The wrapper must still tell them
apart, as it does for every other call: fenced -> :class:`ProducerFencedError` (the task steps
aside), abortable -> :class:`TransactionAbortable` (the loop aborts and replays), for the
per-output ``produce`` as for the checkpoint record's ``produce_to``.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from confluent_kafka import KafkaError, KafkaException

from eos_etl.engine import checkpoint_topic
from eos_etl.engine.errors import ProducerFencedError, PublishError, TransactionAbortable
from eos_etl.engine.lineage import H_SOURCE_OFFSET
from eos_etl.engine.pipeline import DEFAULT_PRODUCER_CONFIG, PipelineConfig
from eos_etl.engine.publishing.checkpoint import PartitionCheckpoint
from eos_etl.engine.publishing.producer import TransactionalProducer
from eos_etl.engine.publishing.publisher import PartitionResult
from eos_etl.engine.publishing.transaction_loop import LineageWriter, TransactionLoop
from eos_etl.kafka.reader import read_ranges
from eos_etl.kafka.topics import ensure_topics
from tests.conftest import unique

#: The broker refuses records larger than this on the small topic (the client's own limit is far higher;
#: the records are random bytes, which compression cannot bring under it).
SMALL_TOPIC_MAX_BYTES = 1024


def producer_for(connection, tid: str) -> TransactionalProducer:
    settings = {**DEFAULT_PRODUCER_CONFIG, **connection.client_config(), "transactional.id": tid,
                "transaction.timeout.ms": 60_000, "log_level": 0}
    producer = TransactionalProducer(settings, retry_deadline_s=5.0, op_timeout_s=10.0)
    producer.init_transactions()
    return producer


def refused_code(producer: TransactionalProducer, topic: str) -> int:
    """The bare code librdkafka's own produce() refuses a record with now."""
    with pytest.raises(KafkaException) as raw:
        producer.producer.produce(topic, b"v", b"k", partition=0)
    err = raw.value.args[0]
    assert not err.fatal() and not err.txn_requires_abort(), "librdkafka flags this refusal itself now"
    return err.code()


def fenced(connection, topic: str) -> TransactionalProducer:
    """A producer in a transaction, fenced by a newer one with its transactional.id (its produce seen fenced)."""
    tid = unique("refused-fenced")
    old = producer_for(connection, tid)
    old.begin_transaction()
    old.produce(topic, b"k", b"before the fence", [])
    old.producer.flush(10)
    newer = producer_for(connection, tid)  # bumps the epoch: the old one is fenced
    newer.close()
    old.produce(topic, b"k", b"after the fence", [])  # accepted locally, refused by the broker
    try:
        old.producer.flush(10)  # the client's own flush: it may raise the fatal error itself
    except Exception:  # noqa: BLE001 - the producer is fenced either way (refused_code checks)
        pass
    return old


def abortable(connection, small_topic: str) -> TransactionalProducer:
    """A producer whose transaction a broker-refused record made abortable (the producer itself is fine)."""
    producer = producer_for(connection, unique("refused-abortable"))
    producer.begin_transaction()
    producer.producer.produce(small_topic, os.urandom(4 * SMALL_TOPIC_MAX_BYTES), b"k", partition=0)
    producer.producer.flush(10)
    return producer


@pytest.fixture
def topics(topic_factory):
    return topic_factory("refused-out"), topic_factory("refused-small",
                                                        config={"max.message.bytes": str(SMALL_TOPIC_MAX_BYTES)})


def produce_by(producer, call: str, topic: str) -> None:
    """One record through ``call``: the per-output ``produce`` or the checkpoint record's ``produce_to``."""
    if call == "produce":
        producer.produce(topic, b"k", b"v", [])
    else:
        producer.produce_to(topic, 0, b"k", b"v")


@pytest.mark.parametrize("call", ["produce", "produce_to"])
def test_a_produce_refused_after_the_fence_is_the_fenced_error(connection, topics, call):
    out, _ = topics
    producer = fenced(connection, out)
    try:
        assert refused_code(producer, out) == KafkaError._FATAL
        with pytest.raises(PublishError) as exc:
            produce_by(producer, call, out)
        assert type(exc.value) is ProducerFencedError, f"{type(exc.value).__name__}: {exc.value}"
        assert producer.transactional_id in str(exc.value)
        assert exc.value.transaction_age_s is not None  # what superseded.step_aside needs
    finally:
        producer.close()


def test_a_flush_that_sees_the_fence_is_the_fenced_error(connection, topics):
    """The broker refuses a produce with an old epoch: the flush that waits for it ends fenced, as the
    transactional calls do (not the client's fatal error raised from inside the delivery callbacks)."""
    out, _ = topics
    tid = unique("refused-flush")
    old = producer_for(connection, tid)
    try:
        old.begin_transaction()
        old.produce(out, b"k", b"before the fence", [])
        old.flush()
        producer_for(connection, tid).close()  # a newer epoch: the old producer is fenced
        old.produce(out, b"k", b"after the fence", [])
        with pytest.raises(ProducerFencedError) as exc:
            old.flush()
        assert "fenced" in str(exc.value)
    finally:
        old.close()


@pytest.mark.parametrize("call", ["produce", "produce_to"])
def test_a_produce_refused_in_an_abortable_transaction_is_abortable(connection, topics, call):
    out, small = topics
    producer = abortable(connection, small)
    try:
        assert refused_code(producer, out) == KafkaError._STATE
        with pytest.raises(TransactionAbortable) as exc:
            produce_by(producer, call, out)
        assert "too large" in exc.value.reason.lower() or "size" in exc.value.reason.lower(), exc.value.reason
        producer.abort_transaction()  # the producer is still usable: abort, then a new transaction commits
        producer.begin_transaction()
        producer.produce(out, b"k", b"after the abort", [])
        producer.commit_transaction()
    finally:
        producer.close()


class OneTooLarge:
    """The loop's writer: the record at ``offset`` also sends one record the broker refuses (once),
    so the transaction turns abortable under the loop; every record's real output goes to ``out``."""

    def __init__(self, producer, input_topic, small, offset, *, after: bool):
        self.inner = LineageWriter(producer.produce, input_topic, 0, "run-refused", topic_id="t-id", pipeline="g")
        self.producer, self.small, self.offset, self.after = producer, small, offset, after
        self.outputs = self.inner.outputs
        self.refused = False

    def write(self, record) -> None:
        if not self.after:
            self._refuse_once(record[0])
        self.inner.write(record)
        if self.after:
            self._refuse_once(record[0])

    def _refuse_once(self, offset: int) -> None:
        if offset == self.offset and not self.refused:
            self.refused = True
            self.producer.producer.produce(self.small, os.urandom(4 * SMALL_TOPIC_MAX_BYTES), b"k", partition=0)
            self.producer.producer.flush(10)  # its delivery fails: the transaction is abortable now


@pytest.mark.parametrize("where", ["output", "checkpoint record"])
def test_the_loop_aborts_and_replays_a_transaction_whose_produce_was_refused(connection, admin, topics, where):
    """The refusal reaches the loop from the next output's produce, or from the checkpoint record's produce_to
    (the abortable record is the last of a chunk): either way one abort, a replay, every record exactly once."""
    out, small = topics
    source, group, tid = unique("refused-in"), unique("refused-group"), unique("refused-loop")
    config = PipelineConfig(connection, input_topic=source, group=group, output_topics=(out,),
                            transactional_id_prefix=tid, writer_slots=None)  # one partition, one loop
    admin.create_topics({source: 1})
    config = replace(config, input_topic_id=admin.topic_id(source))
    ensure_topics(admin, [checkpoint_topic.topic_spec(config.checkpoint_topic, 1)])
    end, chunk = 8, 4
    producer = producer_for(connection, tid)
    checkpoint = PartitionCheckpoint(config, 0)
    # "output": refused before record 5's output; "checkpoint record": after the chunk's last output, so the
    # commit's checkpoint record (produce_to) is the first produce refused.
    writer = (OneTooLarge(producer, source, small, 5, after=False) if where == "output"
              else OneTooLarge(producer, source, small, chunk - 1, after=True))
    try:
        result = PartitionResult(partition=0, transactional_id=tid, start=0, end=end, committed_before=None)
        loop = TransactionLoop(producer, checkpoint, writer, result, position=0,
                               validated_position=lambda c: 0 if c is None else c, chunk_records=chunk,
                               chunk_seconds=3600, max_abort_retries=3)
        for offset in range(end):
            if offset >= loop.position:
                loop.add((offset, [(out, b"k", f"out-{offset}".encode(), [])]))
        loop.finish(end)
    finally:
        producer.close()
        checkpoint.close()
    assert writer.refused
    assert result.aborts == 1 and result.records_published == end, result
    offsets = admin.settled_offsets(out, timeout_s=30)
    visible = read_ranges(connection, out, {0: (0, offsets[0].last_stable)}, isolation="read_committed",
                          timeout_s=30)
    sources = [int(r.headers[H_SOURCE_OFFSET]) for r in visible]
    assert sorted(sources) == list(range(end)), f"not exactly once: {sources}"
