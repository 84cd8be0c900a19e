"""Losing a broker while a run starts never crashes it: the real CLI against real brokers with real
SIGKILLs.

Every step before publishing (connect, metadata, committed offsets, fencing,
preflight, planning) uses whichever broker answers, retries retriable errors
within a stated deadline, and otherwise fails with exit code 2 and one
``error:`` line; never a traceback, never a signal. The retry/deadline helper and
unreachable addresses, broker-free: tests/unit/kafka/test_start_phase.py.
"""

from __future__ import annotations

import pytest

from eos_etl.checker import check_shop
from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.host.ports import free_port
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.errors import BrokerLostError
from eos_etl.kafka.topics import ensure_topics
from eos_etl.shop.generator import generate
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings
from eos_etl_lab.faults import Lab
from eos_etl_lab.faults import broker_scenarios as sc
from tests.conftest import unique
from tests.support.start_phase import cli, error_lines


def _cluster_shop(cluster: KafkaCluster, partitions: int = 2) -> ShopSettings:
    connection = KafkaConnection(cluster.bootstrap_servers)
    tag = unique("start")
    topics = ShopTopics(purchases=f"purchases-{tag}", invoices=f"invoices-{tag}", shipments=f"shipments-{tag}",
                        dead_letters=f"purchases-{tag}.dlq")
    shop = ShopSettings(connection=connection, topics=topics, group=f"group-{tag}", transactional_id_prefix=tag)
    ensure_topics(ClusterAdmin(connection), shop.specs(partitions))
    return shop


@pytest.mark.spark
@pytest.mark.slow
def test_a_bootstrap_list_naming_a_dead_node_still_works(healthy_cluster):
    shop = _cluster_shop(healthy_cluster)
    generate(shop.connection, shop.topics.purchases, 300, seed=18)
    # The first node of the list is dead, and it is still in the metadata (KRaft fences it after
    # 9 s): connect, preflight's broker config, offsets, fencing and publishing must use the others.
    dead = healthy_cluster.nodes[0]
    dead.kill()
    try:
        t = shop.topics
        res = cli("run-window", "--bootstrap-servers", healthy_cluster.bootstrap_servers, "--input-topic",
                  t.purchases, "--invoices-topic", t.invoices, "--shipments-topic", t.shipments, "--dlq-topic",
                  t.dead_letters, "--group", shop.group, "--transactional-id-prefix", shop.transactional_id_prefix,
                  "--compact")
        assert res.returncode == 0, res.stderr[-3000:]
        assert "Traceback" not in res.stderr and not error_lines(res.stderr)
        report = check_shop(shop)
        assert report.ok, report.to_dict()
    finally:
        dead.start()


# -- the scenario, fast: broker SIGKILLs in a run's first seconds --------------------------------------
def _log_tail(result) -> str:
    """The failed run's last lines (the scenario keeps its log), so a failure shows its traceback."""
    from pathlib import Path

    path = result.detail.rsplit(" log=", 1)[1] if " log=" in result.detail else ""
    return "\n".join(Path(path).read_text().splitlines()[-40:]) if path else ""


def assert_start_phase_passed(result):
    assert not result.error, result.error
    assert result.kills == 1
    assert result.violations == {}, (result, _log_tail(result))
    assert result.lso_settled


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("seed", [1])  # more seeds: make soak-cluster
def test_broker_killed_while_a_run_starts_on_three_nodes(healthy_cluster, seed, tmp_path):
    lab = Lab(KafkaConnection(healthy_cluster.bootstrap_servers), broker=healthy_cluster, log_dir=tmp_path)
    assert_start_phase_passed(sc.start_phase_broker_kill(lab, seed, records=300))


@pytest.mark.spark
@pytest.mark.slow
def test_the_only_broker_killed_while_a_run_starts(tmp_path):
    # A broker of its own: the session broker must not be killed under other tests.
    broker = KafkaCluster(home=tmp_path / "kafka", port=free_port())
    broker.start()
    try:
        # Killed in its first 3 s: before Spark starts, so the run must fail with one clear error or ride through.
        result = sc.start_phase_broker_kill(Lab(KafkaConnection(broker.bootstrap_servers), broker=broker,
                                                log_dir=tmp_path), 3,
                                            records=300, kill_within_s=3.0)
        # In this process too: the broker answered, then died. That is a runtime failure (exit code 1),
        # not the configuration error (exit code 2) of a list that never answered.
        admin = ClusterAdmin(KafkaConnection(broker.bootstrap_servers), timeout=1.0, retry_deadline_s=2.0)
        admin.check_reachable()
        broker.kill()
        with pytest.raises(BrokerLostError, match=f"cannot reach Kafka at {broker.bootstrap_servers} .* any more"
                           ) as lost:
            admin.check_reachable()
        assert lost.value.exit_code == 1
    finally:
        broker.stop()
    assert_start_phase_passed(result)
    assert "exit=0" in result.detail or "cannot reach Kafka" in result.detail, result.detail
