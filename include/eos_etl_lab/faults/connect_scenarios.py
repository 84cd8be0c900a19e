"""Faults on the Spark Connect route: the server, the client and the broker under a window run on the server.

The lab's :class:`~eos_etl.embedded.spark_connect.SparkConnectServer` (``Lab.connect``)
runs every window; the job is a real ``python -m eos_etl run-window`` client.
A window is made to stay in flight where the fault lands: one publishing task
sleeps mid-transaction (failpoint ``mid_produce=sleep``, once). After the
fault, production's next steps: the supervisor's ``ensure_running`` (what the
run task does before every window) and a retry; then the checker.

- **connect_server_kill**: SIGKILL of the server mid-publish.
- **connect_server_crash**: the server's JVM crashes mid-publish (SIGSEGV, its crash report written).
- **connect_server_stop**: SIGSTOP of the server past the stall bound (a stuck JVM).
- **connect_client_kill**: SIGKILL of the client mid-window: its tasks commit nothing
  past its lease (``engine.publishing.client_lease``: they fail at their next commit once
  it expired), and the server ends the orphaned operation within its detached-operation bound.
- **connect_task_kill**: Airflow kills the run task: the operator's ``on_kill``
  (SIGTERM to the client), which interrupts the operations it tagged (the
  session is the pipeline's and stays).
- **connect_two_clients**: two clients run the same window at once.
- **connect_server_restart**: the server restarted between two windows.
- **connect_broker_kill**: the broker SIGKILLed (and restarted 2 s later) while a
  Connect window publishes.

Each trial records how long the faulted run took to end (``fail_s``, within
:data:`FAIL_BOUND_S` or it is a hang) and the recovery (fault to exact output).
"""

from __future__ import annotations

import logging
import random
import signal
import time
from dataclasses import dataclass, field

import psutil

from eos_etl.embedded.spark_connect import (
    DETACHED_TIMEOUT,
    MAINTENANCE_INTERVAL,
    SENDER_MAX_STREAM_DURATION,
    SparkConnectServer,
)
from eos_etl.spark.connect_client import TERM_GRACE_S
from eos_etl.spark.connect_probe import STALL_BOUND_S

from .job_process import JobProcess
from .lab import Lab, TrialResult
from .landing import Landing, python_task_workers
from .trial import FaultTrial, once, shop_with_purchases, trial

log = logging.getLogger(__name__)

#: A window whose server dies or stalls ends within this (the client's watch, a probe, the exit).
FAIL_BOUND_S = STALL_BOUND_S + 15
#: An orphaned operation (its client killed) ends within this: the response stream's end (when the server
#: sees the client gone), Spark's detached timeout, its maintenance interval, and the time to interrupt
#: the tasks.
ORPHAN_BOUND_S = sum(float(s.rstrip("s")) for s in (SENDER_MAX_STREAM_DURATION, DETACHED_TIMEOUT,
                                                     MAINTENANCE_INTERVAL)) + 15
SLEEP_S = 120  # how long the failpoint keeps a task in flight (the fault lands within it)
EXTRA = ["--chunk-records", "200"]
#: The faulted run of a client-kill scenario: a task that Spark destroys mid-transaction leaves it open
#: until the broker aborts it, and the checker before any retry waits for that (SETTLE_BOUND_S).
FAULTED_TXN_TIMEOUT = ["--transaction-timeout-ms", "40000"]
SETTLE_BOUND_S = 40 + 20
#: What the server's log says of a task whose run's client is gone (engine.publishing.client_lease).
LEASE_REFUSAL = "ClientLeaseError: the Spark Connect client that started this task's run is gone"


def _server(lab: Lab) -> SparkConnectServer:
    if lab.connect is None:
        raise ValueError("Connect scenarios need a lab with a Spark Connect server (Lab.connect)")
    return lab.connect


def _client(lab: Lab, shop, failpoints: str = "", run_id: str | None = None, extra: list[str] = EXTRA
            ) -> JobProcess:
    extra = extra + (["--run-id", run_id] if run_id else [])
    return lab.job(shop, extra, failpoints=failpoints, env=_server(lab).client_env())


def _in_flight(lab: Lab, shop, scenario: str, seed: int, extra: list[str] = EXTRA) -> JobProcess:
    """A client whose task for one partition is asleep mid-transaction."""
    server = _server(lab)
    server.ensure_running()
    since = server.log_file.stat().st_size if server.log_file.is_file() else 0
    job = _client(lab, shop, f"{_asleep(seed)},{once(scenario)}", extra=extra).start()
    _wait_asleep(server, since, job)
    return job


def _asleep(seed: int) -> str:
    """The failpoint that keeps one partition's task asleep mid-transaction (the fault lands meanwhile)."""
    return f"mid_produce=sleep:{SLEEP_S},partition={seed % 2},after={10 + seed * 13 % 90}"


def _wait_asleep(server: SparkConnectServer, since: int, job: JobProcess) -> None:
    """Until the server logged (after byte ``since``) that the task fell asleep; the client killed if it never did."""
    deadline = time.monotonic() + 240
    while "failpoint mid_produce fired" not in server.log_since(since):
        if not job.alive or time.monotonic() > deadline:
            job.kill()
            raise RuntimeError(f"the window never reached its failpoint:\n{job.tail()}")
        time.sleep(0.3)


def _window_in_flight(lab: Lab, result: TrialResult, scenario: str, seed: int, extra: list[str] = EXTRA):
    """A fresh shop with 600 purchases (committed, aborted and invalid ones) and a client in flight on it."""
    shop, ends = shop_with_purchases(lab, result, 2, scenario.replace("_", "-"), 600, invalid_share=0.05,
                                      seed=seed, transaction_size=100, abort_share=0.1)
    return shop, ends, _in_flight(lab, shop, scenario, seed, extra)


def task_workers(server: SparkConnectServer) -> list[int]:
    """The server's Python workers running a task now (children of its worker daemons)."""
    try:
        return python_task_workers([server.pid()])
    except (ValueError, TypeError):
        return []


def _ended_within(result: TrialResult, job: JobProcess, t_fault: float, bound_s: float, codes: tuple[int, ...]
                  ) -> int | None:
    """Wait for the faulted run to end within ``bound_s``; it must end with one of ``codes`` and,
    failing, with exactly one ``error:`` line and no traceback."""
    code = job.wait(max(1.0, bound_s - (time.monotonic() - t_fault)))
    if code is None:
        result.hung = True
        job.kill()
        return None
    result.fail_s = round(time.monotonic() - t_fault, 1)
    errors = [line for line in job.stderr.splitlines() if line.startswith("error:")]
    if code not in codes or (code != 0 and (len(errors) != 1 or "Traceback" in job.stderr)):
        result.violations["unclear_failure"] = 1
        log.error("faulted run: exit %s, errors %s\n%s", code, errors, job.tail(30))
    return code


def _recover(lab: Lab, result: TrialResult, shop, t_fault: float, extra: list[str] = EXTRA) -> None:
    _server(lab).ensure_running()
    lab.recover(shop, extra, env=_server(lab).client_env())
    result.recovery_s = round(time.monotonic() - t_fault, 1)


@dataclass(kw_only=True)
class ServerFault(FaultTrial):
    """A window in flight on the server (one task asleep mid-transaction), the server sent ``sig``; the
    faulted run must end within :data:`FAIL_BOUND_S` with one clear error; the supervisor's restart and
    the retry; the checker."""

    sig: int
    records: int = 600
    purchases: dict = field(default_factory=lambda: {"invalid_share": 0.05, "transaction_size": 100,
                                                     "abort_share": 0.1})
    extra: list[str] = field(default_factory=lambda: list(EXTRA))
    server: SparkConnectServer | None = field(init=False, default=None)
    since: int = field(init=False, default=0)
    pid: int | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.failpoint = _asleep(self.seed)

    def job_env(self) -> dict | None:
        self.server = _server(self.lab)
        self.server.ensure_running()
        self.since = self.server.log_file.stat().st_size if self.server.log_file.is_file() else 0
        return self.server.client_env()

    def reach(self) -> None:
        _wait_asleep(self.server, self.since, self.job)

    def inject(self) -> None:
        self.pid = self.server.pid()
        psutil.Process(self.pid).send_signal(self.sig)
        self.t_fault = time.monotonic()
        self.result.kills += 1

    def finish(self) -> int | None:
        return _ended_within(self.result, self.job, self.t_fault, FAIL_BOUND_S, (1,))

    def retry(self) -> None:
        """Whatever the faulted run did: production's next steps, the supervisor (timed: the fault to a
        server that answers) and a retry."""
        t0 = time.monotonic()
        self.server.ensure_running()
        self.result.counters["restart_s"] = round(time.monotonic() - t0, 1)
        self.result.counters["answering_after_fault_s"] = round(time.monotonic() - self.t_fault, 1)
        _recover(self.lab, self.result, self.shop, self.t_fault)

    def describe(self) -> str:
        return (f"server {signal.Signals(self.sig).name} mid-publish; the window ended (exit {self.code}) after "
                f"{self.result.fail_s}s; restarted by the next window's supervisor in "
                f"{self.result.counters.get('restart_s')}s (pid {self.pid} -> {self.server.pid()}, answering "
                f"{self.result.counters.get('answering_after_fault_s')}s after the fault), retry exact after "
                f"{self.result.recovery_s}s")


def connect_server_kill(lab: Lab, seed: int) -> TrialResult:
    return ServerFault(lab=lab, scenario="connect_server_kill", seed=seed, sig=signal.SIGKILL).run()


def connect_server_crash(lab: Lab, seed: int) -> TrialResult:
    """The server's JVM crashes mid-publish (a SIGSEGV: HotSpot writes its crash report and aborts, as on a
    native fault of its own): the window fails clearly, the next window's supervisor restarts the server."""
    return ServerFault(lab=lab, scenario="connect_server_crash", seed=seed, sig=signal.SIGSEGV).run()


def connect_server_stop(lab: Lab, seed: int) -> TrialResult:
    return ServerFault(lab=lab, scenario="connect_server_stop", seed=seed, sig=signal.SIGSTOP).run()


@dataclass(frozen=True)
class MidStream:
    """A window still streaming records into its publishing tasks when the fault lands: big (the soak: a
    million purchases) or small and slowed down (the test suite: every record of a task sleeps a little,
    failpoint ``mid_produce=throttle``, in small Arrow batches, so that an interrupted task still reaches
    its stream's end before Spark destroys its worker). The fault waits ``fault_after_s`` after the tasks
    started and then for a partition whose range is committed in part."""

    purchases: int
    partitions: int = 3
    chunk_records: int = 20_000
    fault_after_s: float = 10.0
    throttle_s: float = 0.0  # per record, in the faulted run only
    arrow_batch: int | None = None  # spark.sql.execution.arrow.maxRecordsPerBatch (None: Spark's default)
    transaction_size: int = 10_000  # of the generator (2 % of its transactions abort)

    def extra(self) -> list[str]:
        conf = ["--spark-conf", f"spark.sql.execution.arrow.maxRecordsPerBatch={self.arrow_batch}"] \
            if self.arrow_batch else []
        return ["--chunk-records", str(self.chunk_records), *conf]

    def failpoints(self) -> str:
        return f"mid_produce=throttle:{self.throttle_s},after=100" if self.throttle_s else ""


#: The soak's: a million purchases over three partitions, the fault 10 s after publishing started.
SOAK_MIDSTREAM = MidStream(purchases=1_000_000)


def _landing(lab: Lab, shop, ends: dict[int, int]) -> Landing:
    committed = lab.admin.committed_offsets(shop.group, shop.topics.purchases, sorted(ends))
    return Landing.from_ends(ends, committed, len(task_workers(_server(lab))))


def _streaming(lab: Lab, result: TrialResult, scenario: str, seed: int, window: MidStream):
    """A fresh shop with ``window.purchases`` and a client streaming it, up to the moment to fault it:
    (shop, ends, client, where the fault lands)."""
    shop, ends = shop_with_purchases(lab, result, window.partitions, scenario.replace("_", "-"), window.purchases,
                                      invalid_share=0.05, seed=seed, transaction_size=window.transaction_size,
                                      abort_share=0.02)
    _server(lab).ensure_running()
    job = lab.job(shop, window.extra() + FAULTED_TXN_TIMEOUT, failpoints=window.failpoints(),
                  env=_server(lab).client_env()).start()
    if not job.wait_for("publishing tasks", 300):
        job.kill()
        raise RuntimeError(f"the window never started publishing:\n{job.tail()}")
    time.sleep(window.fault_after_s)
    deadline = time.monotonic() + 60
    while not (landing := _landing(lab, shop, ends)).mid_stream and job.alive and time.monotonic() < deadline:
        time.sleep(0.2)
    return shop, ends, job, landing


def _tasks_ended(lab: Lab, result: TrialResult, t_fault: float, bound: float) -> float:
    """Wait for the server's publishing tasks to end (the orphan cancelled, the interrupt landed)."""
    server = _server(lab)
    while task_workers(server) and time.monotonic() - t_fault < bound + 60:
        time.sleep(0.5)
    ended_s = round(time.monotonic() - t_fault, 1)
    if ended_s > bound:
        result.violations["orphan_outlived_its_bound"] = 1
    return ended_s


def _client_gone(lab: Lab, seed: int, scenario: str, end_client, window: MidStream | None = None) -> TrialResult:
    """The client ended by ``end_client`` with its window in flight (``window``: streaming; None: one
    task asleep mid-transaction); once its tasks ended and its outputs settled, the checker before any
    retry, then the retry and the checker again.
    A trial whose fault struck no work in progress (no task with records to come, none killed by Spark nor
    refused a commit by its client's lease, or, streaming, no range committed in part) fails as
    ``fault_not_mid_stream``."""
    with trial(scenario, f"seed={seed}") as result:
        server = _server(lab)
        since = server.log_file.stat().st_size if server.log_file.is_file() else 0
        if window is None:
            shop, ends, job = _window_in_flight(lab, result, scenario, seed, EXTRA + FAULTED_TXN_TIMEOUT)
            landing, extra = _landing(lab, shop, ends), EXTRA
        else:
            shop, ends, job, landing = _streaming(lab, result, scenario, seed, window)
            extra = window.extra()
        t_fault = time.monotonic()
        how = end_client(job)
        result.kills = 1
        ended_s = result.fail_s = _tasks_ended(lab, result, t_fault,
                                               ORPHAN_BOUND_S if how == "SIGKILL" else TERM_GRACE_S + 5)
        log_text = server.log_since(since)
        killed = log_text.count("TaskKilled")
        # A task whose client's lease expired fails at its next commit (one traceback per attempt, as often
        # as Spark logs it): not killed, but stopped on work in progress all the same.
        refused = log_text.count(LEASE_REFUSAL)
        landing.record(result, streaming=window is not None)
        result.counters["tasks_killed"] = killed
        result.counters["lease_refusals_logged"] = refused
        if not killed and not refused:
            result.violations["fault_not_mid_stream"] = 1
        lab.judge_before_retry(result, shop, SETTLE_BOUND_S)
        _recover(lab, result, shop, t_fault, extra)
        result.detail = (f"client {how} mid-window: {landing.describe()}; its tasks on the server ended "
                         f"{ended_s}s later, {killed} killed by Spark, {refused} lease refusals logged; before any "
                         "retry (outputs settled in "
                         f"{result.counters['settled_before_retry_s']}s) "
                         f"{result.counters['committed_before_retry']:,} inputs committed, "
                         f"{result.counters['published_before_retry']:,} published, "
                         f"{result.counters['lost_before_retry']:,} lost; the retry ended {result.recovery_s}s after "
                         "the fault")
        lab.judge(result, shop, ends)
    return result


def _sigkill(job: JobProcess) -> str:
    job.kill()
    return "SIGKILL"


def _on_kill(job: JobProcess) -> str:
    """Airflow's own path: the operator's ``on_kill`` (SIGTERM) on the running client."""
    from eos_etl.orchestration.operators import WindowSparkConnectOperator  # Airflow loads for these scenarios only

    operator = WindowSparkConnectOperator(task_id="run_window", application="jobs/run_window.py")
    operator._proc = job.proc
    operator.on_kill()
    code = job.wait(5)
    errors = [line for line in job.stderr.splitlines() if line.startswith("error:")]
    if code != 143 or len(errors) != 1 or "terminated (SIGTERM)" not in errors[0]:
        raise RuntimeError(f"on_kill: exit {code}, errors {errors}:\n{job.tail()}")
    return "SIGTERM (on_kill)"


def connect_client_kill(lab: Lab, seed: int) -> TrialResult:
    return _client_gone(lab, seed, "connect_client_kill", _sigkill)


def connect_task_kill(lab: Lab, seed: int) -> TrialResult:
    """Airflow kills the run task: the operator's ``on_kill`` on the running client."""
    return _client_gone(lab, seed, "connect_task_kill", _on_kill)


def connect_client_kill_midstream(lab: Lab, seed: int, window: MidStream = SOAK_MIDSTREAM) -> TrialResult:
    """The client SIGKILLed while its tasks stream: the server cancels the orphan mid-stream."""
    return _client_gone(lab, seed, "connect_client_kill_midstream", _sigkill, window)


def connect_client_term_midstream(lab: Lab, seed: int, window: MidStream = SOAK_MIDSTREAM) -> TrialResult:
    """The operator's ``on_kill`` while the client's tasks stream: they are interrupted mid-stream."""
    return _client_gone(lab, seed, "connect_client_term_midstream", _on_kill, window)


def connect_two_clients(lab: Lab, seed: int) -> TrialResult:
    with trial("connect_two_clients", f"seed={seed}") as result:
        shop, ends = shop_with_purchases(lab, result, 2, "connect-two", 3000, invalid_share=0.05, seed=seed,
                                          transaction_size=200, abort_share=0.1)
        _server(lab).ensure_running()
        t0 = time.monotonic()
        jobs = [_client(lab, shop, run_id=f"twin-{i}-{seed}").start() for i in (1, 2)]
        codes = [j.wait(FAIL_BOUND_S + 240) for j in jobs]
        for j in jobs:
            if j.alive:
                result.hung = True
                j.kill()
        result.fail_s = round(time.monotonic() - t0, 1)
        if 0 not in codes:
            _recover(lab, result, shop, t0)
        result.detail = f"exit codes {codes}; {sum(j.count('fenced') > 0 for j in jobs)} of 2 saw fencing"
        lab.judge(result, shop, ends)
    return result


def connect_server_restart(lab: Lab, seed: int) -> TrialResult:
    with trial("connect_server_restart", f"seed={seed}") as result:
        shop, ends = shop_with_purchases(lab, result, 2, "connect-restart", 600, invalid_share=0.05, seed=seed)
        server = _server(lab)
        server.ensure_running()
        lab.recover(shop, EXTRA + ["--max-records-per-partition", "100"], env=server.client_env())
        pid = server.pid()
        server.stop()
        t_fault = time.monotonic()
        result.kills = 1
        _recover(lab, result, shop, t_fault)
        result.detail = f"restarted between windows (pid {pid} -> {server.pid()}); next window exact"
        lab.judge(result, shop, ends)
    return result


def connect_broker_kill(lab: Lab, seed: int) -> TrialResult:
    rng = random.Random(seed)
    with trial("connect_broker_kill", f"seed={seed}") as result:
        shop, ends = shop_with_purchases(lab, result, 2, "connect-broker", 3000, invalid_share=0.05, seed=seed,
                                          transaction_size=200, abort_share=0.1)
        _server(lab).ensure_running()
        job = _client(lab, shop).start()
        if not job.wait_for("publishing tasks", 240):
            raise RuntimeError(f"the window never started publishing:\n{job.tail()}")
        time.sleep(rng.uniform(0.0, 2.0))
        lab.broker.kill()
        t_fault = time.monotonic()
        result.kills = 1
        time.sleep(2)
        lab.broker.start()
        code = _ended_within(result, job, t_fault, 300, (0, 1, 2))
        if code != 0:
            _recover(lab, result, shop, t_fault)
        else:
            result.recovery_s = result.fail_s
        result.detail = f"broker SIGKILL mid-window, back after 2 s; the window ended with exit {code}"
        lab.judge(result, shop, ends)
    return result


CONNECT_SCENARIOS = {
    "connect_server_kill": connect_server_kill,
    "connect_server_crash": connect_server_crash,
    "connect_server_stop": connect_server_stop,
    "connect_client_kill": connect_client_kill,
    "connect_task_kill": connect_task_kill,
    "connect_client_kill_midstream": connect_client_kill_midstream,
    "connect_client_term_midstream": connect_client_term_midstream,
    "connect_two_clients": connect_two_clients,
    "connect_server_restart": connect_server_restart,
    "connect_broker_kill": connect_broker_kill,
}
