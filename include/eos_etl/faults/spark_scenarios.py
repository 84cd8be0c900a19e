"""Spark-side faults on the standalone cluster: a lost executor, a lost worker, speculative copies.

The job runs on the lab's :class:`~eos_etl.stack.spark_cluster.SparkStandalone`
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
"""

from __future__ import annotations

import logging
import os
import random
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from ..stack.spark_cluster import ExecutorProcess, SparkStandalone
from .cluster_scenarios import FAILPOINT_WAIT_S, RUN_BOUND_S, _finish, _restore, register
from .lab import Lab, TrialResult
from .scenarios import _once, _shop_with_purchases, trial

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


def _executor_or_worker_kill(lab: Lab, scenario: str, seed: int, *, whole_worker: bool, connect: bool = False,
                             records: int = 3000, partitions: int = 2, chunk_records: int = 500) -> TrialResult:
    """``connect``: the window runs on the lab's Spark Connect server, whose executors are the cluster's."""
    cluster, spark = lab.cluster, _spark(lab)
    with trial(scenario, f"seed={seed}") as result:
        _restore(cluster)
        spark.start()
        shop, ends = _shop_with_purchases(lab, result, partitions, scenario.replace("_", "-"), records,
                                          invalid_share=0.05, seed=seed, transaction_size=250, abort_share=0.1)
        env = None
        if connect:
            lab.connect.ensure_running()
            extra, env = ["--chunk-records", str(chunk_records)], lab.connect.client_env()
        else:
            extra = _cluster_args(lab, chunk_records)
        p = seed % partitions
        failpoint = f"mid_produce=stop,partition={p},after={100 + seed * 37 % 300},{_once(scenario)}"
        job = lab.job(shop, extra, failpoints=failpoint, env=env).start()
        try:
            executor = _stopped_task(spark, FAILPOINT_WAIT_S, job)
            t_fault = time.monotonic()
            if whole_worker:
                worker = spark.worker(executor.worker_id)
                doomed = worker.executors()
                worker.kill()
                for e in doomed:  # a machine losing power takes its executors and Python workers too
                    _sigkill([e.pid, *e.python_workers()])
                what = f"worker {worker.worker_id} ({worker.host}) with {len(doomed)} executor(s)"
            else:
                _sigkill([executor.pid, *executor.python_workers()])
                what = f"executor {executor.executor_id} on {executor.host} (pid {executor.pid})"
            result.kills += 1
            code = _finish(lab, result, job, t_fault, RUN_BOUND_S, scenario)
        finally:
            if job.alive:
                job.kill()
        attempts = partition_attempts(spark, shop.topics.purchases, p)
        spark.start()  # the killed worker back (a no-op after an executor kill)
        if code != 0:
            lab.recover(shop, extra, env=env)
            result.recovery_s = round(time.monotonic() - t_fault, 1)
        result.detail = (f"SIGKILL of {what} mid-transaction on partition {p}; attempts of that partition: "
                         f"{attempts.started}; faulted run {'hung' if code is None else f'exit {code}'}; "
                         f"recovered in {result.recovery_s}s")
        if len(attempts.started) < 2:
            raise RuntimeError(f"partition {p} was not retried after the kill (attempts {attempts.started})")
        if whole_worker and not attempts.hosts - {worker.host}:
            result.violations["not_retried_on_another_worker"] = 1
        lab.judge(result, shop, ends)
    return result


def executor_kill(lab: Lab, seed: int) -> TrialResult:
    """SIGKILL the executor (JVM and Python workers) running a publishing task with an open transaction."""
    return _executor_or_worker_kill(lab, "executor_kill", seed, whole_worker=False)


def worker_kill(lab: Lab, seed: int) -> TrialResult:
    """SIGKILL the whole worker (daemon, executors, Python workers) running a publishing task."""
    return _executor_or_worker_kill(lab, "worker_kill", seed, whole_worker=True)


def spark_speculation(lab: Lab, seed: int, *, records: int = 3000, partitions: int = 2,
                      chunk_records: int = 500) -> TrialResult:
    """spark.speculation=true with one publishing task straggling mid-transaction: two copies run at once."""
    cluster, spark = lab.cluster, _spark(lab)
    rng = random.Random(seed)
    with trial("spark_speculation", f"seed={seed}") as result:
        _restore(cluster)
        spark.start()
        shop, ends = _shop_with_purchases(lab, result, partitions, "speculation", records,
                                          invalid_share=0.05, seed=seed, transaction_size=250, abort_share=0.1)
        extra = _cluster_args(lab, chunk_records)
        speculative = [*extra, *(a for k, v in SPECULATION_CONF.items() for a in ("--spark-conf", f"{k}={v}"))]
        p = seed % partitions
        after = rng.randrange(50, 450)
        failpoint = f"mid_produce=sleep:{STRAGGLE_S:.0f},partition={p},after={after},{_once('speculation')}"
        job = lab.job(shop, speculative, failpoints=failpoint).start()
        t_start = time.monotonic()
        try:
            code = _finish(lab, result, job, t_start, RUN_BOUND_S, "spark_speculation")
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
                         f"redundant: {'yes' if attempts.killed_as_redundant else 'no'}; run exit {code} in {took:.0f}s")
        if len(attempts.started) < 2 or len(attempts.hosts) < 2:
            raise RuntimeError(f"no speculative copy of partition {p} ran on another host "
                               f"(attempts {attempts.started})")
        lab.judge(result, shop, ends)
    return result


def connect_executor_kill(lab: Lab, seed: int) -> TrialResult:
    """The same executor kill under a window run on the Spark Connect server (its executors on the cluster)."""
    return _executor_or_worker_kill(lab, "connect_executor_kill", seed, whole_worker=False, connect=True)


SPARK_SCENARIOS = {"executor_kill": executor_kill, "worker_kill": worker_kill,
                   "spark_speculation": spark_speculation, "connect_executor_kill": connect_executor_kill}
for _name, _run in SPARK_SCENARIOS.items():
    register(_name, _run)
