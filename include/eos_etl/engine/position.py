"""Where an input partition of a pipeline stands: the one place that decides it.

The specification is the table in docs/positions.md; :data:`ROWS` holds the same
rows, and :func:`decide` follows them in order, first match wins. It is a pure
function of one partition's :class:`PartitionState`: the planner, a run, the DAG's
plan task and idle tick, ``offsets show``, ``offsets restore`` and ``offsets reset``
all gather the state and ask it; no other code decides a position.

The sources, and what each can prove:

* the group's committed offset (``G``): the position as the last transaction
  committed it. Kafka deletes it ``offsets.retention.minutes`` after the last
  commit of a group without members, with the group, and with its topic;
* the partition's checkpoint record (``C``, :mod:`.checkpoint_log`): the same
  position, committed in the same transaction, in a compacted topic that keeps
  it; it names the input topic's id, so it tells a topic deleted and created
  again (same name, new id) from the one the position was taken on. Every writer
  of a record (a run, an idle tick, a start commit, a restore, a reset) goes
  through :class:`~.checkpoint.PartitionCheckpoint`, which cannot be built
  without the topic id: a record without one is older than that rule;
* the pipeline's identity (``I``, :mod:`.identity`): recorded once, before the pipeline's first commit
  where nothing can have been published (``born new``). Every commit writes the partition's checkpoint
  record in the same transaction, in a topic that never deletes records by time: while such an identity
  of this topic id exists, a partition with neither ``G`` nor ``C`` was never published from;
* the outputs' lineage (``L``, :mod:`.lineage_positions`): the outputs this
  pipeline published from this topic (its own ``pipeline`` and
  ``source_topic_id`` headers), read only when neither of the above exists. It
  proves "never published" only while no output record was ever deleted.

Where the state cannot prove where the pipeline stood, the decision is to stop
with exit code 2 and the command that is right in that state: never a guess
that republishes or skips.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .checkpoint_log import CheckpointEntry


class Lineage(str, Enum):
    """What the outputs' lineage says of one input partition."""

    UNREAD = "unread"  # not read (only read where the decision needs it)
    NONE = "none"  # no output of this pipeline names it, and no output record was ever deleted
    NONE_TRUNCATED = "none, outputs truncated"  # none found, but output records were deleted: proves nothing
    FOUND = "found"  # an output of this pipeline names it (``lineage_offset``: the largest source offset)


class StartPolicy(str, Enum):
    """Where a partition starts when the pipeline never published from it."""

    EARLIEST = "earliest"
    LATEST = "latest"
    FAIL = "fail"


class Verdict(str, Enum):
    START = "start"  # resume at the committed position
    FRESH = "fresh"  # never published from: start where the start policy says
    READ_LINEAGE = "read lineage"  # ask the outputs' lineage, then decide again
    STOP = "stop"  # exit code 2: an operator must act (``recovery``)


class Recovery(str, Enum):
    """The operator's command for a stopped partition (:func:`command` spells it)."""

    RESET_EARLIEST = "offsets reset --to earliest"
    RESET_TO_CHECKPOINT = "offsets reset --to checkpoint"
    RESTORE_FROM_LINEAGE = "offsets restore --from-lineage"


@dataclass(frozen=True)
class PartitionState:
    """Everything :func:`decide` may look at for one input partition."""

    partition: int
    topic_id: str  # the input topic's id now
    log_start: int  # the earliest offset the input partition still holds
    log_end: int  # its last stable offset (where a window ends)
    group_offset: int | None = None  # the group's committed offset (None: absent, expired or deleted)
    record: CheckpointEntry | None = None  # the partition's checkpoint record
    known_partitions: int = 0  # the most input partitions any of the pipeline's records names (0: no record)
    lineage: Lineage = Lineage.UNREAD
    lineage_offset: int | None = None  # with FOUND: the largest source offset of an output
    born_new: bool = False  # the pipeline's identity was recorded before its first commit, on this topic id


@dataclass(frozen=True)
class Row:
    """One row of the table: its name, the decision, and why."""

    name: str
    when: str
    verdict: Verdict
    position: str
    recovery: Recovery | None
    why: str


ROWS: tuple[Row, ...] = (
    Row("other-topic-at-zero", "C names another topic id, at position 0, the new log starting at 0",
        Verdict.START, "0",
        None, "a run that committed only the partition's start: 0 skips nothing and nothing was published "
        "from the new log (every commit on it would name its id)"),
    Row("other-topic", "C names another topic id than the input's, at a position past 0", Verdict.STOP, "-",
        Recovery.RESET_EARLIEST,
        "the input was deleted and created again since the position was taken; the new log's records are not "
        "the old ones, whatever its length"),
    Row("record-without-id", "G absent, C without a topic id", Verdict.STOP, "-", Recovery.RESET_TO_CHECKPOINT,
        "a record older than the rule that every record names its topic: it cannot prove it was taken on "
        "this topic (reset --to checkpoint accepts it, reset --to earliest if the topic was re-created)"),
    Row("beyond-log-end", "the position (G, else C) past the log end", Verdict.STOP, "-", Recovery.RESET_EARLIEST,
        "a position only moves to a last stable offset the partition had and a log end never moves back: the "
        "log is not the one the position was taken on (re-created or truncated)"),
    Row("below-log-start", "the position below the log start", Verdict.STOP, "-", Recovery.RESET_EARLIEST,
        "records the pipeline never processed were deleted (retention, deleteRecords): someone must accept "
        "the loss"),
    Row("group", "G present", Verdict.START, "G", None,
        "the last committed transaction's position (Kafka deletes a group's offsets of a deleted topic, so "
        "they were taken on this one)"),
    Row("checkpoint", "G absent, C of this topic", Verdict.START, "C", None,
        "the group's offsets expired or were deleted; the record, committed in the same transaction, keeps "
        "the position"),
    Row("new-partition", "G and C absent, every record written before the partition existed", Verdict.FRESH,
        "policy", None,
        "partitions were added after the pipeline's last commit: no run ever read this one"),
    Row("lineage-unread", "G and C absent, a record knew the partition or there is none", Verdict.READ_LINEAGE,
        "-", None, "only the outputs can tell a first run from a lost position"),
    Row("lineage-found", "... and an output of this pipeline names the partition", Verdict.STOP, "-",
        Recovery.RESTORE_FROM_LINEAGE,
        "the pipeline published from it and its position is gone: the policy would publish again"),
    Row("never-published", "... no output of this pipeline names it, no output record ever deleted",
        Verdict.FRESH, "policy", None, "every output this pipeline published is still there and none names it"),
    Row("never-committed", "... none names it, output records were deleted, the identity born new on this topic",
        Verdict.FRESH, "policy", None,
        "the identity was recorded before the pipeline's first commit and every commit writes the partition's "
        "record, which Kafka never deletes: no run ever committed this partition: the deleted records were others'"),
    Row("unprovable", "... none names it, but output records were deleted", Verdict.STOP, "-",
        Recovery.RESET_EARLIEST,
        "the deleted records may have been this pipeline's: nothing proves a first run (reset --to earliest "
        "if it is one)"),
)

_BY_NAME = {row.name: row for row in ROWS}


@dataclass(frozen=True)
class Decision:
    """Where a partition starts (``offset``, for START and FRESH), or why it cannot (``row.recovery``)."""

    partition: int
    row: Row
    offset: int | None = None

    @property
    def verdict(self) -> Verdict:
        return self.row.verdict

    @property
    def committed(self) -> bool:
        """The group already holds this position (nothing to commit before publishing)."""
        return self.row.name == "group"


def _decision(state: PartitionState, name: str, offset: int | None = None) -> Decision:
    return Decision(state.partition, _BY_NAME[name], offset)


def resumed_position(group_offset: int | None, record: CheckpointEntry | None, topic_id: str) -> int | None:
    """The committed position an attempt resumes from, inside a run that already planned: the group's
    offset, else the record's if it names ``topic_id``; None when neither (a partition whose start
    the run commits). Rows ``group`` and ``checkpoint``; a record of another topic is never a position."""
    if group_offset is not None:
        return group_offset
    if record is not None and record.topic_id == topic_id:
        return record.next_offset
    return None


def decide(state: PartitionState, policy: StartPolicy = StartPolicy.EARLIEST) -> Decision:
    """The row of :data:`ROWS` that ``state`` is in, first match wins, and its position."""
    record, group = state.record, state.group_offset
    if record is not None and record.topic_id and record.topic_id != state.topic_id:
        position = group if group is not None else record.next_offset
        if position == 0 and state.log_start == 0:
            return _decision(state, "other-topic-at-zero", 0)
        return _decision(state, "other-topic")
    if group is None and record is not None and not record.topic_id:
        return _decision(state, "record-without-id")
    position = resumed_position(group, record, state.topic_id)
    if position is not None:
        if position > state.log_end:
            return _decision(state, "beyond-log-end")
        if position < state.log_start:
            return _decision(state, "below-log-start")
        return _decision(state, "group" if group is not None else "checkpoint", position)
    if 0 < state.known_partitions <= state.partition:
        return _fresh(state, "new-partition", policy)
    if state.lineage is Lineage.UNREAD:
        return _decision(state, "lineage-unread")
    if state.lineage is Lineage.FOUND:
        return _decision(state, "lineage-found")
    if state.lineage is Lineage.NONE:
        return _fresh(state, "never-published", policy)
    if state.born_new:
        return _fresh(state, "never-committed", policy)
    return _decision(state, "unprovable")


def _fresh(state: PartitionState, name: str, policy: StartPolicy) -> Decision:
    if policy is StartPolicy.FAIL:
        return Decision(state.partition, Row(name, _BY_NAME[name].when, Verdict.STOP, "-", None,
                                             "the start policy is 'fail'"))
    return _decision(state, name, state.log_start if policy is StartPolicy.EARLIEST else state.log_end)


def lineage_position(state: PartitionState) -> int | None:
    """Where ``offsets restore --from-lineage`` puts a partition of row ``lineage-found``: one past the
    largest source offset an output of this pipeline names. Outputs and offsets commit in one
    transaction, so no committed output exists for a record at or past it."""
    if state.lineage is Lineage.FOUND and state.lineage_offset is not None:
        return state.lineage_offset + 1
    return None
