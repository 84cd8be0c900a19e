"""Broker-free: what a producer's committed transactions wrote, per topic partition
(:attr:`~eos_etl.engine.publishing.producer.TransactionalProducer.written`), which a run waits for a
read_committed reader to see before it ends (:mod:`eos_etl.engine.publishing.visibility`;
against a broker: tests/integration/engine/publishing/test_visibility.py).

A stand-in for librdkafka's handle gives every record the next offset of its partition (aborted records
take offsets too, as in Kafka) and reports the deliveries when flushed: a committed transaction's last
offsets count, an aborted one's never, and a commit of unknown outcome's do (it may have landed).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError

from eos_etl.engine.errors import TransactionAbortable
from eos_etl.engine.publishing import producer as producer_module
from eos_etl.engine.publishing.producer import TransactionalProducer


class Message:
    def __init__(self, topic: str, partition: int, offset: int):
        self._topic, self._partition, self._offset = topic, partition, offset

    def topic(self):
        return self._topic

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset


class Handle:
    """librdkafka's handle in memory. The partitioner: the key's length modulo 2. ``fail``: deliveries of
    records to these (topic, partition) fail."""

    def __init__(self, conf: dict):
        self.on_delivery = conf["on_delivery"]
        self.logs: dict[tuple[str, int], int] = {}  # the next offset of each partition
        self.queue: list[Message] = []
        self.fail: set[tuple[str, int]] = set()

    def produce(
        self, topic, value=None, key=None, partition=-1, on_delivery=None, callback=None, timestamp=0, headers=None
    ):
        # confluent-kafka's own signature, positional or by keyword; -1: the partitioner's choice
        p = len(key) % 2 if partition == -1 else partition
        offset = self.logs.get((topic, p), 0)
        self.logs[(topic, p)] = offset + 1
        self.queue.append(Message(topic, p, offset))

    def __len__(self):
        return len(self.queue)

    def flush(self, _timeout):
        delivered, self.queue = self.queue, []
        for msg in delivered:
            failed = (msg.topic(), msg.partition()) in self.fail
            self.on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT) if failed else None, msg)
        return 0

    poll = flush

    def list_topics(self, timeout):
        return SimpleNamespace(orig_broker_id=1)

    def init_transactions(self, _timeout):
        pass

    def begin_transaction(self):
        pass

    def commit_transaction(self, _timeout):
        pass

    def abort_transaction(self, _timeout):
        self.queue.clear()

    def purge(self, **_kwargs):
        self.queue.clear()


@pytest.fixture
def producer(monkeypatch) -> TransactionalProducer:
    monkeypatch.setattr(producer_module, "Producer", Handle)
    p = TransactionalProducer({"transactional.id": "written-test", "bootstrap.servers": "127.0.0.1:1"})
    p.init_transactions()
    return p


def transaction(p: TransactionalProducer, outputs: list[tuple[str, bytes]], *, checkpoint: int | None = None):
    """Begin, produce ``(topic, key)`` records (and a checkpoint record to partition ``checkpoint``)."""
    p.begin_transaction()
    for topic, key in outputs:
        p.produce(topic, key, b"v", [])
    if checkpoint is not None:
        p.produce_to("shop.checkpoints", checkpoint, b"key", b"{}")


def test_a_committed_transaction_counts_its_last_record_per_partition(producer):
    p = producer
    transaction(p, [("invoices", b"a"), ("invoices", b"bb"), ("invoices", b"c"), ("shipments", b"a")], checkpoint=2)
    p.flush()
    assert p.written == {}  # delivered, not committed yet
    p.commit_transaction()
    assert p.written == {("invoices", 1): 1, ("invoices", 0): 0, ("shipments", 1): 0, ("shop.checkpoints", 2): 0}


def test_an_aborted_transaction_never_counts_and_a_later_commit_counts_past_it(producer):
    p = producer
    transaction(p, [("invoices", b"a")], checkpoint=0)
    p.commit_transaction()
    transaction(p, [("invoices", b"a"), ("invoices", b"a"), ("shipments", b"a")], checkpoint=0)
    p.flush()  # delivered, then aborted: a read_committed reader never sees them
    p.abort_transaction()
    assert p.written == {("invoices", 1): 0, ("shop.checkpoints", 0): 0}
    transaction(p, [("invoices", b"a")], checkpoint=0)
    p.commit_transaction()
    # Offsets 1 and 2 of invoices[1] were the aborted transaction's; the commit's record is at 3.
    assert p.written == {("invoices", 1): 3, ("shop.checkpoints", 0): 2}


def test_a_transaction_whose_commit_fails_abortable_does_not_count(producer):
    p = producer
    transaction(p, [("invoices", b"a"), ("shipments", b"a")])
    p.producer.fail = {("shipments", 1)}
    with pytest.raises(TransactionAbortable, match="deliveries failed"):
        p.commit_transaction()  # its flush saw a failed delivery: never committed
    p.abort_transaction()
    assert p.written == {}


def test_a_commit_of_unknown_outcome_counts_once_the_producer_is_reinitialised(producer):
    p = producer
    transaction(p, [("invoices", b"a")])
    p.commit_transaction()
    transaction(p, [("invoices", b"a"), ("shipments", b"bb")])
    p.flush()  # delivered; the commit's answer is lost
    p.reinitialise()  # it may have landed: its records are waited for (at once if the new epoch aborted it)
    assert p.written == {("invoices", 1): 1, ("shipments", 0): 0}
