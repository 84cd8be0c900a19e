"""Writer slots: which transactional id publishes which input partition, and how that grouping is kept.

Without slots (``PipelineConfig.writer_slots`` unset) every input partition ``p`` is published by its
own transactional id, ``<prefix>-<topic>-<p>``: one Spark task, one producer and its
``init_transactions``, one checkpoint consumer per partition and window. With ``S`` slots, partition
``p`` belongs to slot ``p % S``, whose id is ``<prefix>-<topic>-s<slot>of<S>``; a window runs one Spark
task per slot that has records (:func:`~.kafka_source.read_window`: the slot's partitions read one after
another in one Spark partition, no shuffle) and one producer per slot, initialised once, publishing its
partitions one after another (:class:`~.publisher.SlotPublisher`). Everything per partition stays per
partition: its committed position, its transactions (each commits that partition's outputs, offset and
checkpoint record), its window-end proof. docs/design-writer-slots.md has the measurements and the
steps not taken yet.

Fencing holds because the grouping is static: one id ever commits a partition at a time, and a newer
holder of that id fences every older one. A change of the grouping (another ``S``, or slots switched
on or off) would let two ids commit one partition, so it is recorded and refused:

* every commit says which grouping made it: the group offset's metadata (:func:`offset_metadata`) and
  the checkpoint record (``writer_slots``);
* a plan whose records name another grouping stops with exit code 2 (:class:`WriterSlotsChangedError`),
  and so does every publisher that finds one on the position it just read after its
  ``init_transactions`` (:func:`check_committed`), before it produces anything;
* only ``offsets reslot`` changes it (:func:`~.publisher.reslot_positions`): it fences every id of the
  old grouping, commits every partition's position again with the new ids, then fences the old ids once
  more. A process of the old grouping that initialised before the second fence is fenced by it; one that
  initialises after it reads a position the new grouping committed, and stops.
"""

from __future__ import annotations

from collections.abc import Mapping

from .errors import WriterSlotsChangedError

#: The group offset's metadata with ``S`` slots is ``writer_slots=S``; without slots, none (as before slots).
METADATA_KEY = "writer_slots="


def offset_metadata(writer_slots: int | None) -> str:
    """What a commit with ``writer_slots`` writes beside the group's offset."""
    return "" if writer_slots is None else f"{METADATA_KEY}{writer_slots}"


def grouping_of_metadata(metadata: str) -> int | None:
    """The writer slots a group offset's metadata names (None: none, a commit without slots)."""
    if metadata.startswith(METADATA_KEY):
        try:
            return int(metadata[len(METADATA_KEY):])
        except ValueError:
            pass
    return None


def describe(writer_slots: int | None) -> str:
    return "one transactional id per partition" if writer_slots is None else f"{writer_slots} writer slots"


def reslot_command(config, writer_slots: int | None) -> str:
    option = "--writer-slots none" if writer_slots is None else f"--writer-slots {writer_slots}"
    return (f"python -m eos_etl offsets reslot {option} --input-topic {config.input_topic} --group {config.group} "
            "(and this run's connection and topic options; no run of the pipeline may be going on)")


def check_grouping(config, committed: Mapping[int, int | None]) -> None:
    """Raise :class:`WriterSlotsChangedError` unless every partition of ``committed`` (partition -> the
    writer slots its last commit names) was committed with ``config.writer_slots``."""
    other = {p: s for p, s in committed.items() if s != config.writer_slots}
    if not other:
        return
    found = sorted({s for s in other.values()}, key=lambda s: -1 if s is None else s)
    raise WriterSlotsChangedError(
        f"group {config.group}'s positions of {config.input_topic} partitions {sorted(other)} were committed with "
        f"{' and '.join(describe(s) for s in found)}, this run has {describe(config.writer_slots)}: "
        f"change the grouping with `{reslot_command(config, config.writer_slots)}`, or run with the old setting")


def check_committed(config, partition: int, writer_slots: int | None) -> None:
    """:func:`check_grouping` for the one position a publisher just read."""
    check_grouping(config, {partition: writer_slots})
