"""Writer slots: which transactional id publishes which input partition, and how that grouping is kept.

Without slots (``PipelineConfig.writer_slots`` None, ``--writer-slots per-partition``) every input
partition ``p`` is published by its own transactional id, ``<prefix>-<topic>-<p>``: one Spark task, one
producer and its ``init_transactions``, one checkpoint consumer per partition and window. With ``S`` slots, partition
``p`` belongs to slot ``p % S``, whose id is ``<prefix>-<topic>-s<slot>of<S>``; a window runs one Spark
task per slot that has records (:func:`~.kafka_source.read_window`: the slot's partitions read one after
another in one Spark partition, no shuffle) and one producer per slot, initialised once, publishing its
partitions one after another (:class:`~.publisher.SlotPublisher`). Everything per partition stays per
partition: its committed position, its transactions (each commits that partition's outputs, offset and
checkpoint record), its window-end proof. docs/design-writer-slots.md has the measurements and the
steps not taken yet.

Which grouping a run uses is the pipeline's recorded identity's (:mod:`.identity`), read by its plan, and
the window carries it (``Window.writer_slots``) to every task. The setting says what a *new* pipeline is
recorded with, not what the current one must be: unset (:data:`AS_COMMITTED`, the default), a pipeline
keeps its recorded grouping, and a new one takes :data:`DEFAULT_WRITER_SLOTS` (:func:`resolve`, which
also adopts what an older version committed); set (a count, or ``None`` for one id per partition), a
plan of a pipeline recorded otherwise stops (exit 2).

Fencing holds because one grouping (and one prefix) holds the pipeline at a time: the one its identity
records (:mod:`.identity`), read by every plan and run and by every publisher after its
``init_transactions``, never a run's flag or the metadata of the group's offsets. A new holder of an id
fences every older one; a change of the grouping is a new version of the identity that fences every id the
record ever named (``offsets reslot``, :func:`~.planning.identity_keeper.change`). Checkpoint records of
older versions name the grouping that committed them (``writer_slots``): read only to adopt a pipeline that
has no identity record yet.
"""

from __future__ import annotations

from collections.abc import Mapping

from .errors import WriterSlotsChangedError

#: The setting "as committed" (the default): the grouping the pipeline's committed positions name; a pipeline
#: with none committed starts with :data:`DEFAULT_WRITER_SLOTS`. Never a grouping itself: a plan resolves it.
AS_COMMITTED = "as-committed"

#: A new pipeline's writer slots: the executor cores of the embedded Spark (``local[2]``), so the slots' tasks run
#: in one wave (docs/design-writer-slots.md: 2 slots beat 4 from 128 partitions up on 2 cores).
DEFAULT_WRITER_SLOTS = 2

def describe(writer_slots: int | None | str) -> str:
    if writer_slots == AS_COMMITTED:
        return "the grouping its positions were committed with"
    return "one transactional id per partition" if writer_slots is None else f"{writer_slots} writer slots"


def option(writer_slots: int | None) -> str:
    """The ``--writer-slots`` value of a grouping (``per-partition``: one id per partition)."""
    return "per-partition" if writer_slots is None else str(writer_slots)


def parse(value) -> int | None | str:
    """A setting from its outside forms (an option's text, a Variable's JSON value): a positive count,
    ``per-partition`` (or ``none``) for one id per partition, or absent/``as-committed`` for :data:`AS_COMMITTED`.
    Raises ``ValueError`` on anything else."""
    if value is None or value == AS_COMMITTED:
        return AS_COMMITTED
    if isinstance(value, str) and value.strip().lower() in ("per-partition", "none"):
        return None
    text = str(value).strip()
    if type(value) is bool or not (type(value) is int or text.isdigit()) or int(text) < 1:
        raise ValueError(f"expected a positive count, per-partition or {AS_COMMITTED}, got {value!r}")
    return int(text)


def resolve(config, committed: Mapping[int, int | None]) -> int | None:
    """The grouping a plan publishes with, from ``config.writer_slots`` and ``committed`` (partition -> the
    writer slots its last commit names, for every partition with a committed position of this topic).

    :data:`AS_COMMITTED`: the one grouping ``committed`` names, or :data:`DEFAULT_WRITER_SLOTS` if it names
    none; positions under two groupings (a reslot interrupted) stop with :class:`WriterSlotsChangedError`
    naming the reslot that finishes the change. A set grouping: itself, unless a position names another
    (:func:`check_grouping`)."""
    if config.writer_slots != AS_COMMITTED:
        check_grouping(config, committed)
        return config.writer_slots
    found = set(committed.values())
    if not found:
        return DEFAULT_WRITER_SLOTS
    if len(found) == 1:
        return found.pop()
    # A reslot fences every grouping but its target before it commits anything, so finishing it towards any
    # of them is safe; the slotted one is named (a reslot goes towards slots far more often than away).
    target = max(found, key=lambda s: -1 if s is None else s)
    named = "; ".join(f"{describe(s)} (partitions {sorted(p for p, g in committed.items() if g == s)})"
                      for s in sorted(found, key=lambda s: -1 if s is None else s))
    raise WriterSlotsChangedError(
        f"group {config.group}'s positions of {config.input_topic} were committed with {named}"
        f" (an `offsets reslot` that did not finish?): finish the change with `{reslot_command(config, target)}`")


def reslot_command(config, writer_slots: int | None) -> str:
    option_ = f"--writer-slots {option(writer_slots)}"
    return (f"python -m eos_etl offsets reslot {option_} --input-topic {config.input_topic} --group {config.group} "
            "(and this run's connection and topic options; no run of the pipeline may be going on)")


def check_grouping(config, committed: Mapping[int, int | None]) -> None:
    """Raise :class:`WriterSlotsChangedError` unless every partition of ``committed`` (partition -> the
    writer slots its last commit names) was committed with ``config.writer_slots``."""
    if config.writer_slots == AS_COMMITTED:
        raise ValueError("check_grouping needs a grouping: resolve() the setting first")
    other = {p: s for p, s in committed.items() if s != config.writer_slots}
    if not other:
        return
    found = sorted({s for s in other.values()}, key=lambda s: -1 if s is None else s)
    raise WriterSlotsChangedError(
        f"group {config.group}'s positions of {config.input_topic} partitions {sorted(other)} were committed with "
        f"{' and '.join(describe(s) for s in found)}, this run has {describe(config.writer_slots)}: "
        f"change the grouping with `{reslot_command(config, config.writer_slots)}`, or run with the old setting")
