"""Broker-side faults on a three-node cluster: each kills, freezes or restarts the node that matters.

The job is stopped at a failpoint (its publishing worker SIGSTOPs itself, so
a transaction is open at a known step), the harness asks the cluster which
node holds the role under test (leader of an output partition, transaction
coordinator of the job's transactional.id, group coordinator of its group,
active KRaft controller), injects the fault into that node and resumes the
job. The faulted run must finish, or fail clearly (:mod:`.clear_failure`: exit
code 1 or 2, one ``error:`` line) within :data:`RUN_BOUND_S`; otherwise it counts as a hang. The node comes
back, a clean run finishes the window if needed, and the checker judges.

Every trial records the faults injected (``kills``), ``recovery_s`` (from the
fault to the faulted run finishing, or else to the next run finishing) and
``hung``. :data:`CLUSTER_SCENARIOS` maps names to ``run(lab, seed) ->
TrialResult``; the cluster soak runs what is registered there.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from eos_etl.checker import read_topic
from eos_etl.embedded.kafka_cluster import KafkaCluster, KafkaNode
from eos_etl.errors import EXIT_RUNTIME

from . import broker_scenarios as sc
from . import leaders
from .clear_failure import error_lines, failed_clearly
from .job_process import PUBLISHING, JobProcess
from .lab import Lab, TrialResult, transactional_id
from .trial import (
    FAILPOINT_WAIT_S,
    RUN_BOUND_S,
    FaultTrial,
    once,
    shop_with_purchases,
    trial,
    wait_faulted_run,
)

log = logging.getLogger(__name__)

#: With two of three brokers down the run fails within this (engine.tasks.replica_guard:
#: 15 s grace + probes + Spark cancelling the job).
MIN_ISR_BOUND_S = 60.0
#: broker.session.timeout.ms (9 s default) plus margin: a paused node is fenced by then.
PAUSE_S = 12.0

# (lab, shop, seed) -> node id to fault
NodePick = Callable[[KafkaCluster, object, int], int | None]


def restore_cluster(cluster: KafkaCluster) -> None:
    """Every node running and every partition fully in sync again, so the next trial starts healthy."""
    cluster.start()
    cluster.wait_in_sync()


@dataclass(kw_only=True)
class NodeFault(FaultTrial):
    """The job stopped at its ``failpoint``; the node ``pick`` names faulted (``fault``: kill /
    freeze_kill / pause) as the job resumes; the faulted run within :data:`RUN_BOUND_S`; the cluster
    whole again, then a clean run if the faulted one did not finish."""

    pick: NodePick
    fault: str = "kill"
    extra: list[str] = field(default_factory=lambda: ["--chunk-records", "500"])
    cluster: KafkaCluster = field(init=False)
    rng: random.Random = field(init=False)
    node_id: int | None = field(init=False, default=None)
    how: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.cluster = self.lab.cluster
        self.rng = random.Random(self.seed)

    def prepare(self) -> None:
        restore_cluster(self.cluster)

    def inject(self) -> None:
        self.node_id = self.pick(self.cluster, self.shop, self.seed)
        if self.node_id is None:
            raise RuntimeError(f"{self.scenario}: the cluster named no node to fault")
        node: KafkaNode = self.cluster.node(self.node_id)
        self.t_fault = time.monotonic()
        self.how = _inject(node, self.job, self.fault, self.rng)
        self.result.kills += 1

    def heal(self) -> None:
        restore_cluster(self.cluster)

    def describe(self) -> str:
        return (f"node {self.node_id} {self.how} at {self.failpoint.split(',')[0]}; faulted run "
                f"{'hung' if self.code is None else f'exit {self.code}'}; recovered in {self.result.recovery_s}s")


def _inject(node: KafkaNode, job: JobProcess, fault: str, rng: random.Random) -> str:
    """Fault ``node`` and let the stopped job go on; returns what was done."""
    if fault == "kill":
        node.kill()
        job.resume()
        return "SIGKILLed"
    if fault == "freeze_kill":
        # Frozen first, so the job's next request (its EndTxn) is in flight at the node when it dies.
        node.pause()
        job.resume()
        delay = rng.uniform(0.5, 2.0)
        time.sleep(delay)
        node.kill()
        return f"SIGSTOPped, job resumed into commit, SIGKILLed {delay:.1f}s later"
    if fault == "pause":
        node.pause()
        job.resume()
        time.sleep(PAUSE_S)
        node.resume()
        return f"SIGSTOPped for {PAUSE_S:.0f}s (> broker.session.timeout.ms), then SIGCONT"
    raise ValueError(f"unknown fault {fault!r}")


# -- who to fault ------------------------------------------------------------------------------
def _output_leader(cluster: KafkaCluster, shop, seed: int) -> int | None:
    topic = (shop.topics.invoices, shop.topics.shipments)[seed % 2]
    return leaders.leader(cluster, topic, seed % 2)


def _transaction_coordinator(cluster: KafkaCluster, shop, seed: int) -> int | None:
    return leaders.transaction_coordinator(cluster, transactional_id(shop, seed % 2))


def _group_coordinator(cluster: KafkaCluster, shop, _seed: int) -> int | None:
    return leaders.group_coordinator(cluster, shop.group)


def _active_controller(cluster: KafkaCluster, _shop, _seed: int) -> int | None:
    return cluster.active_controller()


# -- the scenarios -------------------------------------------------------------------------------
def partition_leader_kill(lab: Lab, seed: int) -> TrialResult:
    """SIGKILL the leader of an output partition while a transaction is open (mid-produce)."""
    return NodeFault(lab=lab, scenario="partition_leader_kill", seed=seed, pick=_output_leader,
                     failpoint=f"mid_produce=stop,partition={seed % 2},after={100 + seed * 37 % 300}").run()


def txn_coordinator_kill_before_commit(lab: Lab, seed: int) -> TrialResult:
    """SIGKILL the transaction coordinator after send_offsets_to_transaction, before commit."""
    return NodeFault(lab=lab, scenario="txn_coordinator_kill_before_commit", seed=seed, pick=_transaction_coordinator,
                     failpoint=f"after_send_offsets=stop,partition={seed % 2}").run()


def txn_coordinator_kill_during_commit(lab: Lab, seed: int) -> TrialResult:
    """The transaction coordinator frozen as the job commits, then SIGKILLed with the EndTxn in flight."""
    return NodeFault(lab=lab, scenario="txn_coordinator_kill_during_commit", seed=seed, pick=_transaction_coordinator,
                     failpoint=f"before_commit=stop,partition={seed % 2}", fault="freeze_kill").run()


def group_coordinator_kill(lab: Lab, seed: int) -> TrialResult:
    """SIGKILL the group coordinator just before send_offsets_to_transaction (TxnOffsetCommit goes to it)."""
    return NodeFault(lab=lab, scenario="group_coordinator_kill", seed=seed, pick=_group_coordinator,
                     failpoint=f"before_send_offsets=stop,partition={seed % 2}").run()


def controller_kill(lab: Lab, seed: int) -> TrialResult:
    """SIGKILL the active KRaft controller mid-transaction."""
    return NodeFault(lab=lab, scenario="controller_kill", seed=seed, pick=_active_controller,
                     failpoint=f"mid_produce=stop,partition={seed % 2},after={100 + seed * 53 % 300}").run()


def broker_pause(lab: Lab, seed: int) -> TrialResult:
    """SIGSTOP an output partition's leader past its session timeout mid-transaction, then SIGCONT."""
    return NodeFault(lab=lab, scenario="broker_pause", seed=seed, pick=_output_leader, fault="pause",
                     failpoint=f"mid_produce=stop,partition={seed % 2},after={100 + seed * 41 % 300}").run()


def rolling_restart(lab: Lab, seed: int, *, records: int = 200_000, partitions: int = 4,
                    chunk_records: int = 20_000) -> TrialResult:
    """Restart all three nodes one at a time (clean stop, back in sync before the next) while a window publishes."""
    cluster = lab.cluster
    rng = random.Random(seed)
    with trial("rolling_restart", f"{records} records seed={seed}") as result:
        restore_cluster(cluster)
        shop, ends = shop_with_purchases(lab, result, partitions, "rolling-restart", records,
                                          invalid_share=0.05, seed=seed, transaction_size=1000, abort_share=0.05)
        extra = ["--chunk-records", str(chunk_records)]
        job = lab.job(shop, extra).start()
        try:
            if not job.wait_for(PUBLISHING, FAILPOINT_WAIT_S):
                raise RuntimeError(f"the job never started publishing:\n{job.tail()}")
            time.sleep(rng.uniform(0.0, 2.0))
            t_fault = time.monotonic()
            restarted = []
            for node in cluster.nodes:
                node.restart(hard=bool(seed % 2))
                cluster.wait_in_sync()
                result.kills += 1
                restarted.append((node.node_id, job.alive))
            code = wait_faulted_run(lab, result, job, t_fault, RUN_BOUND_S + 120, "rolling_restart")
        finally:
            if job.alive:
                job.kill()
        if code != 0:
            lab.recover(shop, extra, timeout_s=900)
            result.recovery_s = round(time.monotonic() - t_fault, 1)
        during = sum(alive for _, alive in restarted)
        result.detail = (f"{'SIGKILL' if seed % 2 else 'clean'} restarts of nodes {[n for n, _ in restarted]}, "
                         f"{during} of 3 while the job still ran; faulted run "
                         f"{'hung' if code is None else f'exit {code}'}; done {result.recovery_s}s after the first")
        lab.judge(result, shop, ends)
    return result


def two_brokers_down(lab: Lab, seed: int) -> TrialResult:
    """Two of three nodes SIGKILLed mid-transaction: outputs below min.insync.replicas.

    Pass: the run fails clearly within :data:`MIN_ISR_BOUND_S`: exit code 1 (the brokers
    failed, not the configuration) and one ``error:`` line naming min.insync.replicas; once the nodes are back, nothing
    is visible to read_committed readers and the offsets did not move; the next
    run is exact.
    """
    cluster = lab.cluster
    rng = random.Random(seed)
    with trial("two_brokers_down", f"seed={seed}") as result:
        restore_cluster(cluster)
        shop, ends = shop_with_purchases(lab, result, 2, "two-down", 2000, invalid_share=0.05, seed=seed,
                                          transaction_size=250, abort_share=0.1)
        extra = ["--chunk-records", "100000"]  # one transaction per partition: nothing commits before the fault
        job = lab.job(shop, extra, failpoints=f"mid_produce=stop,after={50 + seed * 29 % 300},{once('two-down')}"
                      ).start()
        try:
            if not job.wait_for_failpoint_stop(FAILPOINT_WAIT_S):
                raise RuntimeError(f"the job never reached mid_produce:\n{job.tail()}")
            down = rng.sample([n.node_id for n in cluster.nodes], 2)
            t_fault = time.monotonic()
            for node_id in down:
                cluster.node(node_id).kill()
                result.kills += 1
            job.resume()
            code = wait_faulted_run(lab, result, job, t_fault, MIN_ISR_BOUND_S, "two_brokers_down")
            failed_after = time.monotonic() - t_fault
        finally:
            if job.alive:
                job.kill()
        errors = error_lines(job.stderr)
        if code != EXIT_RUNTIME or not failed_clearly(code, job.stderr) or "min.insync.replicas" not in errors[0]:
            result.violations["no_min_isr_error"] = 1
        result.recovery_s = None
        restore_cluster(cluster)
        visible = sum(len(read_topic(lab.connection, t)) for t in shop.topics.outputs)
        if visible:
            result.violations["visible_after_failed_run"] = visible
        admin = lab.admin
        moved = admin.committed_offsets(shop.group, shop.topics.purchases, admin.partitions(shop.topics.purchases))
        if any(v is not None for v in moved.values()):
            result.violations["offsets_moved"] = 1
        lab.recover(shop, extra)
        result.recovery_s = round(time.monotonic() - t_fault, 1)
        result.detail = (f"nodes {down} SIGKILLed mid-transaction; run exit {code} after {failed_after:.0f}s "
                         f"(bound {MIN_ISR_BOUND_S:.0f}s): {errors[0][:200] if errors else job.tail(3)!r}; "
                         f"next run exact {result.recovery_s}s after the fault")
        lab.judge(result, shop, ends)
    return result


#: name -> run(lab, seed); the cluster soak runs these (extend with :func:`register`).
CLUSTER_SCENARIOS: dict[str, Callable[[Lab, int], TrialResult]] = {
    "partition_leader_kill": partition_leader_kill,
    "txn_coordinator_kill_before_commit": txn_coordinator_kill_before_commit,
    "txn_coordinator_kill_during_commit": txn_coordinator_kill_during_commit,
    "group_coordinator_kill": group_coordinator_kill,
    "controller_kill": controller_kill,
    "broker_pause": broker_pause,
    "rolling_restart": rolling_restart,
    "two_brokers_down": two_brokers_down,
}


def register(name: str, run: Callable[[Lab, int], TrialResult]) -> None:
    """Add a scenario to the cluster soak (Spark executor / worker kills, ...)."""
    CLUSTER_SCENARIOS[name] = run


# The start-up fault (a random node killed in a run's first seconds) also runs on the cluster.
if hasattr(sc, "start_phase_broker_kill"):
    register("start_phase_broker_kill", sc.start_phase_broker_kill)
