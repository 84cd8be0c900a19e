"""The shop's settings and their outside forms (shop/settings.py): command-line options and the
DAGs' Variable JSON, one mapping each way (broker-free)."""

from __future__ import annotations

from eos_etl.cli import build_parser
from eos_etl.cli.options import shop_settings_from_args
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
    assert ShopSettings.from_mapping(data, CONNECTION) == CUSTOM
    assert ShopDagConfig(data).settings(CONNECTION) == CUSTOM and ShopDagConfig(data).chunk_records == 10
    empty = ShopSettings.from_mapping({}, CONNECTION)
    assert empty == ShopSettings(connection=CONNECTION)
    assert (empty.group, empty.transactional_id_prefix, empty.max_payload_bytes) == (
        DEFAULT_GROUP, DEFAULT_TRANSACTIONAL_ID_PREFIX, DEFAULT_MAX_PAYLOAD_BYTES)
    replay = ShopDagConfig(data).settings(CONNECTION, version="v2")
    assert replay.topics.invoices == "i.v2" and replay.group == "g-replay-v2" and replay.topics.purchases == "p"
