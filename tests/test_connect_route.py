"""What a run does differently as a Spark Connect client, without a server: the pooled reader group."""

from __future__ import annotations

import pytest

from eos_etl.engine.connect_route import READER_GROUP_PREFIX, SPARK_TOKEN_ENV, pooled_reader_group
from eos_etl.kafka.connection import KafkaConnection

CONNECT = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})()
CLASSIC = type("SparkSession", (), {"__module__": "pyspark.sql.session"})()


def options(password: str = "pw-one") -> dict[str, str]:
    connection = KafkaConnection("localhost:1", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                                 sasl_username="shop", sasl_password=password)
    return {**connection.spark_options(), "kafka.isolation.level": "read_committed"}


@pytest.fixture
def token(monkeypatch):
    monkeypatch.setenv(SPARK_TOKEN_ENV, "server-token-1")


def test_a_connect_clients_windows_share_one_reader_group_per_set_of_options(token):
    group = pooled_reader_group(CONNECT, options())
    assert group.startswith(READER_GROUP_PREFIX) and len(group) == len(READER_GROUP_PREFIX) + 32
    assert pooled_reader_group(CONNECT, dict(reversed(list(options().items())))) == group  # order-free
    # Spark refuses a pooled consumer whose options differ from its key's first: a changed password is a new key.
    assert pooled_reader_group(CONNECT, options("pw-two")) != group


def test_the_reader_group_cannot_test_a_guess_of_the_password_without_the_token(token, monkeypatch):
    group = pooled_reader_group(CONNECT, options())
    assert "pw-one" not in group and "shop" not in group
    monkeypatch.setenv(SPARK_TOKEN_ENV, "server-token-2")  # another server: another key, another id
    assert pooled_reader_group(CONNECT, options()) != group


def test_a_classic_session_or_a_server_without_token_keeps_sparks_own_group(token, monkeypatch):
    assert pooled_reader_group(CLASSIC, options()) is None  # its executors end with the application
    monkeypatch.delenv(SPARK_TOKEN_ENV)
    assert pooled_reader_group(CONNECT, options()) is None
