"""The Kafka deployments a bench run measures against: the bench's own single node, or a 3-node cluster.

A :class:`KafkaTarget` is one :class:`~eos_etl.embedded.kafka_cluster.KafkaCluster`
(any size) started in its own directory under the bench's work dir on free
ports, with the client connection and admin the cases use, and the inputs
generated on it. Every case row and check says which target it ran against,
so single-node and cluster figures are never mixed.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.topic_spec import TopicSpec
from eos_etl.kafka.topics import TopicState, ensure_topics
from eos_etl.shop.generator import generate

from .harness import process_cpu_seconds

log = logging.getLogger(__name__)


@dataclass
class KafkaTarget:
    name: str  # "single" or "cluster": the label rows and checks carry
    cluster: KafkaCluster
    connection: KafkaConnection
    admin: ClusterAdmin
    inputs: dict[int, dict] = field(default_factory=dict)  # input partitions -> {"topic", "count", ...}

    @classmethod
    def start(cls, name: str, home: Path, *, size: int, heap: str | None = None, jmx: bool = False,
              overrides: dict[str, str] | None = None) -> "KafkaTarget":
        """Start a ``size``-node Kafka in ``home`` (a fresh directory) on free ports (``jmx``: with its
        metrics readable, :meth:`request_counts`; ``overrides``: broker properties)."""
        cluster = KafkaCluster(home=home, size=size, heap=heap, jmx=jmx, overrides=dict(overrides or {}))
        try:
            cluster.start()
        except BaseException:
            cluster.stop()  # a node that did start must not outlive a failed start
            raise
        connection = KafkaConnection(cluster.bootstrap_servers)
        target = cls(name=name, cluster=cluster, connection=connection, admin=ClusterAdmin(connection, timeout=30))
        log.info("bench Kafka %r: %d node(s) on %s (pids %s)", name, size, cluster.bootstrap_servers,
                 [n.pid() for n in cluster.nodes])
        return target

    def stop(self) -> None:
        self.cluster.stop()

    @property
    def nodes(self) -> int:
        return self.cluster.size

    def broker_cpu_seconds(self) -> float | None:
        """CPU seconds of all its broker processes so far (None when a node is gone)."""
        per_node = [process_cpu_seconds(n.pid()) for n in self.cluster.nodes]
        return None if any(c is None for c in per_node) else sum(per_node)

    def deleting(self) -> list[str]:
        """The partition directories the brokers still have to delete (a deleted topic's partitions are
        renamed ``<topic>-<partition>.<id>-delete`` and removed ``file.delete.delay.ms`` later)."""
        return sorted(d.name for n in self.cluster.nodes if n.data_dir.is_dir()
                      for d in n.data_dir.iterdir() if d.name.endswith("-delete"))

    def wait_deleted(self, timeout_s: float = 300.0) -> float:
        """Wait until the brokers have deleted every deleted topic's files: the seconds it took. Deleting a
        1,024-partition topic's files costs a broker CPU seconds (unmapping and removing each partition's
        segment and indexes), which must not land in the next measured window."""
        t0 = time.monotonic()
        while (left := self.deleting()) and time.monotonic() - t0 < timeout_s:
            time.sleep(0.5)
        if left:
            raise TimeoutError(f"the brokers still delete {len(left)} partition directories after {timeout_s}s")
        return round(time.monotonic() - t0, 1)

    def request_counts(self) -> dict[str, int]:
        """Requests served so far per API (``EndTxn``, ``InitProducerId``, ...), summed over the nodes and
        the API versions: the brokers' own ``RequestMetrics`` counters, read with Kafka's JmxTool."""
        counts: dict[str, int] = {}
        for node in self.cluster.nodes:
            proc = subprocess.run(
                [*self.cluster.jvm_args(node.home / "unused-log4j2.properties"), "org.apache.kafka.tools.JmxTool",
                 "--jmx-url", node.jmx_url, "--object-name", "kafka.network:type=RequestMetrics,name=RequestsPerSec,*",
                 "--attributes", "Count", "--report-format", "csv", "--one-time"],
                capture_output=True, text=True, timeout=120, check=True)
            counts_of(proc.stdout, counts)
        return counts

    def prepare_input(self, topic: str, partitions: int, count: int, transaction_size: int | None = None) -> dict:
        """Generate ``count`` valid purchases (seed 42: the same records on every target) into a fresh topic,
        ``transaction_size`` purchases per transaction (None: none, no commit markers)."""
        states = ensure_topics(self.admin, [TopicSpec(topic, partitions)])
        stats = generate(self.connection, topic, count, invalid_share=0.0, seed=42, transaction_size=transaction_size)
        entry = {"topic": topic, "count": count, "generate_s": stats.seconds, "transaction_size": transaction_size,
                 **states[topic].to_dict()}
        self.inputs[partitions] = entry
        log.info("input %s on %s: %d purchases in %d partitions (%.1fs)", topic, self.name, count, partitions,
                 stats.seconds)
        return entry

    def topic_durability(self, topics: list[str]) -> dict[str, TopicState]:
        return self.admin.topic_states(topics)

    def describe(self) -> dict:
        """Nodes, where they listen and their heap, for the report."""
        return {"nodes": self.nodes, "bootstrap_servers": self.cluster.bootstrap_servers,
                "heap_per_node": self.cluster.heap}


def stop_leftovers(work: Path) -> None:
    """Stop any Kafka an earlier, interrupted bench run left running under ``work`` (before it is wiped)."""
    for layout in sorted(work.glob("*/cluster.json")):
        size = len(json.loads(layout.read_text())["nodes"])
        leftover = KafkaCluster(home=layout.parent, size=size)
        if any(n.pid() is not None for n in leftover.nodes):
            log.warning("a previous bench Kafka still runs in %s; stopping it", layout.parent)
            leftover.stop()


def counts_of(jmx_csv: str, into: dict[str, int]) -> dict[str, int]:
    """Add JmxTool's ``--report-format csv`` lines of ``RequestsPerSec`` counters to ``into``, by request."""
    for line in jmx_csv.splitlines():
        name, _, value = line.partition(',"')
        if ",request=" not in name or not name.endswith(":Count"):
            continue
        request = name.split(",request=", 1)[1].split(",", 1)[0].split(":", 1)[0]
        into[request] = into.get(request, 0) + int(float(value.rstrip('"')))
    return into
