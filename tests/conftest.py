"""Shared fixtures: one real Kafka broker and one SparkSession per test session, and the suite's layout.

The tests live in three folders, each mirroring the package path of the module a file tests:
tests/unit (broker-free), tests/integration (real components), tests/lab (tests of eos_etl_lab);
every test is marked with its folder's name (see "the three folders" below). Helpers that several
test files share are in tests/support.

The broker is the product's own launcher on free loopback ports in a temp
directory (never the demo broker in var/kafka). Every test gets its own
topics, group and transactional-id prefix from the factories below, so tests
never see each other's data.
"""

from __future__ import annotations

import os
import secrets
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from eos_etl import logging_setup
from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.embedded.spark_cluster import SparkStandalone
from eos_etl.embedded.spark_connect import SparkConnectServer
from eos_etl.host.ports import free_port
from eos_etl.jvm.options import JVM_OPTIONS_ENV
from eos_etl.kafka.acls import grant
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.topics import ensure_topics
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings
from eos_etl_lab.faults.lab import lab_writer_slots

# Every JVM of the suite (brokers, Spark drivers, executors, standalone daemons, also those Airflow's
# tasks start) with the C1 compiler only: the suite's JVMs live for seconds over hundreds of records
# and spent more CPU JIT-compiling with C2 than running (see eos_etl.jvm.options; one event-driven DAG
# test: 272 -> 155 CPU s). Semantics are untouched; `make bench` runs with the default JIT.
# C1 alone makes HotSpot reserve 48 MB of code cache, not 240 MB: a worker's session-long Spark JVM
# filled it within a few quality tests ("CodeCache is full. Compiler has been disabled") and ran every
# later query's code interpreted.
os.environ.setdefault(JVM_OPTIONS_ENV, "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m")
# The suite's Airflows parse their DAG files once at start and never see them change; Airflow's default
# re-parse every 30 s cost ~12 CPU s per Airflow test on a 2-core machine the tests share.
os.environ.setdefault("AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL", "120")
# A task's successor waits for the scheduler's next loop; an idle one sleeps 1 s between loops by default.
# 0.25 s halved the gaps between a window's tasks (docs/airflow.md, "Latency between tasks").
os.environ.setdefault("AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME", "0.25")

SASL_USER = "etl"
SASL_PASSWORD = secrets.token_urlsafe(18)  # per test process; never written down
# A second SCRAM user with no ACLs of its own: what another tenant of the cluster can do.
OTHER_USER = "intruder"
OTHER_PASSWORD = secrets.token_urlsafe(18)


# -- shared helpers (import them from here: `from tests.conftest import unique, read_all`) -------
def unique(prefix: str) -> str:
    """A name no other test (or earlier run) uses: topics, groups, transactional ids."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


TXN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    value: str


def wait_settled(connection: KafkaConnection, topic: str, timeout: float = 15.0) -> None:
    """Wait until no transaction is undecided on ``topic``: last stable offset == high watermark.

    commit/abort_transaction return once the coordinator has *decided*; it
    writes the markers right after, so for a few milliseconds the LSO (what
    read_committed consumers may read up to) still lags behind.
    """
    offsets = ClusterAdmin(connection).settled_offsets(topic, timeout_s=timeout)
    assert all(o.settled for o in offsets.values()), \
        f"{topic} still has undecided transactions after {timeout}s: {offsets}"


def read_all(
    connection: KafkaConnection,
    topic: str,
    partitions: list[int] | None = None,
    *,
    isolation: str = "read_committed",
    settle: bool = True,
    timeout: float = 30.0,
) -> list[Rec]:
    """Every record of ``topic`` visible with ``isolation``, from the beginning to the end.

    The end is the high watermark the consumer itself reports (for a
    read_committed consumer that is the last stable offset). Reading stops
    when the consumer's position reached it on every partition; it fails if
    that does not happen within ``timeout``. With ``settle`` (the default)
    it first waits until no transaction on the topic is undecided, so a
    transaction committed just before is fully visible; pass False to look at
    a topic with a transaction deliberately left open.
    """
    if settle:
        wait_settled(connection, topic)
    conf = connection.client_config()
    conf.update(
        {
            "group.id": unique("reader"),  # never subscribes, never commits
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": isolation,
            "log_level": 0,
        }
    )
    consumer = Consumer(conf)
    try:
        if partitions is None:
            md = consumer.list_topics(topic, timeout=10)
            partitions = sorted(md.topics[topic].partitions)
        ends = {}
        for p in partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            ends[p] = high
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, -2) for p in pending])  # -2 = OFFSET_BEGINNING
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"reading {topic} ({isolation}) did not reach the end offsets {ends} within {timeout}s; "
                    f"positions {consumer.position([TopicPartition(topic, p) for p in pending])}"
                )
            msg = consumer.poll(0.2)
            if msg is not None:
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(msg.error())
                out.append(Rec(msg.partition(), msg.offset(), msg.value().decode()))
            for tp in consumer.position([TopicPartition(topic, p) for p in pending]):
                if tp.offset >= ends[tp.partition]:
                    pending.discard(tp.partition)
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


# -- the three folders: the markers follow them --------------------------------------------------------
# tests/unit: broker-free (no Kafka broker, no cluster, no Spark, no Airflow process); tests/integration:
# against real components; tests/lab: tests of eos_etl_lab, of either kind. Every test under one of them
# is marked with its name (--strict-markers: declared in pyproject.toml), so `-m unit` is tests/unit
# exactly. A test under tests/unit that needs a broker, a cluster or Spark is a collection error.
TESTS_DIR = Path(__file__).resolve().parent
FOLDERS = ("unit", "integration", "lab")

#: Fixtures that start a broker, a cluster or Spark (directly or through the fixtures they use): these
#: names, and every fixture whose name says broker or cluster (a module's own broker); and the marks
#: that say a test needs them. None of them belongs under tests/unit.
RUNTIME_FIXTURES = {"spark"}
RUNTIME_WORDS = ("broker", "cluster")
RUNTIME_MARKS = ("spark", "slow", "integration")


def folder_of(path) -> str | None:
    """unit, integration or lab: the folder of tests/ the file at ``path`` is in (None outside them)."""
    path = Path(path).resolve()
    if not path.is_relative_to(TESTS_DIR):
        return None
    parts = path.relative_to(TESTS_DIR).parts
    return parts[0] if len(parts) > 1 and parts[0] in FOLDERS else None


def runtime_needs(item) -> list[str]:
    """What of ``item`` starts a broker, a cluster or Spark: the fixtures and marks that say so."""
    fixtures = sorted(getattr(item, "fixturenames", ()))
    return ([f"fixture {f}" for f in fixtures if f in RUNTIME_FIXTURES or any(w in f for w in RUNTIME_WORDS)]
            + [f"mark {m}" for m in RUNTIME_MARKS if item.get_closest_marker(m)])


def pytest_itemcollected(item) -> None:
    folder = folder_of(item.path)
    if folder is not None:
        item.add_marker(getattr(pytest.mark, folder))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """The guard of tests/unit: a test there that needs a broker, a cluster or Spark fails its file's
    collection, naming the test, what it needs and where it belongs."""
    report = yield
    if report.passed and folder_of(collector.path) == "unit":
        wrong = [(item, needs) for item in report.result
                 if isinstance(item, pytest.Item) and (needs := runtime_needs(item))]
        if wrong:
            report.outcome = "failed"
            report.longrepr = "\n".join(
                f"{item.nodeid} needs a broker, a cluster or Spark ({', '.join(needs)}), but tests/unit is "
                f"broker-free: it belongs under tests/integration/ (tests/lab/ for a test of eos_etl_lab), at the "
                f"same package path" for item, needs in wrong)
            report.result = []
    return report


# -- scheduling over pytest-xdist workers (`make test` runs three) ---------------------------------
# Session fixtures are per worker: tests on the three-node Kafka cluster or the Spark
# standalone cluster share one xdist group, so only one worker ever starts those clusters; a module
# whose tests share a module-scoped fixture (its own broker, a network lab) is one group too, so that
# fixture starts once, not once per worker that happens to get one of its tests.
SHARED_CLUSTER_FIXTURES = {"kafka_cluster", "healthy_cluster", "spark_cluster"}


def _uses_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values())


def xdist_group_of(item) -> str | None:
    """The xdist group the item runs in: its own mark's, the shared clusters', its module's or none."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return mark.args[0] if mark.args else mark.kwargs.get("name", "default")
    if SHARED_CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "shared-clusters"
    if _uses_module_fixture(item):
        return item.module.__name__
    return None


# tryfirst: xdist's own collection hook (on each worker) reads the xdist_group marks to name each
# test's group, so they must be added before it runs.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        group = xdist_group_of(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    # Long tests first, so the last minutes are not one worker finishing a long test alone.
    # A stable sort: every worker collects the same order, as xdist requires.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session", autouse=True)
def _logging() -> None:
    logging_setup.configure("INFO")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory) -> Iterator[KafkaCluster]:
    broker = KafkaCluster(
        home=tmp_path_factory.mktemp("kafka"),
        port=free_port(),
        sasl_users={SASL_USER: SASL_PASSWORD, OTHER_USER: OTHER_PASSWORD},
    )
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def spark_connect_server(tmp_path_factory):
    """A Spark Connect server (local[2,4]) for this worker, started on first use: the default route,
    which the Airflow tests run their windows on. Tests that kill or stall a server start their own."""
    server = SparkConnectServer(home=tmp_path_factory.mktemp("spark-connect-shared"), port=free_port(),
                                master="local[2,4]")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory) -> Iterator[KafkaCluster]:
    """Three KRaft nodes on loopback (replication factor 3, min.insync.replicas 2), started on first use.

    Tests that kill, stop or pause nodes take ``healthy_cluster`` instead, which
    brings every node back and waits for all replicas to be in sync first.
    """
    cluster = KafkaCluster(home=tmp_path_factory.mktemp("kafka-cluster"), size=3)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()  # nodes that did come up must not outlive a failed start
        raise
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory) -> Iterator[SparkStandalone]:
    """A Spark standalone master with two 1-core workers on free loopback ports, started on first use.

    Tests that kill workers or executors must leave both workers running
    (``spark_cluster.start()`` brings back any that is down).
    """
    cluster = SparkStandalone(home=tmp_path_factory.mktemp("spark-cluster"), workers=2)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def healthy_cluster(kafka_cluster: KafkaCluster) -> KafkaCluster:
    """The session's cluster with all three nodes running and every partition fully in sync."""
    kafka_cluster.start()
    kafka_cluster.wait_in_sync()
    return kafka_cluster


@pytest.fixture(scope="session")
def connection(kafka_broker: KafkaCluster) -> KafkaConnection:
    return KafkaConnection(kafka_broker.bootstrap_servers)


@pytest.fixture(scope="session")
def sasl_connection(kafka_broker: KafkaCluster) -> KafkaConnection:
    """The pipeline's principal over SASL_SSL (SCRAM-SHA-512, the broker verified against its CA).
    It has no ACLs until a test grants them (``shop_factory(conn=...)`` grants the shop's)."""
    return scram_connection(kafka_broker, SASL_USER, SASL_PASSWORD)


def scram_connection(broker: KafkaCluster, user: str, password: str) -> KafkaConnection:
    return KafkaConnection(broker.sasl_bootstrap_servers, security_protocol="SASL_SSL",
                           sasl_mechanism="SCRAM-SHA-512", sasl_username=user, sasl_password=password,
                           ssl_ca_location=str(broker.ca_file))


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
    """make_shop(partitions=3) -> ShopSettings with fresh topics, group and transactional-id prefix.

    With a SASL ``conn``, its principal is granted the ``roles``' ACLs on the new shop (through
    the super-user's loopback connection, as ``python -m eos_etl acl grant`` does)."""

    def make_shop(partitions: int = 3, *, conn: KafkaConnection | None = None,
                  roles: tuple[str, ...] = ("pipeline", "validator"), **kwargs) -> ShopSettings:
        kwargs.setdefault("writer_slots", lab_writer_slots())  # $EOS_ETL_LAB_WRITER_SLOTS: the kill tests on slots
        tag = uuid.uuid4().hex[:10]
        topics = ShopTopics(
            purchases=f"purchases-{tag}",
            invoices=f"invoices-{tag}",
            shipments=f"shipments-{tag}",
            dead_letters=f"purchases-{tag}.dlq",
        )
        shop = ShopSettings(
            connection=conn or connection,
            topics=topics,
            group=f"shop-{tag}",
            transactional_id_prefix=f"shop-{tag}",
            **kwargs,
        )
        ensure_topics(admin, shop.specs(partitions))
        if shop.connection.sasl_username:
            resources = shop.pipeline().resources()
            grant(connection, shop.connection.sasl_username, [g for r in roles for g in resources.grants(r)])
        return shop

    return make_shop


@pytest.fixture(scope="session")
def spark():
    from eos_etl.jvm import class_data
    from eos_etl.shop.jvm_training import SHOP_JVM_WORKLOAD
    from eos_etl.spark.session import spark_session

    try:
        class_data.build(SHOP_JVM_WORKLOAD)  # make setup built it; a no-op then
    except class_data.ClassDataError as exc:  # Spark runs without it; test_class_data fails on it
        warnings.warn(f"no class-data archive: {exc}", stacklevel=1)
    os.environ.setdefault("EOS_ETL_SPARK_DRIVER_MEMORY", "1g")
    session = spark_session("eos-etl-tests", master="local[2,4]")
    yield session
    session.stop()
