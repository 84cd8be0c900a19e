"""Warnings about the broker's offsets retention, before it matters.

Kafka deletes the committed offsets of a group without members
``offsets.retention.minutes`` after their last commit. The pipeline does not
depend on them lasting (its checkpoint topic keeps the position, see
:mod:`.checkpoint_log`), but monitoring tools read the group's lag and an
operator should know before offsets vanish: a run warns, one line each, when
the last commit is older than half the retention, and when the schedule leaves
less than twice its interval of margin.
"""

from __future__ import annotations

import time

from ..kafka.admin import ClusterAdmin

SETTING = "offsets.retention.minutes"
KAFKA_DEFAULT_MINUTES = 10080  # what a broker without the setting uses


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
