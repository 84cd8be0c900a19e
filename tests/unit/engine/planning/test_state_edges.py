"""Broker-free: the planner's errors and lineage rules for the edge states of
tests/integration/engine/planning/test_state_edges.py (every state's decision:
tests/unit/engine/test_position_table.py)."""

from __future__ import annotations

import argparse

import pytest

from eos_etl.cli.offsets import partition_list as _partition_list
from eos_etl.engine.checkpoint_log import CheckpointEntry, decode, key
from eos_etl.engine.errors import InputDataLossError, PositionBeyondLogError, PositionLostError
from eos_etl.engine.pipeline import PipelineConfig
from eos_etl.engine.planning.lineage_positions import read_lineage
from eos_etl.engine.planning.planner import Positions
from eos_etl.engine.position import Lineage, PartitionState, decide
from eos_etl.engine.window import OffsetRange, Window
from eos_etl.errors import ConfigurationError
from eos_etl.kafka.admin import PartitionOffsets
from eos_etl.kafka.connection import KafkaConnection

OLD_ID, NEW_ID = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"


def found(*states: PartitionState) -> Positions:
    """What the planner gathers, for states given by hand (no broker)."""
    return Positions(NEW_ID, {s.partition: PartitionOffsets(s.log_start, s.log_end, s.log_end) for s in states},
                     {s.partition: s for s in states}, {s.partition: decide(s) for s in states})


def refusal(*states: PartitionState) -> Exception:
    with pytest.raises((PositionBeyondLogError, PositionLostError, InputDataLossError)) as info:
        found(*states).raise_if_stopped(config())
    assert info.value.exit_code == 2 and "\n" not in str(info.value)
    return info.value


def config() -> PipelineConfig:
    return PipelineConfig(connection=KafkaConnection("127.0.0.1:9"), input_topic="purchases",
                          output_topics=("invoices",), group="shop", transactional_id_prefix="shop")


def test_a_position_beyond_the_log_end_is_one_error_line_with_exit_code_2():
    text = str(refusal(PartitionState(0, NEW_ID, 0, 512, 1524), PartitionState(1, NEW_ID, 0, 488, 1476),
                       PartitionState(2, NEW_ID, 0, 9, 9)))
    assert "purchases[0] position 1524, log end 512; purchases[1] position 1476, log end 488" in text
    assert "purchases[2]" not in text and "re-created or truncated" in text
    assert "offsets reset --to earliest --partitions 0,1 --input-topic purchases --group shop" in text


def test_a_position_at_or_below_the_log_end_or_none_is_accepted():
    found(PartitionState(0, NEW_ID, 0, 12, 12), PartitionState(1, NEW_ID, 0, 5, None, None, 1,
                                                                 Lineage.NONE)).raise_if_stopped(config())


def test_a_position_taken_on_another_topic_of_the_same_name_is_one_error_line_with_exit_code_2():
    """The new log may be longer than the old position: only the checkpoint record's topic id tells."""
    text = str(refusal(
        PartitionState(0, NEW_ID, 0, 3000, None, CheckpointEntry(0, 1524, 3, "run-1", 0, OLD_ID), 3),
        PartitionState(1, NEW_ID, 0, 3000, None, CheckpointEntry(1, 1476, 3, "run-1", 0, OLD_ID), 3),
        PartitionState(2, NEW_ID, 0, 3000, 9, CheckpointEntry(2, 9, 3, "run-2", 0, NEW_ID), 3)))
    assert "purchases[0] position 1524 (run run-1); purchases[1] position 1476 (run run-1)" in text
    assert "purchases[2]" not in text and OLD_ID in text and NEW_ID in text and "deleted and created again" in text
    assert "offsets reset --to earliest --partitions 0,1 --input-topic purchases --group shop" in text


def test_a_record_without_a_topic_id_stands_only_beside_a_group_offset():
    legacy = CheckpointEntry(0, 5, 2, "old-run", 0)
    found(PartitionState(0, NEW_ID, 0, 9, 5, legacy, 2)).raise_if_stopped(config())
    text = str(refusal(PartitionState(0, NEW_ID, 0, 9, None, legacy, 2)))
    assert "names no topic id" in text and "offsets reset --to checkpoint --partitions 0" in text
    # Only a partition's start was committed on the old topic: position 0 skips nothing on the new one.
    zero = PartitionState(0, NEW_ID, 0, 9, None, CheckpointEntry(0, 0, 1, "run", 0, OLD_ID), 1)
    assert decide(zero).offset == 0


def test_the_first_stopped_row_of_the_table_is_the_error_and_names_all_its_partitions():
    """Two partitions lost to a deleted checkpoint topic, one re-created: the re-creation comes first."""
    lost = [PartitionState(p, NEW_ID, 0, 50, None, None, 0, Lineage.FOUND, 20) for p in (0, 1)]
    text = str(refusal(*lost, PartitionState(2, NEW_ID, 0, 50, None, CheckpointEntry(2, 9, 3, "r", 0, OLD_ID), 3)))
    assert "purchases[2] position 9" in text and "purchases[0]" not in text
    text = str(refusal(*lost))
    assert "purchases[0], purchases[1]" in text and "offsets restore --from-lineage" in text


def test_outputs_with_deleted_records_and_no_own_lineage_prove_nothing_and_say_so():
    text = str(refusal(PartitionState(0, NEW_ID, 0, 50, None, None, 0, Lineage.NONE_TRUNCATED)))
    assert "records were deleted from the outputs invoices" in text and "outputs hold records" not in text
    assert "offsets reset --to earliest --partitions 0" in text


def test_the_topic_id_round_trips_through_the_checkpoint_record_and_older_records_read_without_one():
    e = CheckpointEntry(1, 42, 2, "run-9", 1000, NEW_ID)
    assert decode("shop", "purchases", key("shop", "purchases", 1), e.value(), 1000) == e
    old = b'{"next_offset":42,"input_partitions":2,"run_id":"run-9"}'
    assert decode("shop", "purchases", key("shop", "purchases", 1), old, 1000).topic_id == ""


def test_a_window_planned_on_another_topic_of_the_same_name_is_refused():
    w = Window("purchases", "shop", {0: OffsetRange(0, 5)}, topic_id=OLD_ID)
    assert Window.from_json(w.to_json()) == w
    with pytest.raises(ConfigurationError, match="deleted and created again"):
        w.check_against("purchases", "shop", {0: 9}, NEW_ID)
    w.check_against("purchases", "shop", {0: 9}, OLD_ID)
    Window("purchases", "shop", {0: OffsetRange(0, 5)}).check_against("purchases", "shop", {0: 9}, NEW_ID)


def test_held_partitions_round_trip_through_the_windows_json():
    w = Window("purchases", "shop", {0: OffsetRange(0, 5), 1: OffsetRange(3, 3)}, uncommitted=(1,), held=(0,))
    assert w.to_dict()["held"] == [0]
    assert Window.from_json(w.to_json()) == w
    assert "held" not in Window("purchases", "shop", {0: OffsetRange(0, 5)}).to_dict()
    with pytest.raises(ValueError):
        Window.from_dict({**w.to_dict(), "held": [7]})


def test_partition_lists_for_offsets_reset():
    assert _partition_list("1,0,1") == [0, 1]
    for bad in ("0,x", "-1", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            _partition_list(bad)


class OutputsOnly:
    """The two admin calls read_lineage makes before it reads any lineage."""

    def __init__(self, offsets: dict[str, dict[int, PartitionOffsets]]):
        self._offsets = offsets

    def partitions(self, topic: str) -> list[int]:
        return sorted(self._offsets[topic])

    def offsets(self, topic: str, partitions: list[int]) -> dict[int, PartitionOffsets]:
        return {p: self._offsets[topic][p] for p in partitions}


def test_empty_outputs_mean_nothing_was_published_and_emptied_ones_prove_nothing():
    cfg = PipelineConfig(connection=KafkaConnection("127.0.0.1:9"), input_topic="purchases",
                         output_topics=("invoices", "dlq"), group="shop", transactional_id_prefix="shop")
    empty = OutputsOnly({"invoices": {0: PartitionOffsets(0, 0, 0)}, "dlq": {0: PartitionOffsets(0, 0, 0)}})
    assert read_lineage(empty, cfg, NEW_ID, [0, 1]) == {0: (Lineage.NONE, None), 1: (Lineage.NONE, None)}
    # Every record deleted from the outputs (retention): they were there, so nothing proves a first run.
    emptied = OutputsOnly({"invoices": {0: PartitionOffsets(40, 40, 40)}, "dlq": {0: PartitionOffsets(3, 3, 3)}})
    assert read_lineage(emptied, cfg, NEW_ID, [0, 1]) == {p: (Lineage.NONE_TRUNCATED, None) for p in (0, 1)}
