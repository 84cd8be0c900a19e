"""The shop's settings and their outside forms (shop/settings.py): command-line options and the
DAGs' Variable JSON, one mapping each way (broker-free)."""

from __future__ import annotations

import dataclasses

import pytest

from eos_etl.cli import build_parser
from eos_etl.cli.options import shop_settings_from_args
from eos_etl.engine.pipeline import PipelineConfig
from eos_etl.engine.slots import AS_COMMITTED
from eos_etl.errors import ConfigurationError
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.orchestration.settings import ShopDagConfig
from eos_etl.shop.schema import DEFAULT_MAX_PAYLOAD_BYTES, ShopTopics
from eos_etl.shop.settings import DEFAULT_GROUP, DEFAULT_TRANSACTIONAL_ID_PREFIX, ShopSettings

CONNECTION = KafkaConnection("127.0.0.1:9092")
CUSTOM = ShopSettings(connection=CONNECTION, topics=ShopTopics("p", "i", "s", "p.dlq"), group="g",
                      transactional_id_prefix="t", max_payload_bytes=1234)


def test_options_given_by_to_args_read_back_the_same_settings_in_every_command_that_takes_them():
    for command in ("run-window", "plan-window", "create-topics", "check", "offsets", "transactions"):
        extra = ["show"] if command == "offsets" else []
        args = build_parser().parse_args([command, *extra, "--bootstrap-servers", "127.0.0.1:9092",
                                          *CUSTOM.to_args()])
        assert shop_settings_from_args(args) == CUSTOM, command


def test_the_variable_json_gives_the_same_settings_and_every_key_is_optional():
    data = {"topics": {"purchases": "p", "invoices": "i", "shipments": "s", "dead_letters": "p.dlq"},
            "group": "g", "transactional_id_prefix": "t", "max_payload_bytes": 1234, "chunk_records": 10}
    tuned = dataclasses.replace(CUSTOM, chunk_records=10)
    assert ShopSettings.from_mapping(data, CONNECTION) == tuned
    assert ShopDagConfig(data).settings(CONNECTION) == tuned
    empty = ShopSettings.from_mapping({}, CONNECTION)
    assert empty == ShopSettings(connection=CONNECTION)
    assert (empty.group, empty.transactional_id_prefix, empty.max_payload_bytes) == (
        DEFAULT_GROUP, DEFAULT_TRANSACTIONAL_ID_PREFIX, DEFAULT_MAX_PAYLOAD_BYTES)
    replay = ShopDagConfig(data).settings(CONNECTION, version="v2")
    assert replay.topics.invoices == "i.v2" and replay.group == "g-replay-v2" and replay.topics.purchases == "p"


def test_records_per_transaction_travel_in_the_settings_from_the_variable_to_the_run_s_engine_config():
    tuned = ShopSettings.from_mapping({"chunk_records": 7}, CONNECTION)
    args = build_parser().parse_args(["run-window", "--bootstrap-servers", "127.0.0.1:9092", *tuned.to_args()])
    again = shop_settings_from_args(args)
    assert again == tuned and again.pipeline().chunk_records == 7
    assert again.pipeline(chunk_records=3).chunk_records == 3  # a run's own override still wins
    default = ShopSettings(connection=CONNECTION)
    assert "--chunk-records" not in default.to_args()  # plan-window, which does not take it, reads these too
    engine_default = PipelineConfig(connection=CONNECTION, input_topic="p", group="g", output_topics=("i",),
                                    transactional_id_prefix="t").chunk_records
    assert default.pipeline().chunk_records == engine_default


def test_writer_slots_travel_from_the_variable_and_the_options_to_every_command_and_the_engine():
    slotted = ShopSettings.from_mapping({"writer_slots": 4}, CONNECTION)
    assert slotted.writer_slots == 4 and slotted.pipeline().writer_slots == 4
    assert slotted.pipeline().transactional_id(5) == f"{slotted.pipeline().transactional_id_stem}s1of4"
    for command in ("run-window", "plan-window", "offsets", "transactions"):
        extra = ["reslot"] if command == "offsets" else []
        args = build_parser().parse_args([command, *extra, "--bootstrap-servers", "127.0.0.1:9092",
                                          *slotted.to_args()])
        assert shop_settings_from_args(args) == slotted, command
    per_partition = ShopSettings.from_mapping({"writer_slots": "per-partition"}, CONNECTION)
    assert per_partition.writer_slots is None and per_partition.pipeline().transactional_id(5).endswith("-5")
    args = build_parser().parse_args(["run-window", "--bootstrap-servers", "127.0.0.1:9092", *per_partition.to_args()])
    assert shop_settings_from_args(args) == per_partition
    # Unset (the default): as committed, decided by a plan; nothing names an id before that.
    default = ShopSettings(connection=CONNECTION)
    assert "--writer-slots" not in default.to_args()
    args = build_parser().parse_args(["run-window", "--bootstrap-servers", "127.0.0.1:9092", *default.to_args()])
    assert shop_settings_from_args(args) == default
    for unset in ({}, {"writer_slots": None}):
        assert ShopSettings.from_mapping(unset, CONNECTION).writer_slots == AS_COMMITTED
    with pytest.raises(ConfigurationError, match="not decided yet"):
        default.pipeline().transactional_id(0)
    for bad in (0, -1, "two", True, 1.5):
        with pytest.raises(ValueError, match="positive count"):
            ShopSettings.from_mapping({"writer_slots": bad}, CONNECTION)
