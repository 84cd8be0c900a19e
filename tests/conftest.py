"""Shared fixtures: one real Kafka broker and one SparkSession per test session.

The broker is the product's own launcher on free loopback ports in a temp
directory (never the demo broker in var/kafka). Every test gets its own
topics, group and transactional-id prefix from the factories below, so tests
never see each other's data.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from eos_etl import logging_setup
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.shop.job import ShopSettings
from eos_etl.shop.schema import ShopTopics
from eos_etl.stack.broker import KafkaBroker
from eos_etl.stack.tools import free_port

SASL_USER = "etl"
SASL_PASSWORD = "etl-test-secret"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session", autouse=True)
def _logging() -> None:
    logging_setup.configure("INFO")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(
        home=tmp_path_factory.mktemp("kafka"),
        port=free_port(),
        sasl_port=free_port(),
        sasl_users={SASL_USER: SASL_PASSWORD},
    )
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def connection(kafka_broker: KafkaBroker) -> KafkaConnection:
    return KafkaConnection(kafka_broker.bootstrap_servers)


@pytest.fixture(scope="session")
def sasl_connection(kafka_broker: KafkaBroker) -> KafkaConnection:
    return KafkaConnection(
        kafka_broker.sasl_bootstrap_servers,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username=SASL_USER,
        sasl_password=SASL_PASSWORD,
    )


@pytest.fixture(scope="session")
def admin(connection: KafkaConnection) -> ClusterAdmin:
    return ClusterAdmin(connection)


@pytest.fixture
def topic_factory(admin: ClusterAdmin):
    """make_topic(prefix, partitions=1) -> a fresh, unique topic name."""

    def make_topic(prefix: str = "t", partitions: int = 1, config: dict | None = None) -> str:
        name = unique(prefix)
        admin.create_topics({name: partitions}, config=config)
        return name

    return make_topic


@pytest.fixture
def shop_factory(admin: ClusterAdmin, connection: KafkaConnection):
    """make_shop(partitions=3) -> ShopSettings with fresh topics, group and transactional-id prefix."""

    def make_shop(partitions: int = 3, *, conn: KafkaConnection | None = None, **kwargs) -> ShopSettings:
        tag = uuid.uuid4().hex[:10]
        topics = ShopTopics(
            purchases=f"purchases-{tag}",
            invoices=f"invoices-{tag}",
            shipments=f"shipments-{tag}",
            dead_letters=f"purchases-{tag}.dlq",
        )
        admin.create_topics(
            {topics.purchases: partitions, topics.invoices: partitions, topics.shipments: partitions,
             topics.dead_letters: 1},
        )
        return ShopSettings(
            connection=conn or connection,
            topics=topics,
            group=f"shop-{tag}",
            transactional_id_prefix=f"shop-{tag}",
            **kwargs,
        )

    return make_shop


@pytest.fixture(scope="session")
def spark():
    from eos_etl.stack.spark import spark_session

    os.environ.setdefault("EOS_ETL_SPARK_DRIVER_MEMORY", "1g")
    session = spark_session("eos-etl-tests", master="local[2,4]")
    yield session
    session.stop()
