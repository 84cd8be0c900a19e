"""What a run does differently as a Spark Connect client, without a server: the pooled reader group, the
size of the server's consumer pool, and jobs run side by side as part of the caller's operations."""

from __future__ import annotations

import threading
import time

import pytest

from eos_etl.embedded.spark_connect import kafka_consumer_pool
from eos_etl.engine.tasks.connect_route import READER_GROUP_PREFIX, SPARK_TOKEN_ENV, concurrently, pooled_reader_group
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


@pytest.mark.parametrize(("memory", "pool"), [("1g", 256), ("2G", 512), ("1536m", 384), ("512m", 128),
                                              ("128m", 64), ("1073741824", 256)])
def test_the_servers_consumer_pool_grows_with_its_heap(memory, pool):
    """An idle pooled consumer holds heap: 1,024 of them ran a 1 GB server out of it mid-window."""
    assert kafka_consumer_pool(memory) == pool


class TaggedSession:
    """A Connect client's tags as pyspark keeps them: one set per thread."""

    __module__ = "pyspark.sql.connect.session"

    def __init__(self):
        self._local = threading.local()

    def _tags(self) -> set:
        if not hasattr(self._local, "tags"):
            self._local.tags = set()
        return self._local.tags

    def addTag(self, tag):  # noqa: N802 - pyspark's name
        self._tags().add(tag)

    def getTags(self):  # noqa: N802 - pyspark's name
        return set(self._tags())


def test_jobs_side_by_side_carry_the_callers_tags_and_keep_their_order():
    """A SIGTERM interrupts the operations tagged with the client's tag: a thread's must carry it too."""
    spark = TaggedSession()
    spark.addTag("eos-etl-client-1")
    seen, started = [], threading.Barrier(3, timeout=10)

    def job(n):
        def run():
            started.wait()  # all three run at once, not one after another
            seen.append((n, frozenset(spark.getTags()), threading.current_thread() is not threading.main_thread()))
            return n * 10
        return run

    assert concurrently(spark, [job(1), job(2), job(3)]) == [10, 20, 30]
    assert sorted(seen) == [(n, frozenset({"eos-etl-client-1"}), True) for n in (1, 2, 3)]


def test_a_failed_job_is_raised_once_the_others_have_ended():
    spark, ended = TaggedSession(), []

    def fails():
        raise RuntimeError("read failed")

    def slow():
        time.sleep(0.2)
        ended.append("slow")
        return "done"

    with pytest.raises(RuntimeError, match="read failed"):
        concurrently(spark, [fails, slow])
    assert ended == ["slow"]  # no job left running behind the error
