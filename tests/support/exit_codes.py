"""The exit-code contract's table and its provoked rows, shared by tests/unit/test_exit_codes.py (the table
against the package, broker-free) and tests/integration/test_exit_codes.py (the provoked rows through the CLI,
against a real broker)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from eos_etl.engine.lineage import H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC
from eos_etl.host.ports import free_port
from tests.support import ROOT
from tests.support.cli import cli as run_cli
from tests.support.cli import sasl_args, shop_args

DOC = ROOT / "docs" / "operations.md"
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


ROWS = documented_rows()


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


PROVOKE = {
    "BrokerUnreachableError": provoke_broker_unreachable,
    "InputDataLossError": provoke_input_data_loss,
    "MissingTopicError": provoke_missing_topic,
    "AuthenticationError": provoke_authentication,
    "PositionLostError": provoke_position_lost,
    "ProducerFencedError": provoke_fenced,
}
