"""The exit-code contract, read from its documented table (docs/operations.md, "Exit codes, error by error").

Every error class the package defines (a subclass of :class:`eos_etl.errors.EosEtlError`, all of the
package's modules imported) must have a row; each class's ``exit_code`` must be its row's; the
command line must end with that code and one ``error:`` line; Airflow must retry or fail for good as
the row says (:mod:`eos_etl.orchestration.task_failures`). Broker-free, except the rows marked
*provoked*, which are provoked against a real broker through the CLI: here, or in the test named in
:data:`PROVOKED_ELSEWHERE`. A new class is one new row in the table (and its code in the class).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import eos_etl
from eos_etl import cli
from eos_etl.engine.lineage import H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC
from eos_etl.errors import EosEtlError
from eos_etl.host.ports import free_port
from eos_etl.kafka import errors as kafka
from eos_etl.kafka import reachability
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.shop.generator import generate

from . import test_broker_lost_in_task, test_state_edges, test_writer_slots
from .test_cli import cli as run_cli
from .test_cli import sasl_args, shop_args

DOC = Path(__file__).resolve().parents[1] / "docs" / "operations.md"
SECTION = "## Exit codes, error by error"
AIRFLOW = {"retry": "retry", "fail, no retry": "fail"}


@dataclass(frozen=True)
class Row:
    name: str
    exit_code: int
    line: str  # the documented shape of the error: line
    airflow: str  # "retry" or "fail"
    provoked: bool

    @property
    def head(self) -> str:
        """The line's literal start, up to its first placeholder."""
        return re.split(r"<|…|\(base class", self.line.strip("`"), maxsplit=1)[0]


def documented_rows() -> dict[str, Row]:
    text = DOC.read_text()
    assert SECTION in text, f"{DOC} has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows: dict[str, Row] = {}
    for line in section.splitlines():
        m = re.match(r"^\| `(\w+)` \| (\d) \| (.+) \| ([^|]+) \|$", line)
        if m is None:
            continue
        name, code, shape, airflow = m.group(1), int(m.group(2)), m.group(3).strip(), m.group(4).strip()
        assert name not in rows, f"two rows for {name}"
        assert airflow in AIRFLOW, f"{name}: Airflow column {airflow!r} is none of {sorted(AIRFLOW)}"
        provoked = shape.endswith("(provoked)")
        rows[name] = Row(name, code, shape.removesuffix("(provoked)").strip(), AIRFLOW[airflow], provoked)
    assert rows, f"no rows parsed from {SECTION!r} in {DOC}"
    return rows


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


ROWS = documented_rows()
CLASSES = project_error_classes()

#: Rows provoked through the CLI against a real broker by a test of another module (here: the others).
PROVOKED_ELSEWHERE = {
    # Positions committed per partition, a run and an offsets reset with writer slots.
    "WriterSlotsChangedError": (test_writer_slots,
                                "test_another_grouping_is_refused_until_reslot_which_fences_the_old_ids"),
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


# -- the provoked rows: through the CLI, against a real broker ---------------------------------------------------
def assert_row(name: str, res) -> None:
    """The run ended as ``name``'s row says: its exit code, exactly one error: line, of its shape."""
    row = ROWS[name]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert res.returncode == row.exit_code, f"{name}: exit code {res.returncode}: {errors or res.stderr[-3000:]}"
    assert len(errors) == 1, f"{name}: {len(errors)} error lines: {res.stderr[-3000:]}"
    assert errors[0].startswith(row.head), f"{name}: {errors[0]!r} is not of the shape {row.line}"
    # No traceback of the command's own (Spark's log quotes a failed task's, as "PythonException: Traceback").
    assert not any(line.startswith("Traceback") for line in res.stderr.splitlines()), res.stderr[-3000:]


def provoke_broker_unreachable(shop, connection, tmp_path):
    return run_cli("run-window", "--bootstrap-servers", f"127.0.0.1:{free_port()}", *shop_args(shop), timeout=120)


def provoke_missing_topic(shop, connection, tmp_path):
    args = shop_args(shop)
    args[args.index("--dlq-topic") + 1] = f"no-such-topic-{uuid.uuid4().hex[:8]}"
    return run_cli("run-window", "--bootstrap-servers", connection.bootstrap_servers, *args, timeout=180)


def provoke_authentication(shop, connection, tmp_path, sasl_connection=None):
    return run_cli("run-window", *sasl_args(sasl_connection), *shop_args(shop),
                   env={"EOS_ETL_KAFKA_PASSWORD": "not-the-password"}, timeout=180)


def provoke_position_lost(shop, connection, tmp_path):
    # The pipeline has published from partition 0 (an output's lineage names it) but neither the group
    # nor the checkpoint topic knows a position: starting from the start policy would publish again.
    producer = Producer(connection.client_config())
    producer.produce(shop.topics.invoices, b"an invoice published earlier", b"k", partition=0,
                     headers={H_SOURCE_TOPIC: shop.topics.purchases, H_SOURCE_PARTITION: "0", H_SOURCE_OFFSET: "3"})
    assert producer.flush(30) == 0
    return run_cli("run-window", "--bootstrap-servers", connection.bootstrap_servers, *shop_args(shop), timeout=180)


def provoke_fenced(shop, connection, tmp_path):
    # The task stalls inside its second transaction past transaction.timeout.ms: the coordinator aborts it and
    # bumps the epoch, the task's next call is fenced, and with nobody committing since it fails at once (no
    # task retry: the run's error is the task's).
    paused = tmp_path / "stalled"
    env = {"EOS_ETL_SPARK_MASTER": "local[2,1]",
           "EOS_ETL_FAILPOINTS": f"mid_produce=sleep:12,after=6,once={paused}"}
    return run_cli("run-window", "--bootstrap-servers", connection.bootstrap_servers, *shop_args(shop),
                   "--chunk-records", "4", "--chunk-seconds", "2", "--transaction-timeout-ms", "5000", env=env,
                   timeout=300)


def provoke_input_data_loss(shop, connection, tmp_path):
    # The pipeline's position is 0 (committed by its own command), then records it never processed are
    # deleted, as retention would.
    reset = run_cli("offsets", "reset", "--to", "earliest", "--partitions", "0", "--bootstrap-servers",
                    connection.bootstrap_servers, *shop_args(shop), timeout=180)
    assert reset.returncode == 0, reset.stderr[-3000:]
    client = AdminClient(connection.client_config())
    for future in client.delete_records([TopicPartition(shop.topics.purchases, 0, 10)]).values():
        future.result(30)
    return run_cli("run-window", "--bootstrap-servers", connection.bootstrap_servers, *shop_args(shop), timeout=180)


#: Where each provoked exit-2 row leaves the group's offset of partition 0 (untouched by the run).
POSITION_LEFT = {"InputDataLossError": 0}

PROVOKE = {
    "BrokerUnreachableError": provoke_broker_unreachable,
    "InputDataLossError": provoke_input_data_loss,
    "MissingTopicError": provoke_missing_topic,
    "AuthenticationError": provoke_authentication,
    "PositionLostError": provoke_position_lost,
    "ProducerFencedError": provoke_fenced,
}


def test_every_provoked_row_is_provoked_by_a_test():
    provoked = {name for name, row in ROWS.items() if row.provoked}
    assert provoked == set(PROVOKE) | set(PROVOKED_ELSEWHERE)
    for module, test in PROVOKED_ELSEWHERE.values():
        assert callable(getattr(module, test, None)), f"{module.__name__} has no {test}"


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(PROVOKE))
def test_the_provoked_rows_end_the_cli_as_documented(name, shop_factory, connection, sasl_connection, admin, tmp_path):
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 20, seed=7)
    extra = {"sasl_connection": sasl_connection} if name == "AuthenticationError" else {}
    res = PROVOKE[name](shop, connection, tmp_path, **extra)
    assert_row(name, res)
    if ROWS[name].exit_code == 2:  # nothing published, no offset moved
        parts = admin.partitions(shop.topics.purchases)
        assert admin.committed_offsets(shop.group, shop.topics.purchases, parts) == {0: POSITION_LEFT.get(name)}
    assert os.environ.get("EOS_ETL_FAILPOINTS") is None  # the failpoints were the run's own
