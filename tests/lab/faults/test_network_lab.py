"""The network-partition lab and a fast partition smoke (``make soak-partitions`` runs every scenario).

The lab's hosts are network namespaces this test creates (root): three Kafka nodes and two job hosts
on a bridge inside a namespace of its own. These tests check that the lab keeps its traffic to itself
and cleans up after itself, that its cuts behave like a network (silence, not errors; one way or both),
and run one partition scenario end to end: a run cut off mid-transaction, taken over by a retried run
on the other job host while the cut heals, its late requests rejected, the checker exact and Kafka's
find-hanging empty.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from eos_etl.kafka.connection import KafkaConnection
from eos_etl_lab.faults import Lab
from eos_etl_lab.faults import partition_scenarios as ps
from eos_etl_lab.faults.netns import Netns, namespace_names, remove_leftovers
from eos_etl_lab.faults.network_lab import PREFIX, NetworkLab

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def network_lab(tmp_path_factory):
    lab = NetworkLab(tmp_path_factory.mktemp("network-lab"))
    try:
        lab.start()
        yield lab
    finally:
        lab.stop()


def _connects(lab: NetworkLab, host: str, address: str, port: int, timeout_s: float = 2.0) -> str:
    """From ``host``: 'ok', 'timeout' or the error a TCP connect to ``address:port`` gets."""
    code = (f"import socket\ntry:\n    socket.create_connection(({address!r}, {port}), timeout={timeout_s}).close()\n"
            f"    print('ok')\nexcept socket.timeout:\n    print('timeout')\n"
            f"except OSError as e:\n    print(e.strerror)")
    out = subprocess.run(lab.job_command([sys.executable, "-c", code], host), capture_output=True, text=True,
                         timeout=30)
    return out.stdout.strip() or out.stderr.strip()


def test_the_lab_keeps_its_traffic_inside_its_own_namespaces(network_lab):
    net = network_lab
    for name, host in net.hosts.items():
        routes = host.netns.ip("-4", "route", "show").stdout.strip().splitlines()
        assert routes == [f"{net.subnet} dev eth0 proto kernel scope link src {host.address}"], (name, routes)
    # The bridge is in the lab's switch namespace, not in the machine's.
    bridges = subprocess.run(["ip", "-o", "link", "show", "type", "bridge"], capture_output=True, text=True).stdout
    assert "br0" in Netns(f"{net.tag}-sw").ip("-o", "link", "show", "type", "bridge").stdout
    assert net.tag not in bridges
    # The machine reaches the lab's subnet through the observer's link only.
    root_routes = subprocess.run(["ip", "-4", "route", "show", net.subnet], capture_output=True, text=True).stdout
    assert root_routes.count(net.subnet) == 1 and "dev enl" in root_routes, root_routes
    # Brokers advertise their own host's address.
    assert [n.address for n in net.cluster.nodes] == [f"{net.host(f'n{i}').address}:9092" for i in (1, 2, 3)]


def _comm(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def test_the_job_runs_in_its_host_namespace(network_lab):
    proc = subprocess.Popen(network_lab.job_command(["sleep", "30"], "job2"))
    try:
        deadline = time.monotonic() + 10
        while _comm(proc.pid) != "sleep" and time.monotonic() < deadline:  # ip netns exec: setns, then exec
            time.sleep(0.05)
        assert _comm(proc.pid) == "sleep"
        assert os.stat(f"/proc/{proc.pid}/ns/net").st_ino == os.stat(network_lab.host("job2").netns.path).st_ino
        assert os.stat(f"/proc/{proc.pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
    finally:
        proc.kill()
        proc.wait()


def test_cuts_are_silence_one_way_or_both_and_heal(network_lab):
    net = network_lab
    n1 = net.host(1).address
    assert _connects(net, "job", n1, 9092) == "ok"
    net.partition("job", 1)
    try:
        assert _connects(net, "job", n1, 9092) == "timeout"  # dropped, never refused: a network, not a process
        assert _connects(net, "job2", n1, 9092) == "ok"  # only the pair is cut
        assert [f for f in net.status().faults] == ["job -> n1", "n1 -> job"]
        assert net.status().rules["n1"] == [f"-A EOSNET -s {net.host('job').address}/32 -j DROP"]
        net.heal()
        assert _connects(net, "job", n1, 9092) == "ok"
        net.partition(1, "job", one_way=True)  # n1's answers lost: the job's SYN arrives, the SYN-ACK does not
        assert _connects(net, "job", n1, 9092) == "timeout"
        assert net.status().rules["n1"] == [] and net.status().rules["job"] == [f"-A EOSNET -s {n1}/32 -j DROP"]
        with pytest.raises(ValueError):
            net.lossy("job", 1, 1.5)
    finally:
        net.heal()
    assert net.status().faults == [] and all(not rules for rules in net.status().rules.values())


def test_a_run_cut_off_mid_transaction_and_taken_over_while_the_cut_heals_is_exactly_once(network_lab, tmp_path):
    lab = Lab(KafkaConnection(network_lab.cluster.bootstrap_servers), broker=network_lab.cluster,
              network=network_lab, log_dir=tmp_path)
    result = ps.late_produce_after_takeover(lab, seed=1)
    assert not result.error, result.error
    assert result.kills == 1, f"the cut never landed: {result}"
    assert not result.hung, f"a run was still going {ps.AFTER_HEAL_BOUND_S:.0f}s after the heal: {result.detail}"
    assert result.violations == {}, result  # checker, late outputs, find-hanging, clear ends of both runs
    assert result.lso_settled, "an output partition's last stable offset stays below its high watermark"


def test_a_stopped_lab_leaves_nothing_and_leftovers_of_dead_labs_are_removed(tmp_path):
    lab = NetworkLab(tmp_path / "lab").start(with_cluster=False)
    names = [h.netns.name for h in lab.hosts.values()] + [f"{lab.tag}-sw"]
    observer = lab.observer_link
    assert set(names) <= set(namespace_names())
    assert observer in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    lab.stop()
    assert not set(names) & set(namespace_names())
    assert f" {observer}@" not in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    # A lab whose process died (pid 2**22 + 1 is above any pid Linux hands out) left a namespace behind.
    dead = Netns(f"{PREFIX}-{2**22 + 1}-1-sw").create()
    try:
        assert dead.name in remove_leftovers(PREFIX)
        assert dead.name not in namespace_names()
    finally:
        dead.delete()


def test_the_partition_soak_plans_every_scenario_seed_major():
    from eos_etl_lab.faults.partition_soak import PartitionSoakOptions, plan

    steps = plan(PartitionSoakOptions(seeds=2))
    assert len(steps) == 2 * len(ps.PARTITION_SCENARIOS)
    assert [name for name, _ in steps[:len(ps.PARTITION_SCENARIOS)]] == list(ps.PARTITION_SCENARIOS)
    assert {seed for _, seed in steps} == {1, 2}
    with pytest.raises(ValueError, match="unknown partition scenario"):
        plan(PartitionSoakOptions(scenarios=("no_such_cut",)))


def test_the_partition_section_comes_from_its_template_and_replaces_only_itself(tmp_path):
    from eos_etl_lab.faults.lab import TrialResult
    from eos_etl_lab.faults.partition_soak import ClusterFacts, PartitionSoakOptions, PartitionSoakRun, write_markdown

    page = tmp_path / "reliability.md"
    page.write_text("<!-- cluster soak: begin (generated) -->\ncluster table\n<!-- cluster soak: end -->\n")
    trials = [TrialResult("controller_isolated", f"seed={s}", records=3000, kills=1, recovery_s=20.0 + s,
                          exit_code=0, variant=f"transaction.version={tv}", counters={"new_epochs": s},
                          detail="split {job, n1} | n[2, 3] <b>")
              for tv in (1, 2) for s in (1, 2)]
    trials.append(TrialResult("lossy_link", "30% seed=3", records=3000, kills=1, hung=True,
                              variant="transaction.version=2"))
    run = PartitionSoakRun(trials, [ClusterFacts("transaction.version=1", 1, 27, "10.231.0.0/24")], 600.0)
    write_markdown(run, PartitionSoakOptions(out=page), "python -m eos_etl_lab soak --partitions")
    text = page.read_text()
    assert "cluster table" in text  # the other soak's section stays
    assert "| controller_isolated | transaction.version=1 | 2 | 2 | 0 | 0 | 22 s | 0 | 3 | 0 | 0 |" in text, text
    assert "| lossy_link | transaction.version=2 | 1 | 1 | 1 | 0 | - | 1 | 0 | 0 | 0 |" in text
    assert "VIOLATIONS, HANGS OR FAILED TRIALS" in text
    assert "split {job, n1} / n[2, 3] &lt;b>" in text  # one cell, no tag can start in it
    assert "*Would catch:*" in text and "lossy_link**: A lossy link" in text
    write_markdown(PartitionSoakRun([], [], 1.0), PartitionSoakOptions(out=page), "again")
    assert page.read_text().count("## Network partitions") == 1
