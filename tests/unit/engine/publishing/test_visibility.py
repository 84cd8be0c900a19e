"""Broker-free: the run's wait for a read_committed reader to see what it committed
(:mod:`eos_etl.engine.publishing.visibility`), against a stand-in for the cluster's last stable offsets.
Against a broker, with a partition held open by another transaction:
tests/integration/engine/publishing/test_visibility.py.
"""

from __future__ import annotations

import time

import pytest

from eos_etl.engine.errors import CommitNotVisibleError
from eos_etl.engine.publishing import visibility
from eos_etl.engine.publishing.publisher import PartitionResult
from eos_etl.engine.publishing.visibility import last_written, wait_visible
from eos_etl.kafka.errors import BrokerLostError


class Admin:
    """Answers each ``last_stable_offsets`` with the next of ``answers`` (the last one for ever), or raises it."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked: list[dict[str, list[int]]] = []

    def last_stable_offsets(self, partitions, *, deadline_s=None):
        self.asked.append(partitions)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return {t: {p: answer[t][p] for p in ps} for t, ps in partitions.items()}


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(visibility, "sleep", slept.append)
    return slept


def result(p: int, written: list) -> PartitionResult:
    return PartitionResult(partition=p, transactional_id="t", start=0, end=1, committed_before=None,
                           last_written=written)


def test_the_results_merge_to_the_largest_offset_per_partition():
    merged = last_written([result(0, [["inv", 0, 5], ["ckpt", 0, 1]]), result(1, [["inv", 0, 9], ["inv", 1, 2]]),
                           result(2, [])])
    assert merged == {"inv": {0: 9, 1: 2}, "ckpt": {0: 1}}


def test_visible_at_once_is_one_request_and_no_pause(sleeps):
    admin = Admin({"inv": {0: 10, 1: 3}, "ckpt": {0: 2}})
    assert wait_visible(None, {"inv": {0: 9, 1: 2}, "ckpt": {0: 1}}, admin=admin) >= 0
    assert admin.asked == [{"inv": [0, 1], "ckpt": [0]}] and sleeps == []


def test_nothing_written_asks_nothing(sleeps):
    admin = Admin(AssertionError("asked"))
    assert wait_visible(None, {}, admin=admin) == 0.0 and wait_visible(None, {"inv": {}}, admin=admin) == 0.0


def test_a_partition_is_waited_for_until_its_stable_offset_passes_the_last_record(sleeps):
    # The last stable offset must be past the record: equal to its offset is the record still undecided.
    admin = Admin({"inv": {0: 9, 1: 3}}, {"inv": {0: 9, 1: 3}}, {"inv": {0: 10, 1: 3}})
    wait_visible(None, {"inv": {0: 9, 1: 2}}, admin=admin)
    # Asked again only for what was not visible yet, after a growing pause.
    assert admin.asked == [{"inv": [0, 1]}, {"inv": [0]}, {"inv": [0]}]
    assert sleeps == [visibility.FIRST_PAUSE_S, 2 * visibility.FIRST_PAUSE_S]


def test_never_visible_within_the_bound_is_one_error_of_exit_code_1():
    admin = Admin({"inv": {0: 4}})
    t0 = time.monotonic()
    with pytest.raises(CommitNotVisibleError) as failed:
        wait_visible(None, {"inv": {0: 9}}, timeout_s=0.3, admin=admin)
    assert 0.3 <= time.monotonic() - t0 < 1.0  # the whole bound: the last ask at its end
    assert failed.value.exit_code == 1
    assert "inv[0] (its last record at 9, last stable offset 4)" in str(failed.value)
    assert 3 <= len(admin.asked) <= 6  # pauses of 10, 20, 40, 80 ms...: a few requests, not a busy loop


def test_a_cluster_that_stops_answering_is_the_same_error_with_its_cause(sleeps):
    lost = BrokerLostError("cannot reach Kafka any more")
    admin = Admin(lost)
    with pytest.raises(CommitNotVisibleError, match="cannot reach Kafka any more") as failed:
        wait_visible(None, {"inv": {0: 9}}, admin=admin)
    assert failed.value.exit_code == 1 and failed.value.__cause__ is lost
    assert "last stable offset not read" in str(failed.value)
