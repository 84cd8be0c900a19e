"""Plan the next window from the pipeline's committed positions and the last stable offsets.

A partition's start is the group's committed offset. Where the group has none,
Kafka may have deleted it (``offsets.retention.minutes`` after the last commit
of a group without members): the pipeline's checkpoint topic
(:mod:`.checkpoint_log`) still holds the position, and the run resumes there.
Only a partition the pipeline never published from (no output's lineage names
it) starts where the start policy says (``earliest`` by default); one it
published from but whose position is gone stops the run
(:class:`PositionLostError`), never republishes. A position past the
partition's log end (the topic was re-created or truncated), or taken on a topic
of the same name deleted since (the checkpoint record's topic id is not the
topic's), stops the run too (:class:`PositionBeyondLogError`), never skips the
new log's records.

Planning writes nothing and fences nothing: only a run passes ``recover``,
which takes the pipeline's transactional ids over when an incomplete
transaction holds the group's offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from enum import Enum

from ..kafka.admin import ClusterAdmin, PartitionOffsets
from ..kafka.errors import UnstableOffsetsError
from ..kafka.group_offsets import GroupOffsetsReader
from . import checkpoint_log
from .checkpoint_log import CheckpointEntry
from .errors import InputDataLossError, PositionBeyondLogError, PositionLostError
from .lineage_positions import last_published
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
                        published_from: Callable[[list[int]], set[int]], *,
                        describe_lost: Callable[[list[int]], str]) -> dict[int, int | None]:
    """Positions for the partitions the group has no offset for; None: never published from (fresh).

    * the partition's checkpoint record: its position (the group's offset expired);
    * no record, and records of runs before the partition existed (``input_partitions`` not
      beyond it): it is new: fresh;
    * no record, but a record of a run that knew the partition, or no record of the pipeline at
      all: the outputs' lineage decides. ``published_from(partitions)`` is the subset with a
      committed output: their position is lost. The others never published anything (a run
      killed while it committed the partitions' starts, a partition that was empty then or
      added while a run was in flight): fresh, like a first run.

    Raises :class:`PositionLostError` (``describe_lost(partitions)`` is its message) for the lost ones.
    """
    found: dict[int, int | None] = {}
    unsure: list[int] = []
    known = max((e.input_partitions for e in entries.values()), default=0)
    for p in missing:
        if p in entries:
            found[p] = entries[p].next_offset
        elif p < known or not entries:
            unsure.append(p)
        else:
            found[p] = None
    lost = sorted(published_from(unsure)) if unsure else []
    if lost:
        raise PositionLostError(describe_lost(lost))
    found.update({p: None for p in unsure})
    return found


def published_from(admin: ClusterAdmin, input_topic: str, partitions: list[int],
                   output_topics: tuple[str, ...]) -> set[int]:
    """The input partitions of ``partitions`` with a committed output (the lineage headers say so).

    Outputs whose earlier records were deleted (retention, deleteRecords) cannot prove a partition
    never published: then every partition counts as published. Empty outputs need no reading.
    """
    offsets = {t: admin.offsets(t, admin.partitions(t)) for t in output_topics}
    if not any(o.last_stable > o.earliest for parts in offsets.values() for o in parts.values()):
        return set()
    if any(o.earliest > 0 for parts in offsets.values() for o in parts.values()):
        log.warning("outputs %s had records deleted: their lineage cannot prove that %s partitions %s never "
                    "published", ", ".join(output_topics), input_topic, partitions)
        return set(partitions)
    return set(last_published(admin, input_topic, partitions, output_topics))


def _held_partitions(admin: ClusterAdmin, group: str, topic: str, parts: list[int]) -> list[int]:
    """The partitions whose offsets an incomplete transaction holds (a stable read waits for them)."""
    held = []
    for p in parts:
        try:
            admin.committed_offsets(group, topic, [p], unstable_timeout=1.0)
        except UnstableOffsetsError:
            held.append(p)
    return held


def _group_offsets(admin: ClusterAdmin, group: str, topic: str, parts: list[int],
                   recover: Callable[[list[int]], None] | None) -> tuple[dict[int, int | None], list[int]]:
    """The group's committed offsets, and the partitions an incomplete transaction holds (only
    without ``recover``: their last completed commit is reported)."""
    try:
        return admin.committed_offsets(group, topic, parts, unstable_timeout=2.0), []
    except UnstableOffsetsError as exc:
        if recover is not None:
            log.warning("%s; fencing the pipeline's transactional ids to abort it", exc)
            recover(parts)
            return admin.committed_offsets(group, topic, parts), []
        # Planning only: fencing would abort a live attempt's transaction. The last completed
        # commit is where a run resumes if the holder dies; if it commits, its run skips what it published.
        held = _held_partitions(admin, group, topic, parts)
        with GroupOffsetsReader(admin.connection.client_config(), group) as reader:
            last = reader.unstable(topic, parts, admin.timeout)
        log.warning("%s; planning from the last completed commit of %s partitions %s (held by a transaction "
                    "in flight, not fenced: a plan changes nothing)", exc, topic, held)
        return last, held


def committed_positions(admin: ClusterAdmin, config: PipelineConfig, parts: list[int], *,
                        recover: Callable[[list[int]], None] | None = None,
                        entries: Mapping[int, CheckpointEntry] | None = None,
                        ) -> tuple[dict[int, int | None], list[int], list[int]]:
    """Each partition's committed position: the group's offset, else its checkpoint record, else
    None for a partition the pipeline never published from; the partitions the group had no
    offset for; and the partitions whose offsets a transaction in flight holds.
    :class:`PositionLostError` for a partition whose position is gone.

    ``recover(partitions)`` (a run's) is called when the group's offsets are held by a transaction
    that never completed (an attempt died between send_offsets_to_transaction and commit): it must
    fence the pipeline's transactional ids, which aborts that transaction, so the run can go on
    instead of waiting for the broker's transaction timeout. Without it (a plan), nothing is fenced:
    held partitions are planned from their last completed commit and reported as held.
    ``entries``: the checkpoint records, if the caller read them already.
    """
    committed, held = _group_offsets(admin, config.group, config.input_topic, parts, recover)
    missing = [p for p in parts if committed.get(p) is None]
    if not missing:
        return committed, [], held
    if entries is None:
        entries = checkpoint_log.read_entries(admin.connection, config.checkpoint_topic, config.group,
                                              config.input_topic)

    def describe_lost(lost: list[int]) -> str:
        names = ", ".join(f"{config.input_topic}[{p}]" for p in lost)
        return (f"{names}: group {config.group} has no committed offset and the checkpoint topic "
                f"{config.checkpoint_topic} no record, but the outputs hold records published from "
                f"{'it' if len(lost) == 1 else 'them'}; starting from the start policy would publish those "
                f"records again. Nothing was published; recover the position with `{recovery_command(config)}`, "
                "then run again")

    found = recovered_positions(
        missing, entries, lambda unsure: published_from(admin, config.input_topic, unsure, config.output_topics),
        describe_lost=describe_lost)
    if restored := {p: offset for p, offset in found.items() if offset is not None}:
        log.warning("group %s has no committed offset for %s partitions %s (expired after the broker's "
                    "offsets.retention.minutes?); the checkpoint topic %s has their positions: %s", config.group,
                    config.input_topic, sorted(restored), config.checkpoint_topic, restored)
    if fresh := sorted(p for p, offset in found.items() if offset is None):
        log.info("%s partitions %s: never published from; they start where the start policy says",
                 config.input_topic, fresh)
    committed.update(found)
    return committed, missing, held


def reset_command(config: PipelineConfig, partitions: list[int]) -> str:
    return (f"python -m eos_etl offsets reset --to earliest --partitions {','.join(map(str, partitions))} "
            f"--input-topic {config.input_topic} --group {config.group} (and this run's connection and "
            "topic options)")


def check_same_topic(config: PipelineConfig, topic_id: str, committed: Mapping[int, int | None],
                     entries: Mapping[int, CheckpointEntry]) -> None:
    """:class:`PositionBeyondLogError` for the partitions whose position was taken on another topic of
    the same name: their checkpoint record (written with every commit) names a topic id that is not
    ``topic_id``. The topic was deleted and created again; its new log may already be longer than
    the old position, which the log-end check cannot see. A position of 0 skips nothing on any log
    (a run that committed only the partition's start): it stands, and the run's next commit
    records the new id."""
    replaced = sorted(p for p, e in entries.items() if committed.get(p) and e.on_other_topic(topic_id))
    if not replaced:
        return
    where = "; ".join(f"{config.input_topic}[{p}] position {committed[p]} (run {entries[p].run_id})"
                      for p in replaced)
    raise PositionBeyondLogError(
        f"{where}: the position of group {config.group} was committed on {config.input_topic} with topic id "
        f"{entries[replaced[0]].topic_id}, and the topic's id is now {topic_id}: it was deleted and created again "
        f"since the last run. Nothing was published and no offset moved; if the new log's records are all new "
        f"to this pipeline, start them from the beginning with `{reset_command(config, replaced)}`, then run again")


def check_within_log(config: PipelineConfig, committed: Mapping[int, int | None],
                     offsets: Mapping[int, PartitionOffsets]) -> None:
    """:class:`PositionBeyondLogError` for the partitions whose committed position lies past their log end.

    A position only ever moves to a last stable offset the partition had, and a partition's log end
    never moves back: past it, the log is not the one the position was taken on (the topic was
    deleted and created again, or truncated). Planning from it would skip the new log's records.
    """
    beyond = sorted(p for p, c in committed.items() if c is not None and p in offsets and c > offsets[p].high_watermark)
    if not beyond:
        return
    where = "; ".join(f"{config.input_topic}[{p}] position {committed[p]}, log end {offsets[p].high_watermark}"
                      for p in beyond)
    raise PositionBeyondLogError(
        f"{where}: the committed position of group {config.group} is beyond the partition's log end, so "
        f"{config.input_topic} was likely re-created or truncated since the last run. Nothing was published "
        f"and no offset moved; if the new log's records are all new to this pipeline, start them from the "
        f"beginning with `{reset_command(config, beyond)}`, then run again")


def check_above_log_start(config: PipelineConfig, committed: Mapping[int, int | None],
                          offsets: Mapping[int, PartitionOffsets]) -> None:
    """:class:`InputDataLossError` naming every partition whose position lies below its log start:
    records the pipeline never processed were deleted (retention, deleteRecords)."""
    below = sorted(p for p, c in committed.items() if c is not None and p in offsets and c < offsets[p].earliest)
    if not below:
        return
    where = "; ".join(f"{config.input_topic}[{p}]: records [{committed[p]},{offsets[p].earliest})" for p in below)
    raise InputDataLossError(
        f"{where} were deleted before being processed (the committed positions of group {config.group} are below "
        f"the earliest retained offsets). Nothing was published and no offset moved; to accept the loss, move the "
        f"positions forward deliberately with `{reset_command(config, below)}`")


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

    Positions as :func:`committed_positions` reads them; planning writes nothing, and fences
    nothing unless a run passes ``recover`` (held partitions are the window's ``held``). The
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
    topic_id = admin.topic_id(topic)
    offsets = admin.offsets(topic, parts)
    entries = checkpoint_log.read_entries(admin.connection, config.checkpoint_topic, group, topic)
    committed, missing, held = committed_positions(admin, config, parts, recover=recover, entries=entries)
    check_same_topic(config, topic_id, committed, entries)
    check_within_log(config, committed, offsets)
    check_above_log_start(config, committed, offsets)
    time_caps = admin.offsets_for_time(topic, parts, until_timestamp_ms) if until_timestamp_ms is not None else {}
    ranges: dict[int, OffsetRange] = {}
    for p in parts:
        off = offsets[p]
        start = committed.get(p)
        if start is None:
            if policy is StartPolicy.FAIL:
                raise InputDataLossError(f"group {group} has no committed offset for {topic}[{p}] and policy is 'fail'")
            start = off.earliest if policy is StartPolicy.EARLIEST else off.last_stable
        end = off.last_stable
        if p in time_caps and time_caps[p] is not None:
            end = min(end, time_caps[p])
        if max_records_per_partition is not None:
            end = min(end, start + max_records_per_partition)
        end = max(end, start)
        ranges[p] = OffsetRange(start, end)
    window = Window(topic=topic, group=group, ranges=ranges, uncommitted=tuple(missing), held=tuple(held),
                    topic_id=topic_id)
    log.info("planned window %s", window)
    return window
