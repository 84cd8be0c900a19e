"""Exit codes: 2 for bad configuration or arguments, 1 for a run the world failed under (broker-free).

The real-broker cases: tests/test_start_phase.py (a lost broker), tests/test_cli.py and
tests/test_acls.py (configuration errors), tests/test_superseded.py (fenced)."""

from __future__ import annotations

import argparse

import pytest

from eos_etl import cli
from eos_etl.engine import errors as engine
from eos_etl.engine.producer import TransactionOutcomeUnknown
from eos_etl.errors import ConfigurationError
from eos_etl.kafka import errors as kafka
from eos_etl.kafka import reachability
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.stack.errors import SparkServerLostError
from eos_etl.stack.tools import free_port

CONFIGURATION = [ConfigurationError, kafka.KafkaSetupError, kafka.BrokerUnreachableError, kafka.MissingTopicError,
                 kafka.AuthenticationError, kafka.AuthorizationError, kafka.TopicMismatchError,
                 engine.WindowMismatchError, engine.InputDataLossError, engine.TransformContractError,
                 engine.PositionLostError, engine.PositionBeyondLogError, engine.TransactionalIdNotAuthorizedError]
RUNTIME = [kafka.BrokerLostError, kafka.UnstableOffsetsError, engine.EngineError, engine.PublishError,
           engine.ProducerFencedError, engine.NotEnoughReplicasError, TransactionOutcomeUnknown,
           SparkServerLostError]


@pytest.mark.parametrize("cls", CONFIGURATION, ids=lambda c: c.__name__)
def test_configuration_errors_exit_2(cls):
    assert cls.exit_code == 2


@pytest.mark.parametrize("cls", RUNTIME, ids=lambda c: c.__name__)
def test_runtime_failures_exit_1(cls):
    assert cls.exit_code == 1


@pytest.mark.parametrize("error, code", [(engine.NotEnoughReplicasError("outputs cannot reach min.insync.replicas"), 1),
                                         (engine.PositionLostError("position lost"), 2)])
def test_the_cli_exits_with_the_errors_code_and_one_line(monkeypatch, capsys, error, code):
    def fails(_args):
        raise error

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(parser, "parse_args", lambda argv: argparse.Namespace(func=fails, log_level="INFO"))
    assert cli.main(["anything"]) == code
    err = capsys.readouterr().err
    assert err.splitlines() == [f"error: {error}"]


def test_a_cluster_that_never_answered_is_a_configuration_error_one_that_answered_is_lost():
    dead = KafkaConnection(f"127.0.0.1:{free_port()}")
    reachability.forget(dead)
    admin = ClusterAdmin(dead, timeout=1.0, retry_deadline_s=1.0)
    with pytest.raises(kafka.BrokerUnreachableError) as never:
        admin.check_reachable()
    assert type(never.value) is kafka.BrokerUnreachableError and never.value.exit_code == 2
    assert f"cannot reach Kafka at {dead.bootstrap_servers} (PLAINTEXT): no broker answered" in str(never.value)

    # The same list, had it answered earlier in this process (the bootstrap servers in another order).
    servers = dead.bootstrap_servers
    reachability.mark_answered(KafkaConnection(f" {servers.upper()} "))
    try:
        assert reachability.has_answered(dead)
        assert not reachability.has_answered(KafkaConnection(f"127.0.0.1:{free_port()}"))
        with pytest.raises(kafka.BrokerLostError) as lost:
            admin.check_reachable()
        assert lost.value.exit_code == 1
        message = str(lost.value)
        assert message.startswith(f"cannot reach Kafka at {servers} (PLAINTEXT) any more: no broker answered")
        assert "answered earlier in this run" in message
        # Still a BrokerUnreachableError: every caller that tolerates an unreachable cluster tolerates this.
        assert isinstance(lost.value, kafka.BrokerUnreachableError)
    finally:
        reachability.forget(dead)


def test_airflow_retries_runtime_failures_and_fails_bad_configuration_for_good():
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from eos_etl.orchestration import task_failures

    config = task_failures.for_exit_code(2, "jobs/run_window.py exited with 2")
    assert isinstance(config, AirflowFailException) and "not retried" in str(config)
    for code in (1, 137, -9, None):
        runtime = task_failures.for_exit_code(code, f"jobs/run_window.py exited with {code}")
        assert type(runtime) is AirflowException, code
    assert isinstance(task_failures.for_error(ConfigurationError("deploy mode 'cluster'")), AirflowFailException)
    assert isinstance(task_failures.for_error(kafka.MissingTopicError("no topic")), AirflowFailException)
    assert task_failures.for_error(engine.NotEnoughReplicasError("min.insync.replicas")) is None
    assert task_failures.for_error(kafka.BrokerLostError("lost")) is None
    assert task_failures.for_error(ValueError("a bug")) is None
