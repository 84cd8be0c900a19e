"""Authentication and authorization on the real broker: SASL_SSL with SCRAM-SHA-512, the
broker's certificate verified, StandardAuthorizer with least-privilege ACLs per role.

Incomplete security settings, refused before anything connects: tests/unit/kafka/test_acls.py."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from eos_etl.embedded.tls import ensure_broker_tls
from eos_etl.kafka.acls import grant
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.errors import AuthorizationError, BrokerUnreachableError
from eos_etl.kafka.grants import Grant
from eos_etl.shop.generator import generate
from eos_etl_lab.faults.lab import transactional_id
from tests.conftest import OTHER_PASSWORD, OTHER_USER, SASL_PASSWORD, scram_connection, unique
from tests.support.cli import assert_untouched, cli, shop_args


def acls_of(connection: KafkaConnection, principal: str) -> set[tuple]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(connection.client_config())
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    return {(b.restype.name, b.name, b.resource_pattern_type.name, b.operation.name, b.permission_type.name)
            for b in admin.describe_acls(flt, request_timeout=10).result(timeout=15)}


def test_acl_grant_prints_and_creates_exactly_the_pipeline_role(shop_factory, connection):
    shop = shop_factory(partitions=1)
    user = unique("grantee")
    res = cli("acl", "grant", "--principal", user, "--role", "pipeline", "--bootstrap-servers",
              connection.bootstrap_servers, *shop_args(shop))
    assert res.returncode == 0, res.stderr
    t = shop.topics
    stem = f"{shop.transactional_id_prefix}-{t.purchases}-"
    checkpoints = shop.pipeline().checkpoint_topic
    expected = {("TOPIC", t.purchases, "LITERAL", "READ", "ALLOW"),
                *(("TOPIC", out, "LITERAL", op, "ALLOW") for out in (*t.outputs, checkpoints)
                  for op in ("WRITE", "DESCRIBE_CONFIGS", "CREATE")),
                ("TOPIC", checkpoints, "LITERAL", "READ", "ALLOW"),
                ("GROUP", shop.group, "LITERAL", "READ", "ALLOW"),
                # A Spark Connect client's lease groups (engine.publishing.client_lease).
                ("GROUP", f"{shop.group}-lease-", "PREFIXED", "READ", "ALLOW"),
                ("BROKER", "kafka-cluster", "LITERAL", "DESCRIBE_CONFIGS", "ALLOW"),
                ("TRANSACTIONAL_ID", stem, "PREFIXED", "WRITE", "ALLOW"),
                # The one id the pipeline's identity record is written under (engine.identity.lock_id).
                ("TRANSACTIONAL_ID", f"{shop.group}.identity.{t.purchases}", "LITERAL", "WRITE", "ALLOW")}
    # Nothing more: on the cluster only reading broker settings (no IdempotentWrite, no Alter).
    assert acls_of(connection, f"User:{user}") == expected
    printed = [line for line in res.stdout.splitlines() if line.startswith(f"granted User:{user}: ")]
    assert len(printed) == len(expected) and f"WRITE on transactional-id names starting {stem!r}" in res.stdout
    # Granting again changes nothing; adding the validator and watcher roles (which also read the input)
    # adds their own: the watcher reads its own group only.
    again = cli("acl", "grant", "--principal", user, "--role", "pipeline", "--role", "validator", "--role",
                "watcher", "--bootstrap-servers", connection.bootstrap_servers, *shop_args(shop))
    assert again.returncode == 0, again.stderr
    assert acls_of(connection, f"User:{user}") == expected | {
        *(("TOPIC", out, "LITERAL", "READ", "ALLOW") for out in (*t.outputs, checkpoints)),
        ("GROUP", shop.group, "LITERAL", "DESCRIBE", "ALLOW"),
        ("GROUP", f"{shop.group}-arrivals", "LITERAL", "READ", "ALLOW")}


def _denied(exc_or_error) -> int:
    err = exc_or_error.args[0] if isinstance(exc_or_error, KafkaException) else exc_or_error
    return err.code()


def test_another_principal_cannot_read_write_or_fence_the_pipeline(shop_factory, kafka_broker, sasl_connection,
                                                                   connection):
    shop = shop_factory(partitions=1, conn=sasl_connection, roles=("pipeline",))
    generate(connection, shop.topics.purchases, 20, seed=5)
    shop.plan()  # the pipeline's principal plans (and recovers its transactional ids) with its ACLs
    intruder = scram_connection(kafka_broker, OTHER_USER, OTHER_PASSWORD)

    # The intruder is a tenant with a consumer group of its own, so only topic ACLs are at stake.
    intruder_group = unique("intruder-group")
    grant(connection, OTHER_USER, [Grant("group", intruder_group, "READ")])
    seed = Producer(connection.client_config())  # a record in every output, written by the super-user
    for topic in shop.topics.outputs:
        seed.produce(topic, b"{}", partition=0)
    assert seed.flush(15) == 0

    def records_read(conn: KafkaConnection, topic: str, group: str) -> int:
        consumer = Consumer({**conn.client_config(), "group.id": group, "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            return sum(1 for _ in range(12) if (m := consumer.poll(0.5)) is not None and m.error() is None)
        finally:
            consumer.close()

    assert records_read(connection, shop.topics.invoices, unique("g")) == 1  # the probe can see a record
    for topic in shop.topics.outputs:
        # Without Describe the topic does not even exist for it; a fetch gets nothing.
        with pytest.raises(AuthorizationError, match=f"may not use topic {topic!r}"):
            ClusterAdmin(intruder).partitions(topic)
        assert records_read(intruder, topic, intruder_group) == 0
    # Least privilege: the pipeline's own principal writes the outputs but cannot read them either.
    assert records_read(sasl_connection, shop.topics.invoices, shop.group) == 0

    # The intruder can neither take over (and so fence) a pipeline transactional id ...
    producer = Producer({**intruder.client_config(), "transactional.id": transactional_id(shop, 0)})
    with pytest.raises(KafkaException) as exc:
        producer.init_transactions(15)
    assert _denied(exc.value) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # ... nor write an output topic outside a transaction.
    results = []
    plain = Producer({**intruder.client_config(), "enable.idempotence": False})
    plain.produce(shop.topics.invoices, b"forged", on_delivery=lambda err, _msg: results.append(err))
    plain.flush(15)
    assert results and results[0] is not None and results[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Its password is right: it is the ACLs that stop it, not the login.
    assert ClusterAdmin(intruder).broker_count() == 1


def test_a_principal_without_acls_fails_in_one_line_naming_what_is_missing(shop_factory, kafka_broker, admin):
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 10, seed=6)
    intruder = scram_connection(kafka_broker, OTHER_USER, OTHER_PASSWORD)
    res = cli("run-window", "--bootstrap-servers", intruder.bootstrap_servers, "--security-protocol", "SASL_SSL",
              "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", OTHER_USER,
              "--ssl-ca-location", intruder.ssl_ca_location, *shop_args(shop),
              env={"EOS_ETL_KAFKA_PASSWORD": OTHER_PASSWORD})
    assert res.returncode == 2, res.stderr[-2000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"lacks READ on topic {shop.topics.purchases!r}" in errors[0], res.stderr[-2000:]
    assert "acl grant" in errors[0] and "Traceback" not in res.stderr and OTHER_PASSWORD not in res.stderr
    assert_untouched(shop, admin)


def test_an_authorization_failure_is_not_reported_as_bad_credentials(shop_factory, kafka_broker):
    shop = shop_factory(partitions=1)
    intruder = ClusterAdmin(scram_connection(kafka_broker, OTHER_USER, OTHER_PASSWORD))
    with pytest.raises(AuthorizationError, match="no ACL on the consumer group"):
        intruder.committed_offsets(shop.group, shop.topics.purchases, [0])


def test_clients_verify_the_broker_certificate(kafka_broker, tmp_path):
    """A client trusting another CA never completes the TLS handshake, so never sends its password."""
    other_ca = ensure_broker_tls(tmp_path / "other-ca").ca_file
    conn = KafkaConnection(kafka_broker.sasl_bootstrap_servers, "SASL_SSL", "SCRAM-SHA-512", "etl",
                           SASL_PASSWORD, str(other_ca))
    with pytest.raises(BrokerUnreachableError):
        ClusterAdmin(conn, timeout=5, retry_deadline_s=5).check_reachable()
    # The right CA, the same login: accepted.
    ClusterAdmin(scram_connection(kafka_broker, "etl", SASL_PASSWORD)).check_reachable()


def test_scram_user_command_creates_a_login_from_an_environment_variable(kafka_broker, connection):
    """`scram-user` as the super-user: the new login works over SASL_SSL, the password is never printed,
    and setting it again replaces the old password."""
    from eos_etl.kafka.errors import AuthenticationError

    user, first, second = unique("user"), f"pw-{unique('a')}", f"pw-{unique('b')}"
    for password in (first, second):
        res = cli("scram-user", "--bootstrap-servers", connection.bootstrap_servers, "--username", user,
                  "--password-env", "NEW_KAFKA_PASSWORD", env={"NEW_KAFKA_PASSWORD": password})
        assert res.returncode == 0, res.stderr[-2000:]
        assert res.stdout.strip() == f"SCRAM-SHA-512 credentials stored for User:{user}"
        assert password not in res.stdout + res.stderr
    ClusterAdmin(scram_connection(kafka_broker, user, second)).check_reachable()
    with pytest.raises(AuthenticationError):
        ClusterAdmin(scram_connection(kafka_broker, user, first), timeout=5, retry_deadline_s=5).check_reachable()


# -- a run fails fast, naming the permission, for each ACL of the pipeline role it lacks ---------------
def _resource_name(shop, resource: str, name: str | None) -> str:
    if resource == "group":
        return shop.group
    if resource == "transactional-id":
        return shop.pipeline().transactional_id_stem
    return getattr(shop.topics, name)


@pytest.mark.parametrize("resource, name, operation", [
    ("topic", "purchases", "READ"),
    ("topic", "invoices", "WRITE"),
    ("topic", "shipments", "WRITE"),
    ("topic", "dead_letters", "WRITE"),
    ("topic", "invoices", "DESCRIBE_CONFIGS"),
    ("group", None, "READ"),
    ("transactional-id", None, "WRITE"),
])
def test_a_run_missing_one_acl_fails_fast_naming_it(resource, name, operation, shop_factory, kafka_broker,
                                                     connection, admin):
    shop = shop_factory(partitions=1)
    generate(connection, shop.topics.purchases, 20, seed=7)
    lacking = Grant(resource, _resource_name(shop, resource, name), operation, prefixed=resource == "transactional-id")
    grants = shop.pipeline().resources().grants("pipeline")
    assert lacking in grants
    # A principal of its own per case: ACLs of one case never help another.
    user = unique("partial")
    kafka_broker.add_scram_user(user, OTHER_PASSWORD)
    grant(connection, user, [g for g in grants if g != lacking])

    res = cli("run-window", "--bootstrap-servers", kafka_broker.sasl_bootstrap_servers, "--security-protocol",
              "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", user, "--ssl-ca-location",
              str(kafka_broker.ca_file), *shop_args(shop), env={"EOS_ETL_KAFKA_PASSWORD": OTHER_PASSWORD})
    assert res.returncode == 2, res.stderr[-3000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert lacking.name in errors[0] and "acl grant" in errors[0], errors[0]
    if resource != "transactional-id":
        assert str(lacking) in errors[0]  # the exact permission: operation, resource kind and name
    else:  # proven by an init_transactions under the stem, which the broker refuses
        assert "no Write ACL" in errors[0] and "transactional.id" in errors[0]
    assert_untouched(shop, admin)
