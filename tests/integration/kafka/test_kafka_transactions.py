"""Kafka transaction semantics the exactly-once engine relies on, proven on a real broker.

* committed records are visible to read_committed consumers, aborted ones never are
  (but they are physically in the log, so read_uncommitted consumers see them);
* offsets sent with ``send_offsets_to_transaction`` become the group's committed
  offsets only when the transaction commits;
* a second producer with the same transactional.id fences the first and aborts
  its open transaction;
* committed records and committed group offsets survive a clean and a hard
  (SIGKILL) broker restart.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.host.ports import free_port
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.errors import KafkaSetupError
from eos_etl.kafka.group_offsets import GroupOffsetsReader
from tests.conftest import TXN_TIMEOUT_S, Rec, read_all, unique


def values(records: list[Rec]) -> list[str]:
    return [r.value for r in records]


def txn_producer(connection: KafkaConnection, transactional_id: str, **extra) -> Producer:
    conf = connection.client_config()
    conf.update(
        {
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60_000,
            "linger.ms": 5,
            "log_level": 0,
        }
    )
    conf.update(extra)
    producer = Producer(conf)
    producer.init_transactions(TXN_TIMEOUT_S)
    return producer


def produce_all(producer: Producer, topic: str, vals: list[str], partition: int | None = None) -> None:
    for v in vals:
        if partition is None:
            producer.produce(topic, value=v.encode(), key=v.encode())
        else:
            producer.produce(topic, value=v.encode(), key=v.encode(), partition=partition)


def group_consumer(connection: KafkaConnection, group: str) -> Consumer:
    """A consumer that only lends its group metadata to a transaction (never subscribes)."""
    conf = connection.client_config()
    conf.update(
        {
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "log_level": 0,
        }
    )
    return Consumer(conf)


def plain_produce(connection: KafkaConnection, topic: str, vals: list[str]) -> None:
    conf = connection.client_config()
    conf.update({"acks": "all", "enable.idempotence": True, "log_level": 0})
    p = Producer(conf)
    produce_all(p, topic, vals, partition=0)
    assert p.flush(30) == 0


def unstable_committed(connection: KafkaConnection, group: str, topic: str, partition: int) -> int | None:
    """The group's committed offset WITHOUT require_stable: never waits for an open transaction.
    Read the way the product reads committed offsets (a consumer's ``committed()``), never through
    ``AdminClient.list_consumer_group_offsets`` (librdkafka#5040: SIGSEGV on NOT_COORDINATOR)."""
    with GroupOffsetsReader(connection.client_config(), group) as reader:
        return reader.unstable(topic, [partition], timeout_s=15)[partition]


def stable_committed(
    admin: ClusterAdmin, group: str, topic: str, partitions: list[int], *, retry_any: bool = False,
    timeout: float = 30.0
) -> dict[int, int | None]:
    """``admin.committed_offsets`` (require_stable), retried while the broker answers
    UNSTABLE_OFFSET_COMMIT.

    commit/abort_transaction return once the coordinator has decided; the
    markers (also the one in __consumer_offsets) are written right after, and
    in between a stable OffsetFetch answers UNSTABLE_OFFSET_COMMIT for the
    partition. ClusterAdmin.committed_offsets surfaces that as KafkaSetupError
    instead of waiting (see the report), so the tests wait here. With
    ``retry_any`` every failure is retried (coordinators loading after a restart).
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return admin.committed_offsets(group, topic, partitions)
        except KafkaSetupError as exc:
            if not (retry_any or "UNSTABLE_OFFSET_COMMIT" in str(exc)) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


# -- 1. commit / abort visibility ------------------------------------------------------


def test_committed_visible_aborted_only_to_read_uncommitted(connection, admin, topic_factory):
    topic = topic_factory("txn-vis")
    producer = txn_producer(connection, unique("txn-vis"))

    committed = [f"committed-{i}" for i in range(5)]
    producer.begin_transaction()
    produce_all(producer, topic, committed)
    producer.commit_transaction(TXN_TIMEOUT_S)

    aborted = [f"aborted-{i}" for i in range(3)]
    producer.begin_transaction()
    produce_all(producer, topic, aborted)
    # librdkafka #4849: flush first; it also puts the aborted records in the log for real.
    assert producer.flush(30) == 0
    producer.abort_transaction(TXN_TIMEOUT_S)

    # A second committed transaction after the aborted one: read_committed must skip the hole.
    tail = [f"committed-tail-{i}" for i in range(2)]
    producer.begin_transaction()
    produce_all(producer, topic, tail)
    producer.commit_transaction(TXN_TIMEOUT_S)

    rc = read_all(connection, topic, isolation="read_committed")
    ru = read_all(connection, topic, isolation="read_uncommitted")

    assert values(rc) == committed + tail
    assert len(ru) == len(committed) + len(aborted) + len(tail) == 10
    assert values(ru) == committed + aborted + tail
    # The aborted records really are in the log, at offsets read_committed jumped over.
    aborted_offsets = {r.offset for r in ru if r.value.startswith("aborted-")}
    assert len(aborted_offsets) == 3
    assert aborted_offsets.isdisjoint({r.offset for r in rc})
    # Markers take offsets too: 10 records + 3 markers (2 commits, 1 abort); nothing is left open.
    ends = admin.offsets(topic, [0])[0]
    assert (ends.high_watermark, ends.last_stable) == (13, 13)
    assert {r.offset for r in ru} == set(range(13)) - {5, 9, 12}  # markers: commit, abort, commit


# -- 2. offsets in a transaction -----------------------------------------------------------


def test_transactional_offsets_commit_only_with_the_transaction(connection, admin, topic_factory):
    source = topic_factory("txn-off-in")
    sink = topic_factory("txn-off-out")
    group = unique("txn-off-group")
    plain_produce(connection, source, [f"in-{i}" for i in range(10)])

    consumer = group_consumer(connection, group)
    producer = txn_producer(connection, unique("txn-off"))
    try:
        meta = consumer.consumer_group_metadata()

        # Aborted: neither the output nor the offset may land.
        producer.begin_transaction()
        produce_all(producer, sink, ["out-aborted"])
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 4)], meta, TXN_TIMEOUT_S)
        assert producer.flush(30) == 0
        producer.abort_transaction(TXN_TIMEOUT_S)
        assert stable_committed(admin, group, source, [0]) == {0: None}
        assert unstable_committed(connection, group, source, 0) is None

        # Committed: the offset becomes the group's committed offset.
        producer.begin_transaction()
        produce_all(producer, sink, ["out-1"])
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 7)], meta, TXN_TIMEOUT_S)
        producer.commit_transaction(TXN_TIMEOUT_S)
        assert stable_committed(admin, group, source, [0]) == {0: 7}
        (tp,) = consumer.committed([TopicPartition(source, 0)], timeout=15)
        assert tp.offset == 7

        # Pending: sent but not yet committed, so the old offset still stands ...
        producer.begin_transaction()
        produce_all(producer, sink, ["out-2"])
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 9)], meta, TXN_TIMEOUT_S)
        assert producer.flush(30) == 0
        assert unstable_committed(connection, group, source, 0) == 7
        # ... and after this abort it still does.
        producer.abort_transaction(TXN_TIMEOUT_S)
        assert stable_committed(admin, group, source, [0]) == {0: 7}

        producer.begin_transaction()
        produce_all(producer, sink, ["out-3"])
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 10)], meta, TXN_TIMEOUT_S)
        producer.commit_transaction(TXN_TIMEOUT_S)
        assert stable_committed(admin, group, source, [0]) == {0: 10}
        (tp,) = consumer.committed([TopicPartition(source, 0)], timeout=15)
        assert tp.offset == 10
    finally:
        consumer.close()

    assert values(read_all(connection, sink)) == ["out-1", "out-3"]
    assert values(read_all(connection, sink, isolation="read_uncommitted")) == [
        "out-aborted", "out-1", "out-2", "out-3"
    ]


# -- 3. fencing -------------------------------------------------------------------------------

FENCED_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


def test_same_transactional_id_fences_and_aborts_the_older_producer(connection, topic_factory):
    topic = topic_factory("txn-fence")
    tid = unique("txn-fence")

    zombie = txn_producer(connection, tid)
    zombie.begin_transaction()
    produce_all(zombie, topic, [f"zombie-{i}" for i in range(3)])
    assert zombie.flush(30) == 0  # in the log, inside an open transaction

    # Before the fence the open transaction pins the LSO: read_committed sees nothing.
    assert read_all(connection, topic, isolation="read_committed", settle=False) == []
    assert len(read_all(connection, topic, isolation="read_uncommitted", settle=False)) == 3

    successor = txn_producer(connection, tid)  # init_transactions bumps the epoch

    with pytest.raises(KafkaException) as info:
        zombie.produce(topic, value=b"zombie-late")
        zombie.commit_transaction(TXN_TIMEOUT_S)
    err = info.value.args[0]
    assert err.fatal(), err
    assert err.code() in FENCED_CODES, err

    # The zombie is dead for good: a new transaction cannot even start.
    with pytest.raises(KafkaException):
        zombie.begin_transaction()

    assert read_all(connection, topic, isolation="read_committed") == []
    # The open transaction's records are in the log (aborted); the late one never got in.
    assert values(read_all(connection, topic, isolation="read_uncommitted")) == ["zombie-0", "zombie-1", "zombie-2"]

    successor.begin_transaction()
    produce_all(successor, topic, ["successor-0", "successor-1"])
    successor.commit_transaction(TXN_TIMEOUT_S)

    assert values(read_all(connection, topic, isolation="read_committed")) == ["successor-0", "successor-1"]
    assert values(read_all(connection, topic, isolation="read_uncommitted")) == [
        "zombie-0", "zombie-1", "zombie-2", "successor-0", "successor-1"
    ]


# -- 4. broker restarts ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory):
    """A broker of this module alone: it gets restarted and killed."""
    broker = KafkaCluster(home=tmp_path_factory.mktemp("kafka-restart"), port=free_port(), heap="512m")
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


def test_committed_records_and_offsets_survive_clean_and_hard_restart(own_broker):
    conn = KafkaConnection(own_broker.bootstrap_servers)
    admin = ClusterAdmin(conn)
    source, sink, group = unique("rs-in"), unique("rs-out"), unique("rs-group")
    admin.create_topics({source: 1, sink: 1})
    plain_produce(conn, source, [f"in-{i}" for i in range(6)])

    def txn(tid: str, vals: list[str], offset: int, *, commit: bool) -> None:
        consumer = group_consumer(conn, group)
        producer = txn_producer(conn, tid)
        try:
            producer.begin_transaction()
            produce_all(producer, sink, vals)
            producer.send_offsets_to_transaction(
                [TopicPartition(source, 0, offset)], consumer.consumer_group_metadata(), TXN_TIMEOUT_S
            )
            if commit:
                producer.commit_transaction(TXN_TIMEOUT_S)
            else:
                assert producer.flush(30) == 0
                producer.abort_transaction(TXN_TIMEOUT_S)
        finally:
            consumer.close()
            del producer

    tid = unique("rs")
    txn(tid, ["r-0", "r-1", "r-2"], 3, commit=True)
    txn(tid, ["x-0"], 5, commit=False)
    assert values(read_all(conn, sink)) == ["r-0", "r-1", "r-2"]
    assert stable_committed(admin, group, source, [0]) == {0: 3}

    own_broker.restart(hard=False)
    assert values(read_all(conn, sink)) == ["r-0", "r-1", "r-2"]
    assert values(read_all(conn, sink, isolation="read_uncommitted")) == ["r-0", "r-1", "r-2", "x-0"]
    assert stable_committed(admin, group, source, [0], retry_any=True) == {0: 3}

    # Transactions keep working after the restart (same transactional.id).
    txn(tid, ["s-0", "s-1"], 6, commit=True)
    assert stable_committed(admin, group, source, [0], retry_any=True) == {0: 6}

    own_broker.restart(hard=True)
    assert values(read_all(conn, sink)) == ["r-0", "r-1", "r-2", "s-0", "s-1"]
    assert values(read_all(conn, sink, isolation="read_uncommitted")) == ["r-0", "r-1", "r-2", "x-0", "s-0", "s-1"]
    assert stable_committed(admin, group, source, [0], retry_any=True) == {0: 6}
