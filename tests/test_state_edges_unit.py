"""Broker-free: the planner's rules for the edge states of tests/test_state_edges.py."""

from __future__ import annotations

import argparse

import pytest

from eos_etl.cli.pipeline import _partition_list
from eos_etl.engine.checkpoint_log import CheckpointEntry, decode, key
from eos_etl.errors import ConfigurationError
from eos_etl.engine.errors import PositionBeyondLogError, PositionLostError
from eos_etl.engine.pipeline import PipelineConfig
from eos_etl.engine.planner import check_same_topic, check_within_log, published_from, recovered_positions
from eos_etl.engine.window import OffsetRange, Window
from eos_etl.kafka.admin import PartitionOffsets
from eos_etl.kafka.connection import KafkaConnection


def entry(p: int, offset: int, partitions: int) -> CheckpointEntry:
    return CheckpointEntry(p, offset, partitions, "run-1", 0)


def resolve(missing, entries, published=frozenset()):
    asked: list[list[int]] = []

    def published_from(partitions: list[int]) -> set[int]:
        asked.append(list(partitions))
        return set(published) & set(partitions)

    found = recovered_positions(missing, {e.partition: e for e in entries}, published_from,
                                describe_lost=lambda lost: f"lost {lost}")
    return found, asked


def test_a_partition_the_records_know_but_no_output_names_is_fresh():
    """A first run killed while it committed the starts: 0 and 2 have records (3 partitions), 1 none."""
    found, asked = resolve([1], [entry(0, 0, 3), entry(2, 0, 3)])
    assert found == {1: None} and asked == [[1]]


def test_a_partition_the_records_know_and_an_output_names_is_lost():
    with pytest.raises(PositionLostError, match=r"lost \[1\]"):
        resolve([0, 1], [entry(2, 5, 3)], published={1})


def test_only_the_partitions_in_doubt_are_looked_up_in_the_lineage():
    found, asked = resolve([0, 1, 3], [entry(0, 7, 3), entry(2, 9, 3)])
    assert found == {0: 7, 1: None, 3: None} and asked == [[1]]  # 3 is newer than every record


def config() -> PipelineConfig:
    return PipelineConfig(connection=KafkaConnection("127.0.0.1:9"), input_topic="purchases",
                          output_topics=("invoices",), group="shop", transactional_id_prefix="shop")


def test_a_position_beyond_the_log_end_is_one_error_line_with_exit_code_2():
    offsets = {0: PartitionOffsets(0, 510, 512), 1: PartitionOffsets(0, 488, 488), 2: PartitionOffsets(0, 9, 9)}
    with pytest.raises(PositionBeyondLogError) as info:
        check_within_log(config(), {0: 1524, 1: 1476, 2: 9}, offsets)
    text = str(info.value)
    assert info.value.exit_code == 2 and "\n" not in text
    assert "purchases[0] position 1524, log end 512; purchases[1] position 1476, log end 488" in text
    assert "purchases[2]" not in text and "re-created or truncated" in text
    assert "offsets reset --to earliest --partitions 0,1 --input-topic purchases --group shop" in text


def test_a_position_at_or_below_the_log_end_or_none_is_accepted():
    offsets = {0: PartitionOffsets(0, 10, 12), 1: PartitionOffsets(0, 5, 5)}
    check_within_log(config(), {0: 12, 1: None}, offsets)


OLD_ID, NEW_ID = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"


def test_a_position_taken_on_another_topic_of_the_same_name_is_one_error_line_with_exit_code_2():
    """The new log may be longer than the old position: only the checkpoint record's topic id tells."""
    entries = {0: CheckpointEntry(0, 1524, 3, "run-1", 0, OLD_ID), 1: CheckpointEntry(1, 1476, 3, "run-1", 0, OLD_ID),
               2: CheckpointEntry(2, 9, 3, "run-2", 0, NEW_ID)}
    with pytest.raises(PositionBeyondLogError) as info:
        check_same_topic(config(), NEW_ID, {0: 1524, 1: 1476, 2: 9}, entries)
    text = str(info.value)
    assert info.value.exit_code == 2 and "\n" not in text
    assert "purchases[0] position 1524 (run run-1); purchases[1] position 1476 (run run-1)" in text
    assert "purchases[2]" not in text and OLD_ID in text and NEW_ID in text and "deleted and created again" in text
    assert "offsets reset --to earliest --partitions 0,1 --input-topic purchases --group shop" in text


def test_records_without_a_topic_id_and_positions_of_the_same_topic_are_accepted():
    entries = {0: CheckpointEntry(0, 5, 2, "old-run", 0), 1: CheckpointEntry(1, 7, 2, "run", 0, NEW_ID)}
    check_same_topic(config(), NEW_ID, {0: 5, 1: 7}, entries)
    check_same_topic(config(), NEW_ID, {0: None, 1: None, 2: 3}, {})
    # Only a partition's start was committed on the old topic: position 0 skips nothing on the new one.
    check_same_topic(config(), NEW_ID, {0: 0}, {0: CheckpointEntry(0, 0, 1, "run", 0, OLD_ID)})


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
    """The two admin calls published_from makes before it reads any lineage."""

    def __init__(self, offsets: dict[str, dict[int, PartitionOffsets]]):
        self._offsets = offsets

    def partitions(self, topic: str) -> list[int]:
        return sorted(self._offsets[topic])

    def offsets(self, topic: str, partitions: list[int]) -> dict[int, PartitionOffsets]:
        return {p: self._offsets[topic][p] for p in partitions}


def test_empty_outputs_mean_nothing_was_published_and_truncated_ones_prove_nothing():
    empty = OutputsOnly({"invoices": {0: PartitionOffsets(0, 0, 0)}, "dlq": {0: PartitionOffsets(0, 0, 0)}})
    assert published_from(empty, "purchases", [0, 1], ("invoices", "dlq")) == set()
    # Records deleted from an output (retention): no lineage can show a partition never published.
    truncated = OutputsOnly({"invoices": {0: PartitionOffsets(40, 90, 90)}, "dlq": {0: PartitionOffsets(0, 3, 3)}})
    assert published_from(truncated, "purchases", [0, 1], ("invoices", "dlq")) == {0, 1}
