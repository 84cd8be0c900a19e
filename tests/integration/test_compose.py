"""The scripts of docker/ run against a real broker: kafka-init sets up a working least-privilege login,
and the TLS script makes certificates a real broker and a TLS client accept (its keystore served by the
broker; a TLS handshake with its Connect certificate).

docker-compose.yaml and the rest of docker/, checked without starting anything: tests/unit/test_compose.py.
"""

from __future__ import annotations

import os
import socket
import ssl
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support import ROOT


def test_kafka_init_script_sets_up_a_working_least_privilege_login(kafka_broker):
    """docker/kafka/init-kafka.sh, run as is against a real broker's super-user listener: the user logs in
    over SASL_SSL, the shop's topics exist, and the user holds exactly the pipeline, validator and watcher ACLs."""
    from eos_etl.kafka.admin import ClusterAdmin
    from eos_etl.kafka.connection import KafkaConnection
    from eos_etl.shop.schema import ShopTopics
    from eos_etl.shop.settings import ShopSettings
    from tests.conftest import unique
    from tests.integration.kafka.test_acls import acls_of

    user, password = unique("compose-etl"), f"pw-{unique('x')}"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "EOS_ETL_BOOTSTRAP_SERVERS": kafka_broker.bootstrap_servers, "EOS_ETL_PIPELINE_USER": user,
           "EOS_ETL_PIPELINE_PASSWORD": password, "EOS_ETL_PARTITIONS": "2"}
    for name in ("EOS_ETL_KAFKA_SECURITY_PROTOCOL", "EOS_ETL_KAFKA_SASL_MECHANISM", "EOS_ETL_KAFKA_USERNAME",
                 "EOS_ETL_KAFKA_PASSWORD", "EOS_ETL_KAFKA_SSL_CA_LOCATION"):
        env.pop(name, None)
    for _ in range(2):  # idempotent: it runs on every `docker compose up`
        proc = subprocess.run(["bash", str(ROOT / "docker" / "kafka" / "init-kafka.sh")], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        assert password not in proc.stdout + proc.stderr
    login = KafkaConnection(kafka_broker.sasl_bootstrap_servers, "SASL_SSL", "SCRAM-SHA-512", user, password,
                            str(kafka_broker.ca_file))
    ClusterAdmin(login).check_reachable()
    topics = ShopTopics()
    admin = ClusterAdmin(KafkaConnection(kafka_broker.bootstrap_servers))
    assert {t: len(admin.partitions(t)) for t in (topics.purchases, topics.invoices, topics.shipments,
                                                 topics.dead_letters)} == {
        topics.purchases: 2, topics.invoices: 2, topics.shipments: 2, topics.dead_letters: 1}
    resources = ShopSettings(connection=login).pipeline().resources()
    kinds = {"cluster": "BROKER"}  # confluent-kafka's name of Kafka's cluster resource
    expected = {(kinds.get(g.resource, g.resource.upper().replace("-", "_")), g.name,
                 "PREFIXED" if g.prefixed else "LITERAL",
                 g.operation, "ALLOW") for role in ("pipeline", "validator", "watcher") for g in resources.grants(role)}
    assert acls_of(KafkaConnection(kafka_broker.bootstrap_servers), f"User:{user}") == expected


# -- TLS --------------------------------------------------------------------------------------------
def _make_tls(tmp_path: Path) -> tuple[dict, subprocess.CompletedProcess]:
    dirs = {"KAFKA_SECRETS_DIR": tmp_path / "kafka", "SPARK_CONNECT_SECRETS_DIR": tmp_path / "connect",
            "CA_DIR": tmp_path / "ca"}
    env = {**os.environ, **{k: str(v) for k, v in dirs.items()}, "KAFKA_TLS_HOSTS": "127.0.0.1,localhost",
           "SPARK_CONNECT_TLS_HOSTS": "spark-connect,localhost"}
    proc = subprocess.run(["bash", str(ROOT / "docker" / "tls" / "make-tls.sh")], env=env, capture_output=True,
                          text=True, timeout=120)
    return dirs, proc


def _serve_tls_once(pem: Path, port_out: list, ready: threading.Event) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pem)
    context.set_alpn_protocols(["h2"])
    with socket.create_server(("127.0.0.1", 0)) as server:
        port_out.append(server.getsockname()[1])
        ready.set()
        server.settimeout(30)
        for _ in range(2):
            conn, _ = server.accept()
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(tls.selected_alpn_protocol().encode())
            except (ssl.SSLError, OSError):
                pass  # the client that does not trust this CA


@pytest.mark.integration
def test_tls_script_makes_certificates_a_real_broker_and_a_tls_client_accept(tmp_path):
    """docker/tls/make-tls.sh, run as is: a Kafka broker serves SASL_SSL with its PEM keystore and a
    client verifying against ca.pem (host name included) logs in; the Spark Connect certificate
    passes a TLS handshake for `spark-connect` with ALPN h2 (what gRPC requires); a client trusting
    another CA gets neither."""
    from eos_etl.embedded.kafka_cluster import KafkaCluster
    from eos_etl.embedded.tls import ensure_broker_tls
    from eos_etl.host.ports import free_port
    from eos_etl.kafka.admin import ClusterAdmin
    from eos_etl.kafka.connection import KafkaConnection
    from eos_etl.kafka.errors import BrokerUnreachableError

    dirs, made = _make_tls(tmp_path)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    broker_pem, connect_pem, ca = (dirs["KAFKA_SECRETS_DIR"] / "broker.pem",
                                   dirs["SPARK_CONNECT_SECRETS_DIR"] / "server.pem", dirs["CA_DIR"] / "ca.pem")
    assert [stat.S_IMODE(p.stat().st_mode) for p in (broker_pem, connect_pem, ca)] == [0o400, 0o400, 0o444]
    assert not list(tmp_path.rglob("*.key")), "the CA's key must not outlive the script"
    again = subprocess.run(["bash", str(ROOT / "docker" / "tls" / "make-tls.sh")], capture_output=True, text=True,
                           env={**os.environ, **{k: str(v) for k, v in dirs.items()}}, timeout=60)
    assert again.returncode == 0 and "keeping" in again.stdout
    other_ca = ensure_broker_tls(tmp_path / "other-ca").ca_file

    # Spark Connect's endpoint: a TLS server with its certificate; a client that checks the name.
    port, ready = [], threading.Event()
    server = threading.Thread(target=_serve_tls_once, args=(connect_pem, port, ready), daemon=True)
    server.start()
    assert ready.wait(10)
    for trusted, expect_ok in ((ca, True), (other_ca, False)):
        client = ssl.create_default_context(cafile=str(trusted))
        client.set_alpn_protocols(["h2"])
        with socket.create_connection(("127.0.0.1", port[0]), timeout=10) as raw:
            try:
                with client.wrap_socket(raw, server_hostname="spark-connect") as tls:
                    assert expect_ok and tls.recv(2) == b"h2"
            except ssl.SSLCertVerificationError:
                assert not expect_ok
    server.join(10)

    user, user_password = "etl", "compose-tls-check-password"
    broker = KafkaCluster(home=tmp_path / "kafka-home", port=free_port(), sasl_users={user: user_password},
                          overrides={"listener.name.sasl_ssl.ssl.keystore.type": "PEM",
                                     "listener.name.sasl_ssl.ssl.keystore.location": str(broker_pem)})
    broker.start()
    try:
        def login(trusted: Path) -> ClusterAdmin:
            return ClusterAdmin(KafkaConnection(broker.sasl_bootstrap_servers, "SASL_SSL", "SCRAM-SHA-512", user,
                                                user_password, str(trusted)), timeout=5, retry_deadline_s=10)

        login(ca).check_reachable()
        with pytest.raises(BrokerUnreachableError):  # another CA did not sign it: no handshake, no password sent
            login(other_ca).check_reachable()
    finally:
        broker.stop()
