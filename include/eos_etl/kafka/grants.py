"""Least-privilege ACLs for a pipeline's principals: what each role needs (data only; granting and
checking them is :mod:`.acls`).

The brokers run Kafka's ``StandardAuthorizer`` with no access where no ACL is
found. Two roles cover everything the product does with a principal:

* **pipeline** (plan and run windows): Read on the input topic (fetch, list
  offsets); Write on each output topic, DescribeConfigs on them (the run
  checks their ``min.insync.replicas``) and Create (a replay creates its
  versioned output topics; on a topic that exists it allows nothing); the same
  on the pipeline's checkpoint topic plus Read (its records are the position
  when the group's offsets expired; the run checks its ``cleanup.policy``);
  Read on the consumer group (the committed offsets, and the offsets sent in
  each transaction), and on the groups starting ``<group>-lease-`` (:data:`LEASE_GROUP_INFIX`: on
  the Spark Connect route the client holds a lease group of its own, which its tasks describe
  before each commit, ``engine.publishing.client_lease``); DescribeConfigs on the cluster (read-only: the run checks
  the brokers' ``transaction.max.timeout.ms`` and ``offsets.retention.minutes``
  up front; sensitive broker settings are never returned); Write on the
  transactional ids, as one PREFIXED ACL on ``<prefix>-<input topic>-``, and on the one literal id
  its identity record is written under (``<group>.identity.<input topic>``: whatever prefix a run names,
  the writers of the record fence each other).
  IdempotentWrite on the cluster is *not* granted: since Kafka 3.0 (KIP-679) a
  transactional producer's InitProducerId is authorised by Write on its
  transactional id, so the permission would only widen what a stolen login can do.
* **validator** (data-quality validation): Read on the input topic, the
  output topics and the checkpoint topic, Describe on the group (its committed
  offsets).
* **watcher** (event-driven runs: the consumer that only notices arrivals):
  Read on the input topic and on its own group, the pipeline's group name plus
  ``-arrivals`` (:data:`WATCH_GROUP_SUFFIX`). Nothing of the pipeline's group.

Anything else is denied: another principal can neither read the outputs nor
use (and so fence) the pipeline's transactional ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError

ROLES = ("pipeline", "validator", "watcher")
#: The name of Kafka's one cluster resource in ACLs.
CLUSTER_NAME = "kafka-cluster"
#: The watcher's consumer group is the pipeline's group name plus this.
WATCH_GROUP_SUFFIX = "-arrivals"
#: A Spark Connect client's lease group is the pipeline's group name plus this, its run id and more.
LEASE_GROUP_INFIX = "-lease-"


@dataclass(frozen=True)
class Grant:
    """One allowed operation on one resource (a literal name, or every name with a prefix)."""

    resource: str  # topic | group | cluster | transactional-id
    name: str
    operation: str  # READ | WRITE | CREATE | DESCRIBE | DESCRIBE_CONFIGS
    prefixed: bool = False

    def __str__(self) -> str:
        what = f"names starting {self.name!r}" if self.prefixed else repr(self.name)
        return f"{self.operation} on {self.resource} {what}"


@dataclass(frozen=True)
class PipelineResources:
    """The Kafka resources one pipeline uses (generic: no domain in here)."""

    input_topic: str
    output_topics: tuple[str, ...]
    group: str
    transactional_id_stem: str  # every transactional id of the pipeline starts with it
    checkpoint_topic: str  # written in every transaction, like the outputs; read when the group's offsets expired
    identity_transactional_id: str = ""  # the one id the pipeline's identity record is written under

    def grants(self, role: str) -> list[Grant]:
        if role == "pipeline":
            return [Grant("topic", self.input_topic, "READ"),
                    *(Grant("topic", t, op) for t in (*self.output_topics, self.checkpoint_topic)
                      for op in ("WRITE", "DESCRIBE_CONFIGS", "CREATE")),
                    Grant("topic", self.checkpoint_topic, "READ"),
                    Grant("group", self.group, "READ"),
                    Grant("group", self.group + LEASE_GROUP_INFIX, "READ", prefixed=True),
                    Grant("cluster", CLUSTER_NAME, "DESCRIBE_CONFIGS"),
                    Grant("transactional-id", self.transactional_id_stem, "WRITE", prefixed=True),
                    *([Grant("transactional-id", self.identity_transactional_id, "WRITE")]
                      if self.identity_transactional_id else [])]
        if role == "validator":
            return [*(Grant("topic", t, "READ") for t in (self.input_topic, *self.output_topics,
                                                            self.checkpoint_topic)),
                    Grant("group", self.group, "DESCRIBE")]
        if role == "watcher":
            return [Grant("topic", self.input_topic, "READ"), Grant("group", self.watch_group, "READ")]
        raise ConfigurationError(f"unknown role {role!r}: one of {', '.join(ROLES)}")

    @property
    def watch_group(self) -> str:
        return self.group + WATCH_GROUP_SUFFIX

    def needed_to_run(self) -> list[Grant]:
        """What a run checks with :func:`missing_grants`: the pipeline role without Create
        (replays only), the transactional ids (no API describes them: the run proves their
        Write with an ``init_transactions`` instead) and the cluster's DescribeConfigs (only
        warnings need it: the run goes on without it)."""
        return [g for g in self.grants("pipeline")
                if g.operation != "CREATE" and g.resource not in ("transactional-id", "cluster")]
