"""Network partitions: brokers and the job on hosts of their own, cut apart Jepsen-style.

Every scenario runs on a :class:`~eos_etl_lab.faults.network_lab.NetworkLab`: three
KRaft nodes (replication factor 3, min.insync.replicas 2) and the job's host
(``job``: the ``run-window`` driver with its Spark local executors), each in a
network namespace of its own. Unlike the process faults of
:mod:`.cluster_scenarios`, nothing is killed or frozen: every process keeps
running and keeps serving whoever can still reach it, while packets between
chosen hosts vanish (iptables DROP on the receiving host), in one direction or
both, or a random share of them is lost.

A trial: fresh topics with 3,000 purchases (aborted input transactions and
invalid records among them), the job stopped at a failpoint so a transaction is
open at a known step, the cut applied, the job resumed; the cut heals after the
trial's duration (from seconds to longer than every client retry), then the
faulted run must finish, or fail clearly (:mod:`.clear_failure`: exit code 1,
the world failed, or 2, bad configuration, with exactly one ``error:`` line),
within :data:`AFTER_HEAL_BOUND_S` (else it is a hang). Then the whole
cluster is back in sync, a clean run finishes the window if the faulted one
did not, and the verdict: the independent checker exact (nothing lost,
duplicated, torn, visible beyond its offsets or from aborted input; offsets at
the input's ends), every output partition's last stable offset at its high
watermark, and Kafka's own ``find-hanging`` empty on every broker for the
trial's topics.

Each trial records ``recovery_s`` (from the cut to the faulted run finishing,
or else to the clean run finishing) and counts what the engine did in
``counters``: producers ended and re-initialised after a commit or abort of
unknown outcome (``new_epochs``), attempts fenced (``fenced``), aborts.
:data:`PARTITION_SCENARIOS` maps names to ``run(lab, seed) -> TrialResult``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from eos_etl.checker import read_topic
from eos_etl.engine.lineage import H_RUN_ID, H_SOURCE_OFFSET, H_SOURCE_PARTITION
from eos_etl.kafka.java_tools import TransactionsTool

from . import leaders
from .clear_failure import CLEAR_EXITS, failed_clearly
from .job_process import PUBLISHING, JobProcess
from .lab import Lab, TrialResult, transactional_id
from .network_lab import NetworkLab
from .trial import FAILPOINT_WAIT_S, FaultTrial, once, shop_with_purchases, trial, wait_faulted_run

log = logging.getLogger(__name__)

#: Once a cut heals, the faulted run finishes or fails with one clear error within this many seconds.
#: The slowest legitimate path: a publishing call stuck past its bound (op timeout 30 s + 15 s margin)
#: ends the Python worker, Spark retries the task, the retry re-initialises (retries for up to 60 s) and
#: replays the open transaction; or a stall of the transaction timeout + 30 s (150 s) ends it the same way.
AFTER_HEAL_BOUND_S = 240.0
#: A whole window over a lossy link finishes or fails with one clear error within this many seconds.
LOSSY_BOUND_S = 900.0
RECORDS = 3000
PARTITIONS = 2
CHUNK_RECORDS = 500

#: Log lines the trials count: the engine's (engine.publishing.transaction_loop, engine.publishing.superseded)
#: and a Python worker's native crash (faulthandler's report, e.g. glibc aborting in librdkafka's destroy).
NEW_EPOCH_LINE = "ending the producer of"
FENCED_LINE = "was fenced by another attempt"
ABORT_LINE = "aborting transaction of"
CRASH_LINE = "Fatal Python error"
#: faulthandler's first line when engine.tasks.watchdog ended a Python worker: a producer call outlived its bound
#: (its timeout + a margin: the library ignored its own timeout, librdkafka#5456), or no progress for the
#: stall timeout.
WATCHDOG_LINE = "Timeout (0:"

# (network lab, shop, seed) -> what was cut (applied already)
Cut = Callable[[NetworkLab, object, int], str]


def _pick(seed: int, choices: tuple):
    return choices[(seed - 1) % len(choices)]


def _network(lab: Lab) -> NetworkLab:
    if lab.network is None:
        raise ValueError("partition scenarios need a lab whose hosts are network namespaces (Lab.network)")
    return lab.network


def restore(net: NetworkLab) -> None:
    """Every cut healed, every node running, every partition fully in sync: the next trial starts healthy."""
    net.heal()
    net.cluster.start()
    net.cluster.wait_in_sync()


def hanging_transactions(lab: Lab, topics: tuple[str, ...]) -> list[dict[str, str]]:
    """Kafka's find-hanging on every broker, the rows for ``topics``."""
    tool = TransactionsTool(lab.connection)
    rows = []
    for node in lab.network.cluster.nodes:
        rows += [r for r in tool.hanging_transactions(str(node.node_id)) if r.get("Topic") in topics]
    return rows


def judge(lab: Lab, result: TrialResult, shop, ends: dict[int, int]) -> TrialResult:
    """The checker's verdict, settled outputs, and Kafka's find-hanging empty for the trial's topics."""
    lab.judge(result, shop, ends)
    # The checkpoint topic too: every transaction writes its record there.
    topics = (shop.topics.purchases, *shop.topics.outputs, shop.pipeline().checkpoint_topic)
    hanging = hanging_transactions(lab, topics)
    if hanging:
        result.violations["find_hanging"] = len(hanging)
        log.error("%s/%s: find-hanging reports %s", result.scenario, result.trial, hanging)
    return result


def _count(result: TrialResult, *jobs: JobProcess) -> None:
    for key, line in (("new_epochs", NEW_EPOCH_LINE), ("fenced", FENCED_LINE), ("aborts", ABORT_LINE),
                      ("worker_crashes", CRASH_LINE), ("watchdog_ends", WATCHDOG_LINE)):
        n = sum(j.count(line) for j in jobs if j is not None)
        if n:
            result.counters[key] = result.counters.get(key, 0) + n


def _outcome(code: int | None) -> str:
    return "hung" if code is None else "finished" if code == 0 else f"exit {code}"


def _counted(result: TrialResult) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(result.counters.items())) or "no aborts"


def _after_run(lab: Lab, result: TrialResult, job: JobProcess, code: int | None, shop, extra: list[str],
               t_fault: float, name: str) -> str:
    """After the faulted run: its log kept, the lab whole again, a clean run if it did not finish, what the
    engine did counted. Returns where the log is."""
    result.exit_code = code
    kept = lab.keep_log(job, name)  # every faulted run's log: what the engine did
    restore(lab.network)
    recovery = None
    if code != 0:
        recovery = lab.recover(shop, extra)
        result.recovery_s = round(time.monotonic() - t_fault, 1)
    _count(result, job, recovery)
    return kept


@dataclass(kw_only=True)
class CutTrial(FaultTrial):
    """The job stopped at its ``failpoint``; ``cut`` applied and the job resumed into it; the cut healed
    after ``cut_s``; the faulted run within :data:`AFTER_HEAL_BOUND_S` of the heal; then its log kept,
    the lab whole, a clean run if it did not finish, what the engine did counted; the verdict of
    :func:`judge` (the checker and Kafka's find-hanging)."""

    cut: Cut
    cut_s: float
    records: int = RECORDS
    partitions: int = PARTITIONS
    extra: list[str] = field(default_factory=lambda: ["--chunk-records", str(CHUNK_RECORDS)])
    net: NetworkLab = field(init=False)
    what: str = field(init=False, default="")
    ended_during_cut: bool = field(init=False, default=False)
    healed_after: float = field(init=False, default=0.0)
    ran_s: float = field(init=False, default=0.0)
    kept: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.net = _network(self.lab)

    def prepare(self) -> None:
        restore(self.net)

    def inject(self) -> None:
        self.what = self.cut(self.net, self.shop, self.seed)
        self.t_fault = time.monotonic()
        self.result.kills += 1
        self.job.resume()
        self.ended_during_cut = self.job.wait(self.cut_s) is not None
        self.net.heal()
        self.healed_after = time.monotonic() - self.t_fault
        self.bound_s = self.healed_after + AFTER_HEAL_BOUND_S

    def finish(self) -> int | None:
        code = super().finish()
        self.ran_s = time.monotonic() - self.t_fault
        return code

    def release(self) -> None:
        self.net.heal()

    def retry(self) -> None:
        """As after every faulted run of a partition trial (:func:`_after_run`): log kept, lab whole, retry."""
        self.kept = _after_run(self.lab, self.result, self.job, self.code, self.shop, self.extra, self.t_fault,
                               f"{self.scenario}-seed{self.seed}")

    def describe(self) -> str:
        return (f"{self.what} at {self.failpoint.split(',')[0]}, healed after {self.healed_after:.0f}s; faulted run "
                f"{_outcome(self.code)} {self.ran_s:.0f}s after the cut"
                f"{' (during the cut)' if self.ended_during_cut else ''}; "
                f"{'recovered' if self.code != 0 else 'done'} in {self.result.recovery_s}s; {_counted(self.result)}"
                + (f"; log {self.kept}" if self.kept else ""))

    def judge(self) -> None:
        judge(self.lab, self.result, self.shop, self.ends)


# -- who to cut ---------------------------------------------------------------------------------------
def _coordinator(net: NetworkLab, shop, partition: int) -> int:
    node = leaders.transaction_coordinator(net.cluster, transactional_id(shop, partition))
    if node is None:
        raise RuntimeError(f"no transaction coordinator for {transactional_id(shop, partition)}")
    return node


def _output_leader(net: NetworkLab, shop, seed: int) -> tuple[str, int, int]:
    topic = (shop.topics.invoices, shop.topics.shipments)[seed % 2]
    node = leaders.leader(net.cluster, topic, seed % PARTITIONS)
    if node is None:
        raise RuntimeError(f"{topic}[{seed % PARTITIONS}] has no leader")
    return topic, seed % PARTITIONS, node


def _others(net: NetworkLab, node_id: int) -> list[int]:
    return [n.node_id for n in net.cluster.nodes if n.node_id != node_id]


# -- the scenarios --------------------------------------------------------------------------------------
def coordinator_cut_before_commit(lab: Lab, seed: int) -> TrialResult:
    """The job cut off from its transaction coordinator after send_offsets_to_transaction, before the commit.

    Would catch: a commit retried on the old coordinator forever (a hang), an abort after a commit
    that landed, a new transaction begun on a producer whose commit outcome is unknown.
    """
    p = seed % PARTITIONS

    def cut(net: NetworkLab, shop, _seed: int) -> str:
        node = _coordinator(net, shop, p)
        net.partition("job", node)
        return f"job <-> coordinator n{node} cut"

    return CutTrial(lab=lab, scenario="coordinator_cut_before_commit", seed=seed, cut=cut,
                    cut_s=_pick(seed, (12, 40, 80)), failpoint=f"after_send_offsets=stop,partition={p}").run()


def coordinator_cut_during_commit(lab: Lab, seed: int) -> TrialResult:
    """The job's EndTxn sent into a cut to the coordinator: both ways (the commit arrives late or never),
    or only the coordinator's answers lost (the commit lands, the job never hears). 80 s outlasts the
    commit's retries (60 s): the outcome is unknown and the producer must be ended and re-initialised.

    Would catch: an unknown commit treated as failed (aborted and replayed: duplicates) or as done
    (offsets assumed: losses), a late EndTxn completing a transaction after a newer one began.
    """
    p = seed % PARTITIONS
    one_way, cut_s = _pick(seed, ((True, 80), (False, 80), (False, 15)))

    def cut(net: NetworkLab, shop, _seed: int) -> str:
        node = _coordinator(net, shop, p)
        if one_way:
            net.partition(node, "job", one_way=True)
            return f"coordinator n{node}'s answers to the job lost"
        net.partition("job", node)
        return f"job <-> coordinator n{node} cut"

    return CutTrial(lab=lab, scenario="coordinator_cut_during_commit", seed=seed, cut=cut, cut_s=cut_s,
                    failpoint=f"before_commit=stop,partition={p}").run()


def leader_cut_mid_transaction(lab: Lab, seed: int) -> TrialResult:
    """The job cut off from one output partition's leader with a transaction open (mid-produce).

    Would catch: a flush or abort that never returns, produce requests of an aborted transaction
    landing later in the next one (same producer epoch on the old protocol), lost or duplicated
    records when the transaction is replayed.
    """
    def cut(net: NetworkLab, shop, s: int) -> str:
        topic, partition, leader = _output_leader(net, shop, s)
        net.partition("job", leader)
        return f"job <-> n{leader} (leader of {topic.split('-')[0]}[{partition}]) cut"

    return CutTrial(lab=lab, scenario="leader_cut_mid_transaction", seed=seed, cut=cut, cut_s=_pick(seed, (12, 40, 80)),
                    failpoint=f"mid_produce=stop,partition={seed % PARTITIONS},after={100 + seed * 37 % 300}").run()


def leader_cut_from_followers(lab: Lab, seed: int) -> TrialResult:
    """An output partition's leader cut off from both other nodes (its followers and the controller
    majority) while the job still reaches it: its ISR cannot shrink (the controller is unreachable),
    acks=all writes wait there, the majority elects a new leader; after the heal the old leader
    truncates what it alone had.

    Would catch: a write acknowledged by an isolated leader and then lost (lost outputs), a
    transaction committed with part of its outputs truncated away (torn), a hang on the old leader.
    """
    def cut(net: NetworkLab, shop, s: int) -> str:
        topic, partition, leader = _output_leader(net, shop, s)
        net.partition(leader, _others(net, leader))
        return f"n{leader} (leader of {topic.split('-')[0]}[{partition}]) cut from n{_others(net, leader)}"

    return CutTrial(lab=lab, scenario="leader_cut_from_followers", seed=seed, cut=cut, cut_s=_pick(seed, (20, 45, 90)),
                    failpoint=f"mid_produce=stop,partition={seed % PARTITIONS},after={100 + seed * 41 % 300}").run()


def controller_isolated(lab: Lab, seed: int) -> TrialResult:
    """The active KRaft controller cut off from every other host (nodes and job) mid-transaction.

    Would catch: metadata served stale by the isolated node sending the job to a leader that no
    longer is one, a transaction stuck behind a coordinator that moved, a hang.
    """
    def cut(net: NetworkLab, _shop, _s: int) -> str:
        controller = net.cluster.active_controller()
        if controller is None:
            raise RuntimeError("no active controller")
        net.isolate(controller)
        return f"active controller n{controller} isolated"

    return CutTrial(lab=lab, scenario="controller_isolated", seed=seed, cut=cut, cut_s=_pick(seed, (15, 45, 90)),
                    failpoint=f"mid_produce=stop,partition={seed % PARTITIONS},after={100 + seed * 53 % 300}").run()


def split_job_on_minority(lab: Lab, seed: int) -> TrialResult:
    """A majority/minority split with the job on the minority side: {job, one node} | {two nodes}.

    The job reaches one broker only, which can no longer form a quorum or an ISR of two: nothing
    can commit. The run must ride out a short split and fail a long one with one clear error
    (min.insync.replicas) instead of timing out for minutes.

    Would catch: a commit acknowledged by the minority (lost after the heal), a hang, an unclear
    failure, anything of the failed run visible or its offsets moved.
    """
    def cut(net: NetworkLab, shop, s: int) -> str:
        topic, partition, leader = _output_leader(net, shop, s)
        net.split(["job", leader], _others(net, leader))
        return f"split {{job, n{leader}}} | n{_others(net, leader)}"

    return CutTrial(lab=lab, scenario="split_job_on_minority", seed=seed, cut=cut, cut_s=_pick(seed, (10, 40, 90)),
                    failpoint=f"mid_produce=stop,partition={seed % PARTITIONS},after={100 + seed * 29 % 300}").run()


def split_job_on_majority(lab: Lab, seed: int) -> TrialResult:
    """A majority/minority split with the job on the majority side: {one node} | {job, two nodes}; the
    minority node is the job's transaction coordinator (odd seeds) or an output partition's leader.

    Would catch: the job waiting on the minority node instead of following the leaders and the
    coordinator to the majority, writes the minority node accepted surfacing after the heal.
    """
    p = seed % PARTITIONS

    def cut(net: NetworkLab, shop, s: int) -> str:
        if s % 2:
            node, role = _coordinator(net, shop, p), "transaction coordinator"
        else:
            topic, partition, node = _output_leader(net, shop, s)
            role = f"leader of {topic.split('-')[0]}[{partition}]"
        net.split([node], ["job", *_others(net, node)])
        return f"split n{node} ({role}) | {{job, n{_others(net, node)}}}"

    return CutTrial(lab=lab, scenario="split_job_on_majority", seed=seed, cut=cut, cut_s=_pick(seed, (20, 45, 90)),
                    failpoint=f"mid_produce=stop,partition={p},after={100 + seed * 31 % 300}").run()


def lossy_link(lab: Lab, seed: int, *, records: int = RECORDS, partitions: int = PARTITIONS,
               chunk_records: int = CHUNK_RECORDS) -> TrialResult:
    """A lossy link between the job and every broker (10, 20 or 30 % of the packets dropped at random,
    both ways) for the whole window: every request, answer and acknowledgement may vanish.

    Would catch: retried produce requests duplicated (idempotence broken), answers lost on commit
    mistaken for failures (duplicates) or successes (losses), a run that never finishes.
    """
    net = _network(lab)
    rate = _pick(seed, (0.1, 0.2, 0.3))
    with trial("lossy_link", f"{rate:.0%} seed={seed}") as result:
        restore(net)
        shop, ends = shop_with_purchases(lab, result, partitions, "lossy", records, invalid_share=0.05,
                                          seed=seed, transaction_size=250, abort_share=0.1)
        extra = ["--chunk-records", str(chunk_records)]
        net.lossy("job", [n.node_id for n in net.cluster.nodes], rate)
        t_fault = time.monotonic()
        result.kills += 1
        job = lab.job(shop, extra).start()
        try:
            code = wait_faulted_run(lab, result, job, t_fault, LOSSY_BOUND_S, "lossy_link")
            ran_s = time.monotonic() - t_fault
        finally:
            if job.alive:
                job.kill()
            net.heal()
        kept = _after_run(lab, result, job, code, shop, extra, t_fault, f"lossy_link-seed{seed}")
        result.detail = (f"{rate:.0%} of packets between job and n1-n3 dropped for the whole run; run "
                         f"{_outcome(code)} after {ran_s:.0f}s (bound {LOSSY_BOUND_S:.0f}s); {_counted(result)}"
                         + (f"; log {kept}" if kept else ""))
        judge(lab, result, shop, ends)
    return result


def late_produce_after_takeover(lab: Lab, seed: int) -> TrialResult:
    """A run cut off mid-transaction is taken over by a retried run on another host; the cut heals once
    the retry has fenced it and publishes, so the first run's produce requests (held in its TCP send
    queue) and later calls land late, next to the retry's transaction.

    Odd seeds cut the first run from one output partition's leader only (its produce requests are
    late), even seeds from every broker. The retry (host ``job2``) fences the first run's producer of
    the stopped partition (init_transactions: new epoch), which aborts its open transaction; after the
    heal none of the first run's outputs of that partition at or past the offset the retry started
    from may become visible, in its aborted transaction or in the retry's. (The first run's other
    partition may legitimately finish first, after the heal.)

    Would catch: a late produce request accepted into the retry's transaction or into a transaction
    of its own that later commits (KIP-890's first part is the only guard on the old protocol),
    a transaction left hanging by a late write, the fenced run not ending.
    """
    net = _network(lab)
    p = seed % PARTITIONS
    scenario = "late_produce_after_takeover"
    with trial(scenario, f"seed={seed}") as result:
        restore(net)
        shop, ends = shop_with_purchases(lab, result, PARTITIONS, "late-produce", RECORDS, invalid_share=0.05,
                                          seed=seed, transaction_size=250, abort_share=0.1)
        extra = ["--chunk-records", str(CHUNK_RECORDS)]
        first_id, retry_id = f"first-{seed}", f"retry-{seed}"
        first = lab.job(shop, extra + ["--run-id", first_id],
                        failpoints=f"mid_produce=stop,partition={p},after={150 + seed * 17 % 200},{once(scenario)}"
                        ).start()
        retry = recovery = None
        try:
            if not first.wait_for_failpoint_stop(FAILPOINT_WAIT_S):
                raise RuntimeError(f"the first run never reached mid_produce:\n{first.tail()}")
            if seed % 2:
                topic, partition, leader = _output_leader(net, shop, seed)
                net.partition("job", leader)
                what = f"job <-> n{leader} (leader of {topic.split('-')[0]}[{partition}]) cut"
            else:
                net.partition("job", [n.node_id for n in net.cluster.nodes])
                what = "job <-> every broker cut"
            t_fault = time.monotonic()
            result.kills += 1
            first.resume()  # produces into the cut: requests wait in its sockets
            time.sleep(5)
            retry = lab.job(shop, extra + ["--run-id", retry_id], host="job2").start()
            # Logged once the retry's init_transactions fenced the first run's producer of that partition
            # (aborting its open transaction) and read where the partition's committed offsets stand.
            publishing = f"{PUBLISHING}{shop.topics.purchases}[{p}]"
            if not retry.wait_for(publishing, FAILPOINT_WAIT_S):
                raise RuntimeError(f"the retry never started publishing partition {p}:\n{retry.tail()}")
            committed_at_takeover = _position(retry, publishing)
            visible_before = _late_outputs(lab, shop, first_id, p, committed_at_takeover)
            net.heal()  # the retry is publishing: the first run's requests land now
            healed_after = time.monotonic() - t_fault
            retry_code = wait_faulted_run(lab, result, retry, t_fault, healed_after + AFTER_HEAL_BOUND_S,
                                          f"{scenario}-retry")
            first_code = first.wait(max(1.0, healed_after + AFTER_HEAL_BOUND_S - (time.monotonic() - t_fault)))
            _judge_first_run(lab, result, first, first_code)
        finally:
            for job in (first, retry):
                if job is not None and job.alive:
                    job.kill()
            net.heal()
        result.exit_code = retry_code
        kept = [lab.keep_log(first, f"{scenario}-seed{seed}-first"),
                lab.keep_log(retry, f"{scenario}-seed{seed}-retry")]
        restore(net)
        visible_after = _late_outputs(lab, shop, first_id, p, committed_at_takeover)
        if visible_after or visible_before:
            result.violations["late_outputs_visible"] = visible_after + visible_before
        if retry_code != 0:
            recovery = lab.recover(shop, extra)
        result.recovery_s = round(time.monotonic() - t_fault, 1) if retry_code != 0 else result.recovery_s
        _count(result, first, retry, recovery)
        result.detail = (f"{what} mid-transaction; retry on job2 started 5s later, healed after "
                         f"{healed_after:.0f}s while it published; retry {_outcome(retry_code)}, first run "
                         f"{_outcome(first_code)}; first run's outputs of partition {p} from the takeover's offset "
                         f"{committed_at_takeover} on visible before/after the heal: {visible_before}/{visible_after}; "
                         f"{_counted(result)}" + (f"; logs {', '.join(k for k in kept if k)}" if any(kept) else ""))
        judge(lab, result, shop, ends)
    return result


def _judge_first_run(lab: Lab, result: TrialResult, first: JobProcess, code: int | None) -> None:
    """The fenced first run must end too: finished, or failed clearly (exit 1 or 2 with one ``error:`` line),
    within the bound."""
    if code is None:
        result.hung = True
        lab.keep_log(first, "late-produce-first-hung")
    elif code in CLEAR_EXITS:
        if not failed_clearly(code, first.stderr):
            result.violations["first_run_no_clear_error"] = 1
    elif code != 0:
        result.violations["first_run_unclear_failure"] = 1
        lab.keep_log(first, f"late-produce-first-exit{code}")


def _position(job: JobProcess, publishing: str) -> int:
    """The committed position a run's publisher started a partition from (its "publishing ..." log line)."""
    line = next(line for line in job.stderr.splitlines() if publishing in line)
    match = re.search(r"from committed position (\d+)", line)
    if match is None:
        raise RuntimeError(f"no committed position in {line!r}")
    return int(match.group(1))


def _late_outputs(lab: Lab, shop, run_id: str, partition: int, from_offset: int) -> int:
    """Visible outputs of run ``run_id`` from input ``partition`` at or past ``from_offset``."""
    return sum(r.headers.get(H_RUN_ID) == run_id.encode()
               and int(r.headers.get(H_SOURCE_PARTITION, b"-1")) == partition
               and int(r.headers.get(H_SOURCE_OFFSET, b"-1")) >= from_offset
               for t in shop.topics.outputs for r in read_topic(lab.connection, t))


#: name -> run(lab, seed); the partition soak runs these.
PARTITION_SCENARIOS: dict[str, Callable[[Lab, int], TrialResult]] = {
    "coordinator_cut_before_commit": coordinator_cut_before_commit,
    "coordinator_cut_during_commit": coordinator_cut_during_commit,
    "leader_cut_mid_transaction": leader_cut_mid_transaction,
    "leader_cut_from_followers": leader_cut_from_followers,
    "controller_isolated": controller_isolated,
    "split_job_on_minority": split_job_on_minority,
    "split_job_on_majority": split_job_on_majority,
    "lossy_link": lossy_link,
    "late_produce_after_takeover": late_produce_after_takeover,
}
