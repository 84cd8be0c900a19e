"""The model soak's operations on the pipeline's identity (docs/pipeline-identity.md), broker-free: each drawn
many times in a default soak, the offsets a hand reset writes, the other grouping a racing run takes, the pause
hook, and how the model follows an offset written by hand until a commit takes it over.

The operations themselves run against a real broker in ``make soak-model`` (and
``python -m eos_etl_lab soak --model``)."""

from __future__ import annotations

import random
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from eos_etl.engine import slots
from eos_etl.engine.checkpoint_log import CheckpointEntry
from eos_etl.engine.lineage import H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC
from eos_etl.kafka.reader import ConsumedRecord
from eos_etl_lab.faults import model as ms
from eos_etl_lab.faults.job_process import JobProcess
from eos_etl_lab.faults.model import harness as harness_module
from eos_etl_lab.faults.model.identity_operations import GROUPINGS, hand_reset_targets, other_grouping
from eos_etl_lab.faults.model.pause_hook import PAUSE_ENV, pausing_env, wait_paused

IDENTITY_OPS = ("hand_offset_reset", "race_other_grouping", "paused_run", "partitions_added_between_plan_and_run",
                "second_pipeline_same_group_other_prefix")


def test_each_identity_operation_is_drawn_many_times_in_a_default_soak():
    """``make soak-model`` (20 seeds of 10 operations, with a Connect server) draws each of them at least
    5 times; all of them start a run but the hand reset, which writes offsets only."""
    drawn = Counter(op.kind for seed in range(1, 21) for op in ms.draw_history(seed, 10, connect=True)[1])
    assert min(drawn[kind] for kind in IDENTITY_OPS) >= 5, drawn
    assert set(IDENTITY_OPS) - set(ms.RUN_OPS) == {"hand_offset_reset"}


def test_a_hand_reset_writes_offsets_within_each_log_from_its_seed():
    """Every value within [log start, last stable offset]; ``current`` the position (clamped, the log start
    for none), ``back`` at or below it, ``forward`` at or above it; the same seed the same offsets. Over
    seeds, ``any`` reaches both ends of the log and the position itself."""
    bounds = {0: (0, 100), 1: (40, 60), 2: (10, 10), 3: (0, 50)}
    positions = {0: 30, 1: 70, 2: None, 3: None}
    now = {0: 30, 1: 60, 2: 10, 3: 0}
    assert hand_reset_targets("current", 1, bounds, positions) == now
    for seed in range(200):
        back, forward, anywhere = (hand_reset_targets(to, seed, bounds, positions) for to in ("back", "forward", "any"))
        for p, (low, top) in bounds.items():
            assert low <= back[p] <= now[p] <= forward[p] <= top
            assert low <= anywhere[p] <= top
    assert hand_reset_targets("any", 7, bounds, positions) == hand_reset_targets("any", 7, bounds, positions)
    seen = {hand_reset_targets("any", seed, {0: (0, 4)}, {0: 2})[0] for seed in range(200)}
    assert seen == {0, 1, 2, 3, 4}
    with pytest.raises(ValueError, match="not 'sideways'"):
        hand_reset_targets("sideways", 1, bounds, positions)


def test_a_racing_run_always_takes_a_grouping_other_than_the_pipelines():
    for drawn in GROUPINGS:
        for reference in (1, 2, 3, None):
            grouping = other_grouping(drawn, reference)
            assert grouping != reference
            if slots.parse(drawn) != reference:
                assert grouping == slots.parse(drawn)


HOOKED = """
import logging, subprocess, sys
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s %(message)s")
log = logging.getLogger("eos_etl.lab_test")
logging.getLogger("other").warning("not counted")
for i in range(1, 6):
    log.info("line %d", i)
    if i == 1:  # a process it starts (Spark's JVM, its Python workers) loads the hook but never pauses
        child = subprocess.run([sys.executable, "-c", "import logging; logging.basicConfig(); "
                                "[logging.getLogger('eos_etl.child').warning('child %d', i) for i in range(9)]"])
        log.info("child exit %d", child.returncode)
"""


def test_the_pause_hook_stops_the_process_after_its_nth_log_line_only(tmp_path: Path):
    """A process run with :func:`pausing_env` stops itself right after its 4th ``eos_etl`` record (others'
    not counted), the child it started first never pauses; resumed, it runs to its end."""
    env = pausing_env(tmp_path / "hook", 4)
    assert env[PAUSE_ENV] == "4" and env["PYTHONPATH"].split(":")[0] == str(tmp_path / "hook")
    job = JobProcess([sys.executable, "-c", HOOKED], env=env).start()
    try:
        assert wait_paused(job, 60), job.stderr
        time.sleep(0.3)
        lines = [line for line in job.stderr.splitlines() if line.startswith("eos_etl.lab_test")]
        assert lines == ["eos_etl.lab_test line 1", "eos_etl.lab_test child exit 0", "eos_etl.lab_test line 2",
                         "eos_etl.lab_test line 3"], job.stderr
        assert job.count("child 8") == 1
        job.signal(signal.SIGCONT)
        assert job.wait(30) == 0
    finally:
        if job.alive:
            job.kill()
    assert job.count("eos_etl.lab_test line 5") == 1
    unpaused = JobProcess([sys.executable, "-c", HOOKED], env=pausing_env(tmp_path / "hook", 99)).start()
    assert not wait_paused(unpaused, 60) and unpaused.wait(30) == 0  # fewer lines: it ends unpaused


# -- following an offset written by hand -------------------------------------------------------------
TOPIC = "purchases-t"


def _record(partition: int, offset: int, *, source: int | None = None) -> ConsumedRecord:
    headers = {} if source is None else {H_SOURCE_TOPIC: TOPIC.encode(), H_SOURCE_PARTITION: str(partition).encode(),
                                        H_SOURCE_OFFSET: str(source).encode()}
    return ConsumedRecord(TOPIC if source is None else "invoices-t", partition, offset, None, None, headers)


def _harness(monkeypatch, *, group: dict, records: dict, inputs: range, republished: list[int],
             hand: dict, age_s: float = 5.0, dropped: bool = False, log_start: int = 0):
    """A history whose partition 0 had the offsets of ``hand`` written by hand ``age_s`` ago: the group's
    offsets and checkpoint records now, the input records, and the source offsets published since the reset."""
    h = object.__new__(ms.History)
    h.seed, h.step, h.out = 1, 3, ms.Outcome(1, 1, [])
    h.shop = SimpleNamespace(topics=SimpleNamespace(purchases=TOPIC, outputs=("invoices-t",)), connection=None)
    h.hand, h.hand_at, h.hand_dropped = dict(hand), time.monotonic() - age_s, dropped
    h.truncated, h.outputs_from = set(), {"invoices-t": {0: 10}}
    h.lab = SimpleNamespace(admin=SimpleNamespace(
        offsets=lambda _t, parts: {p: SimpleNamespace(earliest=log_start) for p in parts}))
    h.deleted = []
    monkeypatch.setattr(h, "committed", lambda: dict(group), raising=False)
    monkeypatch.setattr(h, "records", lambda: {p: CheckpointEntry(p, o, 1, "r", 0) for p, o in records.items()},
                        raising=False)
    monkeypatch.setattr(h, "delete_input_below", h.deleted.append, raising=False)

    def read(_connection, topic, *, start=None, **_kw):
        if topic == TOPIC:
            return [_record(0, o) for o in inputs if o >= (start or {}).get(0, 0)]
        return [_record(0, 10 + i, source=o) for i, o in enumerate(republished)]

    monkeypatch.setattr(harness_module, "read_topic", read)
    return h


def test_a_backwards_hand_reset_taken_over_with_its_range_published_again_is_followed(monkeypatch):
    h = _harness(monkeypatch, group={0: 100}, records={0: 100}, inputs=range(0, 100), republished=[20, 21],
                 hand={0: (20, 80)})
    h.follow_hand_reset()
    assert h.hand == {} and not h.out.violations and not h.deleted


def test_a_commit_that_skips_the_range_asked_for_again_while_the_offset_was_there_is_a_violation(monkeypatch):
    """The run took the partition over from its checkpoint's 80, not from the 20 written by hand 5 s ago."""
    h = _harness(monkeypatch, group={0: 100}, records={0: 100}, inputs=range(0, 100), republished=[80, 81],
                 hand={0: (20, 80)})
    h.follow_hand_reset()
    assert [v.kind for v in h.out.violations] == ["hand_reset_not_followed"] and not h.deleted


@pytest.mark.parametrize("age_s, dropped", [(70.0, False), (5.0, True)], ids=["expired", "group deleted"])
def test_an_offset_gone_before_a_commit_took_it_over_leaves_the_checkpoints_position(monkeypatch, age_s, dropped):
    """Older than the broker's retention (or seen gone), the written offset may have expired before the run
    planned: the run resumed at the checkpoint's 80; the range 20..80 is deleted from the input (judged no more)."""
    h = _harness(monkeypatch, group={0: 100}, records={0: 100}, inputs=range(0, 100), republished=[80, 81],
                 hand={0: (20, 80)}, age_s=age_s, dropped=dropped)
    h.follow_hand_reset()
    assert not h.out.violations and h.deleted == [{0: 80}] and h.hand == {}


def test_an_offset_gone_with_its_record_below_the_log_start_is_one_the_next_run_must_stop_at(monkeypatch):
    """Forwards to 90 (records below deleted): the offset expired, the record's 60 is below the log start."""
    h = _harness(monkeypatch, group={0: None}, records={0: 60}, inputs=range(90, 100), republished=[],
                 hand={0: (90, 60)}, log_start=90)
    h.follow_hand_reset()
    assert h.truncated == {0} and h.hand_dropped and h.hand == {0: (90, 60)} and not h.out.violations


def test_a_pending_offset_waits_for_a_commit(monkeypatch):
    h = _harness(monkeypatch, group={0: 20}, records={0: 80}, inputs=range(0, 100), republished=[],
                 hand={0: (20, 80)})
    h.follow_hand_reset()
    assert h.hand == {0: (20, 80)} and not h.out.violations and not h.truncated


def test_the_identity_operations_draw_their_arguments_from_the_history_rng():
    """A seed's history is drawn again by the shrinker and a replay: the same rng, the same arguments."""
    for kind in IDENTITY_OPS:
        a, b = (ms.draw_op(random.Random(5), kind, connect=True) for _ in range(2))
        assert a == b and a.kind == kind
