"""Plan the next window from the pipeline's positions and the last stable offsets.

Where each partition starts is :func:`~.position.decide`'s answer, the one
specification (docs/positions.md): this module gathers each partition's state
for it (the group's offset, the checkpoint record, the input's id and log,
and, only where the decision asks, the outputs' lineage), turns a stop into
one error with its exit code and command, and caps each range's end.

Who publishes is the pipeline's identity (:mod:`..identity`), read first: a run whose
settings disagree with it stops before any position is read or any id fenced; a pipeline
without one is planned as its record would say (:func:`.identity_keeper.proposal`).

Planning writes nothing and fences nothing: only a run passes ``recover``,
which takes the pipeline's transactional ids over when an incomplete
transaction holds the group's offsets, and records the identity of a pipeline
that has none (or finishes a change of it that was interrupted).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from ...kafka.admin import ClusterAdmin, PartitionOffsets
from ...kafka.errors import UnstableOffsetsError
from ...kafka.group_offsets import GroupOffsetsReader
from .. import checkpoint_log, identity, slots
from ..checkpoint_log import CheckpointEntry
from ..errors import InputDataLossError, PositionBeyondLogError, PositionLostError
from ..identity import Identity
from ..pipeline import PipelineConfig
from ..position import ROWS, Decision, PartitionState, StartPolicy, Verdict, decide
from ..window import OffsetRange, Window
from . import identity_keeper
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
    # The pipeline's identity as recorded; where none is, what its first run records (version 0).
    identity: Identity | None = None

    def legacy_groupings(self) -> dict[int, int | None]:
        """Per partition whose checkpoint record names this topic, the writer slots an older version named in
        it: what a pipeline without an identity record is adopted with (:func:`.identity_keeper.proposal`)."""
        return committed_groupings({p: s.record for p, s in self.states.items()}, self.topic_id)

    @property
    def recorded(self) -> bool:
        return self.identity is not None and self.identity.version > 0

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
              lineage_progress: Callable[[str], None] | None = None, check_settings: bool = True,
              input_created: bool = False) -> Positions:
    """Gather each partition's state and :func:`~.position.decide` it; the outputs' lineage is read
    only for the partitions whose decision asks for it. The identity first: ``config``'s settings are
    checked against it (unless ``check_settings`` is off: a change of them) before anything else is read.
    Writes nothing; fences nothing unless a run passes ``recover`` (see :func:`_group_offsets`), with which
    an interrupted change of the identity is finished first."""
    policy = StartPolicy(policy)
    topic, group = config.input_topic, config.group
    recorded = checkpoint_log.read_identity(admin.connection, config.checkpoint_topic, group, topic)
    if recorded is not None and check_settings:
        identity.check(recorded, config)  # before any position is read or any id fenced
    topic_id = admin.topic_id(topic)
    if recorded is not None and not recorded.ready and recover is not None:
        recorded = identity_keeper.finish(config, recorded, parts)
    offsets = admin.offsets(topic, parts)
    # The group's offsets first: a run's ``recover`` aborts a transaction that also held a record.
    fence = recover and (lambda ps: recover(_as_committed(admin, config, recorded), ps))
    committed, held = _group_offsets(admin, group, topic, parts, fence)
    entries = checkpoint_log.read_entries(admin.connection, config.checkpoint_topic, group, topic)
    born_new = recorded is not None and recorded.proves_never_published(topic_id)
    states = {p: _state(p, topic_id, offsets[p], committed.get(p), entries, born_new) for p in parts}
    decisions = {p: decide(s, policy) for p, s in states.items()}
    if unread := sorted(p for p, d in decisions.items() if d.verdict is Verdict.READ_LINEAGE):
        kwargs = {"progress": lineage_progress} if lineage_progress is not None else {}
        for p, (lineage, offset) in read_lineage(admin, config, topic_id, unread, **kwargs).items():
            states[p] = replace(states[p], lineage=lineage, lineage_offset=offset)
            decisions[p] = decide(states[p], policy)
    found = Positions(topic_id, offsets, states, decisions, tuple(held), recorded)
    if recorded is None:  # unchecked (a change, a report): what the pipeline committed, not what the command sets
        proposing = config if check_settings else replace(config, writer_slots=slots.AS_COMMITTED)
        found = replace(found, identity=identity_keeper.proposal(proposing, topic_id, found,
                                                                 input_created=input_created))
    return found


def _as_committed(admin: ClusterAdmin, config: PipelineConfig, recorded: Identity | None) -> PipelineConfig:
    """``config`` naming the ids that hold the pipeline's partitions now: the recorded identity's, or, where none
    is recorded, the grouping an older version named in the checkpoint records."""
    if recorded is not None:
        return identity.bind(config, recorded)
    return with_committed_grouping(admin, config)


def with_committed_grouping(admin: ClusterAdmin, config: PipelineConfig) -> PipelineConfig:
    """``config`` with the ids that may hold its partitions now, for what must name them before a plan could (a
    run's ``recover``, a lab's zombie): the recorded identity's grouping; without a record, the one the checkpoint
    records of an older version name (:func:`.slots.resolve`)."""
    recorded = checkpoint_log.read_identity(admin.connection, config.checkpoint_topic, config.group,
                                            config.input_topic)
    if recorded is not None:
        return identity.bind(config, recorded)
    topic_id = admin.topic_id(config.input_topic)
    entries = checkpoint_log.read_entries(admin.connection, config.checkpoint_topic, config.group, config.input_topic)
    legacy = replace(config, writer_slots=slots.AS_COMMITTED)
    return replace(config, writer_slots=slots.resolve(legacy, committed_groupings(entries, topic_id)))


def committed_groupings(records: Mapping[int, CheckpointEntry | None], topic_id: str) -> dict[int, int | None]:
    """Per partition whose checkpoint record names the topic ``topic_id``, the writer slots it was committed
    with: records of a topic of the same name deleted since say nothing of this one."""
    return {p: r.writer_slots for p, r in records.items() if r is not None and r.topic_id == topic_id}


def _state(p: int, topic_id: str, offsets: PartitionOffsets, group_offset: int | None,
           entries: Mapping[int, CheckpointEntry], born_new: bool) -> PartitionState:
    return PartitionState(p, topic_id, offsets.earliest, offsets.last_stable, group_offset, entries.get(p),
                          max((e.input_partitions for e in entries.values()), default=0), born_new=born_new)


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
    record: bool = False,
) -> Window:
    """Per partition: [its decided start, last stable offset), capped.

    Starts as :func:`positions` decides them (one :class:`~.errors.EngineError` with exit code 2
    for a partition whose state needs an operator); planning writes nothing, and fences
    nothing unless a run passes ``recover`` (held partitions are the window's ``held``). A run, or a plan
    that says ``record`` (the DAG's, whose window a later task runs), records the identity of a pipeline
    that has none (:func:`.identity_keeper.establish`), which the window then names. The
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
    all_parts = admin.partitions(topic)
    parts = partitions if partitions is not None else all_parts
    found = positions(admin, config, parts, policy=start_policy, recover=recover)
    found.raise_if_stopped(config)
    recorded = found.identity
    if (record or recover is not None) and not found.recorded:  # the identity its plan proposes, recorded
        recorded = identity_keeper.establish(config, recorded, all_parts)
        # Another writer may have recorded one first: its settings must be this run's. The positions stand
        # (they do not depend on the grouping, and a record born new only frees partitions that stopped).
        identity.check(recorded, config)
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
    missing = tuple(p for p in parts if not _checkpointed(found.decisions[p], found.states[p]))
    _log_sources(config, found)
    committed_at = {p: s.record.timestamp_ms for p, s in found.states.items() if s.record is not None}
    window = Window(topic=topic, group=group, ranges=ranges, uncommitted=missing, held=found.held,
                    topic_id=found.topic_id, committed_at=committed_at, writer_slots=recorded.writer_slots,
                    identity_version=recorded.version, input_partitions=len(all_parts))
    log.info("planned window %s", window)
    return window


def _checkpointed(decision: Decision, state: PartitionState) -> bool:
    """The position is the group's and its checkpoint record says the same: nothing to commit before publishing.
    A group offset an operator wrote by hand (Kafka's tools: the record still says the old position) is
    committed first like a start, so the record keeps it when the group's offsets expire."""
    return (decision.committed and state.record is not None and state.record.topic_id == state.topic_id
            and state.record.next_offset == state.group_offset)


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
