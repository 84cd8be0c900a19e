"""Broker-free: where a partition starts when the group's offsets are gone, and the retention warnings.

The same rules against a real broker whose offsets retention is one minute:
tests/integration/engine/test_offsets_expiry.py.
"""

from __future__ import annotations

import pytest

from eos_etl.engine import checkpoint_log, offsets_retention
from eos_etl.engine.checkpoint_log import CheckpointEntry
from eos_etl.engine.position import Lineage, PartitionState, Verdict, decide
from eos_etl.engine.window import OffsetRange, Window
from eos_etl.orchestration.dag_factory import schedule_interval_s

TOPIC_ID = "t-id"


def entry(p: int, offset: int, partitions: int = 2) -> CheckpointEntry:
    return CheckpointEntry(p, offset, partitions, "run-1", 0, TOPIC_ID)


def start(p: int, entries: list[CheckpointEntry], lineage: Lineage = Lineage.UNREAD, log=(0, 500)):
    """Where partition ``p`` starts with no group offset: (verdict, offset, row)."""
    record = {e.partition: e for e in entries}.get(p)
    known = max((e.input_partitions for e in entries), default=0)
    d = decide(PartitionState(p, TOPIC_ID, log[0], log[1], None, record, known, lineage, 9 if lineage is
                              Lineage.FOUND else None))
    return d.verdict, d.offset, d.row.name


def test_a_checkpoint_record_is_the_position_of_a_partition_whose_group_offset_expired():
    entries = [entry(0, 120), entry(1, 95)]
    assert [start(p, entries) for p in (0, 1)] == [(Verdict.START, 120, "checkpoint"), (Verdict.START, 95,
                                                                                          "checkpoint")]


def test_fresh_topics_start_from_the_policy_without_a_flag():
    assert start(0, []) == (Verdict.READ_LINEAGE, None, "lineage-unread")
    assert start(0, [], Lineage.NONE, log=(7, 500)) == (Verdict.FRESH, 7, "never-published")


def test_outputs_without_any_checkpoint_record_never_mean_start_from_earliest():
    assert start(0, [], Lineage.FOUND)[::2] == (Verdict.STOP, "lineage-found")
    assert start(0, [], Lineage.NONE_TRUNCATED)[::2] == (Verdict.STOP, "unprovable")


def test_a_partition_added_after_the_last_run_is_new_one_it_knew_is_lost():
    assert start(2, [entry(0, 10), entry(1, 12)]) == (Verdict.FRESH, 0, "new-partition")  # the runs knew 2
    assert start(1, [entry(0, 10, partitions=3)], Lineage.FOUND)[::2] == (Verdict.STOP, "lineage-found")


def test_checkpoint_records_round_trip_and_foreign_or_broken_ones_are_ignored():
    e = CheckpointEntry(3, 1234, 4, "r-9", 1_700_000_000_000)
    key = checkpoint_log.key("g", "purchases", 3)
    assert checkpoint_log.decode("g", "purchases", key, e.value(), e.timestamp_ms) == e
    assert checkpoint_log.decode("other", "purchases", key, e.value(), 0) is None
    assert checkpoint_log.decode("g", "orders", key, e.value(), 0) is None
    assert checkpoint_log.decode("g", "purchases", key, None, 0) is None  # a tombstone
    assert checkpoint_log.decode("g", "purchases", b"not json", e.value(), 0) is None
    assert checkpoint_log.decode("g", "purchases", key, b'{"next_offset": "x"}', 0) is None


def test_warnings_for_a_short_retention_and_an_old_last_commit():
    now = 10_000_000_000
    hour = 3_600_000
    quiet = offsets_retention.warnings(10080, {0: now - hour, 1: now - 2 * hour}, topic="purchases", group="g",
                                       now_ms=now, schedule_interval_s=3600)
    assert quiet == []
    short = offsets_retention.warnings(60, {0: now - hour // 60}, topic="purchases", group="g", now_ms=now,
                                       schedule_interval_s=3600)
    assert len(short) == 1 and "offsets.retention.minutes=60" in short[0] and "every 60 minutes" in short[0]
    old = offsets_retention.warnings(10080, {0: now - 4 * 24 * hour, 1: now - hour}, topic="purchases", group="g",
                                     now_ms=now)
    assert len(old) == 1 and "purchases[0]" in old[0] and "4.0 days ago" in old[0] and "expire soon" in old[0]
    assert all("\n" not in line for line in short + old)


@pytest.mark.parametrize("schedule, seconds", [("@hourly", 3600), ("*/5 * * * *", 300),
                                               ("0 9 * * 1-5", 3 * 86400), (None, None), ("not cron", None)])
def test_the_schedule_interval_is_its_longest_gap(schedule, seconds):
    assert schedule_interval_s(schedule) == seconds


def test_a_window_with_nothing_new_renews_only_the_positions_getting_old():
    now, minute = 1_800_000_000_000, 60_000
    committed_at = {0: now - minute, 1: now - 42 * 60 * minute, 2: now - 41 * 60 * minute}
    # A week's retention: renewed past a quarter of it (42 hours); partition 3 has no checkpoint record.
    assert offsets_retention.renewal_due(10080, [0, 1, 2, 3], committed_at, now_ms=now) == [1, 3]
    # A one-minute retention (the offsets-expiry tests' broker): past 15 s.
    assert offsets_retention.renewal_due(1, [0, 1], {0: now - 14_000, 1: now - 15_000}, now_ms=now) == [1]
    # The brokers' configs unreadable: every partition, as before.
    assert offsets_retention.renewal_due(None, [0, 1], {0: now, 1: now}, now_ms=now) == [0, 1]


def test_a_windows_commit_times_survive_its_json():
    window = Window(topic="t", group="g", ranges={0: OffsetRange(5, 5), 1: OffsetRange(7, 7)}, committed_at={0: 123})
    assert Window.from_json(window.to_json()) == window
    assert "committed_at" not in Window(topic="t", group="g", ranges={0: OffsetRange(5, 5)}).to_dict()
    with pytest.raises(ValueError, match="committed_at"):
        Window.from_dict({**window.to_dict(), "committed_at": {"2": 1}})
