"""A fenced attempt waits only for another attempt that really commits (engine.publishing.superseded).

Broker-free: the transitions of :func:`wait_for_successor` on a fake clock, with the committed
offset scripted. On a real broker (a transaction the coordinator aborts at its timeout):
tests/integration/engine/publishing/test_superseded.py.
"""

from __future__ import annotations

import pytest

from eos_etl.engine.errors import ProducerFencedError
from eos_etl.engine.pipeline import PipelineConfig
from eos_etl.engine.publishing.superseded import Fence, Outcome, first_commit_bound_s, wait_for_successor
from eos_etl.kafka.connection import KafkaConnection

BOUND = 65.0


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def watch(commits, *, end: int = 100, position: int | None = 10, age: float | None = 5.0, timeout: float = 120.0):
    """``commits(t)``: the committed offset at time t (None: unreadable). Returns (outcome, seconds, reads)."""
    clock, reads = Clock(), []

    def read():
        reads.append(clock())
        return commits(clock())

    outcome = wait_for_successor(read, end, Fence(position, age, timeout), progress_bound_s=BOUND,
                                 clock=clock, sleep=clock.sleep)
    return outcome, clock(), reads


def test_a_fence_at_the_transactions_timeout_with_nobody_committing_fails_at_once():
    outcome, took, reads = watch(lambda t: 10, age=120.5)
    assert outcome is Outcome.NO_SUCCESSOR and took == 0 and len(reads) == 1


def test_a_fence_at_the_timeout_with_unreadable_offsets_fails_at_once_too():
    outcome, took, _ = watch(lambda t: None, age=121.0)
    assert outcome is Outcome.NO_SUCCESSOR and took == 0


def test_a_fence_at_the_timeout_waits_for_an_attempt_that_committed_since():
    # Someone committed past this attempt's last known position: another attempt runs; it finishes at t=30.
    outcome, took, _ = watch(lambda t: 100 if t >= 30 else 40, age=130.0)
    assert outcome is Outcome.COMPLETED and 30 <= took <= 31


def test_a_window_already_committed_to_its_end_stands_down_at_once():
    for age in (None, 5.0, 200.0):
        outcome, took, _ = watch(lambda t: 100, age=age)
        assert outcome is Outcome.COMPLETED and took == 0


def test_a_fence_by_another_attempt_waits_its_first_commit_bound_then_gives_up():
    outcome, took, reads = watch(lambda t: 10, age=5.0)
    assert outcome is Outcome.NO_SUCCESSOR and took == pytest.approx(BOUND) and len(reads) > 10


def test_an_attempt_that_keeps_committing_is_waited_for_past_the_bound():
    # A commit every 20 s from 10 to 100: 180 s in all, far more than one bound, never a gap that long.
    outcome, took, _ = watch(lambda t: min(100, 10 + 10 * int(t // 20)), age=5.0)
    assert outcome is Outcome.COMPLETED and 180 <= took <= 181


def test_an_attempt_that_stops_committing_is_given_up_one_bound_after_its_last_commit():
    outcome, took, _ = watch(lambda t: 10 if t < 20 else 50, age=5.0)
    assert outcome is Outcome.STALLED and took == pytest.approx(20 + BOUND, abs=1.0)


def test_without_a_known_position_the_first_read_is_the_baseline():
    outcome, took, _ = watch(lambda t: 30 if t < 10 else 60, position=None, age=None)
    assert outcome is Outcome.STALLED and took == pytest.approx(10 + BOUND, abs=1.0)
    outcome, took, _ = watch(lambda t: 30, position=None, age=None)
    assert outcome is Outcome.NO_SUCCESSOR and took == pytest.approx(BOUND)


def test_the_fence_carries_what_the_attempt_knew():
    config = PipelineConfig(KafkaConnection("127.0.0.1:1"), input_topic="t", group="g", output_topics=("o",),
                            transactional_id_prefix="p", chunk_seconds=20, transaction_timeout_ms=120_000)
    error = ProducerFencedError("fenced", transaction_age_s=121.0, transaction_timeout_s=120.0)
    error.position = 633
    fence = Fence.of(error, config)
    assert fence == Fence(633, 121.0, 120.0) and fence.timed_out
    assert not Fence.of(ProducerFencedError("fenced"), config).timed_out  # nothing known: not explained
    assert not Fence(633, 119.0, 120.0).timed_out and not Fence(633, None, 120.0).timed_out
    assert first_commit_bound_s(config) == 65.0  # chunk_seconds 20 + a flush's 30 s + margin, not the 150 s stall
