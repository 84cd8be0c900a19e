"""Kafka's own command-line tools, run from the jars the project fetched.

confluent-kafka's AdminClient cannot list or describe transactions, find
hanging ones or describe finalised features, so these run Kafka's Java tool
classes (kafka-tools: what ``kafka-transactions.sh`` and ``kafka-features.sh``
run) against a cluster with ``java -cp <the Kafka bundle>``. The client
settings go in a ``--command-config`` file readable by its owner only, never on
the command line.
"""

from __future__ import annotations

import os
import subprocess
import tempfile

from ..host.tools import require_tool
from ..jars import maven
from ..jars.versions import KAFKA_BROKER
from .connection import KafkaConnection
from .errors import KafkaSetupError
from .transactions import TransactionInfo

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"
FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"


def run_kafka_tool(connection: KafkaConnection, tool: str, *args: str, timeout: float = 120) -> str:
    """Run Kafka tool class ``tool`` with ``args`` against ``connection``'s cluster; its standard output."""
    java = require_tool("java", install_hint="apt-get install openjdk-17-jre-headless")
    maven.fetch(KAFKA_BROKER)
    with tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False) as f:
        os.chmod(f.name, 0o600)
        for key, value in connection.spark_options().items():
            if key != "kafka.bootstrap.servers":
                f.write(f"{key.removeprefix('kafka.')}={value}\n")
        config = f.name
    try:
        proc = subprocess.run(
            [java, "-cp", KAFKA_BROKER.classpath(), "-Dlog4j2.level=ERROR", tool,
             "--bootstrap-server", connection.bootstrap_servers, "--command-config", config, *args],
            capture_output=True, text=True, timeout=timeout,
        )
    finally:
        os.unlink(config)
    if proc.returncode != 0:
        raise KafkaSetupError(f"kafka {tool.rsplit('.', 1)[-1]} {args[0]} failed: {proc.stderr.strip()[-800:]}")
    return proc.stdout


class TransactionsTool:
    """Kafka's ``TransactionsCommand`` and ``FeatureCommand``, their output parsed."""

    def __init__(self, connection: KafkaConnection):
        self.connection = connection

    def _run(self, *args: str, tool: str = TRANSACTIONS_COMMAND) -> str:
        return run_kafka_tool(self.connection, tool, *args)

    @staticmethod
    def _table(text: str) -> list[dict[str, str]]:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if not lines:
            return []
        header = lines[0].split()
        # a short line (a blank last column) leaves its trailing columns out
        return [dict(zip(header, (v.strip() for v in ln.split(None, len(header) - 1)), strict=False))
                for ln in lines[1:]]

    def list(self, prefix: str) -> list[TransactionInfo]:
        rows = [r for r in self._table(self._run("list")) if r.get("TransactionalId", "").startswith(prefix)]
        out = []
        for row in sorted(rows, key=lambda r: r["TransactionalId"]):
            info = TransactionInfo(row["TransactionalId"], row.get("TransactionState", "?"), row.get("ProducerId", ""))
            for d in self._table(self._run("describe", "--transactional-id", info.transactional_id)):
                info.producer_epoch = d.get("ProducerEpoch", "")
                info.timeout_ms = (int(d["CurrentTransactionTimeoutMs"])
                                   if d.get("CurrentTransactionTimeoutMs", "").isdigit() else None)
                info.duration_ms = (int(d["TransactionDurationMs"])
                                    if d.get("TransactionDurationMs", "").lstrip("-").isdigit() else None)
                info.partitions = d.get("TopicPartitions", "")
            out.append(info)
        return out

    def find_hanging(self, broker_id: str) -> str:
        return self._run("find-hanging", "--broker-id", broker_id).strip()

    def hanging_transactions(self, broker_id: str) -> list[dict[str, str]]:
        """find-hanging's rows for ``broker_id`` (topic, partition, producer, start offset, ...); [] when none."""
        return self._table(self.find_hanging(broker_id))

    def finalized_features(self) -> dict[str, str]:
        """Finalised feature levels (``FeatureCommand describe``), e.g. {"transaction.version": "2",
        "metadata.version": "4.1-IV1"}."""
        features = {}
        for line in self._run("describe", tool=FEATURE_COMMAND).splitlines():
            fields = dict(part.split(": ", 1) for part in line.split("\t") if ": " in part)
            if "Feature" in fields and "FinalizedVersionLevel" in fields:
                features[fields["Feature"]] = fields["FinalizedVersionLevel"]
        return features
