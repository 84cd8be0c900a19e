"""The cluster's finalised transaction.version and metadata.version, as preflight and `transactions` report them.

Preflight asks one broker with an ApiVersions request (no JVM per run); the operator's
``transactions`` command asks Kafka's own FeatureCommand. Both must agree with how the cluster was
formatted: the session broker with Kafka 4.x's default (transaction.version 2), a private one formatted
with transaction.version=1. The response's parsing alone: tests/unit/kafka/test_features.py.
"""

from __future__ import annotations

import pytest

from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.host.ports import free_port
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.features import finalized_features
from eos_etl.kafka.java_tools import TransactionsTool
from tests.support.cli import cli, shop_args


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
