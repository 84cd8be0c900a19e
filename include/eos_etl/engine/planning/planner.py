"""Plan the next window from the pipeline's positions and the last stable offsets.

Where each partition starts is :func:`~.position.decide`'s answer, the one
specification (docs/positions.md): this module gathers each partition's state
for it (the group's offset, the checkpoint record, the input's id and log,
and, only where the decision asks, the outputs' lineage), turns a stop into
one error with its exit code and command, and caps each range's end.

Planning writes nothing and fences nothing: only a run passes ``recover``,
which takes the pipeline's transactional ids over when an incomplete
transaction holds the group's offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from ...kafka.admin import ClusterAdmin, PartitionOffsets
from ...kafka.errors import UnstableOffsetsError
from ...kafka.group_offsets import GroupOffsetsReader
from .. import checkpoint_log, slots
from ..checkpoint_log import CheckpointEntry
from ..errors import InputDataLossError, PositionBeyondLogError, PositionLostError
from ..pipeline import PipelineConfig
from ..position import ROWS, Decision, PartitionState, StartPolicy, Verdict, decide
from ..window import OffsetRange, Window
from .lineage_positions import read_lineage

log = logging.getLogger(__name__)

__all__ = ["Positions", "StartPolicy", "plan_window", "positions", "recovery_command", "reset_command",
           "with_committed_grouping"]


def recovery_command(config: PipelineConfig) -> str:
    return (f"python -m eos_etl offsets restore --from-lineage --input-topic {config.input_topic} "
            f"--group {config.group} (and this run's connection and topic options)")


def reset_command(config: PipelineConfig, partitions: list[int], to: str = "earliest") -> str:
    return (f"python -m eos_etl offsets reset --to {to} --partitions {','.join(map(str, partitions))} "
            f"--input-topic {config.input_topic} --group {config.group} (and this run's connection and "
            "topic options)")


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


@dataclass(frozen=True)
class Positions:
    """Every partition's state and decision, as one read of the cluster found them."""

    topic_id: str
    offsets: dict[int, PartitionOffsets]
    states: dict[int, PartitionState]
    decisions: dict[int, Decision]
    held: tuple[int, ...] = ()

    def groupings(self) -> dict[int, int | None]:
        """Per partition whose checkpoint record names this topic, the writer slots it was committed with
        (:mod:`.slots`); records of a topic of the same name deleted since say nothing of this one."""
        return committed_groupings({p: s.record for p, s in self.states.items()}, self.topic_id)

    def grouping(self, config: PipelineConfig) -> int | None:
        """The writer slots a run of these positions publishes with (:func:`.slots.resolve`): exit code 2
        (:class:`~.errors.WriterSlotsChangedError`) when ``config`` sets another than the positions' own,
        or the positions name two."""
        return slots.resolve(config, self.groupings())

    def stopped(self) -> dict[int, Decision]:
        return {p: d for p, d in self.decisions.items() if d.verdict is Verdict.STOP}

    def raise_if_stopped(self, config: PipelineConfig) -> None:
        """The error of the first stopped row (in the table's order), naming all its partitions."""
        if stopped := self.stopped():
            first = min(stopped.values(), key=lambda d: _ROW_ORDER[d.row.name])
            raise _stop_error(config, self, sorted(p for p, d in stopped.items() if d.row.name == first.row.name))


def positions(admin: ClusterAdmin, config: PipelineConfig, parts: list[int], *,
              policy: StartPolicy | str = StartPolicy.EARLIEST,
              recover: Callable[[PipelineConfig, list[int]], None] | None = None,
              lineage_progress: Callable[[str], None] | None = None) -> Positions:
    """Gather each partition's state and :func:`~.position.decide` it; the outputs' lineage is read
    only for the partitions whose decision asks for it. Writes nothing; fences nothing unless a run
    passes ``recover`` (see :func:`_group_offsets`)."""
    policy = StartPolicy(policy)
    topic, group = config.input_topic, config.group
    topic_id = admin.topic_id(topic)
    offsets = admin.offsets(topic, parts)
    # The group's offsets first: a run's ``recover`` aborts a transaction that also held a record.
    committed, held = _group_offsets(admin, group, topic, parts,
                                     recover and (lambda ps: recover(with_committed_grouping(admin, config), ps)))
    entries = checkpoint_log.read_entries(admin.connection, config.checkpoint_topic, group, topic)
    states = {p: _state(p, topic_id, offsets[p], committed.get(p), entries) for p in parts}
    decisions = {p: decide(s, policy) for p, s in states.items()}
    if unread := sorted(p for p, d in decisions.items() if d.verdict is Verdict.READ_LINEAGE):
        kwargs = {"progress": lineage_progress} if lineage_progress is not None else {}
        for p, (lineage, offset) in read_lineage(admin, config, topic_id, unread, **kwargs).items():
            states[p] = replace(states[p], lineage=lineage, lineage_offset=offset)
            decisions[p] = decide(states[p], policy)
    return Positions(topic_id, offsets, states, decisions, tuple(held))


def with_committed_grouping(admin: ClusterAdmin, config: PipelineConfig) -> PipelineConfig:
    """``config`` with its writer slots decided from the checkpoint records alone (:func:`.slots.resolve`),
    for what must name the pipeline's transactional ids before a plan could: a run's ``recover``, which
    fences the ids whose transaction holds the group's offsets (a grouping changes only by a reslot, which
    fences the old one, so the records read past that transaction name its grouping), and a lab's zombie."""
    topic_id = admin.topic_id(config.input_topic)
    entries = checkpoint_log.read_entries(admin.connection, config.checkpoint_topic, config.group, config.input_topic)
    return replace(config, writer_slots=slots.resolve(config, committed_groupings(entries, topic_id)))


def committed_groupings(records: Mapping[int, CheckpointEntry | None], topic_id: str) -> dict[int, int | None]:
    """Per partition whose checkpoint record names the topic ``topic_id``, the writer slots it was committed
    with: records of a topic of the same name deleted since say nothing of this one."""
    return {p: r.writer_slots for p, r in records.items() if r is not None and r.topic_id == topic_id}


def _state(p: int, topic_id: str, offsets: PartitionOffsets, group_offset: int | None,
           entries: Mapping[int, CheckpointEntry]) -> PartitionState:
    return PartitionState(p, topic_id, offsets.earliest, offsets.last_stable, group_offset, entries.get(p),
                          max((e.input_partitions for e in entries.values()), default=0))


_ROW_ORDER = {row.name: i for i, row in enumerate(ROWS)}


def _stop_error(config: PipelineConfig, found: Positions, parts: list[int]) -> Exception:
    """The one error (its class carries the exit code) for the partitions ``parts`` of one stopped row."""
    topic, group = config.input_topic, config.group
    d, states = found.decisions[parts[0]], found.states
    names = ", ".join(f"{topic}[{p}]" for p in parts)
    untouched = "Nothing was published and no offset moved"
    row = d.row.name
    if row == "other-topic":
        where = "; ".join(f"{topic}[{p}] position {_position(states[p])} (run {states[p].record.run_id})"
                          for p in parts)
        return PositionBeyondLogError(
            f"{where}: the position of group {group} was committed on {topic} with topic id "
            f"{states[parts[0]].record.topic_id}, and the topic's id is now {found.topic_id}: it was deleted and "
            f"created again since the last run. {untouched}; if the new log's records are all new to this "
            f"pipeline, start them from the beginning with `{reset_command(config, parts)}`, then run again")
    if row == "record-without-id":
        where = "; ".join(f"{topic}[{p}] position {states[p].record.next_offset} (run {states[p].record.run_id})"
                          for p in parts)
        return PositionBeyondLogError(
            f"{where}: group {group} has no committed offset and the checkpoint record names no topic id, so it "
            f"cannot prove it was taken on {topic} as it is now (id {found.topic_id}). {untouched}; if the topic "
            f"was not deleted and created again since, accept the records' positions with "
            f"`{reset_command(config, parts, to='checkpoint')}`, else start from the beginning with "
            f"`{reset_command(config, parts)}`, then run again")
    if row == "beyond-log-end":
        where = "; ".join(f"{topic}[{p}] position {_position(states[p])}, log end {states[p].log_end}"
                          for p in parts)
        return PositionBeyondLogError(
            f"{where}: the committed position of group {group} is beyond the partition's log end, so {topic} was "
            f"likely re-created or truncated since the last run. {untouched}; if the new log's records are all new "
            f"to this pipeline, start them from the beginning with `{reset_command(config, parts)}`, then run again")
    if row == "below-log-start":
        where = "; ".join(f"{topic}[{p}]: records [{_position(states[p])},{states[p].log_start})" for p in parts)
        return InputDataLossError(
            f"{where} were deleted before being processed (the committed positions of group {group} are below "
            f"the earliest retained offsets). {untouched}; to accept the loss, move the positions forward "
            f"deliberately with `{reset_command(config, parts)}`")
    if row == "lineage-found":
        return PositionLostError(
            f"{names}: group {group} has no committed offset and the checkpoint topic {config.checkpoint_topic} no "
            f"record, but the outputs hold records this pipeline published from "
            f"{'it' if len(parts) == 1 else 'them'}; starting from the start policy would publish those records "
            f"again. {untouched}; recover the position with `{recovery_command(config)}`, then run again")
    if row == "unprovable":
        return PositionLostError(
            f"{names}: group {group} has no committed offset, the checkpoint topic {config.checkpoint_topic} no "
            f"record and no remaining output of this pipeline names {'it' if len(parts) == 1 else 'them'}, but "
            f"records were deleted from the outputs {', '.join(config.output_topics)} (retention, deleteRecords): "
            f"they may have been this pipeline's, so nothing proves that it never published from "
            f"{'it' if len(parts) == 1 else 'them'}. {untouched}; if it never did (a new pipeline on outputs "
            f"that others share), start with `{reset_command(config, parts)}`; if it published every record "
            f"the partitions hold now, with `{reset_command(config, parts, to='latest')}`; then run again")
    return InputDataLossError(f"group {group} has no committed offset for {names} and the start policy is 'fail'")


def _position(state: PartitionState) -> int | None:
    if state.group_offset is not None:
        return state.group_offset
    return state.record.next_offset if state.record is not None else None


def plan_window(
    admin: ClusterAdmin,
    config: PipelineConfig,
    *,
    start_policy: StartPolicy | str = StartPolicy.EARLIEST,
    max_records_per_partition: int | None = None,
    until_timestamp_ms: int | None = None,
    partitions: list[int] | None = None,
    recover: Callable[[PipelineConfig, list[int]], None] | None = None,
) -> Window:
    """Per partition: [its decided start, last stable offset), capped.

    Starts as :func:`positions` decides them (one :class:`~.errors.EngineError` with exit code 2
    for a partition whose state needs an operator); planning writes nothing, and fences
    nothing unless a run passes ``recover`` (held partitions are the window's ``held``). The
    partitions the group had no offset for are the window's ``uncommitted``: a run commits
    their planned starts (the checkpoint's position, or the start policy's for a partition
    never published from) before it publishes anything. ``until_timestamp_ms`` caps
    the end at the first record at or after that time (records strictly before it are
    in the window). ``max_records_per_partition`` caps the offset span; on transactional
    topics markers use offsets too, so a capped window may hold slightly fewer records
    than the cap.
    """
    topic, group = config.input_topic, config.group
    admin.check_reachable()  # in 1 s slices: rejected credentials fail in about a second
    parts = partitions if partitions is not None else admin.partitions(topic)
    found = positions(admin, config, parts, policy=start_policy, recover=recover)
    grouping = found.grouping(config)
    found.raise_if_stopped(config)
    time_caps = admin.offsets_for_time(topic, parts, until_timestamp_ms) if until_timestamp_ms is not None else {}
    ranges: dict[int, OffsetRange] = {}
    for p in parts:
        start = found.decisions[p].offset
        end = found.offsets[p].last_stable
        if p in time_caps and time_caps[p] is not None:
            end = min(end, time_caps[p])
        if max_records_per_partition is not None:
            end = min(end, start + max_records_per_partition)
        ranges[p] = OffsetRange(start, max(end, start))
    missing = tuple(p for p in parts if not found.decisions[p].committed)
    _log_sources(config, found)
    committed_at = {p: s.record.timestamp_ms for p, s in found.states.items() if s.record is not None}
    window = Window(topic=topic, group=group, ranges=ranges, uncommitted=missing, held=found.held,
                    topic_id=found.topic_id, committed_at=committed_at, writer_slots=grouping)
    log.info("planned window %s", window)
    return window


def _log_sources(config: PipelineConfig, found: Positions) -> None:
    by_row: dict[str, dict[int, int | None]] = {}
    for p, d in found.decisions.items():
        by_row.setdefault(d.row.name, {})[p] = d.offset
    if restored := by_row.get("checkpoint"):
        log.warning("group %s has no committed offset for %s partitions %s (expired after the broker's "
                    "offsets.retention.minutes?); the checkpoint topic %s has their positions: %s", config.group,
                    config.input_topic, sorted(restored), config.checkpoint_topic, restored)
    for row in ("new-partition", "never-published", "other-topic-at-zero"):
        if fresh := by_row.get(row):
            log.info("%s partitions %s: %s; they start at %s", config.input_topic, sorted(fresh), row, fresh)
