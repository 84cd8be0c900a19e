"""Operator view of a pipeline's transactions: ids, their state, stuck outputs.

confluent-kafka's AdminClient cannot list or describe transactions, so the
transactions come from a :class:`TransactionLister`: in the project, Kafka's
own ``TransactionsCommand`` (kafka-tools, KIP-664: what
``kafka-transactions.sh`` runs) from the jars the project already fetched
(:class:`eos_etl.kafka.java_tools.TransactionsTool`). Output partitions are
checked with list_offsets: a partition whose last stable offset stays below
its high watermark holds an open transaction; it is **stuck** when that
transaction has been open longer than the transaction timeout (the broker
should have aborted it), or when no producer of the pipeline holds it
(find-hanging). The report starts with the cluster's finalised
``transaction.version`` and ``metadata.version`` (Kafka's ``FeatureCommand``,
which names metadata versions as releases do).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Protocol

from .admin import ClusterAdmin
from .connection import KafkaConnection


@dataclass
class TransactionInfo:
    transactional_id: str
    state: str
    producer_id: str = ""
    producer_epoch: str = ""
    timeout_ms: int | None = None
    duration_ms: int | None = None
    partitions: str = ""

    @property
    def overdue(self) -> bool:
        return (self.state.lower() == "ongoing" and self.duration_ms is not None and self.timeout_ms is not None
                and self.duration_ms > self.timeout_ms)


@dataclass
class PartitionLag:
    topic: str
    partition: int
    last_stable: int
    high_watermark: int
    stuck: bool = False
    reason: str = ""


@dataclass
class TransactionsReport:
    transactions: list[TransactionInfo] = field(default_factory=list)
    open_partitions: list[PartitionLag] = field(default_factory=list)
    hanging: str = ""
    # Finalised feature levels: name -> level as FeatureCommand prints it ("2", "4.1-IV1").
    features: dict[str, str] = field(default_factory=dict)

    @property
    def stuck(self) -> list[PartitionLag]:
        return [p for p in self.open_partitions if p.stuck]

    def to_dict(self) -> dict:
        return {"features": self.features,
                "transactions": [asdict(t) | {"overdue": t.overdue} for t in self.transactions],
                "open_partitions": [asdict(p) for p in self.open_partitions],
                "stuck": bool(self.stuck), "hanging": self.hanging}

    def describe(self) -> str:
        lines = []
        if self.features:
            lines.append(f"cluster: transaction.version {self.features.get('transaction.version', '0')}, "
                         f"metadata.version {self.features.get('metadata.version', 'unknown')} (finalised); "
                         "the pipeline's producers (librdkafka) use the version-1 transaction protocol")
        lines.append(f"{'transactional.id':<60} {'state':<16} {'epoch':>5} {'open ms':>9}")
        for t in self.transactions:
            flag = "  OVERDUE" if t.overdue else ""
            dur = t.duration_ms if t.state.lower() == "ongoing" else ""
            lines.append(f"{t.transactional_id:<60} {t.state:<16} {t.producer_epoch:>5} {dur!s:>9}{flag}")
        if not self.transactions:
            lines.append("(no transactional ids of this pipeline on the cluster yet)")
        for p in self.open_partitions:
            state = "STUCK" if p.stuck else "open"
            lines.append(f"{state}: {p.topic}[{p.partition}] last stable {p.last_stable} < high watermark "
                         f"{p.high_watermark} {p.reason}")
        if not self.open_partitions:
            lines.append("all output partitions: last stable offset = high watermark (no open transaction)")
        return "\n".join(lines)


class TransactionLister(Protocol):
    """What the report asks of Kafka's transaction tooling (the admin API has no ListTransactions)."""

    def list(self, prefix: str) -> list[TransactionInfo]:
        """The transactional ids starting with ``prefix``, described."""

    def finalized_features(self) -> dict[str, str]:
        """Finalised feature levels: name -> level ("2", "4.1-IV1")."""

    def find_hanging(self, broker_id: str) -> str:
        """Kafka's find-hanging report for one broker, as printed."""


def inspect_pipeline(connection: KafkaConnection, tool: TransactionLister, *, transactional_id_prefix: str,
                     output_topics: tuple[str, ...], settle_s: float = 2.0) -> TransactionsReport:
    """State of the pipeline's transactional ids (listed by ``tool``) and of its output partitions."""
    admin = ClusterAdmin(connection)
    report = TransactionsReport(transactions=tool.list(transactional_id_prefix + "-"),
                                features=tool.finalized_features())
    overdue = [t for t in report.transactions if t.overdue]
    lagging = []
    for topic in output_topics:
        parts = admin.partitions(topic)
        for p, off in admin.offsets(topic, parts).items():
            if off.last_stable < off.high_watermark:
                lagging.append((topic, p))
    if lagging and settle_s:
        time.sleep(settle_s)  # markers of a just-finished commit are still being written
    for topic, p in lagging:
        off = admin.offsets(topic, [p])[p]
        if off.last_stable >= off.high_watermark:
            continue
        lag = PartitionLag(topic, p, off.last_stable, off.high_watermark)
        holders = [t for t in report.transactions if t.state.lower() == "ongoing" and f"{topic}-{p}" in t.partitions]
        if any(t.overdue for t in holders) or (overdue and not holders):
            lag.stuck, lag.reason = True, "(open longer than the transaction timeout)"
        elif not holders:
            lag.reason = "(held by a producer outside this pipeline, or hanging: see find-hanging)"
        else:
            lag.reason = f"(open transaction of {holders[0].transactional_id}, {holders[0].duration_ms} ms)"
        report.open_partitions.append(lag)
    if report.open_partitions:
        md_brokers = admin._admin.list_topics(timeout=admin.timeout).brokers
        report.hanging = tool.find_hanging(str(next(iter(md_brokers))))
        if report.hanging and "No hanging transactions" not in report.hanging:
            for lag in report.open_partitions:
                if f"{lag.topic}" in report.hanging:
                    lag.stuck, lag.reason = True, "(hanging transaction: kafka-transactions abort)"
    return report
