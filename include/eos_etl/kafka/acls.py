"""Granting a pipeline's ACLs and checking a principal has them, through Kafka's admin API
(which grants each role needs: :mod:`.grants`)."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from .connection import KafkaConnection
from .errors import KafkaSetupError
from .grants import Grant

#: librdkafka's own timeout for the DescribeGroups requests, never reached: the check waits ``timeout``
#: itself and destroys its client first. A request to a group coordinator that times out before the
#: coordinator is found makes librdkafka abort the process (``rd_kafka_enq_once_del_source_return``
#: assertion) once it is found, if the client still lives: with the coordinator's broker dead, at the
#: group's fail-over (librdkafka#4605, docs/librdkafka-enq-once-abort.md). Destroying the client with
#: the request still pending is safe.
_GROUP_REQUEST_TIMEOUT_S = 3600.0


def missing_grants(connection: KafkaConnection, needs: list[Grant], timeout: float = 10.0) -> list[Grant]:
    """The topic and group grants of ``needs`` that the connection's principal lacks, by the
    brokers' own account (DescribeTopics / DescribeGroups with authorized operations).

    A topic it may not even describe lacks Read and Write (either would allow Describe;
    whether DescribeConfigs is granted cannot be told then), a group it may not describe
    lacks everything asked; a topic or group that does not exist is not this check's
    business. Raises the client's ``KafkaException`` for any other failure, ``TimeoutError``
    when a group's coordinator does not answer within ``timeout``.
    """
    allowed: dict[tuple[str, str], set[str] | None] = {}
    denied_codes = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)
    undescribable = {"topic": {"DESCRIBE_CONFIGS"}, "group": set()}  # what is still granted, for all we know

    def collect(kind: str, futures: dict, wait_s: float) -> None:
        for name, fut in futures.items():
            try:
                ops = fut.result(timeout=wait_s).authorized_operations
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
    # A client of its own, destroyed on the way out whatever happened (a request's exception keeps
    # this frame alive in its traceback): its group requests must never reach their own timeout.
    admin = AdminClient({**connection.client_config(), "log_level": 0})
    try:
        if topics:
            collect("topic", admin.describe_topics(TopicCollection(topics), include_authorized_operations=True,
                                                   request_timeout=timeout), timeout + 5)
        if groups:
            # Past ``timeout`` the future's TimeoutError, with the request still pending.
            collect("group", admin.describe_consumer_groups(groups, include_authorized_operations=True,
                                                            request_timeout=_GROUP_REQUEST_TIMEOUT_S), timeout)
    finally:
        del admin
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
