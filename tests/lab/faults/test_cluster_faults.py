"""Fast cluster smoke (the cluster soak, ``make soak-cluster``, runs every broker fault with several seeds).

On the session's three-node cluster: one window whose job is stopped mid-
transaction, the leader of an output partition SIGKILLed, the job resumed. The
run must finish (or fail with one clear error) within the stated bound, and
the independent checker must be exact once the node is back.
"""

from __future__ import annotations

import pytest

from eos_etl.kafka.connection import KafkaConnection
from eos_etl_lab.faults import Lab
from eos_etl_lab.faults import cluster_scenarios as cs

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
    from eos_etl_lab.faults.reliability_page import CLUSTER_SECTION, SINGLE_NODE_SECTION, write_section

    page = tmp_path / "reliability.md"
    page.write_text("# Reliability: the fault-injection soak\n\nsingle-node table v1\n")  # written before markers
    write_section(page, CLUSTER_SECTION, "cluster table v1")
    write_section(page, SINGLE_NODE_SECTION, "single-node table v2")
    write_section(page, CLUSTER_SECTION, "cluster table v2")
    text = page.read_text()
    assert "single-node table v1" not in text and "cluster table v1" not in text
    assert text.index("single-node table v2") < text.index("cluster table v2")
    assert text.count("single-node table v2") == 1 and text.count("cluster table v2") == 1


def test_the_cluster_soak_plans_every_scenario_spark_side_included():
    from collections import Counter

    from eos_etl_lab.faults.soak import ClusterSoakOptions, _cluster_plan

    plan = _cluster_plan(ClusterSoakOptions(seeds=2, start_phase_kills=5))
    counts = Counter(name for name, _ in plan)
    assert counts["start_phase_broker_kill"] == 5
    for name in ("partition_leader_kill", "txn_coordinator_kill_during_commit", "two_brokers_down",
                 "rolling_restart", "executor_kill", "worker_kill", "spark_speculation",
                 "executor_kill_midstream", "driver_kill_midstream", "spark_speculation_streaming",
                 "two_brokers_down_midstream"):
        assert counts[name] == 2, counts
    # Seed-major: every scenario has its first trial before any has its second.
    first_round = [name for name, _ in plan[:len(counts)]]
    assert sorted(first_round) == sorted(counts)


def test_a_subset_soak_gets_a_section_of_its_own_with_the_start_phase_table(tmp_path):
    from eos_etl_lab.faults.lab import TrialResult
    from eos_etl_lab.faults.soak import SoakOptions, write_markdown

    page = tmp_path / "reliability.md"
    page.write_text("<!-- single-node soak: begin (generated) -->\nfull soak table\n<!-- single-node soak: end -->\n")
    runs = [TrialResult("start_phase_broker_kill", f"seed={i}", exit_code=code, violations=v)
            for i, (code, v) in enumerate([(0, {}), (2, {}), (-11, {"killed_by_signal": 1}), (None, {"hung": 1})])]
    write_markdown(runs, 60.0, SoakOptions(scenarios=("start_phase_broker_kill",), out=page), "soak --scenarios x")
    text = page.read_text()
    assert "full soak table" in text  # the full soak's table is not replaced by a subset's
    assert "| one node | 4 | 1 | 1 | 0 | 1 | 1 | 4 of 4 |" in text, text


def test_the_soak_pages_come_from_their_templates_with_the_runs_values_escaped(tmp_path):
    from eos_etl_lab.faults.lab import TrialResult
    from eos_etl_lab.faults.soak import ClusterSoakOptions, SoakOptions, write_cluster_markdown, write_markdown

    page = tmp_path / "reliability.md"
    runs = [TrialResult("zombie", "seed=1", records=1234, kills=1, seconds=61.0, recovery_s=12.4,
                        detail="pid 1 -> 2 | <img src=x onerror=alert(1)> & more\nnext line"),
            TrialResult("zombie", "seed=2", error="could not freeze", lso_settled=False)]
    write_markdown(runs, 120.0, SoakOptions(out=page), "make soak")
    write_cluster_markdown(runs, 120.0, ClusterSoakOptions(out=page), "make soak-cluster")
    text = page.read_text()
    assert text.startswith("<!-- single-node soak: begin (generated) -->\n# Reliability: the fault-injection soak\n")
    assert "| zombie | 2 | 1,234 | 1 | 1 (1 not carried out) | 0 | - | 12 s | 1.0 min |" in text, text
    assert "| **total** | **2** | **1,234** | **1** | **1** | **0** | | | **2.0 min** |" in text
    row = "| zombie | seed=1 | 1,234 | 1 | 0 | 61 | pid 1 -> 2 / &lt;img src=x onerror=alert(1)> &amp; more next line |"
    assert row in text, text  # one line, one cell, no tag can start in it
    assert "| zombie | seed=2 | 0 | 0 | 0, hanging transaction | 0 | NOT CARRIED OUT: could not freeze |" in text
    assert "<img" not in text and "## Trials" in text and "### Cluster trials" in text
    assert "| zombie | seed=1 | 1,234 | 1 | 0 | 12 s | no | pid 1 -> 2 / &lt;img" in text
    assert "| topology |" not in text  # no start-phase runs, no start-phase table
    assert "(the connect_* scenarios" not in text  # no connect_* trials ran
    write_markdown([TrialResult("connect_server_kill", "seed=1", recovery_s=29.0)], 60.0, SoakOptions(out=page),
                   "make soak")
    assert "local mode (the connect_* scenarios: a Spark Connect server, master `local[2,4]`)." in page.read_text()


def test_a_cluster_subset_soak_gets_a_section_of_its_own(tmp_path):
    from eos_etl_lab.faults.lab import TrialResult
    from eos_etl_lab.faults.soak import CLUSTER_SECTION, ClusterSoakOptions, write_cluster_markdown

    page = tmp_path / "reliability.md"
    page.write_text("<!-- cluster soak: begin (generated) -->\nfull cluster table\n<!-- cluster soak: end -->\n")
    opts = ClusterSoakOptions(scenarios=("connect_executor_kill",), out=page)
    runs = [TrialResult("connect_executor_kill", "seed=1", recovery_s=20.0)]
    write_cluster_markdown(runs, 60.0, opts, "soak --cluster --scenarios connect_executor_kill",
                           f"{CLUSTER_SECTION}: connect_executor_kill")
    text = page.read_text()
    assert "full cluster table" in text
    assert "<!-- cluster soak: connect_executor_kill: begin (generated) -->" in text
    assert "cluster fault soak, scenarios: connect_executor_kill" in text
    assert "| connect_executor_kill |" in text


def test_a_rerun_replaces_only_its_scenarios_trials(tmp_path):
    from eos_etl_lab.faults.lab import TrialResult
    from eos_etl_lab.faults.soak import load_results, merge_rerun, save_results

    earlier = [TrialResult("broker_pause", "seed=1", hung=True), TrialResult("controller_kill", "seed=1")]
    merged = merge_rerun(earlier, [TrialResult("broker_pause", "seed=1", recovery_s=15.0)])
    assert [(r.scenario, r.hung) for r in merged] == [("controller_kill", False), ("broker_pause", False)]
    save_results(merged, 42.0, tmp_path / "results.json", "soak --cluster")
    back, wall, command = load_results(tmp_path / "results.json")
    assert back == merged and wall == 42.0 and command == "soak --cluster"
