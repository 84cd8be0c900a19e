"""A commit whose outcome stays unknown, on a real broker: the producer is ended and a new one initialised.

The broker of this module is frozen (SIGSTOP) just as the publisher commits, longer than the
commit's retries: the EndTxn waits unread in the broker's socket, no answer comes, the outcome is
unknown. The loop must not retry on forever and must not abort; it ends the producer, initialises a
new one with the same transactional.id (a new epoch) once the broker is back, learns from the
committed offset whether the commit landed, and finishes the window: every input record published
exactly once, the committed offset at the window end, nothing left open. The same path under real
network cuts runs in the partition soak (``faults.partition_scenarios``); the transitions without a
broker in ``tests/unit/engine/publishing/test_transaction_loop.py``.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace

import pytest

from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.engine import checkpoint_topic
from eos_etl.engine.lineage import H_SOURCE_OFFSET
from eos_etl.engine.pipeline import DEFAULT_PRODUCER_CONFIG, PipelineConfig
from eos_etl.engine.publishing.checkpoint import PartitionCheckpoint
from eos_etl.engine.publishing.producer import TransactionalProducer
from eos_etl.engine.publishing.publisher import PartitionResult
from eos_etl.engine.publishing.transaction_loop import LineageWriter, TransactionLoop
from eos_etl.host.ports import free_port
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.java_tools import TransactionsTool
from eos_etl.kafka.reader import read_ranges
from eos_etl.kafka.topics import ensure_topics
from tests.conftest import unique

#: Each commit call waits this long; retriable failures are retried for RETRY_S.
OP_TIMEOUT_S = 2.0
RETRY_S = 4.0
#: Frozen longer than the commit's retries (about RETRY_S + one call), shorter than those plus the new
#: producer's init retries: the outcome is unknown, and the new producer gets the broker back.
FROZEN_S = 7.0


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory):
    """A broker of this module alone: it gets frozen."""
    broker = KafkaCluster(home=tmp_path_factory.mktemp("kafka-unknown-outcome"), port=free_port(), heap="512m")
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


class FreezingProducer(TransactionalProducer):
    """Freezes the broker once, when the n-th commit starts (all outputs acknowledged first)."""

    def __init__(self, settings: dict, broker: KafkaCluster, at_commit: int, **kwargs):
        super().__init__(settings, **kwargs)
        self._broker, self._at_commit, self._commits = broker, at_commit, 0
        self.froze_at: float | None = None
        self.thawed_at: float | None = None
        self.threads_before: int | None = None
        self.threads_after: int | None = None

    def reinitialise(self) -> None:
        super().reinitialise()
        self.threads_after = librdkafka_threads()

    def commit_transaction(self) -> None:
        self._commits += 1
        if self._commits == self._at_commit:
            self.flush()
            self.threads_before = librdkafka_threads()
            self._broker.nodes[0].pause()
            self.froze_at = time.monotonic()

            def thaw() -> None:
                self._broker.nodes[0].resume()
                self.thawed_at = time.monotonic()

            threading.Timer(FROZEN_S, thaw).start()
        super().commit_transaction()


def librdkafka_threads() -> int:
    """Threads of this process that librdkafka runs (named rdk:main, rdk:broker..., rdk:bg)."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                count += f.read().startswith("rdk:")
        except FileNotFoundError:
            continue
    return count


def _epoch(connection: KafkaConnection, tid: str) -> int:
    [info] = TransactionsTool(connection).list(tid)
    return int(info.producer_epoch)


@pytest.mark.parametrize("at_commit", [2, 3], ids=["mid-window commit", "final commit"])
def test_a_commit_of_unknown_outcome_ends_the_producer_and_a_new_epoch_finishes_exactly_once(own_broker, at_commit):
    connection = KafkaConnection(own_broker.bootstrap_servers)
    admin = ClusterAdmin(connection)
    source, sink, group, tid = unique("uo-in"), unique("uo-out"), unique("uo-group"), unique("uo-txn")
    config = PipelineConfig(connection, input_topic=source, group=group, output_topics=(sink,),
                            transactional_id_prefix=tid, writer_slots=None)  # one partition, one loop
    admin.create_topics({source: 1, sink: 1})
    config = replace(config, input_topic_id=admin.topic_id(source))
    ensure_topics(admin, [checkpoint_topic.topic_spec(config.checkpoint_topic, 1)])
    end = 12
    settings = {**DEFAULT_PRODUCER_CONFIG, **connection.client_config(), "transactional.id": tid,
                "transaction.timeout.ms": 60_000, "log_level": 0}
    producer = FreezingProducer(settings, own_broker, at_commit, retry_deadline_s=RETRY_S,
                                op_timeout_s=OP_TIMEOUT_S)
    checkpoint = PartitionCheckpoint(config, 0)
    try:
        producer.init_transactions()
        epoch_before = _epoch(connection, tid)
        result = PartitionResult(partition=0, transactional_id=tid, start=0, end=end, committed_before=None)
        loop = TransactionLoop(producer, checkpoint,
                               LineageWriter(producer.produce, source, 0, "run-1", topic_id=config.input_topic_id,
                                             pipeline=group), result,
                               position=0, validated_position=lambda c: 0 if c is None else c, chunk_records=4,
                               chunk_seconds=3600, max_abort_retries=3)
        for offset in range(end):
            if offset >= loop.position:
                loop.add((offset, [(sink, b"k", f"out-{offset}".encode(), [])]))
        loop.finish(end)
    finally:
        own_broker.nodes[0].resume()
        producer.close()
        checkpoint.close()

    assert producer.froze_at is not None and producer.thawed_at is not None, "the broker was never frozen"
    assert producer.reinitialisations == 1 and result.reinitialisations == 1, result
    # The old handle was destroyed before the new producer's init returned, not left running beside it.
    assert producer.threads_before and producer.threads_after == producer.threads_before, \
        (producer.threads_before, producer.threads_after)
    assert _epoch(connection, tid) > epoch_before, "the new producer did not get a new epoch"
    assert checkpoint_committed(config) == end
    assert result.records_published == end and result.transactions == 3, result
    offsets = admin.settled_offsets(sink, timeout_s=30)
    assert all(o.settled for o in offsets.values()), f"a transaction is left open: {offsets}"
    visible = read_ranges(connection, sink, {0: (0, offsets[0].last_stable)}, isolation="read_committed",
                          timeout_s=30)
    sources = sorted(int(r.headers[H_SOURCE_OFFSET]) for r in visible)
    assert sources == list(range(end)), f"not exactly once: {sources}"


def checkpoint_committed(config: PipelineConfig) -> int | None:
    reader = PartitionCheckpoint(config, 0)
    try:
        return reader.committed()
    finally:
        reader.close()
