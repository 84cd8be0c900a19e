"""Writer slots without a broker: the grouping of partitions into transactional ids, what a commit
records of it, the refusal of another grouping, and a slot task's stream split per partition."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from eos_etl.cli.options import writer_slots
from eos_etl.engine import slots
from eos_etl.engine.checkpoint_log import CheckpointEntry, decode, key
from eos_etl.engine.errors import WriterSlotsChangedError
from eos_etl.engine.pipeline import PipelineConfig
from eos_etl.engine.tasks.publish_task import StreamDecoder
from eos_etl.engine.window import OffsetRange, Window
from eos_etl.errors import ConfigurationError
from eos_etl.kafka.connection import KafkaConnection


def config(writer_slots=None) -> PipelineConfig:
    return PipelineConfig(connection=KafkaConnection("localhost:1"), input_topic="purchases", group="g",
                          output_topics=("out",), transactional_id_prefix="shop", writer_slots=writer_slots)


def test_without_slots_each_partition_keeps_its_own_id():
    cfg = config()
    assert [cfg.slot_of(p) for p in range(5)] == [0, 1, 2, 3, 4]
    assert cfg.transactional_id(7) == "shop-purchases-7"  # the ids of every pipeline before slots
    assert cfg.producer_settings(7)["transactional.id"] == "shop-purchases-7"


def test_slots_group_partitions_by_remainder_and_name_their_count():
    cfg = config(3)
    assert [cfg.slot_of(p) for p in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert {cfg.transactional_id(p) for p in range(7)} == {"shop-purchases-s0of3", "shop-purchases-s1of3",
                                                          "shop-purchases-s2of3"}
    # Another count never reuses an id, and every id stays under the pipeline's ACL stem.
    assert not {config(4).transactional_id(p) for p in range(7)} & {cfg.transactional_id(p) for p in range(7)}
    assert all(cfg.transactional_id(p).startswith(cfg.transactional_id_stem) for p in range(7))


@pytest.mark.parametrize("bad", [0, -1, 2.0, "4", True])
def test_a_slot_count_is_a_positive_integer(bad):
    with pytest.raises(ConfigurationError, match="writer_slots"):
        config(bad)


def test_the_config_carries_its_slots_across_processes():
    assert PipelineConfig.from_json(config(4).to_json()).writer_slots == 4
    assert PipelineConfig.from_json(config().to_json()).writer_slots is None
    assert PipelineConfig.from_json(config(slots.AS_COMMITTED).to_json()).writer_slots == slots.AS_COMMITTED


def test_the_command_line_takes_a_count_or_per_partition():
    assert writer_slots("4") == 4 and writer_slots("per-partition") is None
    assert writer_slots("none") is None and writer_slots("None") is None  # the spelling before the default changed
    assert writer_slots("as-committed") == slots.AS_COMMITTED
    for bad in ("0", "-2", "four", ""):
        with pytest.raises(Exception, match="--writer-slots"):
            writer_slots(bad)


def test_a_checkpoint_record_of_an_older_version_names_its_grouping():
    """Read only to adopt a pipeline that has no identity record yet (engine.identity)."""
    with_slots = CheckpointEntry(3, 100, 8, "run", 0, "tid", 4)
    entry = decode("g", "purchases", key("g", "purchases", 3), with_slots.value(), 5)
    assert entry.writer_slots == 4 and entry.to_dict()["writer_slots"] == 4
    without = CheckpointEntry(3, 100, 8, "run", 0, "tid")
    assert b"writer_slots" not in without.value()  # records before slots read the same
    assert decode("g", "purchases", key("g", "purchases", 3), without.value(), 5).writer_slots is None


def test_positions_of_another_grouping_are_refused_with_the_reslot_command():
    slots.check_grouping(config(4), {0: 4, 1: 4})
    slots.check_grouping(config(), {0: None})
    with pytest.raises(WriterSlotsChangedError) as refused:
        slots.check_grouping(config(4), {0: 4, 1: None, 2: 2})
    message = str(refused.value)
    assert "partitions [1, 2]" in message and "one transactional id per partition and 2 writer slots" in message
    assert "offsets reslot --writer-slots 4" in message and refused.value.exit_code == 2


def test_as_committed_keeps_the_committed_grouping_and_gives_a_new_pipeline_the_default():
    auto = config(slots.AS_COMMITTED)
    assert slots.resolve(auto, {}) == slots.DEFAULT_WRITER_SLOTS == 2  # a new pipeline
    assert slots.resolve(auto, {0: None, 1: None}) is None  # a pipeline of per-partition ids stays one
    assert slots.resolve(auto, {0: 4, 3: 4}) == 4
    with pytest.raises(WriterSlotsChangedError) as mixed:  # a reslot that did not finish
        slots.resolve(auto, {0: None, 1: 4, 2: 4})
    message = str(mixed.value)
    assert "one transactional id per partition (partitions [0])" in message and "partitions [1, 2]" in message
    assert "offsets reslot --writer-slots 4" in message and mixed.value.exit_code == 2
    # A set grouping is itself, refused against another committed one.
    assert slots.resolve(config(3), {}) == 3 and slots.resolve(config(None), {0: None}) is None
    with pytest.raises(WriterSlotsChangedError, match="--writer-slots 3"):
        slots.resolve(config(3), {0: None})
    with pytest.raises(ValueError, match="resolve"):
        slots.check_grouping(auto, {})


def test_the_window_carries_its_plans_grouping_to_the_run():
    planned = {s: Window("purchases", "g", {0: OffsetRange(0, 5)}, topic_id="id", writer_slots=s) for s in (None, 3)}
    for grouping, window in planned.items():
        again = Window.from_json(window.to_json())
        assert again == window and again.writer_slots == grouping
        bound = config(slots.AS_COMMITTED).bound_to(again)  # the setting's default: the plan's grouping
        assert bound.writer_slots == grouping and bound.input_topic_id == "id"
        assert config(grouping).bound_to(again).writer_slots == grouping
    with pytest.raises(ConfigurationError, match="planned with 3 writer slots, this run has 2 writer slots"):
        config(2).bound_to(planned[3])
    with pytest.raises(ConfigurationError, match="one transactional id per partition, this run has 3"):
        config(3).bound_to(planned[None])
    unplanned = Window("purchases", "g", {0: OffsetRange(0, 5)}, topic_id="id")  # an older plan's JSON
    assert "writer_slots" not in unplanned.to_dict()
    assert Window.from_json(unplanned.to_json()).writer_slots == slots.AS_COMMITTED
    assert config(4).bound_to(unplanned).writer_slots == 4
    with pytest.raises(ConfigurationError, match="names no writer slots"):
        config(slots.AS_COMMITTED).bound_to(unplanned)
    for bad in (0, "2", True):
        data = {**planned[3].to_dict(), "writer_slots": bad}
        with pytest.raises(ValueError, match="writer_slots"):
            Window.from_dict(data)


def test_a_slots_read_names_only_its_partitions():
    window = Window("purchases", "g", {0: OffsetRange(0, 5), 1: OffsetRange(3, 3), 2: OffsetRange(1, 9)})
    assert window.spark_starting_offsets([0, 1]) == '{"purchases": {"0": 0}}'  # an empty range is never read
    assert window.spark_ending_offsets([2]) == '{"purchases": {"2": 9}}'
    assert window.spark_starting_offsets() == '{"purchases": {"0": 0, "2": 1}}'


def _batch(rows):
    """An Arrow batch of the transform's columns: (partition, offset) rows, one output each."""
    out_type = pa.list_(pa.struct([("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary()),
                                   ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))]))
    outputs = [[{"topic": "out", "key": None, "value": f"{p}:{o}".encode(), "headers": []}] for p, o in rows]
    return pa.RecordBatch.from_arrays([pa.array([p for p, _ in rows], pa.int32()), pa.array([o for _, o in rows],
                                                                                              pa.int64()),
                                       pa.array(outputs, out_type)], names=["partition", "offset", "outputs"])


def test_a_slot_tasks_batches_become_one_stream_per_partition_run():
    # Spark's batches cut across partitions: the end of 4 and the start of 0 share a batch.
    batches = [_batch([(4, 10), (4, 11)]), _batch([(4, 12), (0, 3), (0, 4)]), _batch([]), _batch([(0, 5)])]
    decoder = StreamDecoder(iter(batches))
    streams = [(p, [(offset, outs[0][2]) for offset, outs in records]) for p, records in decoder.streams()]
    assert streams == [(4, [(10, b"4:10"), (11, b"4:11"), (12, b"4:12")]), (0, [(3, b"0:3"), (4, b"0:4"), (5, b"0:5")])]
    assert set(decoder.seconds) == {0, 4}


def test_a_partition_that_comes_back_is_a_second_run():
    # The publisher refuses the second run of a partition (the transform shuffled); the decoder shows it.
    decoder = StreamDecoder(iter([_batch([(1, 0), (2, 0), (1, 1)])]))
    assert [p for p, records in decoder.streams() if list(records) or True] == [1, 2, 1]


def test_a_slots_positions_are_read_ahead_in_one_request_and_each_taken_once(monkeypatch):
    """A slot publisher reads its partitions' committed positions once, together (one OffsetFetch, one read of
    the checkpoint records the group has no offset for); each partition's first read takes its answer, and
    any later read (a replay's) asks the broker again."""
    from eos_etl.engine.publishing import checkpoint

    calls = []

    def offsets(_consumer, _topic, parts, _timeout):
        calls.append(("offsets", list(parts)))
        return {p: 10 + p if p % 2 else None for p in parts}

    def records(_connection, _log_topic, _group, _topic, parts, timeout_s):
        calls.append(("records", list(parts)))
        return {p: CheckpointEntry(p, 7, 4, "run-0", 0, "topic-id", 2) for p in parts}

    monkeypatch.setattr(checkpoint, "fetch_committed", offsets)
    monkeypatch.setattr(checkpoint.checkpoint_log, "read_entries", records)
    cfg = dataclasses.replace(config(writer_slots=2), input_topic_id="topic-id")
    shared = checkpoint.SlotCheckpoints(cfg)
    try:
        shared.read_ahead([0, 1, 2, 3])
        assert calls == [("offsets", [0, 1, 2, 3]), ("records", [0, 2])]
        ckpts = {p: shared.of(p) for p in range(4)}
        assert {p: c.committed() for p, c in ckpts.items()} == {0: 7, 1: 11, 2: 7, 3: 13}
        assert len(calls) == 2  # every first read answered from what was read ahead
        assert ckpts[1].committed() == 11 and calls[2:] == [("offsets", [1])]
        assert ckpts[0].committed() == 7 and calls[3:] == [("offsets", [0]), ("records", [0])]
        shared.read_ahead([5])  # one partition reads as it always has, when asked
        assert len(calls) == 5
    finally:
        shared.close()
