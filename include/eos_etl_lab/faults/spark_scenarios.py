"""Spark-side faults on the standalone cluster: a lost executor, a lost worker, speculative copies.

The job runs on the lab's :class:`~eos_etl.embedded.spark_cluster.SparkStandalone`
(master + two workers, each worker on a loopback address of its own, so Spark
treats them as two machines) against the three-node Kafka cluster.

- **executor_kill**: a publishing task stops itself mid-transaction (failpoint
  ``mid_produce=stop``); the harness SIGKILLs the executor JVM running it and
  every Python process under it. Spark loses the executor, the standalone
  master starts a replacement, and the task is retried; the retry's
  ``init_transactions`` fences the dead attempt's producer and aborts its open
  transaction.
- **worker_kill**: the same, but the whole worker goes (its daemon, executors
  and Python workers SIGKILLed at once: a machine losing power). The task can
  only be retried on the other worker. The worker is started again afterwards.
- **spark_speculation**: ``spark.speculation=true`` and one publishing task
  made to straggle with its transaction open (failpoint ``mid_produce=sleep``).
  Spark launches a speculative copy on the other worker; the copy fences the
  original and finishes the partition; Spark kills the original. A trial in
  which no second copy ran tested nothing and is reported as not carried out.

Where each partition's attempts ran is read from the executors' own logs (the
publisher logs ``publishing <topic>[p]`` when an attempt starts), so a trial
shows on which host the retry or the speculative copy ran.

The scenarios above stop a task at a failpoint before they fault it: its
Python worker is frozen and dies with its executor, so they cannot show what a
task does with a stream that was cut while it read it. These land on tasks
that stream (a window of a million purchases, or a task slowed down record by
record), record where the fault landed, and fail a trial whose fault struck no
work in progress (``fault_not_mid_stream``):

- **executor_kill_midstream**: the executor JVM alone SIGKILLed (an executor
  OOM-killed) while its tasks stream; its Python workers outlive it a moment
  and see their stream end. ``spark.task.maxFailures=1``: the lost executor
  fails the job, so no retried attempt runs before the checker.
- **driver_kill_midstream**: the driver (the ``run-window`` process and its
  JVM, client mode) SIGKILLed while executors stream; they find their driver
  gone and exit on their own.
- **spark_speculation_streaming**: as spark_speculation, but the straggler
  streams slowly (failpoint ``mid_produce=throttle``) instead of sleeping, so
  the attempt its copy fences is mid-stream. The copy's ``init_transactions``
  fences the original before Spark could kill it as redundant: the original
  fails at its next produce, and the trial records whether Spark killed it.
- **two_brokers_down_midstream**: two of three Kafka nodes SIGKILLed while
  both tasks stream slowly; the run's ReplicaGuard cancels the job once the
  outputs stayed below min.insync.replicas, interrupting tasks with records
  still to come.

Each waits until the faulted attempts' Python workers are gone and the outputs
settled, runs the independent checker before any retry (every committed input
has its outputs; the committed offsets may stop short of the input's ends),
then a retry and the full check.
"""

from __future__ import annotations

import logging
import os
import random
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.embedded.spark_cluster import ExecutorProcess, SparkStandalone, SparkWorker
from eos_etl.errors import EXIT_RUNTIME

from .clear_failure import error_lines
from .cluster_scenarios import MIN_ISR_BOUND_S, register, restore_cluster
from .job_process import JobProcess
from .lab import Lab, TrialResult
from .landing import Landing, python_task_workers
from .trial import FAILPOINT_WAIT_S, RUN_BOUND_S, FaultTrial, once, shop_with_purchases, trial, wait_faulted_run

log = logging.getLogger(__name__)

#: The straggler sleeps this long with its transaction open: far longer than the partition takes
#: (a few seconds), far shorter than the stall watchdog (transaction timeout + 30 s = 150 s).
STRAGGLE_S = 100.0
#: Speculation tuned so that, with two tasks, one finished task is enough to judge the other slow.
SPECULATION_CONF = {
    "spark.speculation": "true",
    "spark.speculation.interval": "500ms",
    "spark.speculation.multiplier": "1.5",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.minTaskRuntime": "2s",
}


def _spark(lab: Lab) -> SparkStandalone:
    if lab.spark is None:
        raise ValueError("Spark scenarios need a lab with a Spark standalone cluster (Lab.spark)")
    return lab.spark


def _cluster_args(lab: Lab, chunk_records: int) -> list[str]:
    return ["--master", _spark(lab).master_url, "--chunk-records", str(chunk_records)]


def _stopped_task(spark: SparkStandalone, deadline_s: float, job) -> ExecutorProcess:
    """The executor whose Python worker stopped itself at the failpoint."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for executor in spark.executors():
            if executor.stopped_python_workers():
                return executor
        if not job.alive:
            raise RuntimeError(f"the job ended (exit {job.wait(0)}) before its failpoint fired:\n{job.tail()}")
        time.sleep(0.2)
    raise RuntimeError(f"no publishing task stopped at its failpoint within {deadline_s:.0f}s:\n{job.tail()}")


def _sigkill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class PartitionAttempts:
    """What the executors' own logs say about one input partition's publishing task."""

    started: list[str]  # "host/exec <id>" once per attempt that started publishing (by worker, not time)
    killed_as_redundant: int  # attempts Spark killed because another attempt of the task succeeded

    @property
    def hosts(self) -> set[str]:
        return {a.split("/")[0] for a in self.started}


def partition_attempts(spark: SparkStandalone, topic: str, partition: int) -> PartitionAttempts:
    """Read every executor log of the application that published ``topic`` (the publisher logs
    ``publishing <topic>[p]`` when an attempt starts; Spark logs why it kills a task)."""
    started_re = re.compile(rf"publishing {re.escape(topic)}\[{partition}\] ")
    started, redundant = [], 0
    for worker in spark.worker_nodes:
        for stderr in sorted(Path(worker.work_dir).glob("app-*/*/stderr")):
            try:
                text = stderr.read_text(errors="replace")
            except OSError:
                continue
            hits = len(started_re.findall(text))
            started += [f"{worker.host}/exec {stderr.parent.name}"] * hits
            if hits:
                redundant += text.count("reason: another attempt succeeded")
    return PartitionAttempts(started, redundant)


@dataclass(kw_only=True)
class ExecutorKill(FaultTrial):
    """A publishing task stopped itself mid-transaction (``mid_produce=stop``); its executor (JVM and
    Python workers) or, ``whole_worker``, its whole worker SIGKILLed; the faulted run within
    :data:`RUN_BOUND_S`; the worker back, a clean run if the faulted one did not finish. The partition
    must have been retried (a trial where it was not is not carried out), after a worker kill on the
    other worker. ``connect``: the window runs on the lab's Spark Connect server, whose executors are
    the cluster's."""

    whole_worker: bool
    connect: bool = False
    cluster: KafkaCluster = field(init=False)
    spark: SparkStandalone = field(init=False)
    partition: int = field(init=False)
    executor: ExecutorProcess | None = field(init=False, default=None)
    worker: SparkWorker | None = field(init=False, default=None)
    what: str = field(init=False, default="")
    attempts: PartitionAttempts | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.cluster, self.spark = self.lab.cluster, _spark(self.lab)
        self.partition = self.seed % self.partitions
        self.failpoint = f"mid_produce=stop,partition={self.partition},after={100 + self.seed * 37 % 300}"
        self.extra = ["--chunk-records", "500"] if self.connect else _cluster_args(self.lab, 500)

    def prepare(self) -> None:
        restore_cluster(self.cluster)
        self.spark.start()

    def job_env(self) -> dict | None:
        if not self.connect:
            return None
        self.lab.connect.ensure_running()
        return self.lab.connect.client_env()

    def reach(self) -> None:
        self.executor = _stopped_task(self.spark, self.reach_s, self.job)

    def inject(self) -> None:
        self.t_fault = time.monotonic()
        if self.whole_worker:
            self.worker = self.spark.worker(self.executor.worker_id)
            doomed = self.worker.executors()
            self.worker.kill()
            for e in doomed:  # a machine losing power takes its executors and Python workers too
                _sigkill([e.pid, *e.python_workers()])
            self.what = f"worker {self.worker.worker_id} ({self.worker.host}) with {len(doomed)} executor(s)"
        else:
            executor = self.executor
            _sigkill([executor.pid, *executor.python_workers()])
            self.what = f"executor {executor.executor_id} on {executor.host} (pid {executor.pid})"
        self.result.kills += 1

    def heal(self) -> None:
        self.attempts = partition_attempts(self.spark, self.shop.topics.purchases, self.partition)
        self.spark.start()  # the killed worker back (a no-op after an executor kill)

    def describe(self) -> str:
        return (f"SIGKILL of {self.what} mid-transaction on partition {self.partition}; attempts of that partition: "
                f"{self.attempts.started}; faulted run {'hung' if self.code is None else f'exit {self.code}'}; "
                f"recovered in {self.result.recovery_s}s")

    def judge(self) -> None:
        if len(self.attempts.started) < 2:
            raise RuntimeError(f"partition {self.partition} was not retried after the kill "
                               f"(attempts {self.attempts.started})")
        if self.whole_worker and not self.attempts.hosts - {self.worker.host}:
            self.result.violations["not_retried_on_another_worker"] = 1
        super().judge()


def executor_kill(lab: Lab, seed: int) -> TrialResult:
    """SIGKILL the executor (JVM and Python workers) running a publishing task with an open transaction."""
    return ExecutorKill(lab=lab, scenario="executor_kill", seed=seed, whole_worker=False).run()


def worker_kill(lab: Lab, seed: int) -> TrialResult:
    """SIGKILL the whole worker (daemon, executors, Python workers) running a publishing task."""
    return ExecutorKill(lab=lab, scenario="worker_kill", seed=seed, whole_worker=True).run()


def spark_speculation(lab: Lab, seed: int, *, records: int = 3000, partitions: int = 2,
                      chunk_records: int = 500) -> TrialResult:
    """spark.speculation=true with one publishing task straggling mid-transaction: two copies run at once."""
    cluster, spark = lab.cluster, _spark(lab)
    rng = random.Random(seed)
    with trial("spark_speculation", f"seed={seed}") as result:
        restore_cluster(cluster)
        spark.start()
        shop, ends = shop_with_purchases(lab, result, partitions, "speculation", records,
                                          invalid_share=0.05, seed=seed, transaction_size=250, abort_share=0.1)
        extra = _cluster_args(lab, chunk_records)
        speculative = [*extra, *(a for k, v in SPECULATION_CONF.items() for a in ("--spark-conf", f"{k}={v}"))]
        p = seed % partitions
        after = rng.randrange(50, 450)
        failpoint = f"mid_produce=sleep:{STRAGGLE_S:.0f},partition={p},after={after},{once('speculation')}"
        job = lab.job(shop, speculative, failpoints=failpoint).start()
        t_start = time.monotonic()
        try:
            code = wait_faulted_run(lab, result, job, t_start, RUN_BOUND_S, "spark_speculation")
        finally:
            if job.alive:
                job.kill()
        took = time.monotonic() - t_start
        attempts = partition_attempts(spark, shop.topics.purchases, p)
        if code != 0:
            lab.recover(shop, extra)
        result.kills = 1
        result.recovery_s = round(took, 1) if code == 0 else None
        result.detail = (f"partition {p} stalled {STRAGGLE_S:.0f}s after {after} records with its transaction "
                         f"open; attempts of that partition: {attempts.started}; original killed by Spark as "
                         f"redundant: {'yes' if attempts.killed_as_redundant else 'no'}; run exit {code} in "
                         f"{took:.0f}s")
        if len(attempts.started) < 2 or len(attempts.hosts) < 2:
            raise RuntimeError(f"no speculative copy of partition {p} ran on another host "
                               f"(attempts {attempts.started})")
        lab.judge(result, shop, ends)
    return result


def connect_executor_kill(lab: Lab, seed: int) -> TrialResult:
    """The same executor kill under a window run on the Spark Connect server (its executors on the cluster)."""
    return ExecutorKill(lab=lab, scenario="connect_executor_kill", seed=seed, whole_worker=False,
                        connect=True).run()


# -- faults that land on tasks streaming their records -------------------------------------------
#: A window still streaming when the fault lands: a million purchases over four partitions, two tasks
#: at a time on the two one-core workers at about 30,000 purchases a second each, 20,000 per transaction.
MIDSTREAM_PURCHASES = 1_000_000
MIDSTREAM_PARTITIONS = 4
MIDSTREAM_CHUNK = 20_000
#: The faulted run's transactions time out after 40 s (not 120): an attempt destroyed mid-transaction
#: holds every read_committed reader back until the broker aborts it, and the check before any retry
#: waits for that (SETTLE_BOUND_S).
FAULTED_TXN_TIMEOUT = ["--transaction-timeout-ms", "40000"]
SETTLE_BOUND_S = 40 + 20
#: The faulted attempts' Python workers are gone by then: an executor that lost its driver exits within
#: seconds, and Spark destroys an interrupted task's worker 2-4 s after the interrupt.
WORKERS_GONE_S = 90.0
#: From the tasks' start, how long the faulted run may take to commit part of a range.
LANDING_WAIT_S = 300.0


def _landing(lab: Lab, shop, ends: dict[int, int]) -> Landing:
    committed = lab.admin.committed_offsets(shop.group, shop.topics.purchases, sorted(ends))
    return Landing.from_ends(ends, committed, len(python_task_workers(e.pid for e in _spark(lab).executors())))


def _wait_mid_stream(lab: Lab, shop, ends: dict[int, int], job: JobProcess) -> None:
    """Until the run committed part of a range with records still to come (a task is streaming)."""
    deadline = time.monotonic() + LANDING_WAIT_S
    while not _landing(lab, shop, ends).mid_stream:
        if not job.alive:
            raise RuntimeError(f"the run ended (exit {job.wait(0)}) before it streamed:\n{job.tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the run committed no part of a range within {LANDING_WAIT_S:.0f}s:\n{job.tail()}")
        time.sleep(0.3)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(result: TrialResult, pids: list[int], t_fault: float, bound_s: float) -> float:
    """Wait for ``pids`` (the faulted attempts' Python processes) to be gone; seconds from the fault."""
    while any(_running(pid) for pid in pids):
        if time.monotonic() - t_fault > bound_s:
            result.violations["workers_outlived_bound"] = 1
            break
        time.sleep(0.5)
    return round(time.monotonic() - t_fault, 1)


def _before_retry_detail(result: TrialResult) -> str:
    c = result.counters
    return (f"before any retry (workers gone {c.get('workers_gone_s')}s after the fault, outputs settled in "
            f"{c['settled_before_retry_s']}s): {c['committed_before_retry']:,} inputs committed, "
            f"{c['published_before_retry']:,} published, {c['lost_before_retry']:,} lost")


def _kill_executor_jvm(lab: Lab, job: JobProcess, rng: random.Random) -> tuple[str, int | None]:
    """SIGKILL one executor JVM running a task, not its Python workers (an executor OOM-killed)."""
    busy = [e for e in _spark(lab).executors() if python_task_workers([e.pid])]
    if not busy:
        raise RuntimeError(f"no executor was running a task:\n{job.tail()}")
    executor = rng.choice(busy)
    executor.kill()
    return f"executor {executor.executor_id} JVM on {executor.host} (pid {executor.pid}) SIGKILLed", None


def _kill_driver(_lab: Lab, job: JobProcess, _rng: random.Random) -> tuple[str, int | None]:
    """SIGKILL the driver (the run-window process and its JVM, client mode); its executors live on."""
    job.kill()
    return f"driver (run-window pid {job.pid} and its JVM) SIGKILLed", job.wait(0)


def _midstream_kill(lab: Lab, scenario: str, seed: int, fault) -> TrialResult:
    """A million-purchase window on the cluster, ``fault(lab, job, rng)`` once a task streams; once the
    faulted attempts' Python workers are gone, the checker before any retry; a retry; the checker."""
    cluster, spark = lab.cluster, _spark(lab)
    rng = random.Random(seed)
    with trial(scenario, f"{MIDSTREAM_PURCHASES:,} purchases seed={seed}") as result:
        restore_cluster(cluster)
        spark.start()
        shop, ends = shop_with_purchases(lab, result, MIDSTREAM_PARTITIONS, scenario.replace("_", "-"),
                                          MIDSTREAM_PURCHASES, invalid_share=0.05, seed=seed,
                                          transaction_size=10_000, abort_share=0.02)
        extra = _cluster_args(lab, MIDSTREAM_CHUNK)
        faulted = [*extra, *FAULTED_TXN_TIMEOUT, "--spark-conf", "spark.task.maxFailures=1"]
        job = lab.job(shop, faulted).start()
        try:
            _wait_mid_stream(lab, shop, ends, job)
            time.sleep(rng.uniform(0.0, 3.0))
            doomed = [pid for e in spark.executors() for pid in e.python_workers()]
            landing = _landing(lab, shop, ends)
            t_fault = time.monotonic()
            how, code = fault(lab, job, rng)
            log.info("%s: %s; %s", scenario, how, landing.describe())
            result.kills = 1
            if job.alive:
                code = wait_faulted_run(lab, result, job, t_fault, RUN_BOUND_S, scenario)
        finally:
            if job.alive:
                job.kill()
        _checked_then_retried(lab, result, shop, extra, landing, doomed, t_fault, heal=spark.start)
        result.detail = (f"{how} mid-stream: {landing.describe()}; faulted run "
                         f"{'hung' if code is None else f'exit {code}'}; {_before_retry_detail(result)}; "
                         f"the retry ended {result.recovery_s}s after the fault")
        lab.judge(result, shop, ends)
    return result


def _checked_then_retried(lab: Lab, result: TrialResult, shop, extra: list[str], landing: Landing,
                          doomed: list[int], t_fault: float, heal) -> None:
    """After a mid-stream fault: where it landed, the faulted run's workers gone, what was lost healed
    (``heal``: Spark or the brokers back), the checker before any retry, then the retry."""
    landing.record(result)
    result.counters["workers_gone_s"] = _wait_gone(result, doomed, t_fault, WORKERS_GONE_S)
    heal()
    lab.judge_before_retry(result, shop, SETTLE_BOUND_S)
    lab.recover(shop, extra)
    result.recovery_s = round(time.monotonic() - t_fault, 1)


def executor_kill_midstream(lab: Lab, seed: int) -> TrialResult:
    """An executor JVM SIGKILLed while its tasks stream a million-purchase window."""
    return _midstream_kill(lab, "executor_kill_midstream", seed, _kill_executor_jvm)


def driver_kill_midstream(lab: Lab, seed: int) -> TrialResult:
    """The driver SIGKILLed while its executors stream a million-purchase window."""
    return _midstream_kill(lab, "driver_kill_midstream", seed, _kill_driver)


#: The streaming straggler: each record of its attempt sleeps 2 ms (about 500 a second, where the other
#: partition's task does thousands), and Spark sends records in Arrow batches of 200, so the straggler
#: still streams, between short batches, when its speculative copy fences it and Spark kills it.
STRAGGLER_THROTTLE_S = 0.002
STREAMING_ARROW_BATCH = ["--spark-conf", "spark.sql.execution.arrow.maxRecordsPerBatch=200"]


def _copy_started(lab: Lab, shop, ends: dict[int, int], p: int, job: JobProcess) -> Landing:
    """Wait for a second attempt of partition ``p`` to start publishing (its init_transactions has fenced
    the first); where that landed on the first attempt's range."""
    spark = _spark(lab)
    deadline = time.monotonic() + FAILPOINT_WAIT_S
    while len(partition_attempts(spark, shop.topics.purchases, p).started) < 2:
        if not job.alive or time.monotonic() > deadline:
            raise RuntimeError(f"no speculative copy of partition {p} started (run exit {job.wait(0)}):\n"
                               f"{job.tail()}")
        time.sleep(0.3)
    return _landing(lab, shop, ends).only(p)


def spark_speculation_streaming(lab: Lab, seed: int, *, records: int = 40_000, partitions: int = 2,
                                chunk_records: int = 1000) -> TrialResult:
    """spark.speculation=true with one publishing task straggling while it streams: its copy fences it
    mid-stream (where that landed is the fault's landing), the copy finishes the partition."""
    cluster, spark = lab.cluster, _spark(lab)
    with trial("spark_speculation_streaming", f"{records:,} purchases seed={seed}") as result:
        restore_cluster(cluster)
        spark.start()
        shop, ends = shop_with_purchases(lab, result, partitions, "speculation-streaming", records,
                                          invalid_share=0.05, seed=seed, transaction_size=1000, abort_share=0.02)
        extra = _cluster_args(lab, chunk_records)
        speculative = [*extra, *FAULTED_TXN_TIMEOUT, *STREAMING_ARROW_BATCH,
                       *(a for k, v in SPECULATION_CONF.items() for a in ("--spark-conf", f"{k}={v}"))]
        p = seed % partitions
        failpoint = (f"mid_produce=throttle:{STRAGGLER_THROTTLE_S},partition={p},after=100,"
                     f"{once('speculation-streaming')}")
        job = lab.job(shop, speculative, failpoints=failpoint).start()
        t_start = time.monotonic()
        try:
            landing = _copy_started(lab, shop, ends, p, job)
            doomed = [pid for e in spark.executors() for pid in e.python_workers()]
            t_fault = time.monotonic()
            result.kills = 1
            code = wait_faulted_run(lab, result, job, t_start, RUN_BOUND_S, "spark_speculation_streaming")
            took = time.monotonic() - t_start
        finally:
            if job.alive:
                job.kill()
        attempts = partition_attempts(spark, shop.topics.purchases, p)
        landing.record(result)
        result.counters.update(attempts=len(attempts.started), killed_as_redundant=attempts.killed_as_redundant)
        if len(attempts.hosts) < 2:
            result.violations["no_copy_on_another_host"] = 1
        result.counters["workers_gone_s"] = _wait_gone(result, doomed, t_fault, WORKERS_GONE_S)
        lab.judge_before_retry(result, shop, SETTLE_BOUND_S)
        if code != 0:
            lab.recover(shop, extra)
        # From the fence to the faulted run finishing, or else to the retry finishing.
        result.recovery_s = round((t_start + took if code == 0 else time.monotonic()) - t_fault, 1)
        result.detail = (f"partition {p} streaming at {STRAGGLER_THROTTLE_S * 1000:.0f} ms a record when its "
                         f"copy started: {landing.describe()}; attempts {attempts.started}; original killed by "
                         f"Spark as redundant: {'yes' if attempts.killed_as_redundant else 'no'}; run exit {code} in "
                         f"{took:.0f}s; {_before_retry_detail(result)}")
        lab.judge(result, shop, ends)
    return result


def two_brokers_down_midstream(lab: Lab, seed: int, *, records: int = 60_000, partitions: int = 2) -> TrialResult:
    """Two of three nodes SIGKILLed while both tasks stream (2 ms a record, Arrow batches of 200): the
    run's ReplicaGuard cancels its job once the outputs stayed below min.insync.replicas for its grace,
    interrupting tasks with records to come. The run fails with one error naming min.insync.replicas;
    with the nodes back, the checker before any retry, then a retry and the checker."""
    cluster, spark = lab.cluster, _spark(lab)
    rng = random.Random(seed)
    with trial("two_brokers_down_midstream", f"{records:,} purchases seed={seed}") as result:
        restore_cluster(cluster)
        spark.start()
        shop, ends = shop_with_purchases(lab, result, partitions, "two-down-midstream", records,
                                          invalid_share=0.05, seed=seed, transaction_size=1000, abort_share=0.02)
        extra = [*_cluster_args(lab, 1000), *STREAMING_ARROW_BATCH]
        job = lab.job(shop, [*extra, *FAULTED_TXN_TIMEOUT],
                      failpoints=f"mid_produce=throttle:{STRAGGLER_THROTTLE_S},after=100").start()
        try:
            _wait_mid_stream(lab, shop, ends, job)
            time.sleep(rng.uniform(0.0, 2.0))
            doomed = [pid for e in spark.executors() for pid in e.python_workers()]
            landing = _landing(lab, shop, ends)
            down = rng.sample([n.node_id for n in cluster.nodes], 2)
            t_fault = time.monotonic()
            for node_id in down:
                cluster.node(node_id).kill()
            log.info("two_brokers_down_midstream: nodes %s SIGKILLed; %s", down, landing.describe())
            result.kills = 2
            code = wait_faulted_run(lab, result, job, t_fault, MIN_ISR_BOUND_S, "two_brokers_down_midstream")
            failed_s = round(time.monotonic() - t_fault, 1)
        finally:
            if job.alive:
                job.kill()
        errors = error_lines(job.stderr)
        if code != EXIT_RUNTIME or not errors or "min.insync.replicas" not in errors[0]:
            result.violations["no_min_isr_error"] = 1
        _checked_then_retried(lab, result, shop, extra, landing, doomed, t_fault, heal=lambda: restore_cluster(cluster))
        result.detail = (f"nodes {down} SIGKILLed mid-stream: {landing.describe()}; run exit {code} after "
                         f"{failed_s}s: {errors[0][:160] if errors else job.tail(2)!r}; "
                         f"{_before_retry_detail(result)}; the retry ended {result.recovery_s}s after the fault")
        lab.judge(result, shop, ends)
    return result


SPARK_SCENARIOS = {"executor_kill": executor_kill, "worker_kill": worker_kill,
                   "spark_speculation": spark_speculation, "connect_executor_kill": connect_executor_kill,
                   "executor_kill_midstream": executor_kill_midstream, "driver_kill_midstream": driver_kill_midstream,
                   "spark_speculation_streaming": spark_speculation_streaming,
                   "two_brokers_down_midstream": two_brokers_down_midstream}
for _name, _run in SPARK_SCENARIOS.items():
    register(_name, _run)
