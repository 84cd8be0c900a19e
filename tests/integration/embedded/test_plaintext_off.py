"""The embedded broker with PLAINTEXT turned off (EOS_ETL_KAFKA_PLAINTEXT=off): no listener without TLS.

The admin and inter-broker listener and the controller listener then speak TLS
and require a client certificate from the home's CA; the super-users are the
admin's certificate and the brokers' own, nobody anonymous. The pipeline runs
over SASL_SSL as before. A real broker, the real CLI, the independent checker.
"""

from __future__ import annotations

import dataclasses
import json
import uuid

import pytest

from eos_etl.checker import check_shop
from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.host.ports import free_port
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.errors import BrokerUnreachableError
from eos_etl.shop.generator import generate
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings
from tests.support.cli import cli, shop_args

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(params=[1, 3], ids=["one-node", "three-nodes"])
def tls_only_broker(request, tmp_path_factory):
    """One node, or three (replication factor 3, min.insync.replicas 2; inter-broker and controller
    traffic then also over mutual TLS)."""
    password = f"pw-{uuid.uuid4().hex}"
    broker = KafkaCluster(home=tmp_path_factory.mktemp("kafka-tls-only"), size=request.param,
                          port=free_port() if request.param == 1 else None, sasl_users={"etl": password},
                          plaintext=False)
    try:
        broker.start()
        yield broker, password
    finally:
        broker.stop()


def test_a_window_runs_exactly_once_with_no_plaintext_listener(tls_only_broker):
    broker, password = tls_only_broker
    props = broker.nodes[0].properties()
    protocols = {item.split(":")[1] for item in props["listener.security.protocol.map"].split(",")}
    assert protocols == {"SSL", "SASL_SSL"}, props["listener.security.protocol.map"]
    assert "ANONYMOUS" not in props["super.users"]
    assert props["listener.name.internal.ssl.client.auth"] == props["listener.name.controller.ssl.client.auth"] \
        == "required"

    # Nobody reaches the admin listener without TLS, or with TLS but without the admin's certificate.
    for stranger in (KafkaConnection(broker.bootstrap_servers),
                     KafkaConnection(broker.bootstrap_servers, "SSL", ssl_ca_location=str(broker.ca_file))):
        with pytest.raises(BrokerUnreachableError):
            ClusterAdmin(stranger, timeout=5, retry_deadline_s=5).check_reachable()

    # The admin, with its client certificate: topics and ACLs through the CLI.
    admin = broker.admin_connection()
    admin_args = ["--bootstrap-servers", broker.bootstrap_servers, "--security-protocol", "SSL",
                  "--ssl-ca-location", str(broker.ca_file), "--ssl-client-pem", admin.ssl_client_pem]
    tag = uuid.uuid4().hex[:8]
    topics = ShopTopics(purchases=f"purchases-{tag}", invoices=f"invoices-{tag}", shipments=f"shipments-{tag}",
                        dead_letters=f"purchases-{tag}.dlq")
    etl = KafkaConnection(broker.sasl_bootstrap_servers, "SASL_SSL", "SCRAM-SHA-512", "etl", password,
                          str(broker.ca_file))
    shop = ShopSettings(connection=etl, topics=topics, group=f"shop-{tag}", transactional_id_prefix=f"shop-{tag}")
    made = cli("create-topics", *admin_args, *shop_args(shop), "--partitions", "2")
    assert made.returncode == 0, made.stderr[-2000:]
    durability = (3, 2) if broker.size == 3 else (1, 1)
    states = json.loads(made.stdout)
    assert {(s["replication_factor"], s["min_insync_replicas"]) for s in states.values()} == {durability}, states
    granted = cli("acl", "grant", "--principal", "etl", "--role", "pipeline", *admin_args, *shop_args(shop))
    assert granted.returncode == 0, granted.stderr[-2000:]
    stats = generate(admin, topics.purchases, 400, invalid_share=0.1, seed=5, transaction_size=100,
                     abort_share=0.25)
    ends = {p: o.last_stable for p, o in ClusterAdmin(admin).settled_offsets(topics.purchases, [0, 1]).items()}

    # The pipeline over SASL_SSL with its role's ACLs only, then the checker as the admin.
    run = cli("run-window", "--bootstrap-servers", etl.bootstrap_servers, "--security-protocol", "SASL_SSL",
              "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "etl", "--ssl-ca-location", str(broker.ca_file),
              *shop_args(shop), "--chunk-records", "100", "--compact", env={"EOS_ETL_KAFKA_PASSWORD": password})
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert (summary["records_read"], summary["invoices"], summary["dead_letters"]) == (
        stats.produced, stats.valid, sum(stats.invalid.values()))
    report = check_shop(dataclasses.replace(shop, connection=admin), expected_ends=ends)
    assert report.ok, report.to_dict()
