"""The broker's offsets retention: which positions a window with nothing new renews, and warnings.

Kafka deletes the committed offsets of a group without members
``offsets.retention.minutes`` after their last commit. The pipeline does not
depend on them lasting (its checkpoint topic keeps the position, see
:mod:`.checkpoint_log`), but monitoring tools read the group's lag, so a window
with nothing new commits positions again (a renewal) before they expire. Only
the ones that are getting old (:func:`renewal_due`): renewing every partition on
every idle window cost a transaction per input partition each time (128
partitions: 128 InitProducerId, AddPartitionsToTxn and EndTxn requests a window)
for offsets that had days left. A position is renewed once its last commit is
older than :data:`RENEW_SHARE` of the retention; with the warning below about a
schedule slower than half the retention, that leaves a margin of at least a
quarter of it.

An operator should also know before offsets vanish: a run warns, one line each,
when the last commit is older than half the retention, and when the schedule
leaves less than twice its interval of margin.
"""

from __future__ import annotations

import time

from ..kafka.admin import ClusterAdmin

SETTING = "offsets.retention.minutes"
KAFKA_DEFAULT_MINUTES = 10080  # what a broker without the setting uses
#: A position whose last commit is older than this share of the retention is renewed by a window with nothing new.
RENEW_SHARE = 0.25


def renewal_due(retention_minutes: int | None, partitions: list[int], committed_at_ms: dict[int, int], *,
                now_ms: int) -> list[int]:
    """The partitions whose position a window with nothing new commits again: those last committed more
    than :data:`RENEW_SHARE` of the retention ago, or at an unknown time; all of them when the retention
    is unknown (the broker's configs were not readable)."""
    if retention_minutes is None:
        return sorted(partitions)
    limit_ms = retention_minutes * 60_000 * RENEW_SHARE
    return sorted(p for p in partitions if p not in committed_at_ms or now_ms - committed_at_ms[p] >= limit_ms)


def _duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} hours"
    minutes = round(seconds / 60)
    return f"{minutes} minute{'' if minutes == 1 else 's'}"


def warnings(retention_minutes: int, last_commits_ms: dict[int, int | None], *, topic: str, group: str,
             now_ms: int, schedule_interval_s: float | None = None) -> list[str]:
    """The warnings for a retention, each partition's last commit time and a schedule interval."""
    retention_s = retention_minutes * 60
    out = []
    if schedule_interval_s is not None and retention_s < 2 * schedule_interval_s:
        out.append(f"the brokers keep a group's committed offsets {_duration(retention_s)} after its last commit "
                   f"({SETTING}={retention_minutes}) but this pipeline runs every {_duration(schedule_interval_s)}: "
                   f"group {group}'s offsets can expire between two runs; raise {SETTING} to at least "
                   f"{int(2 * schedule_interval_s // 60)} (the checkpoint topic keeps the position meanwhile)")
    known = {p: ts for p, ts in last_commits_ms.items() if ts is not None}
    if known:
        p, oldest = min(known.items(), key=lambda item: item[1])
        age_s = max(0.0, (now_ms - oldest) / 1000)
        if age_s > retention_s / 2:
            out.append(f"the last commit of {topic}[{p}] by group {group} was {_duration(age_s)} ago, more than "
                       f"half of the brokers' {SETTING}={retention_minutes}: its committed offsets "
                       f"{'have expired' if age_s > retention_s else 'expire soon'} (the checkpoint topic keeps "
                       "the position; run the pipeline more often or raise the setting)")
    return out


def check(admin: ClusterAdmin, retention_minutes: str | None, checkpoint_topic: str, *, topic: str, group: str,
          schedule_interval_s: float | None = None) -> list[str]:
    """:func:`warnings` for the pipeline, the last commits read from its checkpoint topic."""
    minutes = int(retention_minutes) if retention_minutes is not None else KAFKA_DEFAULT_MINUTES
    partitions = admin.partitions(checkpoint_topic)
    last = admin.newest_timestamps(checkpoint_topic, partitions)
    return warnings(minutes, last, topic=topic, group=group, now_ms=int(time.time() * 1000),
                    schedule_interval_s=schedule_interval_s)
