"""The cluster's finalised transaction.version and metadata.version, as preflight and `transactions` report them.

Preflight asks one broker with an ApiVersions request (no JVM per run); the operator's
``transactions`` command asks Kafka's own FeatureCommand. Both must agree with how the cluster was
formatted: the session broker with Kafka 4.x's default (transaction.version 2), a private one formatted
with transaction.version=1.
"""

from __future__ import annotations

import struct

import pytest

from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.host.ports import free_port
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.features import api_versions_request, finalized_features, parse_api_versions_response
from eos_etl.kafka.java_tools import TransactionsTool

from .test_cli import cli, shop_args


def _compact(text: bytes) -> bytes:
    return bytes([len(text) + 1]) + text


def test_the_finalised_features_are_read_from_an_api_versions_v3_response():
    finalized = _compact(b"metadata.version") + struct.pack(">hh", 27, 1) + b"\x00"
    finalized += _compact(b"transaction.version") + struct.pack(">hh", 1, 1) + b"\x00"
    finalized_array = bytes([3]) + finalized
    supported = bytes([2]) + _compact(b"transaction.version") + struct.pack(">hh", 0, 2) + b"\x00"
    body = struct.pack(">ih", 7, 0)  # correlation id, no error
    body += bytes([3]) + struct.pack(">hhh", 0, 0, 12) + b"\x00" + struct.pack(">hhh", 18, 0, 4) + b"\x00"
    body += struct.pack(">i", 0)  # throttle time
    epoch = struct.pack(">q", 42)
    body += bytes([3])  # three tagged fields: supported features, their epoch, finalised features
    body += bytes([0, len(supported)]) + supported
    body += bytes([1, len(epoch)]) + epoch
    body += bytes([2, len(finalized_array)]) + finalized_array
    assert parse_api_versions_response(body, 7) == ({"metadata.version": 27, "transaction.version": 1}, 42)
    with pytest.raises(ValueError):
        parse_api_versions_response(body, 8)  # the answer to another request
    request = api_versions_request(7)
    assert struct.unpack(">ihhi", request[:12]) == (len(request) - 4, 18, 3, 7)


def test_preflight_and_feature_command_agree_on_the_session_broker(connection):
    features = finalized_features(connection)
    assert features.transaction_version == 2 and features.metadata_version >= 27, features
    from_java = TransactionsTool(connection).finalized_features()
    assert from_java["transaction.version"] == "2" and from_java["metadata.version"].startswith("4."), from_java


@pytest.fixture(scope="module")
def version1_broker(tmp_path_factory):
    broker = KafkaCluster(home=tmp_path_factory.mktemp("kafka-tv1"), port=free_port(), heap="512m",
                          features={"transaction.version": "1"})
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


def test_a_cluster_formatted_with_transaction_version_1_says_so_in_preflight_and_transactions(version1_broker,
                                                                                           caplog):
    connection = KafkaConnection(version1_broker.bootstrap_servers)
    assert finalized_features(connection).transaction_version == 1
    from eos_etl.kafka.admin import ClusterAdmin
    from eos_etl.kafka.topics import ensure_topics
    from eos_etl.shop.schema import ShopTopics
    from eos_etl.shop.settings import ShopSettings

    topics = ShopTopics("purchases-tv1", "invoices-tv1", "shipments-tv1", "purchases-tv1.dlq")
    shop = ShopSettings(connection=connection, topics=topics, group="group-tv1", transactional_id_prefix="tv1")
    ensure_topics(ClusterAdmin(connection), shop.specs(1))  # its checkpoint topic too
    res = cli("transactions", "--bootstrap-servers", connection.bootstrap_servers, *shop_args(shop), timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.splitlines()[0].startswith("cluster: transaction.version 1, metadata.version 4."), res.stdout
    from eos_etl.engine.planning.preflight import preflight

    with caplog.at_level("INFO", logger="eos_etl.engine.planning.preflight"):
        features = preflight(shop.pipeline()).features
    assert features.transaction_version == 1
    assert any(r.getMessage().startswith("cluster: transaction.version 1, metadata.version level")
               for r in caplog.records), [r.getMessage() for r in caplog.records]
