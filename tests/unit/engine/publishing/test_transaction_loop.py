"""The publisher's transaction loop, transition by transition, without a broker.

A fake transactional producer keeps what a read_committed reader would see
(outputs of committed transactions), the group's committed offset and the
checkpoint topic's record, and
raises an error class at a chosen call: abortable (abort, rewind to the
committed offset, replay), fatal (fenced: the attempt fails, nothing of the
open transaction is visible), unknown outcome (a commit or abort unanswered:
the producer is ended and a new one initialised, with a new epoch, before
anything else; the commit may or may not have landed). Every scenario ends with the invariants checked:
one output per published input record, outputs visible only with their
offsets. The same loop against a real broker and injected faults:
tests/integration/kafka/test_kafka_transactions.py, tests/lab/faults/test_broker_faults.py.
"""

from __future__ import annotations

import json

import pytest

from eos_etl.engine.errors import ProducerFencedError, PublishError, TransactionAbortable, TransactionOutcomeUnknown
from eos_etl.engine.lineage import H_SOURCE_OFFSET, H_SOURCE_PARTITION
from eos_etl.engine.publishing.publisher import PartitionResult
from eos_etl.engine.publishing.transaction_loop import LineageWriter, TransactionLoop
from eos_etl.engine.publishing.visibility import last_written


class FakeProducer:
    """Transactional semantics in memory; ``fail[(method, n)]`` raises that exception on the n-th call."""

    def __init__(self, checkpoint, fail: dict | None = None):
        # One checkpoint (partition 0), or a slot's: partition -> checkpoint.
        self.checkpoints = checkpoint if isinstance(checkpoint, dict) else {0: checkpoint}
        self.fail = dict(fail or {})
        self.calls: dict[str, int] = {}
        self.visible: list[tuple[str, int]] = []  # (topic, source offset) of committed outputs
        self.pending: list[tuple[str, int]] | None = None
        self.pending_offsets: dict[int, int] = {}  # partition -> offset sent to the open transaction
        self.pending_records: dict[int, int] = {}  # partition -> its checkpoint record's next_offset
        self.fenced = False
        self.epoch = 0
        self.ended = False  # after an unknown outcome, until reinitialise(): no call may reach this producer
        self.log: list[tuple[str, int]] = []  # (method, epoch) of every call, in order
        self.abort_settles: list[bool] = []  # per abort: whether it settled the messages first (a replay follows)
        # commit_transaction numbers whose unknown outcome was in fact a commit (the answer was lost).
        self.landed: set[int] = set()
        # Offsets as the real producer reports them (TransactionalProducer.written): every record takes the next
        # offset of its partition (an output's: its input partition), aborted ones too.
        self.next_offset: dict[tuple[str, int], int] = {}
        self.open_written: dict[tuple[str, int], int] = {}
        self.written: dict[tuple[str, int], int] = {}
        self.committed_records: dict[tuple[str, int], int] = {}  # the last committed record's offset, per partition

    def _call(self, method: str) -> None:
        n = self.calls[method] = self.calls.get(method, 0) + 1
        self.log.append((method, self.epoch))
        assert not self.ended, f"{method} on a producer whose commit or abort had an unknown outcome"
        if self.fenced:
            raise ProducerFencedError("producer was fenced")
        exc = self.fail.pop((method, n), None)
        if isinstance(exc, ProducerFencedError):
            self.fenced = True
        if isinstance(exc, TransactionOutcomeUnknown):
            if method == "commit_transaction" and n in self.landed:
                self._apply_commit()
            self.ended = True
        if exc is not None:
            raise exc

    def reinitialise(self):
        """A new producer with a new epoch; its init completes or aborts what the old one left open."""
        self.log.append(("reinitialise", self.epoch))
        self.epoch += 1
        self.ended = False
        self.pending, self.pending_offsets, self.pending_records = None, {}, {}
        self._fold()  # as the real one: an unknown outcome's records count (they may have landed)

    def begin_transaction(self):
        self._call("begin_transaction")
        assert self.pending is None, "begin while a transaction is open"
        self.pending, self.pending_offsets, self.pending_records = [], {}, {}
        self.open_written = {}

    def produce_to(self, topic, partition, key, value):
        assert self.pending is not None, "produce outside a transaction"
        self._call("produce_to")
        self.pending_records[partition] = json.loads(value)["next_offset"]
        self._deliver(topic, partition)

    def produce(self, topic, key, value, headers):
        assert self.pending is not None, "produce outside a transaction"
        self._call("produce")
        self._deliver(topic, int(dict(headers)[H_SOURCE_PARTITION]))
        self.pending.append((topic, int(dict(headers)[H_SOURCE_OFFSET])) if len(self.checkpoints) == 1
                            else (topic, int(dict(headers)[H_SOURCE_PARTITION]), int(dict(headers)[H_SOURCE_OFFSET])))

    def _deliver(self, topic: str, partition: int) -> None:
        offset = self.next_offset[(topic, partition)] = self.next_offset.get((topic, partition), -1) + 1
        self.open_written[(topic, partition)] = offset

    def _fold(self) -> None:
        for tp, offset in self.open_written.items():
            self.written[tp] = max(offset, self.written.get(tp, -1))
        self.open_written = {}

    def poll(self):
        pass

    def send_offsets_to_transaction(self, offsets, _metadata):
        self._call("send_offsets_to_transaction")
        for _topic, partition, offset in offsets:
            self.pending_offsets[partition] = offset

    def flush(self):
        self._call("flush")

    def commit_transaction(self):
        self._call("commit_transaction")
        self._apply_commit()

    def _apply_commit(self):
        self.visible += self.pending
        for partition, offset in self.pending_offsets.items():
            self.checkpoints[partition].committed_offset = offset
        for partition, offset in self.pending_records.items():
            self.checkpoints[partition].logged_offset = offset
        self.pending, self.pending_offsets, self.pending_records = None, {}, {}
        self.committed_records.update(self.open_written)
        self._fold()

    def abort_transaction(self, *, settle: bool = True):
        self.abort_settles.append(settle)
        self._call("abort_transaction")
        self.pending, self.pending_offsets, self.pending_records = None, {}, {}
        self.open_written = {}


class FakeCheckpoint:
    """The group's committed offset (which Kafka may delete: ``committed_offset = None``) and the
    checkpoint topic's record, read in that order, as PartitionCheckpoint does."""

    def __init__(self, committed: int | None = None, partition: int = 0):
        self.committed_offset = committed
        self.logged_offset = committed
        self.partition = partition

    def committed(self):
        return self.committed_offset if self.committed_offset is not None else self.logged_offset

    def stage(self, producer, next_offset: int):
        self.record(producer, next_offset)
        producer.send_offsets_to_transaction(self.offsets(next_offset), self.group_metadata())

    def record(self, producer, next_offset: int):
        producer.produce_to("shop.checkpoints", self.partition, b"key",
                            json.dumps({"next_offset": next_offset}).encode())

    def offsets(self, next_offset: int) -> list:
        return [("purchases", self.partition, next_offset)]

    def group_metadata(self):
        return object()


def records(offsets) -> list:
    """Input records with two outputs each (an invoice and a shipment)."""
    return [(o, [("invoices", b"k", b"v", []), ("shipments", b"k", b"v", [])]) for o in offsets]


def run(offsets, *, end: int, start: int = 0, committed: int | None = None, fail: dict | None = None,
        chunk_records: int = 3, max_abort_retries: int = 3, landed: set[int] = frozenset()):
    checkpoint = FakeCheckpoint(committed)
    producer = FakeProducer(checkpoint, fail)
    producer.landed = set(landed)
    result = PartitionResult(partition=0, transactional_id="shop-purchases-0", start=start, end=end,
                             committed_before=committed)
    loop = TransactionLoop(
        producer, checkpoint,
        LineageWriter(producer.produce, "purchases", 0, "run-1", topic_id="t-id", pipeline="g"), result,
        position=committed if committed is not None else start, validated_position=lambda c: start if c is None else c,
        chunk_records=chunk_records, chunk_seconds=3600, max_abort_retries=max_abort_retries)
    error = None
    try:
        for record in records(offsets):
            if record[0] >= loop.position:
                loop.add(record)
        loop.finish(end)
    except PublishError as exc:
        error = exc
    return producer, checkpoint, result, error


def assert_exactly_once(producer, checkpoint):
    """No output twice, none visible beyond the committed offset, never an invoice without its shipment."""
    committed = checkpoint.committed_offset or 0
    for topic in ("invoices", "shipments"):
        seen = [o for t, o in producer.visible if t == topic]
        assert len(seen) == len(set(seen)), f"duplicate {topic}: {sorted(seen)}"
        assert all(o < committed for o in seen), f"{topic} visible beyond the committed offset {committed}"
    assert ({o for t, o in producer.visible if t == "invoices"}
            == {o for t, o in producer.visible if t == "shipments"})


def test_commits_every_chunk_and_the_window_end_last():
    producer, checkpoint, result, error = run(range(7), end=9)  # offsets 7, 8: markers / aborted records
    assert error is None
    assert checkpoint.committed_offset == 9
    assert (result.transactions, result.records_published, result.aborts) == (3, 7, 0)
    assert result.outputs == {"invoices": 7, "shipments": 7}
    assert sorted(o for t, o in producer.visible if t == "invoices") == list(range(7))
    assert_exactly_once(producer, checkpoint)


def test_nothing_left_to_produce_still_commits_the_window_end():
    producer, checkpoint, result, error = run([], end=5, start=3, committed=3)
    assert error is None and checkpoint.committed_offset == 5 and producer.visible == []
    assert result.transactions == 1


@pytest.mark.parametrize("failing_call", [("produce", 8), ("send_offsets_to_transaction", 2), ("flush", 2),
                                          ("commit_transaction", 2), ("produce", 13)])
def test_an_abortable_error_aborts_rewinds_and_replays_without_duplicates(failing_call):
    producer, checkpoint, result, error = run(
        range(8), end=8, fail={failing_call: TransactionAbortable("broker says abort")})
    assert error is None
    assert result.aborts == 1 and checkpoint.committed_offset == 8 and result.records_published == 8
    assert producer.calls["abort_transaction"] == 1
    assert producer.abort_settles == [True]  # a replay follows: settled first (librdkafka#4849)
    assert sorted(o for t, o in producer.visible if t == "shipments") == list(range(8))
    assert_exactly_once(producer, checkpoint)


def test_an_abort_during_the_final_commit_replays_the_tail():
    producer, checkpoint, result, error = run(
        range(4), end=6, fail={("commit_transaction", 2): TransactionAbortable("coordinator moved")})
    assert error is None and result.aborts == 1 and checkpoint.committed_offset == 6
    assert_exactly_once(producer, checkpoint)


def test_too_many_aborts_fail_the_attempt_with_nothing_torn():
    fail = {("commit_transaction", n): TransactionAbortable(f"abort {n}") for n in range(1, 10)}
    producer, checkpoint, result, error = run(range(5), end=5, fail=fail, max_abort_retries=2)
    assert isinstance(error, PublishError) and "giving up after 2 aborted transactions" in str(error)
    assert producer.visible == [] and checkpoint.committed_offset is None


def test_fenced_mid_transaction_ends_the_attempt_and_hides_the_open_transaction():
    producer, checkpoint, result, error = run(
        range(8), end=8, fail={("produce", 9): ProducerFencedError("fenced by a newer attempt")})
    assert isinstance(error, ProducerFencedError)
    assert checkpoint.committed_offset == 3 and producer.calls.get("abort_transaction") is None
    assert sorted(o for t, o in producer.visible if t == "invoices") == [0, 1, 2]  # only committed chunks
    assert_exactly_once(producer, checkpoint)


def test_a_retry_resumes_from_the_committed_offset_and_publishes_nothing_twice():
    first, checkpoint, _, error = run(
        range(8), end=8, fail={("produce", 9): ProducerFencedError("fenced")})
    assert isinstance(error, ProducerFencedError) and checkpoint.committed_offset == 3
    second, checkpoint2, result, error = run(range(8), end=8, committed=checkpoint.committed_offset)
    assert error is None and checkpoint2.committed_offset == 8 and result.records_published == 5
    combined = FakeProducer(checkpoint2)
    combined.visible = first.visible + second.visible
    assert_exactly_once(combined, checkpoint2)
    assert sorted(o for t, o in combined.visible if t == "invoices") == list(range(8))


def _unknown(what: str) -> TransactionOutcomeUnknown:
    return TransactionOutcomeUnknown(f"{what} got no answer within 60s of retries: its outcome is unknown")


@pytest.mark.parametrize("landed", [False, True], ids=["commit lost", "commit landed, answer lost"])
def test_a_commit_of_unknown_outcome_reinitialises_before_any_new_transaction(landed):
    producer, checkpoint, result, error = run(
        range(8), end=8, fail={("commit_transaction", 2): _unknown("commit_transaction")},
        landed={2} if landed else set())
    assert error is None
    assert result.reinitialisations == 1 and producer.epoch == 1
    assert producer.calls.get("abort_transaction") is None  # an unknown commit is never followed by an abort
    failed_at = producer.log.index(("commit_transaction", 0), producer.log.index(("commit_transaction", 0)) + 1)
    assert producer.log[failed_at + 1] == ("reinitialise", 0)
    assert all(epoch == 1 for _, epoch in producer.log[failed_at + 2:])  # nothing more on the old epoch
    assert checkpoint.committed_offset == 8 and result.records_published == 8
    assert sorted(o for t, o in producer.visible if t == "invoices") == list(range(8))
    assert_exactly_once(producer, checkpoint)


def test_an_abort_of_unknown_outcome_reinitialises_and_replays():
    producer, checkpoint, result, error = run(
        range(8), end=8, fail={("flush", 2): TransactionAbortable("messages undelivered"),
                               ("abort_transaction", 1): _unknown("abort_transaction")})
    assert error is None
    assert result.aborts == 1 and result.reinitialisations == 1 and producer.epoch == 1
    aborted_at = producer.log.index(("abort_transaction", 0))
    assert producer.log[aborted_at + 1] == ("reinitialise", 0)
    assert checkpoint.committed_offset == 8
    assert_exactly_once(producer, checkpoint)
    assert sorted(o for t, o in producer.visible if t == "shipments") == list(range(8))


def test_unknown_outcomes_count_as_aborts_and_end_the_attempt_past_the_limit():
    fail = {("commit_transaction", n): _unknown("commit_transaction") for n in range(1, 10)}
    producer, checkpoint, result, error = run(range(5), end=5, fail=fail, max_abort_retries=2)
    assert isinstance(error, PublishError) and "giving up after 2 aborted transactions" in str(error)
    assert result.reinitialisations == 2 and producer.visible == [] and checkpoint.committed_offset is None


def test_the_checkpoint_record_commits_with_the_offsets_and_never_without_them():
    fail = {("commit_transaction", 2): ProducerFencedError("fenced before the second commit")}
    producer, checkpoint, _, error = run(range(6), end=6, fail=fail)
    assert isinstance(error, ProducerFencedError)
    assert checkpoint.committed_offset == checkpoint.logged_offset == 3  # the fenced transaction left neither


def test_offsets_expired_mid_run_an_abort_rewinds_to_the_checkpoint_record():
    """Kafka deleted the group's offset while the run went on: the replay starts from the checkpoint
    topic's position, not from the window start."""
    checkpoint = FakeCheckpoint(None)
    producer = FakeProducer(checkpoint, {("commit_transaction", 2): TransactionAbortable("coordinator moved")})
    result = PartitionResult(partition=0, transactional_id="t-0", start=0, end=6, committed_before=None)
    loop = TransactionLoop(producer, checkpoint,
                           LineageWriter(producer.produce, "purchases", 0, "r", topic_id="t-id", pipeline="g"), result,
                           position=0, validated_position=lambda c: 0 if c is None else c, chunk_records=3,
                           chunk_seconds=3600, max_abort_retries=3)
    for record in records(range(3)):
        loop.add(record)
    checkpoint.committed_offset = None  # the broker's offsets retention ran out
    for record in records(range(3, 6)):
        loop.add(record)
    loop.finish(6)
    assert result.aborts == 1 and checkpoint.logged_offset == 6
    assert sorted(o for t, o in producer.visible if t == "invoices") == list(range(6))
    checkpoint.committed_offset = checkpoint.logged_offset
    assert_exactly_once(producer, checkpoint)


def test_refresh_commits_the_same_position_again_with_nothing_produced():
    checkpoint = FakeCheckpoint(4)
    checkpoint.committed_offset = None  # expired; the checkpoint record remains
    producer = FakeProducer(checkpoint, {("commit_transaction", 1): TransactionAbortable("retry me")})
    result = PartitionResult(partition=0, transactional_id="t-0", start=4, end=4, committed_before=4)
    loop = TransactionLoop(producer, checkpoint,
                           LineageWriter(producer.produce, "purchases", 0, "r", topic_id="t-id", pipeline="g"), result,
                           position=4, validated_position=lambda c: 4 if c is None else c, chunk_records=3,
                           chunk_seconds=3600, max_abort_retries=3)
    loop.refresh()
    assert checkpoint.committed_offset == checkpoint.logged_offset == 4
    assert producer.visible == [] and result.transactions == 1 and result.aborts == 1


def test_refresh_after_a_commit_of_unknown_outcome_reinitialises_and_commits_again():
    checkpoint = FakeCheckpoint(4)
    producer = FakeProducer(checkpoint, {("commit_transaction", 1): _unknown("commit_transaction")})
    result = PartitionResult(partition=0, transactional_id="t-0", start=4, end=4, committed_before=4)
    loop = TransactionLoop(producer, checkpoint,
                           LineageWriter(producer.produce, "purchases", 0, "r", topic_id="t-id", pipeline="g"), result,
                           position=4, validated_position=lambda c: 4 if c is None else c, chunk_records=3,
                           chunk_seconds=3600, max_abort_retries=3)
    loop.refresh()
    assert result.reinitialisations == 1 and producer.epoch == 1 and producer.calls.get("abort_transaction") is None
    assert producer.log[-1] == ("commit_transaction", 1)  # the renewed commit, on the new epoch
    assert checkpoint.committed_offset == checkpoint.logged_offset == 4 and producer.visible == []


def _loop_over(offsets, *, fail: dict | None = None):
    """A loop that was given ``offsets`` (chunks of 3) and not yet told how the input ended."""
    checkpoint = FakeCheckpoint()
    producer = FakeProducer(checkpoint, fail)
    result = PartitionResult(partition=0, transactional_id="shop-purchases-0", start=0, end=10, committed_before=None)
    loop = TransactionLoop(producer, checkpoint,
                           LineageWriter(producer.produce, "purchases", 0, "run-1", topic_id="t-id", pipeline="g"),
                           result, position=0, validated_position=lambda c: 0 if c is None else c, chunk_records=3,
                           chunk_seconds=3600, max_abort_retries=3)
    for record in records(offsets):
        loop.add(record)
    return producer, checkpoint, loop


def test_abandon_aborts_the_open_transaction_and_commits_nothing_more():
    producer, checkpoint, loop = _loop_over(range(5))  # 0-2 committed, 3-4 open: the input stopped short
    loop.abandon()
    assert not loop.is_open and loop.buffered == [] and loop.position == 3
    assert producer.calls["abort_transaction"] == 1 and producer.calls["commit_transaction"] == 1
    assert producer.abort_settles == [False]  # nothing is replayed: its queued records go unsent
    assert checkpoint.committed_offset == 3
    assert sorted(o for t, o in producer.visible if t == "invoices") == [0, 1, 2]
    assert_exactly_once(producer, checkpoint)


def test_abandon_with_nothing_open_calls_nothing():
    producer, checkpoint, loop = _loop_over(range(3))  # one whole chunk, committed
    loop.abandon()
    assert "abort_transaction" not in producer.calls and checkpoint.committed_offset == 3


def test_abandon_whose_abort_fails_leaves_nothing_visible():
    producer, checkpoint, loop = _loop_over(range(4), fail={("abort_transaction", 1): PublishError("fatal")})
    loop.abandon()  # the next attempt's init_transactions (or the timeout) aborts it
    assert not loop.is_open and checkpoint.committed_offset == 3
    assert sorted(o for t, o in producer.visible if t == "invoices") == [0, 1, 2]


# -- a writer slot's loop: transactions that span its partitions ---------------------------------

def _slot(committed: dict[int, int | None], *, fail: dict | None = None, landed: set[int] = frozenset(),
          chunk_records: int = 4):
    checkpoints = {p: FakeCheckpoint(c, partition=p) for p, c in committed.items()}
    producer = FakeProducer(checkpoints, fail)
    producer.landed = set(landed)
    loop = TransactionLoop(producer, chunk_records=chunk_records, chunk_seconds=3600, max_abort_retries=3,
                           span_partitions=True)
    return producer, checkpoints, loop


def _join(loop, producer, checkpoints, p: int, *, start: int = 0, end: int) -> PartitionResult:
    c = checkpoints[p].committed()
    result = PartitionResult(partition=p, transactional_id="shop-purchases-s0of1", start=start, end=end,
                             committed_before=c)
    loop.join(checkpoints[p], LineageWriter(producer.produce, "purchases", p, "run-1", topic_id="t-id", pipeline="g"),
              result, position=start if c is None else c, validated_position=lambda c, s=start: s if c is None else c)
    return result


def _slot_window(producer, checkpoints, loop, short: int | None = None) -> dict[int, PartitionResult]:
    """Partition 0: records 0-4 of [0,6) (an aborted tail); partition 1: 0-1 of [0,2); partition 2: nothing
    new (committed at 3 before). ``short``: that partition's stream stops after its first record."""
    results = {}
    for p, offsets, end in ((0, range(5), 6), (1, range(2), 2)):
        results[p] = _join(loop, producer, checkpoints, p, end=end)
        for record in records(offsets):
            if record[0] >= loop.position:
                loop.add(record)
            if p == short:
                loop.abandon()
                raise PublishError(f"partition {p} stopped short")
        loop.finish(end)
    results[2] = _join(loop, producer, checkpoints, 2, start=3, end=3)
    loop.refresh()
    loop.close()
    return results


def _visible(producer, topic="invoices") -> list[tuple[int, int]]:
    return sorted((p, o) for t, p, o in producer.visible if t == topic)


def _assert_slot_exactly_once(producer, checkpoints):
    for topic in ("invoices", "shipments"):
        seen = _visible(producer, topic)
        assert len(seen) == len(set(seen)), f"duplicate {topic}: {seen}"
        assert all(o < (checkpoints[p].committed_offset or 0) for p, o in seen), (topic, seen)
    assert _visible(producer, "invoices") == _visible(producer, "shipments")


def test_a_slots_transactions_hold_several_partitions_and_commit_each_ones_position():
    producer, checkpoints, loop = _slot({0: None, 1: None, 2: 3})
    results = _slot_window(producer, checkpoints, loop)
    # Records 0-3 of partition 0 fill the first transaction; the second holds partition 0's record 4 and
    # window end, partition 1's two records and end, and partition 2's renewed position.
    assert producer.calls["commit_transaction"] == 2 and producer.calls["send_offsets_to_transaction"] == 2
    assert {p: (c.committed_offset, c.logged_offset) for p, c in checkpoints.items()} == {
        0: (6, 6), 1: (2, 2), 2: (3, 3)}
    assert {p: (r.transactions, r.records_published) for p, r in results.items()} == {0: (2, 5), 1: (1, 2), 2: (1, 0)}
    assert _visible(producer) == [(0, o) for o in range(5)] + [(1, 0), (1, 1)]
    _assert_slot_exactly_once(producer, checkpoints)


@pytest.mark.parametrize("failing_call", [("commit_transaction", 2), ("send_offsets_to_transaction", 2),
                                          ("produce", 12)])
def test_an_abort_of_a_spanning_transaction_replays_every_partition_it_held(failing_call):
    producer, checkpoints, loop = _slot({0: None, 1: None, 2: 3}, fail={failing_call: TransactionAbortable("abort")})
    results = _slot_window(producer, checkpoints, loop)
    assert producer.calls["abort_transaction"] == 1
    assert {p: c.committed_offset for p, c in checkpoints.items()} == {0: 6, 1: 2, 2: 3}
    assert {p: r.records_published for p, r in results.items()} == {0: 5, 1: 2, 2: 0}
    assert _visible(producer) == [(0, o) for o in range(5)] + [(1, 0), (1, 1)]
    _assert_slot_exactly_once(producer, checkpoints)


@pytest.mark.parametrize("landed", [False, True], ids=["commit lost", "commit landed, answer lost"])
def test_a_spanning_commit_of_unknown_outcome_rereads_every_partition(landed):
    producer, checkpoints, loop = _slot({0: None, 1: None, 2: 3}, fail={("commit_transaction", 2): _unknown("commit")},
                                        landed={2} if landed else set())
    results = _slot_window(producer, checkpoints, loop)
    assert producer.epoch == 1 and producer.calls.get("abort_transaction") is None
    assert {p: c.committed_offset for p, c in checkpoints.items()} == {0: 6, 1: 2, 2: 3}
    assert {p: r.records_published for p, r in results.items()} == {0: 5, 1: 2, 2: 0}
    # Landed: only the renewal (partition 2) is committed again; lost: the whole transaction is replayed.
    assert producer.calls["commit_transaction"] == 3
    _assert_slot_exactly_once(producer, checkpoints)


def test_a_partition_cut_short_in_a_slot_commits_nothing_more_of_the_open_transaction():
    producer, checkpoints, loop = _slot({0: None, 1: None, 2: 3})
    with pytest.raises(PublishError, match="partition 1 stopped short"):
        _slot_window(producer, checkpoints, loop, short=1)
    # Partition 0's first chunk committed; its last record and proven end shared the open transaction
    # with partition 1's record, which was aborted: the retry publishes them again.
    assert {p: c.committed_offset for p, c in checkpoints.items()} == {0: 4, 1: None, 2: 3}
    assert producer.calls["abort_transaction"] == 1 and not loop.is_open
    assert _visible(producer) == [(0, o) for o in range(4)]
    _assert_slot_exactly_once(producer, checkpoints)


def test_a_loop_of_one_partitions_transactions_takes_the_next_only_after_its_commit():
    producer, checkpoints, _ = _slot({0: None, 1: None})
    loop = TransactionLoop(producer, chunk_records=4, chunk_seconds=3600, max_abort_retries=3)
    _join(loop, producer, checkpoints, 0, end=2)
    loop.add(records([0])[0])
    with pytest.raises(ValueError, match="once the last one committed"):
        _join(loop, producer, checkpoints, 1, end=2)
    loop.add(records([1])[0])
    loop.finish(2)
    _join(loop, producer, checkpoints, 1, end=2)
    assert checkpoints[0].committed_offset == 2 and producer.calls["commit_transaction"] == 1


# -- what the committed transactions wrote: the run's end waits for a read_committed reader to see it -------

def _reported(*results: PartitionResult) -> dict[tuple[str, int], int]:
    return {(t, p): o for t, ps in last_written(results).items() for p, o in ps.items()}


@pytest.mark.parametrize("fail", [
    {},
    {("commit_transaction", 2): TransactionAbortable("coordinator moved")},
    {("produce", 8): TransactionAbortable("broker says abort")},
    {("flush", 3): TransactionAbortable("messages undelivered")},
], ids=["clean", "abort at a commit", "abort mid-transaction", "abort at the last flush"])
def test_the_result_reports_the_last_committed_record_of_each_partition_never_an_aborted_one(fail):
    producer, checkpoint, result, error = run(range(8), end=8, fail=fail)
    assert error is None
    # Outputs of the input partition 0 in invoices[0] and shipments[0]; checkpoint records in its partition 0.
    assert _reported(result) == producer.committed_records
    assert set(producer.committed_records) == {("invoices", 0), ("shipments", 0), ("shop.checkpoints", 0)}
    if fail:  # the aborted records took offsets too (as in Kafka); the last ones are the replay's, committed
        assert producer.next_offset[("invoices", 0)] > 7


def test_a_fenced_attempt_reports_only_what_it_committed_before():
    producer, checkpoint, result, error = run(
        range(8), end=8, fail={("produce", 9): ProducerFencedError("fenced by a newer attempt")})
    assert isinstance(error, ProducerFencedError)
    assert _reported(result) == producer.committed_records == {
        ("invoices", 0): 2, ("shipments", 0): 2, ("shop.checkpoints", 0): 0}
    assert producer.next_offset[("invoices", 0)] > 2  # the open transaction's records: never reported


def test_an_abandoned_transaction_is_not_reported():
    producer, checkpoint, loop = _loop_over(range(5))  # 0-2 committed, 3-4 open, then aborted
    loop.abandon()
    assert _reported(loop._current.result) == {("invoices", 0): 2, ("shipments", 0): 2, ("shop.checkpoints", 0): 0}


@pytest.mark.parametrize("landed", [False, True], ids=["commit lost", "commit landed, answer lost"])
def test_a_commit_of_unknown_outcome_is_reported_as_if_it_landed(landed):
    producer, checkpoint, result, error = run(
        range(6), end=6, fail={("commit_transaction", 2): _unknown("commit_transaction")},
        landed={2} if landed else set())
    assert error is None
    reported = _reported(result)
    # Landed: the replay has nothing left but the end; lost: it produces records 3-5 again, after the lost ones.
    assert all(reported[tp] >= offset for tp, offset in producer.committed_records.items())
    assert reported == producer.written


def test_a_slots_results_together_report_every_partition_its_transactions_wrote():
    producer, checkpoints, loop = _slot({0: None, 1: None, 2: 3},
                                        fail={("commit_transaction", 2): TransactionAbortable("abort")})
    results = _slot_window(producer, checkpoints, loop)
    assert _reported(*results.values()) == producer.committed_records
    assert {tp for tp in producer.committed_records if tp[0] == "shop.checkpoints"} == {
        ("shop.checkpoints", 0), ("shop.checkpoints", 1), ("shop.checkpoints", 2)}
