"""The client lease, without a broker: a task commits only while its run's Spark Connect client holds it.

The transaction loop asks the lease right before each ``commit_transaction`` (the fake producer of
test_transaction_loop keeps what a read_committed reader would see); a lease that refuses aborts the
open transaction and commits nothing more. The task's check (:class:`LeaseCheck`) against a fake admin
client: Stable with a member passes, a group with no member fails at once, anything else is asked again
until the deadline. The client's holder against a fake consumer: a paused member renewed well within
the TTL, left at the end; a join the brokers refuse is one clear error before any task. The same on a
real Connect server, a client SIGKILLed mid-window:
tests/integration/embedded/test_connect_supervision.py.
"""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException

from eos_etl.engine.errors import ClientLeaseError
from eos_etl.engine.pipeline import PipelineConfig
from eos_etl.engine.publishing import client_lease
from eos_etl.engine.publishing.client_lease import LEASE_TTL_S, RENEW_S, LeaseCheck, held, lease_group
from eos_etl.engine.publishing.publisher import PartitionResult
from eos_etl.engine.publishing.transaction_loop import LineageWriter, TransactionLoop
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.grants import Grant
from tests.unit.engine.publishing.test_transaction_loop import (
    FakeCheckpoint,
    FakeProducer,
    assert_exactly_once,
    records,
)


class Lease:
    """A lease that holds for ``live`` checks and then finds the client gone; counts its checks and
    what the producer had committed at each."""

    def __init__(self, producer, live: int | None = None):
        self.producer = producer
        self.live = live
        self.checks = 0
        self.commits_at_check: list[int] = []

    def __call__(self) -> None:
        self.checks += 1
        self.commits_at_check.append(self.producer.calls.get("commit_transaction", 0))
        if self.live is not None and self.checks > self.live:
            raise ClientLeaseError("the Spark Connect client that started this task's run is gone")


def _loop(live: int | None, *, committed: int | None = None, chunk_records: int = 3):
    checkpoint = FakeCheckpoint(committed)
    producer = FakeProducer(checkpoint)
    lease = Lease(producer, live)
    result = PartitionResult(partition=0, transactional_id="shop-purchases-0", start=0, end=10,
                             committed_before=committed)
    loop = TransactionLoop(producer, checkpoint,
                           LineageWriter(producer.produce, "purchases", 0, "run-1", topic_id="t-id", pipeline="g"),
                           result, position=committed or 0, validated_position=lambda c: 0 if c is None else c,
                           chunk_records=chunk_records, chunk_seconds=3600, max_abort_retries=3, lease=lease)
    return producer, checkpoint, loop, lease, result


def _publish(loop, offsets, end: int) -> ClientLeaseError | None:
    try:
        for record in records(offsets):
            if record[0] >= loop.position:
                loop.add(record)
        loop.finish(end)
    except ClientLeaseError as exc:
        return exc
    return None


def test_a_live_lease_costs_one_check_per_commit_and_changes_nothing():
    producer, checkpoint, loop, lease, result = _loop(None)
    assert _publish(loop, range(10), 10) is None
    assert checkpoint.committed_offset == 10 and result.records_published == 10
    # Every commit asked once, right before it (chunks 0-2, 3-5, 6-8, then 9 with the window end).
    assert lease.checks == producer.calls["commit_transaction"] == result.transactions == 4
    assert lease.commits_at_check == [0, 1, 2, 3]
    assert_exactly_once(producer, checkpoint)


def test_an_expired_lease_aborts_the_open_transaction_and_commits_nothing_more():
    producer, checkpoint, loop, lease, result = _loop(live=1)  # the client dies after the first commit
    error = _publish(loop, range(10), 10)
    assert isinstance(error, ClientLeaseError) and "is gone" in str(error)
    # The second transaction (records 3-5, its offsets and checkpoint record sent, delivered) was aborted.
    assert producer.calls["commit_transaction"] == 1 and producer.calls["abort_transaction"] == 1
    assert producer.pending is None and not loop.is_open and loop.buffered == []
    assert checkpoint.committed_offset == checkpoint.logged_offset == 3 and loop.position == 3
    assert sorted(o for t, o in producer.visible if t == "invoices") == [0, 1, 2]
    assert result.records_published == 3 and result.transactions == 1
    assert lease.checks == 2  # refused once: never asked again, nothing more produced
    assert producer.calls["produce"] == 2 * 6
    assert_exactly_once(producer, checkpoint)


def test_an_expired_lease_refuses_the_window_end_and_a_refresh_too():
    # The window end of a range whose tail holds nothing to produce (aborted records, markers).
    producer, checkpoint, loop, lease, _ = _loop(live=0, committed=5)
    assert isinstance(_publish(loop, [], 8), ClientLeaseError)
    assert checkpoint.committed_offset == 5 and "commit_transaction" not in producer.calls
    assert producer.calls["abort_transaction"] == 1
    # A refresh of a position with nothing new.
    producer, checkpoint, loop, lease, _ = _loop(live=0, committed=5)
    with pytest.raises(ClientLeaseError):
        loop.refresh()
    assert checkpoint.committed_offset == 5 and "commit_transaction" not in producer.calls


def test_a_slots_spanning_transaction_is_abandoned_whole_when_the_lease_expires():
    checkpoints = {p: FakeCheckpoint(None, partition=p) for p in (0, 1)}
    producer = FakeProducer(checkpoints)
    lease = Lease(producer, live=0)
    loop = TransactionLoop(producer, chunk_records=100, chunk_seconds=3600, max_abort_retries=3,
                           span_partitions=True, lease=lease)
    for p in (0, 1):
        result = PartitionResult(partition=p, transactional_id="shop-purchases-s0of1", start=0, end=3,
                                 committed_before=None)
        loop.join(checkpoints[p], LineageWriter(producer.produce, "purchases", p, "run-1", topic_id="t-id",
                                                pipeline="g"), result, position=0, validated_position=lambda c: c or 0)
        for record in records(range(3)):
            loop.add(record)
        loop.finish(3)  # deferred to the slot's next commit
    with pytest.raises(ClientLeaseError):
        loop.close()
    assert lease.checks == 1 and "commit_transaction" not in producer.calls
    assert producer.calls["abort_transaction"] == 1 and producer.visible == []
    assert {p: c.committed_offset for p, c in checkpoints.items()} == {0: None, 1: None}
    loop.close()  # nothing staged any more: commits nothing, asks nothing
    assert lease.checks == 1


# -- the task's check, against a fake admin client --------------------------------------------------

class Description:
    def __init__(self, state: ConsumerGroupState, members: int):
        self.state = state
        self.members = [object()] * members


class FakeAdmin:
    """Answers each describe_consumer_groups with the next of ``answers``: a Description, an exception, or
    None (no answer: the future never completes)."""

    made = 0

    def __init__(self, answers: list):
        self.answers = answers
        self.requests = 0
        FakeAdmin.made += 1

    def describe_consumer_groups(self, groups, request_timeout):
        assert request_timeout >= 3600  # never reached (librdkafka#4605): the wait is the future's
        self.requests += 1
        answer = self.answers.pop(0)
        future = Future()
        if isinstance(answer, Exception):
            future.set_exception(answer)
        elif answer is not None:
            future.set_result(answer)
        return {groups[0]: future}


@pytest.fixture
def admin(monkeypatch):
    answers: list = []
    admins: list[FakeAdmin] = []

    def make(_config):
        admins.append(FakeAdmin(answers))
        return admins[-1]

    monkeypatch.setattr(client_lease, "AdminClient", make)
    monkeypatch.setattr(client_lease, "CHECK_DEADLINE_S", 0.6)
    monkeypatch.setattr(client_lease, "CHECK_TIMEOUT_S", 0.2)
    return answers, admins


def _check() -> LeaseCheck:
    return LeaseCheck(KafkaConnection("127.0.0.1:1"), "shop-lease-run1-abc")


def test_the_check_passes_on_a_stable_group_with_a_member_with_one_request(admin):
    answers, admins = admin
    answers += [Description(ConsumerGroupState.STABLE, 1)] * 3
    check = _check()
    for _ in range(3):
        check.check()
    assert len(admins) == 1 and admins[0].requests == 3 and check.checks == 3  # one client, one request a check


@pytest.mark.parametrize("state", [ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD])
def test_a_group_without_member_fails_the_check_at_once(admin, state):
    answers, admins = admin
    answers.append(Description(state, 0))
    with pytest.raises(ClientLeaseError, match="is gone: its lease group shop-lease-run1-abc has no member"):
        _check().check()
    assert admins[0].requests == 1


def test_a_rebalance_or_an_error_is_asked_again(admin):
    answers, admins = admin
    answers += [Description(ConsumerGroupState.PREPARING_REBALANCING, 1),
                KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)),
                Description(ConsumerGroupState.STABLE, 1)]
    _check().check()
    assert admins[0].requests == 3


def test_a_lease_that_cannot_be_proven_counts_as_gone_and_a_client_that_timed_out_is_never_reused(admin):
    answers, admins = admin
    answers += [None] * 10  # the coordinator never answers
    with pytest.raises(ClientLeaseError, match="could not be proven within"):
        _check().check()
    assert len(admins) >= 2 and all(a.requests == 1 for a in admins)  # each client dropped after its timeout


# -- where the lease is named, and who may hold it --------------------------------------------------

def _config(**kwargs) -> PipelineConfig:
    return PipelineConfig(connection=KafkaConnection("127.0.0.1:1"), input_topic="purchases", group="shop",
                          output_topics=("invoices",), transactional_id_prefix="shop", **kwargs)


def test_the_lease_travels_in_the_config_and_only_a_connect_run_has_one():
    assert LEASE_TTL_S >= 3 * RENEW_S  # renewals missed before it expires
    group = lease_group("shop", "run1")
    assert group.startswith("shop-lease-run1-") and group != lease_group("shop", "run1")
    config = _config(client_lease=group)
    assert PipelineConfig.from_json(config.to_json()).client_lease == group
    assert LeaseCheck.of(_config()) is None and LeaseCheck.of(config).group == group
    with held(_config(), False) as lease:  # spark-submit, local, or nothing for Spark to publish
        assert lease.bound(config) is config


def test_the_pipeline_role_may_hold_and_describe_its_lease_groups():
    assert Grant("group", "shop-lease-", "READ", prefixed=True) in _config().resources().grants("pipeline")


# -- the client's side, against a fake consumer -----------------------------------------------------

class FakeConsumer:
    """Joins at its first poll (calls ``on_assign``), unless told to report ``error`` instead."""

    error: KafkaError | None = None
    made: list[FakeConsumer] = []

    def __init__(self, conf: dict):
        self.conf = conf
        self.paused: list = []
        self.closed = False
        FakeConsumer.made.append(self)

    def subscribe(self, topics, on_assign):
        self.topics, self._on_assign = topics, on_assign

    def poll(self, timeout):
        if self.error is not None:
            self.conf["error_cb"](self.error)
        elif self._on_assign is not None:
            on_assign, self._on_assign = self._on_assign, None
            on_assign(self, ["partition 0"])
        return None

    def assign(self, partitions):
        self.assigned = partitions

    def pause(self, partitions):
        self.paused = partitions

    def close(self):
        self.closed = True


@pytest.fixture
def consumer(monkeypatch):
    FakeConsumer.made, FakeConsumer.error = [], None
    monkeypatch.setattr(client_lease, "Consumer", FakeConsumer)
    return FakeConsumer


def test_the_client_holds_its_lease_as_a_paused_member_renewed_within_the_ttl_and_leaves_at_the_end(consumer):
    config = _config(run_id="run1")
    with held(config, True) as lease:
        bound = lease.bound(config)
        [member] = consumer.made
        assert bound.client_lease == lease.group and bound.client_lease.startswith("shop-lease-run1-")
        assert member.conf["group.id"] == lease.group and member.topics == [config.checkpoint_topic]
        assert member.paused == ["partition 0"]  # a member, never a reader
        assert member.conf["session.timeout.ms"] == LEASE_TTL_S * 1000
        assert member.conf["heartbeat.interval.ms"] == RENEW_S * 1000 < member.conf["session.timeout.ms"]
        assert not member.closed
    assert member.closed  # left: its tasks see the group empty at once


@pytest.mark.parametrize(("code", "error", "exit_code"), [
    (KafkaError.GROUP_AUTHORIZATION_FAILED, "may not join the run's client lease group", 2),
    (KafkaError.INVALID_SESSION_TIMEOUT, "refuse the client lease's session timeout", 2),
])
def test_a_lease_the_brokers_refuse_fails_the_run_before_its_tasks_with_one_clear_error(consumer, code, error,
                                                                                      exit_code):
    consumer.error = KafkaError(code)
    config = _config()
    with held(config, True) as lease, pytest.raises(Exception, match=error) as refused:
        lease.bound(config)
    assert refused.value.exit_code == exit_code and consumer.made[0].closed


def test_a_lease_not_joined_in_time_fails_the_run_as_the_world_failing(consumer):
    consumer.error = KafkaError(KafkaError._TRANSPORT)  # no coordinator answers
    with held(_config(), True) as lease, pytest.raises(ClientLeaseError, match="was not joined within") as late:
        lease.wait_held(timeout_s=0.3)
    assert late.value.exit_code == 1 and "Local: Broker transport failure" in str(late.value)
