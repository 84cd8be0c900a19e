"""Plan the next window from the pipeline's committed positions and the last stable offsets.

A partition's start is the group's committed offset. Where the group has none,
Kafka may have deleted it (``offsets.retention.minutes`` after the last commit
of a group without members): the pipeline's checkpoint topic
(:mod:`.checkpoint_log`) still holds the position, and the run resumes there.
Only a partition the pipeline never published from starts where the start
policy says (``earliest`` by default); one it may have published from but whose
position is gone stops the run (:class:`PositionLostError`), never republishes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from enum import Enum

from ..kafka.admin import ClusterAdmin
from ..kafka.errors import UnstableOffsetsError
from . import checkpoint_log
from .checkpoint_log import CheckpointEntry
from .errors import InputDataLossError, PositionLostError
from .pipeline import PipelineConfig
from .window import OffsetRange, Window

log = logging.getLogger(__name__)


class StartPolicy(str, Enum):
    """Where a partition starts when the pipeline has never committed for it."""

    EARLIEST = "earliest"
    LATEST = "latest"
    FAIL = "fail"


def recovery_command(config: PipelineConfig) -> str:
    return (f"python -m eos_etl offsets restore --from-lineage --input-topic {config.input_topic} "
            f"--group {config.group} (and this run's connection and topic options)")


def recovered_positions(missing: list[int], entries: Mapping[int, CheckpointEntry],
                        outputs_hold_records: Callable[[], bool], *, describe_lost: Callable[[list[int]], str]
                        ) -> dict[int, int | None]:
    """Positions for the partitions the group has no offset for; None: never published from (fresh).

    * the partition's checkpoint record: its position (the group's offset expired);
    * no record, but a record of a run that knew the partition (``input_partitions`` beyond
      it): lost, because a plan commits every partition's start (:func:`plan_window`), so the
      partition existed and published before checkpoints were kept;
    * no record, but records of runs before the partition existed: it is new: fresh;
    * no record of the pipeline at all: fresh, unless the outputs hold records (the pipeline
      published before it kept checkpoints, or the checkpoint topic was replaced): lost.

    Raises :class:`PositionLostError` (``describe_lost(partitions)`` is its message) for the lost ones.
    """
    found: dict[int, int | None] = {}
    lost: list[int] = []
    known = max((e.input_partitions for e in entries.values()), default=0)
    for p in missing:
        if p in entries:
            found[p] = entries[p].next_offset
        elif p < known or (not entries and outputs_hold_records()):
            lost.append(p)
        else:
            found[p] = None
    if lost:
        raise PositionLostError(describe_lost(lost))
    return found


def outputs_hold_records(admin: ClusterAdmin, topics: tuple[str, ...]) -> bool:
    """Whether any output partition holds anything below its last stable offset (a published record)."""
    for topic in topics:
        offsets = admin.offsets(topic, admin.partitions(topic))
        if any(o.last_stable > o.earliest for o in offsets.values()):
            return True
    return False


def _group_offsets(admin: ClusterAdmin, group: str, topic: str, parts: list[int],
                   recover: Callable[[list[int]], None] | None) -> dict[int, int | None]:
    if recover is None:
        return admin.committed_offsets(group, topic, parts)
    try:
        return admin.committed_offsets(group, topic, parts, unstable_timeout=2.0)
    except UnstableOffsetsError as exc:
        log.warning("%s; fencing the pipeline's transactional ids to abort it", exc)
        recover(parts)
        return admin.committed_offsets(group, topic, parts)


def committed_positions(admin: ClusterAdmin, config: PipelineConfig, parts: list[int], *,
                        recover: Callable[[list[int]], None] | None = None) -> tuple[dict[int, int | None], list[int]]:
    """Each partition's committed position: the group's offset, else its checkpoint record, else
    None for a partition the pipeline never published from; and the partitions the group had no
    offset for. :class:`PositionLostError` for a partition whose position is gone.

    ``recover(partitions)`` is called when the group's offsets are held by a transaction that
    never completed (an attempt died between send_offsets_to_transaction and commit): it must
    fence the pipeline's transactional ids, which aborts that transaction, so planning can go
    on instead of waiting for the broker's transaction timeout.
    """
    committed = _group_offsets(admin, config.group, config.input_topic, parts, recover)
    missing = [p for p in parts if committed.get(p) is None]
    if not missing:
        return committed, []
    entries = checkpoint_log.read_entries(admin.connection, config.checkpoint_topic, config.group, config.input_topic)

    def describe_lost(lost: list[int]) -> str:
        names = ", ".join(f"{config.input_topic}[{p}]" for p in lost)
        return (f"{names}: group {config.group} has no committed offset and the checkpoint topic "
                f"{config.checkpoint_topic} no record, but this pipeline has published before; starting from "
                f"the start policy would publish those records again. Nothing was published; recover the "
                f"position with `{recovery_command(config)}`, then run again")

    found = recovered_positions(missing, entries, lambda: outputs_hold_records(admin, config.output_topics),
                                describe_lost=describe_lost)
    if restored := {p: offset for p, offset in found.items() if offset is not None}:
        log.warning("group %s has no committed offset for %s partitions %s (expired after the broker's "
                    "offsets.retention.minutes?); the checkpoint topic %s has their positions: %s", config.group,
                    config.input_topic, sorted(restored), config.checkpoint_topic, restored)
    committed.update(found)
    return committed, missing


def plan_window(
    admin: ClusterAdmin,
    config: PipelineConfig,
    *,
    start_policy: StartPolicy | str = StartPolicy.EARLIEST,
    max_records_per_partition: int | None = None,
    until_timestamp_ms: int | None = None,
    partitions: list[int] | None = None,
    recover: Callable[[list[int]], None] | None = None,
) -> Window:
    """Per partition: [committed position (or policy), last stable offset), capped.

    Positions as :func:`committed_positions` reads them; planning writes nothing. The
    partitions the group had no offset for are the window's ``uncommitted``: a run commits
    their planned starts (the checkpoint's position, or the start policy's for a partition
    never published from) before it publishes anything. ``until_timestamp_ms`` caps
    the end at the first record at or after that time (records strictly before it are
    in the window). ``max_records_per_partition`` caps the offset span; on transactional
    topics markers use offsets too, so a capped window may hold slightly fewer records
    than the cap.
    """
    policy = StartPolicy(start_policy)
    topic, group = config.input_topic, config.group
    admin.check_reachable()  # in 1 s slices: rejected credentials fail in about a second
    parts = partitions if partitions is not None else admin.partitions(topic)
    offsets = admin.offsets(topic, parts)
    committed, missing = committed_positions(admin, config, parts, recover=recover)
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
    window = Window(topic=topic, group=group, ranges=ranges, uncommitted=tuple(missing))
    log.info("planned window %s", window)
    return window
