"""Least-privilege ACLs for a pipeline's principals, and granting them.

The brokers run Kafka's ``StandardAuthorizer`` with no access where no ACL is
found. Two roles cover everything the product does with a principal:

* **pipeline** (plan and run windows): Read on the input topic (fetch, list
  offsets); Write on each output topic, DescribeConfigs on them (the run
  checks their ``min.insync.replicas``) and Create (a replay creates its
  versioned output topics; on a topic that exists it allows nothing); the same
  on the pipeline's checkpoint topic plus Read (its records are the position
  when the group's offsets expired; the run checks its ``cleanup.policy``);
  Read on the consumer group (the committed offsets, and the offsets sent in
  each transaction); DescribeConfigs on the cluster (read-only: the run checks
  the brokers' ``transaction.max.timeout.ms`` and ``offsets.retention.minutes``
  up front; sensitive broker settings are never returned); Write on the
  transactional ids, as one PREFIXED ACL on ``<prefix>-<input topic>-``.
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

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from ..errors import ConfigurationError
from .connection import KafkaConnection
from .errors import KafkaSetupError

ROLES = ("pipeline", "validator", "watcher")
#: The name of Kafka's one cluster resource in ACLs.
CLUSTER_NAME = "kafka-cluster"
#: The watcher's consumer group is the pipeline's group name plus this.
WATCH_GROUP_SUFFIX = "-arrivals"


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

    def grants(self, role: str) -> list[Grant]:
        if role == "pipeline":
            return [Grant("topic", self.input_topic, "READ"),
                    *(Grant("topic", t, op) for t in (*self.output_topics, self.checkpoint_topic)
                      for op in ("WRITE", "DESCRIBE_CONFIGS", "CREATE")),
                    Grant("topic", self.checkpoint_topic, "READ"),
                    Grant("group", self.group, "READ"),
                    Grant("cluster", CLUSTER_NAME, "DESCRIBE_CONFIGS"),
                    Grant("transactional-id", self.transactional_id_stem, "WRITE", prefixed=True)]
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


def missing_grants(connection: KafkaConnection, needs: list[Grant], timeout: float = 10.0) -> list[Grant]:
    """The topic and group grants of ``needs`` that the connection's principal lacks, by the
    brokers' own account (DescribeTopics / DescribeGroups with authorized operations).

    A topic it may not even describe lacks Read and Write (either would allow Describe;
    whether DescribeConfigs is granted cannot be told then), a group it may not describe
    lacks everything asked; a topic or group that does not exist is not this check's
    business. Raises the client's ``KafkaException`` for any other failure.
    """
    admin = AdminClient({**connection.client_config(), "log_level": 0})
    allowed: dict[tuple[str, str], set[str] | None] = {}
    denied_codes = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)
    undescribable = {"topic": {"DESCRIBE_CONFIGS"}, "group": set()}  # what is still granted, for all we know

    def collect(kind: str, futures: dict) -> None:
        for name, fut in futures.items():
            try:
                ops = fut.result(timeout=timeout + 5).authorized_operations
                allowed[(kind, name)] = None if ops is None else {op.name for op in ops}
            except KafkaException as exc:
                code = exc.args[0].code()
                if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    allowed[(kind, name)] = None
                    continue
                if code not in denied_codes:
                    raise
                allowed[(kind, name)] = undescribable[kind]

    topics = sorted({g.name for g in needs if g.resource == "topic" and not g.prefixed})
    groups = sorted({g.name for g in needs if g.resource == "group" and not g.prefixed})
    if topics:
        collect("topic", admin.describe_topics(TopicCollection(topics), include_authorized_operations=True,
                                               request_timeout=timeout))
    if groups:
        collect("group", admin.describe_consumer_groups(groups, include_authorized_operations=True,
                                                        request_timeout=timeout))
    # None: the broker did not say (no authorizer answers with every operation); never a denial.
    return [g for g in needs if (ops := allowed.get((g.resource, g.name))) is not None and g.operation not in ops]


def principal_name(user: str) -> str:
    """``User:<name>`` (SASL user names are the principals' names)."""
    return user if user.startswith("User:") else f"User:{user}"


def _binding(principal: str, grant: Grant):
    resource = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP, "cluster": ResourceType.BROKER,
                "transactional-id": ResourceType.TRANSACTIONAL_ID}[grant.resource]
    pattern = ResourcePatternType.PREFIXED if grant.prefixed else ResourcePatternType.LITERAL
    return AclBinding(resource, grant.name, pattern, principal, "*", AclOperation[grant.operation],
                      AclPermissionType.ALLOW)


def grant(admin_connection: KafkaConnection, principal: str, grants: list[Grant], timeout: float = 15.0) -> None:
    """Create the ACLs (idempotent: an existing identical ACL stays as it is).

    ``admin_connection`` must be a super-user's (or hold Alter on the cluster)."""
    admin = AdminClient({**admin_connection.client_config(), "log_level": 0})
    # Roles overlap (both read the input topic); the Admin API refuses duplicates in one request.
    bindings = [_binding(principal_name(principal), g) for g in dict.fromkeys(grants)]
    try:
        for fut in admin.create_acls(bindings, request_timeout=timeout).values():
            fut.result(timeout=timeout + 5)
    except KafkaException as exc:
        raise KafkaSetupError(f"could not create the ACLs of {principal_name(principal)} at "
                              f"{admin_connection.bootstrap_servers}: {exc.args[0].str()}") from exc
