"""An attempt's last abort on a real broker: its queued records dropped unsent, the producer fit for more.

Under the engine's long ``linger.ms`` a transaction's records wait in the client's queue until its commit
sends them; an attempt that stops (``TransactionLoop.abandon``) must not send them only to abort them (it
took as long as the transaction), and what drops them must leave the producer's sequence numbers whole
(the client's own ``purge`` does not: the next transaction fails, "skipped sequence numbers").
"""

from __future__ import annotations

from eos_etl.engine.pipeline import DEFAULT_PRODUCER_CONFIG
from eos_etl.engine.publishing.producer import TransactionalProducer
from eos_etl.kafka.reader import read_ranges
from tests.conftest import unique

PARTITIONS = 8
QUEUED = 20_000  # about 120 KB a partition: no batch fills (batch.size 1 MB), none leaves before the linger


def test_an_unsettled_abort_sends_none_of_its_queued_records_and_the_next_transaction_commits(
        connection, admin, topic_factory):
    topic = topic_factory("abort-queued", partitions=PARTITIONS)
    settings = {**DEFAULT_PRODUCER_CONFIG, **connection.client_config(), "transactional.id": unique("abort-queued"),
                # Longer than the test can stall between its produce and its abort: nothing leaves on its own.
                "linger.ms": 60_000, "transaction.timeout.ms": 120_000, "log_level": 0}
    producer = TransactionalProducer(settings, retry_deadline_s=5.0, op_timeout_s=10.0)
    producer.init_transactions()
    try:
        producer.begin_transaction()
        for p in range(PARTITIONS):  # in the log before the abort: every partition in the transaction
            producer.produce_to(topic, p, b"k", b"sent")
        producer.producer.flush(10)
        for i in range(QUEUED):
            producer.produce(topic, f"user-{i}".encode(), b"queued %d" % i, [])
        assert len(producer.producer) == QUEUED  # all still queued
        producer.abort_transaction(settle=False)
        assert len(producer.producer) == 0

        # The abort returns once the coordinator decided; its markers land after (settled: LSO = log end).
        ends = {p: o.high_watermark for p, o in admin.settled_offsets(topic).items()}
        assert ends == {p: 2 for p in range(PARTITIONS)}, "the sent record and the abort marker, nothing queued"

        producer.begin_transaction()
        producer.produce(topic, b"k", b"committed", [])
        producer.commit_transaction()
    finally:
        producer.close()

    # The commit returns once the coordinator decided; its markers land after (under load, after the read).
    ranges = {p: (0, o.last_stable) for p, o in admin.settled_offsets(topic).items()}
    assert [r.value for r in read_ranges(connection, topic, ranges)] == [b"committed"]
    uncommitted = read_ranges(connection, topic, ranges, isolation="read_uncommitted")
    assert sorted(r.value for r in uncommitted) == [b"committed"] + [b"sent"] * PARTITIONS
