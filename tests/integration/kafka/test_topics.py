"""Topics the project creates are as durable as the cluster allows, and existing ones are checked.

Real brokers: the session's three-node cluster (RF 3 / min ISR 2 by default)
and the single node (1 / 1). ``create-topics`` runs as the real CLI. The defaults per broker count,
broker-free: tests/unit/kafka/test_topics.py.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from eos_etl.engine.planning.preflight import preflight
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.topics import Durability, durability_warnings
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings
from eos_etl_lab.faults.leaders import replicas
from tests.conftest import unique


def create_topics(bootstrap: str, tag: str, *extra: str) -> subprocess.CompletedProcess:
    t = ShopTopics(f"purchases-{tag}", f"invoices-{tag}", f"shipments-{tag}", f"purchases-{tag}.dlq")
    return subprocess.run(
        [sys.executable, "-m", "eos_etl", "--log-level", "WARNING", "create-topics", "--bootstrap-servers", bootstrap,
         "--input-topic", t.purchases, "--invoices-topic", t.invoices, "--shipments-topic", t.shipments,
         "--dlq-topic", t.dead_letters, "--group", f"group-{tag}", *extra],
        capture_output=True, text=True, timeout=120,
    )


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error:")]


def test_create_topics_on_three_brokers_gives_rf3_min_isr2_and_says_so(kafka_cluster):
    tag = unique("dur")
    proc = create_topics(kafka_cluster.bootstrap_servers, tag, "--partitions", "2")
    assert proc.returncode == 0, proc.stderr
    assert "3 live broker(s): replication factor 3, min.insync.replicas 2" in proc.stderr
    states = json.loads(proc.stdout)
    assert len(states) == 5
    for name, st in states.items():
        assert (st["replication_factor"], st["min_insync_replicas"], st["created"]) == (3, 2, True), name
        assert st["partitions"] == (1 if name.endswith(".dlq") else 2)
    # The pipeline's checkpoint topic: one partition per input partition, never deleted by time.
    assert states[f"group-{tag}.checkpoints"]["cleanup_policy"] == "compact"
    assert {st["cleanup_policy"] for name, st in states.items() if not name.endswith(".checkpoints")} == {"delete"}
    # What the cluster itself reports, not what the command believes.
    for p in (0, 1):
        assigned, isr = replicas(kafka_cluster, f"invoices-{tag}", p)
        assert len(assigned) == 3 and len(isr) == 3
    # Running it again accepts the topics it made.
    again = create_topics(kafka_cluster.bootstrap_servers, tag, "--partitions", "2")
    assert again.returncode == 0, again.stderr
    assert not any(st["created"] for st in json.loads(again.stdout).values())


def test_create_topics_on_one_broker_stays_1_1(kafka_broker):
    proc = create_topics(kafka_broker.bootstrap_servers, unique("dur1"), "--partitions", "1")
    assert proc.returncode == 0, proc.stderr
    assert "1 live broker(s): replication factor 1, min.insync.replicas 1" in proc.stderr
    assert {(st["replication_factor"], st["min_insync_replicas"])
            for st in json.loads(proc.stdout).values()} == {(1, 1)}


def test_existing_topics_that_fall_short_are_one_clear_error_unless_allowed(kafka_cluster):
    tag = unique("weak")
    admin = ClusterAdmin(KafkaConnection(kafka_cluster.bootstrap_servers))
    # A user's earlier, unreplicated outputs and an input with another partition count.
    admin.create_topics({f"invoices-{tag}": 2, f"shipments-{tag}": 2}, replication_factor=1,
                        config={"min.insync.replicas": "1"})
    admin.create_topics({f"purchases-{tag}": 3})
    proc = create_topics(kafka_cluster.bootstrap_servers, tag, "--partitions", "2")
    assert proc.returncode == 2, proc.stderr
    [error] = error_lines(proc)
    assert "Traceback" not in proc.stderr
    assert f"invoices-{tag}: replication factor 1 < 3, min.insync.replicas 1 < 2" in error
    assert f"purchases-{tag}: 3 partitions, not 2" in error and "--allow-existing" in error
    allowed = create_topics(kafka_cluster.bootstrap_servers, tag, "--partitions", "2", "--allow-existing")
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout)[f"invoices-{tag}"]["replication_factor"] == 1  # kept as it was


def test_replication_factor_above_the_live_brokers_is_one_clear_error(kafka_cluster):
    tag = unique("rf4")
    proc = create_topics(kafka_cluster.bootstrap_servers, tag, "--replication-factor", "4")
    assert proc.returncode == 2
    [error] = error_lines(proc)
    assert "replication factor 4 is more than the 3 live brokers" in error
    admin = ClusterAdmin(KafkaConnection(kafka_cluster.bootstrap_servers))
    assert admin.topic_states([f"purchases-{tag}"]) == {}, "nothing may be created"
    bad_isr = create_topics(kafka_cluster.bootstrap_servers, tag, "--replication-factor", "2",
                            "--min-insync-replicas", "3")
    assert bad_isr.returncode == 2 and len(error_lines(bad_isr)) == 1


def test_run_preflight_warns_once_about_an_unreplicated_output(kafka_cluster, caplog):
    tag = unique("warn")
    conn = KafkaConnection(kafka_cluster.bootstrap_servers)
    topics = ShopTopics(f"purchases-{tag}", f"invoices-{tag}", f"shipments-{tag}", f"purchases-{tag}.dlq")
    admin = ClusterAdmin(conn)
    admin.create_topics({topics.purchases: 1, topics.invoices: 1, topics.dead_letters: 1})
    admin.create_topics({topics.shipments: 1}, replication_factor=1, config={"min.insync.replicas": "1"})
    shop = ShopSettings(conn, topics, group=tag, transactional_id_prefix=tag)
    admin.create_topics({shop.pipeline().checkpoint_topic: 1}, config={"cleanup.policy": "compact"})
    assert durability_warnings(admin, list(topics.outputs)) != []
    with caplog.at_level(logging.WARNING):
        preflight(shop.pipeline())
    lines = [r.getMessage() for r in caplog.records if "replication factor 1" in r.getMessage()]
    assert len(lines) == 1, lines
    assert topics.shipments in lines[0] and "\n" not in lines[0]
    assert "recreate it with replication factor 3, min.insync.replicas 2" in lines[0]


@pytest.mark.parametrize("brokers, rf, isr", [(1, 2, None), (3, 3, 4), (3, 0, None)])
def test_impossible_durability_is_refused(brokers, rf, isr):
    from eos_etl.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        Durability.for_cluster(brokers, rf, isr)
