"""Plan the next window from the group's committed offsets and the last stable offsets."""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum

from ..kafka.admin import ClusterAdmin
from ..kafka.errors import UnstableOffsetsError
from .errors import InputDataLossError
from .window import OffsetRange, Window

log = logging.getLogger(__name__)


class StartPolicy(str, Enum):
    """Where a partition starts when the group has never committed for it."""

    EARLIEST = "earliest"
    LATEST = "latest"
    FAIL = "fail"


def plan_window(
    admin: ClusterAdmin,
    topic: str,
    group: str,
    *,
    start_policy: StartPolicy | str = StartPolicy.EARLIEST,
    max_records_per_partition: int | None = None,
    until_timestamp_ms: int | None = None,
    partitions: list[int] | None = None,
    recover: Callable[[list[int]], None] | None = None,
) -> Window:
    """Per partition: [committed offset (or policy), last stable offset), capped.

    ``recover(partitions)`` is called when the group's offsets are held by a
    transaction that never completed (an attempt died between
    send_offsets_to_transaction and commit): it must fence the pipeline's
    transactional ids, which aborts that transaction, so planning can go on
    instead of waiting for the broker's transaction timeout.

    ``until_timestamp_ms`` caps the end at the first record at or after that
    time (records strictly before it are in the window). ``max_records_per_partition``
    caps the offset span; on transactional topics markers use offsets too, so a
    capped window may hold slightly fewer records than the cap.
    """
    policy = StartPolicy(start_policy)
    admin.check_reachable()  # in 1 s slices: rejected credentials fail in about a second
    parts = partitions if partitions is not None else admin.partitions(topic)
    offsets = admin.offsets(topic, parts)
    if recover is None:
        committed = admin.committed_offsets(group, topic, parts)
    else:
        try:
            committed = admin.committed_offsets(group, topic, parts, unstable_timeout=2.0)
        except UnstableOffsetsError as exc:
            log.warning("%s; fencing the pipeline's transactional ids to abort it", exc)
            recover(parts)
            committed = admin.committed_offsets(group, topic, parts)
    time_caps = admin.offsets_for_time(topic, parts, until_timestamp_ms) if until_timestamp_ms is not None else {}
    ranges: dict[int, OffsetRange] = {}
    for p in parts:
        off = offsets[p]
        start = committed.get(p)
        if start is None:
            if policy is StartPolicy.FAIL:
                raise InputDataLossError(f"group {group} has no committed offset for {topic}[{p}] and policy is 'fail'")
            start = off.earliest if policy is StartPolicy.EARLIEST else off.last_stable
        elif start < off.earliest:
            raise InputDataLossError(
                f"group {group} committed offset {start} for {topic}[{p}] is below the earliest retained offset "
                f"{off.earliest}: records [{start},{off.earliest}) were deleted before being processed. "
                "Move the group's offset forward deliberately (kafka-consumer-groups --reset-offsets) to accept the loss."
            )
        end = off.last_stable
        if p in time_caps and time_caps[p] is not None:
            end = min(end, time_caps[p])
        if max_records_per_partition is not None:
            end = min(end, start + max_records_per_partition)
        end = max(end, start)
        ranges[p] = OffsetRange(start, end)
    window = Window(topic=topic, group=group, ranges=ranges)
    log.info("planned window %s", window)
    return window
