"""The exit-code contract, read from its documented table (docs/operations.md, "Exit codes, error by error").

Every error class the package defines (a subclass of :class:`eos_etl.errors.EosEtlError`, all of the
package's modules imported) must have a row; each class's ``exit_code`` must be its row's; the
command line must end with that code and one ``error:`` line; Airflow must retry or fail for good as
the row says (:mod:`eos_etl.orchestration.task_failures`). Broker-free; the rows marked *provoked*
are provoked against a real broker through the CLI: in tests/integration/test_exit_codes.py, or in
the test named in :data:`PROVOKED_ELSEWHERE`. A new class is one new row in the table (and its code
in the class). The table's reader: tests/support/exit_codes.py.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil

import pytest

import eos_etl
from eos_etl import cli
from eos_etl.errors import EosEtlError
from eos_etl.host.ports import free_port
from eos_etl.kafka import errors as kafka
from eos_etl.kafka import reachability
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from tests.integration.engine import test_pipeline_identity
from tests.integration.engine.planning import test_state_edges
from tests.integration.engine.tasks import test_broker_lost_in_task
from tests.support.exit_codes import DOC, PROVOKE, ROWS, SECTION


def project_error_classes() -> dict[str, type[EosEtlError]]:
    """Every subclass of EosEtlError defined in the package, every module of it imported."""
    for info in pkgutil.walk_packages(eos_etl.__path__, "eos_etl."):
        if not info.name.endswith(".__main__"):  # a __main__ runs its command on import
            importlib.import_module(info.name)
    found: dict[str, type[EosEtlError]] = {}
    todo = [EosEtlError]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] == "eos_etl":
            assert found.setdefault(cls.__name__, cls) is cls, f"two error classes named {cls.__name__}"
    return found


CLASSES = project_error_classes()

#: Rows provoked through the CLI against a real broker by a test of another module (here: the others).
PROVOKED_ELSEWHERE = {
    # A run under another transactional-id prefix than the pipeline's recorded identity.
    "IdentityMismatchError": (test_pipeline_identity, "test_a_run_with_another_transactional_id_prefix_is_refused"),
    # A broker of its own, stopped under a running task.
    "BrokerLostError": (test_broker_lost_in_task,
                        "test_a_broker_lost_under_a_running_task_fails_the_run_with_exit_1_and_the_next_run_is_exact"),
    # The input topic deleted and created again, its new log shorter and then longer than the old position.
    "PositionBeyondLogError": (test_state_edges,
                               "test_a_recreated_input_topic_stops_the_run_and_offsets_reset_brings_it_back"),
}


def test_every_error_class_has_a_row_and_every_row_a_class():
    assert sorted(set(CLASSES) - set(ROWS)) == [], f"error classes without a row in {DOC} ({SECTION})"
    assert sorted(set(ROWS) - set(CLASSES)) == [], f"rows of {DOC} naming no error class of the package"


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_class_exits_with_its_rows_code(name):
    row = ROWS[name]
    assert row.exit_code in (1, 2)
    assert CLASSES[name].exit_code == row.exit_code
    # The contract itself: exit code 2 is what Airflow never retries, 1 what it retries.
    assert row.airflow == ("fail" if row.exit_code == 2 else "retry"), row


@pytest.mark.parametrize("name", sorted(ROWS))
def test_airflow_does_what_the_row_says(name):
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from eos_etl.orchestration import task_failures

    row = ROWS[name]
    error = CLASSES[name](f"the {name} message")
    raised_in_task = task_failures.for_error(error)  # an error the Airflow task's own process raised
    for_exit = task_failures.for_exit_code(row.exit_code, f"jobs/run_window.py exited with {row.exit_code}")
    if row.airflow == "fail":
        assert isinstance(raised_in_task, AirflowFailException), raised_in_task
        assert isinstance(for_exit, AirflowFailException) and "not retried" in str(for_exit), for_exit
    else:
        assert raised_in_task is None  # the error itself is raised: Airflow retries it
        assert type(for_exit) is AirflowException, for_exit


def test_anything_else_is_retried():
    from airflow.sdk.exceptions import AirflowException

    from eos_etl.orchestration import task_failures

    for code in (1, 137, -9, None):
        assert type(task_failures.for_exit_code(code, f"exited with {code}")) is AirflowException, code
    assert task_failures.for_error(ValueError("a bug")) is None


@pytest.mark.parametrize("name", sorted(ROWS))
def test_the_cli_exits_with_the_rows_code_and_one_error_line(monkeypatch, capsys, name):
    error = CLASSES[name](f"the {name} message")

    def fails(_args):
        raise error

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(parser, "parse_args", lambda argv: argparse.Namespace(func=fails, log_level="INFO"))
    assert cli.main(["anything"]) == ROWS[name].exit_code
    assert capsys.readouterr().err.splitlines() == [f"error: {error}"]


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


def test_every_provoked_row_is_provoked_by_a_test():
    provoked = {name for name, row in ROWS.items() if row.provoked}
    assert provoked == set(PROVOKE) | set(PROVOKED_ELSEWHERE)
    for module, test in PROVOKED_ELSEWHERE.values():
        assert callable(getattr(module, test, None)), f"{module.__name__} has no {test}"
