"""Fast cluster smoke (the cluster soak, ``make soak-cluster``, runs every broker fault with several seeds).

On the session's three-node cluster: one window whose job is stopped mid-
transaction, the leader of an output partition SIGKILLed, the job resumed. The
run must finish (or fail with one clear error) within the stated bound, and
the independent checker must be exact once the node is back.
"""

from __future__ import annotations

import pytest

from eos_etl.faults import Lab
from eos_etl.faults import cluster_scenarios as cs
from eos_etl.kafka.connection import KafkaConnection

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def cluster_lab(healthy_cluster, tmp_path) -> Lab:
    return Lab(KafkaConnection(healthy_cluster.bootstrap_servers), broker=healthy_cluster, log_dir=tmp_path)


def test_output_leader_sigkill_mid_transaction_is_exactly_once(cluster_lab, healthy_cluster):
    result = cs.partition_leader_kill(cluster_lab, seed=1)
    assert not result.error, result.error
    assert result.kills == 1, f"the fault never landed: {result}"
    assert not result.hung, f"the run hung past {cs.RUN_BOUND_S:.0f}s after the kill: {result.detail}"
    assert result.recovery_s is not None and result.recovery_s <= cs.RUN_BOUND_S, result
    assert result.violations == {}, result
    assert result.lso_settled, "an output partition's last stable offset stays below its high watermark"
    # The node came back and every partition is fully replicated again (the next test starts healthy).
    assert all(n.is_running() for n in healthy_cluster.nodes)


def test_each_soak_replaces_only_its_own_section_of_the_reliability_page(tmp_path):
    from eos_etl.faults.soak import CLUSTER_SECTION, SINGLE_NODE_SECTION, write_section

    page = tmp_path / "reliability.md"
    page.write_text("# Reliability: the fault-injection soak\n\nsingle-node table v1\n")  # written before markers
    write_section(page, CLUSTER_SECTION, "cluster table v1")
    write_section(page, SINGLE_NODE_SECTION, "single-node table v2")
    write_section(page, CLUSTER_SECTION, "cluster table v2")
    text = page.read_text()
    assert "single-node table v1" not in text and "cluster table v1" not in text
    assert text.index("single-node table v2") < text.index("cluster table v2")
    assert text.count("single-node table v2") == 1 and text.count("cluster table v2") == 1
