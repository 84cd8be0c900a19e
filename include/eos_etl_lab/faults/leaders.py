"""Who leads what on a running cluster: the questions a fault asks before it strikes.

A broker fault matters only on the node that holds the role under test, so the
fault scenarios ask the cluster's metadata (from its live nodes) for the leader
of a partition, its replicas and in-sync replicas, and the coordinator of a
transactional.id or a consumer group: the leader of the internal-topic
partition Kafka maps that id to. The active KRaft controller is
:meth:`~eos_etl.embedded.kafka_cluster.KafkaCluster.active_controller` (``status``
shows it too).
"""

from __future__ import annotations

from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.errors import StackError

TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(key: str, partitions: int) -> int:
    """The internal-topic partition Kafka maps a transactional.id or group id to.

    ``Utils.abs(key.hashCode()) % partitions`` (TransactionStateManager.partitionFor,
    GroupCoordinatorService.partitionFor); Utils.abs maps Integer.MIN_VALUE to 0.
    """
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def leader(cluster: KafkaCluster, topic: str, partition: int, timeout: float = 10.0) -> int | None:
    """The node leading ``topic[partition]`` now (None while it has no leader)."""
    md = cluster.metadata(topic, timeout)
    t = md.topics.get(topic)
    if t is None or partition not in t.partitions:
        raise StackError(f"{topic}[{partition}] does not exist")
    node = t.partitions[partition].leader
    return node if node >= 0 else None


def replicas(cluster: KafkaCluster, topic: str, partition: int) -> tuple[list[int], list[int]]:
    """(replicas, in-sync replicas) of ``topic[partition]``."""
    p = cluster.metadata(topic).topics[topic].partitions[partition]
    return list(p.replicas), list(p.isrs)


def _coordinator(cluster: KafkaCluster, internal_topic: str, key: str, timeout: float) -> int | None:
    md = cluster.metadata(internal_topic, timeout)
    t = md.topics.get(internal_topic)
    if t is None or not t.partitions:
        return None  # created lazily: no transaction (or group) has used the cluster yet
    return leader(cluster, internal_topic, coordinator_partition(key, len(t.partitions)), timeout)


def transaction_coordinator(cluster: KafkaCluster, transactional_id: str, timeout: float = 10.0) -> int | None:
    """The node coordinating ``transactional_id``: the leader of its __transaction_state partition."""
    return _coordinator(cluster, TRANSACTION_STATE_TOPIC, transactional_id, timeout)


def group_coordinator(cluster: KafkaCluster, group: str, timeout: float = 10.0) -> int | None:
    """The node coordinating ``group``: the leader of its __consumer_offsets partition."""
    return _coordinator(cluster, CONSUMER_OFFSETS_TOPIC, group, timeout)
