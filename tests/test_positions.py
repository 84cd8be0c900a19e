"""Broker-free: where a partition starts when the group's offsets are gone, and the retention warnings.

The same rules against a real broker whose offsets retention is one minute:
tests/test_offsets_expiry.py.
"""

from __future__ import annotations

import pytest

from eos_etl.engine import checkpoint_log, offsets_retention
from eos_etl.engine.checkpoint_log import CheckpointEntry
from eos_etl.engine.errors import PositionLostError
from eos_etl.engine.planner import recovered_positions
from eos_etl.orchestration.dag_factory import schedule_interval_s


def entry(p: int, offset: int, partitions: int = 2) -> CheckpointEntry:
    return CheckpointEntry(p, offset, partitions, "run-1", 0)


def resolve(missing, entries, published: set[int] = frozenset()):
    """``published``: the input partitions the outputs' lineage names."""
    asked = []

    def published_from(partitions: list[int]) -> set[int]:
        asked.append(list(partitions))
        return set(published) & set(partitions)

    return recovered_positions(missing, {e.partition: e for e in entries}, published_from,
                               describe_lost=lambda lost: f"lost {lost}"), bool(asked)


def test_a_checkpoint_record_is_the_position_of_a_partition_whose_group_offset_expired():
    assert resolve([0, 1], [entry(0, 120), entry(1, 95)]) == ({0: 120, 1: 95}, False)


def test_fresh_topics_start_from_the_policy_without_a_flag():
    assert resolve([0, 1], [], published=set()) == ({0: None, 1: None}, True)


def test_outputs_without_any_checkpoint_record_never_mean_start_from_earliest():
    with pytest.raises(PositionLostError, match=r"lost \[0, 1\]"):
        resolve([0, 1], [], published={0, 1})


def test_a_partition_added_after_the_last_run_is_new_one_it_knew_is_lost():
    found, _ = resolve([2], [entry(0, 10), entry(1, 12)])  # the runs knew 2 partitions
    assert found == {2: None}
    with pytest.raises(PositionLostError, match=r"lost \[1\]"):
        resolve([1], [entry(0, 10, partitions=3)], published={1})


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
