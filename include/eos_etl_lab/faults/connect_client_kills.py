"""Client SIGKILLs mid-window, hundreds of them, on one Spark Connect server: the server must outlive them all.

Every kill stops a window's tasks on the server by a path that interrupts task threads: the client's lease
runs out and a task fails at its next commit, Spark retries it and, once it gave up, kills the stage's
other tasks with ``Thread.interrupt()`` (the Connect server marks every job interruptible), or the server
cancels the orphaned operation. Each interrupt that lands while a task thread copies an Arrow batch into
its Python runner's buffer used to free that buffer under the copy: a SIGSEGV of the whole server, about
one kill in 32 on the real path (docs/spark-python-interrupt-crash.md; :mod:`eos_etl.jvm.spark_patches`
is the project's immunity).

The loop: one server, shops of :data:`SHOP_PURCHASES` purchases over :data:`PARTITIONS` partitions (the
product's defaults: Arrow batches of 10,000 records, its own chunk size), and for each kill a real
``run-window`` client that resumes the shop's window, SIGKILLed a random 0 to :data:`MAX_DELAY_S` seconds
after its tasks started publishing. A kill counts as landed when the server had task workers running
and the window was not done. After each kill: the server's tasks must end (within the orphan's bound) and
the server must be the same process, answering; a server that died is counted, its ``hs_err`` file kept,
and it is restarted the way the next window would (``ensure_running``: the time from the crash noticed
to a server answering is recorded). When a shop's window is nearly done, a clean run finishes it and the
independent checker judges it exact before the next shop starts; every :data:`CHECK_EVERY` kills the
checker also runs before the next run could hide a loss (every committed input has its outputs).

Cost, on 2 cores: about 35 s a kill. The client's start (about 5 s); the end of its tasks on the server
(about 20 s: the lease's 6 s, the refused task's three retries, then Spark's abort of the stage or the
server's cancellation of the orphan, whichever comes first); a new shop every 8 kills or so (generated,
finished, judged: about 90 s).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from eos_etl.embedded.connect_server_state import jobs_in_flight

from .connect_scenarios import FAULTED_TXN_TIMEOUT, LEASE_REFUSAL, ORPHAN_BOUND_S, SETTLE_BOUND_S, task_workers
from .lab import Lab, TrialResult
from .trial import shop_with_purchases, trial

log = logging.getLogger(__name__)

SHOP_PURCHASES = 1_000_000
PARTITIONS = 3
MAX_DELAY_S = 2.5
#: Every this many kills, the checker runs before the next run (a retry) could hide a loss.
CHECK_EVERY = 20
#: A shop with fewer inputs left to commit than this is finished and judged; the next kills get a new one.
MIN_LEFT = 150_000


def _left(lab: Lab, shop, ends: dict[int, int]) -> int:
    committed = lab.admin.committed_offsets(shop.group, shop.topics.purchases, sorted(ends))
    return sum(end - (committed.get(p) or 0) for p, end in ends.items())


def _tasks_started(server, job, timeout_s: float = 120) -> bool:
    """Wait until the run's tasks run on the server (the previous run's ended before this one started)."""
    deadline = time.monotonic() + timeout_s
    while job.alive and time.monotonic() < deadline:
        if task_workers(server):
            return True
        time.sleep(0.1)
    return False


def patched_class_path(server) -> bool:
    """Whether the server's JVM has the Spark patches' jar first on its class path (eos_etl.jvm.spark_patches)."""
    args = Path(f"/proc/{server.pid()}/cmdline").read_bytes().split(b"\0")
    class_path = args[args.index(b"-cp") + 1].decode() if b"-cp" in args else ""
    return "eos-etl-spark-patches-" in class_path.split(":")[0]


def _tasks_ended(server, pid: int, t_kill: float) -> float:
    """When the killed run's job ended on the server (its event log: Spark retries a failed task, then kills
    the stage's others) and no task ran any more; or the server died (its pid changed); or the orphan's bound
    passed."""
    while server.pid() == pid and time.monotonic() - t_kill < ORPHAN_BOUND_S:
        if not jobs_in_flight(server.event_log_dir) and not task_workers(server):
            return time.monotonic()
        time.sleep(0.1)
    return time.monotonic()


def _hs_errs(server) -> set[str]:
    return {str(p) for where in (server.home, server.home / "local") for p in where.glob("hs_err_pid*.log")}


@dataclass
class _Tally:
    """What the kills of one trial did, summed up into its result at the end."""

    landed: int = 0
    crashes: int = 0
    shops: int = 0
    restart_s: list[float] = field(default_factory=list)
    tasks_ended_s: list[float] = field(default_factory=list)


def client_kills(lab: Lab, seed: int, kills: int = 300, *, shop_purchases: int = SHOP_PURCHASES,
                 min_left: int = MIN_LEFT, check_every: int = CHECK_EVERY, duration_s: float | None = None
                 ) -> TrialResult:
    """``kills`` client SIGKILLs mid-window on ``lab.connect`` (fewer if ``duration_s`` passed first: the
    count reached is reported); violations: the server crashed, a kill that landed on no work in progress,
    and the checker's on every shop (before a retry every ``check_every`` kills)."""
    rng = random.Random(seed)
    with trial("connect_client_kills", f"seed={seed}") as result:
        server = lab.connect
        server.ensure_running()
        known_crashes = _hs_errs(server)
        log_start = server.log_file.stat().st_size if server.log_file.is_file() else 0
        result.counters["patched"] = patched_class_path(server)
        tally = _Tally()
        shop = ends = None
        deadline = time.monotonic() + duration_s if duration_s else float("inf")
        while result.kills < kills and time.monotonic() < deadline:
            if shop is None or _left(lab, shop, ends) < min_left:
                if shop is not None:
                    _judge(lab, result, shop, ends, server)
                shop, ends = shop_with_purchases(lab, TrialResult("", ""), PARTITIONS, f"client-kills-{tally.shops}",
                                                 shop_purchases, invalid_share=0.05, seed=seed * 1000 + tally.shops,
                                                 transaction_size=10_000, abort_share=0.02)
                result.records += sum(ends.values())
                tally.shops += 1
            if not _kill_one(lab, server, shop, rng, result, tally, known_crashes, kills):
                continue
            if result.kills % check_every == 0:
                _judge_before_retry(lab, result, shop)
            if result.kills % 25 == 0:
                log.info("client kills: %d of %d, %d landed mid-window, %d server crashes", result.kills, kills,
                         tally.landed, tally.crashes)
        _judge(lab, result, shop, ends, server)
        _summarize(result, tally, server, log_start, sorted(_hs_errs(server) - known_crashes))
    return result


def _kill_one(lab: Lab, server, shop, rng: random.Random, result: TrialResult, tally: _Tally,
              known_crashes: set[str], kills: int) -> bool:
    """One run of the shop's window, SIGKILLed once its tasks run; then its tasks' end and the server's fate.
    False when the run failed before it published (not a kill; counted, and too many end the trial)."""
    pid = server.pid()
    job = lab.job(shop, FAULTED_TXN_TIMEOUT, env=server.client_env()).start()
    if not job.wait_for("publishing tasks", 300) or not _tasks_started(server, job):
        # After a kill a run may fail before it publishes (a retryable error: exit 1).
        job.kill()
        code = job.wait(10)
        not_started = result.counters["runs_not_publishing"] = result.counters.get("runs_not_publishing", 0) + 1
        log.warning("a run exited %s before its tasks published:\n%s", code, job.tail(20))
        if not_started > max(5, kills // 20):
            raise RuntimeError(f"{not_started} runs never started publishing; the last (exit {code}):\n"
                               f"{job.tail(40)}")
        return False
    time.sleep(rng.uniform(0.0, MAX_DELAY_S))
    streaming = job.alive and bool(task_workers(server))
    if not streaming:
        log.warning("kill %d found no task running (client %s):\n%s", result.kills + 1,
                    "alive" if job.alive else f"exited {job.proc.poll()}", job.tail(8))
    job.kill()
    job.wait(10)
    t_kill = time.monotonic()
    result.kills += 1
    tally.landed += streaming
    tally.tasks_ended_s.append(_tasks_ended(server, pid, t_kill) - t_kill)
    if server.pid() != pid:
        tally.crashes += 1
        t_noticed = time.monotonic()
        log.error("kill %d: the Spark Connect server (pid %s) died; crash files %s", result.kills, pid,
                  sorted(_hs_errs(server) - known_crashes))
        server.ensure_running()
        tally.restart_s.append(round(time.monotonic() - t_noticed, 1))
    elif task_workers(server):
        result.violations["orphan_outlived_its_bound"] = result.violations.get("orphan_outlived_its_bound", 0) + 1
    return True


def _summarize(result: TrialResult, tally: _Tally, server, log_start: int, crash_files: list[str]) -> None:
    log_text = server.log_since(log_start)
    ended = sorted(tally.tasks_ended_s) or [0.0]
    c = result.counters
    c.update(tasks_killed_by_spark=log_text.count("TaskKilled ("), lease_refusals_logged=log_text.count(LEASE_REFUSAL),
             landed_mid_window=tally.landed, server_crashes=tally.crashes, crash_files=crash_files, shops=tally.shops,
             restart_s=tally.restart_s, same_server=tally.crashes == 0,
             tasks_ended_median_s=round(ended[len(ended) // 2], 1), tasks_ended_max_s=round(ended[-1], 1))
    if tally.crashes:
        result.violations["server_crashed"] = tally.crashes
    if tally.landed < result.kills:
        result.violations["fault_not_mid_stream"] = result.kills - tally.landed
    result.detail = (f"{result.kills} client SIGKILLs mid-window on one Spark Connect server ({tally.landed} landed "
                     f"on running tasks; {c['tasks_killed_by_spark']} tasks killed by Spark, "
                     f"{c['lease_refusals_logged']} lease refusals logged), {tally.crashes} server crashes; each "
                     f"kill's tasks ended within {c['tasks_ended_max_s']}s (median {c['tasks_ended_median_s']}s); "
                     f"{tally.shops} shops, each judged after its kills")


def _judge_before_retry(lab: Lab, result: TrialResult, shop) -> None:
    """The checker with the killed run's outputs settled and no retry yet: every committed input has its
    outputs; counted into ``result`` as ``<kind>_before_retry``."""
    verdict = lab.judge_before_retry(TrialResult("", ""), shop, SETTLE_BOUND_S)
    result.counters["checked_before_retry"] = result.counters.get("checked_before_retry", 0) + 1
    for kind, n in verdict.violations.items():
        result.violations[kind] = result.violations.get(kind, 0) + n


def _judge(lab: Lab, result: TrialResult, shop, ends: dict[int, int], server) -> None:
    """Finish the shop's window with a clean run, then the checker; its violations add up over the shops."""
    server.ensure_running()
    lab.recover(shop, env=server.client_env())
    verdict = lab.judge(TrialResult("", ""), shop, ends)
    for kind, n in verdict.violations.items():
        result.violations[kind] = result.violations.get(kind, 0) + n
    result.lso_settled = result.lso_settled and verdict.lso_settled
