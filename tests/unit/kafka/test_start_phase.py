"""Losing a broker while a run starts never crashes it: the broker-free half.

Every step before publishing (connect, metadata, committed offsets, fencing,
preflight, planning) uses whichever broker answers, retries retriable errors
within a stated deadline, and otherwise fails with exit code 2 and one
``error:`` line; never a traceback, never a signal. Here the retry/deadline helper
(eos_etl.kafka.retry) and the CLI against addresses where no broker answers; the real CLI
against real brokers with real SIGKILLs: tests/integration/kafka/test_start_phase.py.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from eos_etl.host.ports import free_port
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.errors import BrokerUnreachableError
from eos_etl.kafka.retry import Deadline, is_retriable, retry_until
from eos_etl_lab.faults import broker_scenarios as sc
from tests.conftest import unique
from tests.support.start_phase import cli, error_lines


def kafka_exc(code: int) -> KafkaException:
    return KafkaException(KafkaError(code))


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
