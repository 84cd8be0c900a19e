"""Losing a broker while a run starts never crashes it.

Every step before publishing (connect, metadata, committed offsets, fencing,
preflight, planning) uses whichever broker answers, retries retriable errors
within a stated deadline, and otherwise fails with exit code 2 and one
``error:`` line; never a traceback, never a signal. Broker-free unit tests of
the retry/deadline helper first, then the real CLI against real brokers with
real SIGKILLs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from eos_etl.checker import check_shop
from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.host.ports import free_port
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.errors import BrokerLostError, BrokerUnreachableError
from eos_etl.kafka.retry import Deadline, is_retriable, retry_until
from eos_etl.kafka.topics import ensure_topics
from eos_etl.shop.generator import generate
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings
from eos_etl_lab.faults import Lab
from eos_etl_lab.faults import broker_scenarios as sc

from .conftest import unique


def kafka_exc(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eos_etl", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# -- the one retry helper, without a broker ----------------------------------------------------------
def test_retriable_failures_are_asked_again_until_they_succeed():
    answers = [kafka_exc(KafkaError.NOT_COORDINATOR), TimeoutError(), kafka_exc(KafkaError._TRANSPORT), "ok"]
    timeouts = []

    def call(timeout):
        timeouts.append(timeout)
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    assert retry_until(call, what="test", deadline_s=10, attempt_timeout_s=3, backoff_s=0.01) == "ok"
    assert len(timeouts) == 4 and all(0 < t <= 3 for t in timeouts)


def test_a_non_retriable_failure_is_raised_at_once():
    calls = []

    def call(_timeout):
        calls.append(1)
        raise kafka_exc(KafkaError.SASL_AUTHENTICATION_FAILED)

    with pytest.raises(KafkaException):
        retry_until(call, what="test", deadline_s=10, backoff_s=0.01)
    assert len(calls) == 1


def test_retrying_stops_at_the_deadline_and_no_attempt_outlives_it():
    timeouts = []

    def call(timeout):
        timeouts.append(timeout)
        time.sleep(timeout)  # a broker that never answers: every attempt waits out its whole timeout
        raise kafka_exc(KafkaError._TIMED_OUT)

    t0 = time.monotonic()
    with pytest.raises(KafkaException):
        retry_until(call, what="test", deadline_s=2.0, attempt_timeout_s=0.8, backoff_s=0.05)
    assert time.monotonic() - t0 < 2.6
    assert len(timeouts) >= 2 and max(timeouts) <= 0.8
    assert sum(timeouts) <= 2.0  # the last attempt only got what was left


def test_what_counts_as_retriable():
    assert is_retriable(TimeoutError())
    for code in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
                 KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                 KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.OFFSET_NOT_AVAILABLE):
        assert is_retriable(kafka_exc(code)), code
    for code in (KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError.UNKNOWN_TOPIC_OR_PART,
                 KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.INVALID_CONFIG):
        assert not is_retriable(kafka_exc(code)), code
    assert not is_retriable(ValueError("a bug is not a broker outage"))


def test_deadline_slices_never_reach_past_it():
    deadline = Deadline(0.5)
    assert deadline.slice(10) <= 0.5
    time.sleep(0.6)
    assert deadline.expired() and deadline.slice(10) == 0.1


def test_verdict_of_a_start_phase_run():
    one_error = "log line\nerror: cannot reach Kafka at x: no broker answered\n"
    assert sc.start_phase_verdict(0, "all fine\n") == {}
    assert sc.start_phase_verdict(2, one_error) == {}
    assert sc.start_phase_verdict(-11, "Fatal Python error: Segmentation fault\n") == {"killed_by_signal": 1}
    assert sc.start_phase_verdict(1, one_error) == {}  # the broker it reached was lost: a runtime failure
    assert sc.start_phase_verdict(1, "Traceback (most recent call last):\n  ...\nTimeoutError\n") == {
        "traceback": 1, "not_one_error_line": 1}
    assert sc.start_phase_verdict(3, one_error) == {"unexpected_exit": 1}
    assert sc.start_phase_verdict(2, one_error + "error: another\n") == {"not_one_error_line": 1}
    assert sc.start_phase_verdict(None, "") == {"hung": 1}


def test_every_question_to_an_unreachable_cluster_fails_within_its_deadline_with_one_clear_error():
    dead = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    admin = ClusterAdmin(KafkaConnection(dead), timeout=1.0, retry_deadline_s=2.0)
    questions = [
        ("metadata", admin.check_reachable),
        ("describe-configs", lambda: admin.broker_config("transaction.max.timeout.ms")),
        ("offset fetch for group 'g'", lambda: admin.committed_offsets("g", "t", [0])),
        ("list-offsets", lambda: admin.offsets("t", [0])),
    ]
    for what, ask in questions:
        t0 = time.monotonic()
        with pytest.raises(BrokerUnreachableError, match=f"cannot reach Kafka at {dead}.*{what}"):
            ask()
        assert time.monotonic() - t0 < 15, what  # 2 s deadline; slack for a loaded 2-core machine


def test_the_cli_leaves_a_python_stack_when_it_crashes_natively():
    # What a SIGSEGV inside librdkafka looked like before: exit 139 and nothing in the log.
    code = ("import ctypes, sys\nfrom eos_etl import cli\n"
            "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "ctypes.string_at(0)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == -11
    assert "Fatal Python error: Segmentation fault" in res.stderr and 'File "<string>"' in res.stderr


# -- bad configuration: the real CLI ------------------------------------------------------
def test_all_nodes_down_fails_within_30s_with_one_clear_error():
    dead = ",".join(f"127.0.0.1:{free_port()}" for _ in range(3))
    t0 = time.monotonic()
    res = cli("run-window", "--bootstrap-servers", dead, "--input-topic", unique("purchases"), timeout=120)
    took = time.monotonic() - t0
    assert res.returncode == 2, res.stderr[-2000:]
    assert took < 30, took
    [error] = error_lines(res.stderr)
    assert f"cannot reach Kafka at {dead}" in error
    assert "Traceback" not in res.stderr


def _cluster_shop(cluster: KafkaCluster, partitions: int = 2) -> ShopSettings:
    connection = KafkaConnection(cluster.bootstrap_servers)
    tag = unique("start")
    topics = ShopTopics(purchases=f"purchases-{tag}", invoices=f"invoices-{tag}", shipments=f"shipments-{tag}",
                        dead_letters=f"purchases-{tag}.dlq")
    shop = ShopSettings(connection=connection, topics=topics, group=f"group-{tag}", transactional_id_prefix=tag)
    ensure_topics(ClusterAdmin(connection), shop.specs(partitions))
    return shop


@pytest.mark.spark
@pytest.mark.slow
def test_a_bootstrap_list_naming_a_dead_node_still_works(healthy_cluster):
    shop = _cluster_shop(healthy_cluster)
    generate(shop.connection, shop.topics.purchases, 300, seed=18)
    # The first node of the list is dead, and it is still in the metadata (KRaft fences it after
    # 9 s): connect, preflight's broker config, offsets, fencing and publishing must use the others.
    dead = healthy_cluster.nodes[0]
    dead.kill()
    try:
        t = shop.topics
        res = cli("run-window", "--bootstrap-servers", healthy_cluster.bootstrap_servers, "--input-topic",
                  t.purchases, "--invoices-topic", t.invoices, "--shipments-topic", t.shipments, "--dlq-topic",
                  t.dead_letters, "--group", shop.group, "--transactional-id-prefix", shop.transactional_id_prefix,
                  "--compact")
        assert res.returncode == 0, res.stderr[-3000:]
        assert "Traceback" not in res.stderr and not error_lines(res.stderr)
        report = check_shop(shop)
        assert report.ok, report.to_dict()
    finally:
        dead.start()


# -- the scenario, fast: broker SIGKILLs in a run's first seconds --------------------------------------
def _log_tail(result) -> str:
    """The failed run's last lines (the scenario keeps its log), so a failure shows its traceback."""
    from pathlib import Path

    path = result.detail.rsplit(" log=", 1)[1] if " log=" in result.detail else ""
    return "\n".join(Path(path).read_text().splitlines()[-40:]) if path else ""


def assert_start_phase_passed(result):
    assert not result.error, result.error
    assert result.kills == 1
    assert result.violations == {}, (result, _log_tail(result))
    assert result.lso_settled


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("seed", [1])  # more seeds: make soak-cluster
def test_broker_killed_while_a_run_starts_on_three_nodes(healthy_cluster, seed, tmp_path):
    lab = Lab(KafkaConnection(healthy_cluster.bootstrap_servers), broker=healthy_cluster, log_dir=tmp_path)
    assert_start_phase_passed(sc.start_phase_broker_kill(lab, seed, records=300))


@pytest.mark.spark
@pytest.mark.slow
def test_the_only_broker_killed_while_a_run_starts(tmp_path):
    # A broker of its own: the session broker must not be killed under other tests.
    broker = KafkaCluster(home=tmp_path / "kafka", port=free_port())
    broker.start()
    try:
        # Killed in its first 3 s: before Spark starts, so the run must fail with one clear error or ride through.
        result = sc.start_phase_broker_kill(Lab(KafkaConnection(broker.bootstrap_servers), broker=broker,
                                                log_dir=tmp_path), 3,
                                            records=300, kill_within_s=3.0)
        # In this process too: the broker answered, then died. That is a runtime failure (exit code 1),
        # not the configuration error (exit code 2) of a list that never answered.
        admin = ClusterAdmin(KafkaConnection(broker.bootstrap_servers), timeout=1.0, retry_deadline_s=2.0)
        admin.check_reachable()
        broker.kill()
        with pytest.raises(BrokerLostError, match=f"cannot reach Kafka at {broker.bootstrap_servers} .* any more"
                           ) as lost:
            admin.check_reachable()
        assert lost.value.exit_code == 1
    finally:
        broker.stop()
    assert_start_phase_passed(result)
    assert "exit=0" in result.detail or "cannot reach Kafka" in result.detail, result.detail


def test_an_admin_client_is_freed_by_reference_counting_not_the_cycle_collector():
    # A reference cycle through the error callback left the client to the cycle
    # collector, which can run on a librdkafka thread and abort the process there
    # ("rd_kafka_destroy() called from librdkafka owned thread").
    import gc
    import weakref

    from eos_etl.kafka.admin import ClusterAdmin
    from eos_etl.kafka.connection import KafkaConnection

    gc.disable()
    try:
        admin = ClusterAdmin(KafkaConnection("127.0.0.1:1"))
        ref = weakref.ref(admin)
        del admin
        assert ref() is None, "ClusterAdmin is only freed by the cycle collector"
    finally:
        gc.enable()


def test_a_task_asks_again_for_its_committed_offset_while_the_coordinator_moves():
    """Seen on three nodes: a task's OffsetFetch answered NOT_COORDINATOR right after a broker was killed."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    from eos_etl.engine.pipeline import PipelineConfig
    from eos_etl.engine.publishing.checkpoint import PartitionCheckpoint
    from eos_etl.kafka.errors import KafkaSetupError

    class MovingCoordinator:
        def __init__(self, failures):
            self.failures = list(failures)

        def committed(self, tps, timeout):
            if self.failures:
                raise KafkaException(KafkaError(self.failures.pop(0)))
            return [TopicPartition(tps[0].topic, tps[0].partition, 42)]

        def close(self):
            pass

    config = PipelineConfig(KafkaConnection("127.0.0.1:1"), input_topic="t", group="g", output_topics=("o",),
                            transactional_id_prefix="p", input_topic_id="t-id", writer_slots=2)
    checkpoint = PartitionCheckpoint(config, 0, timeout_s=10)
    checkpoint._consumer.close()
    checkpoint._consumer = MovingCoordinator([KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS])
    assert checkpoint.committed() == 42
    checkpoint._consumer = MovingCoordinator([KafkaError.GROUP_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaSetupError, match="cannot read committed offset of t\\[0\\]"):
        checkpoint.committed()
