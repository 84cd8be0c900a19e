"""Fault scenarios on one broker: each kills, pauses or starves real processes, recovers and is judged.

Every function returns :class:`TrialResult` rows; a trial that could not be
carried out (the job never reached its failpoint, a recovery run failed) has
``error`` set and counts as failed, never as passed. After every trial the lab
checks with the independent checker (zero violations, committed offsets equal
to the input's ends) and that no output transaction hangs.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Producer

from eos_etl.checker import read_topic
from eos_etl.engine.lineage import H_RUN_ID
from eos_etl.host.ports import free_port
from eos_etl.shop.generator import generate, hostile_purchases

from .clear_failure import CLEAR_EXITS, error_lines, failed_clearly, run_violations
from .job_process import FAILPOINT_FIRED, PUBLISHING, JobProcess, run_window_args
from .lab import Lab, TrialResult
from .trial import FaultTrial, once, shop_with_purchases, trial, written

log = logging.getLogger(__name__)

STEP_POINTS = ("after_init", "mid_produce", "after_send_offsets", "before_commit", "after_commit", "before_report")


# -- 1. SIGKILL at every step boundary of a transaction ---------------------------------------------
@dataclass(kw_only=True)
class StepKill(FaultTrial):
    """The job stopped exactly at ``point`` (the worker SIGSTOPs itself), its whole process group
    SIGKILLed there; the next run recovers; the checker."""

    point: str
    fire_once: bool = False
    records: int = 600
    purchases: dict = field(default_factory=lambda: {"invalid_share": 0.1, "transaction_size": 100,
                                                     "abort_share": 0.2})
    extra: list[str] = field(default_factory=lambda: ["--chunk-records", "100"])
    reach_s: float = 240

    def __post_init__(self) -> None:
        self.name = f"{self.point} seed={self.seed}"
        self.shop_name = f"step-{self.point.replace('_', '-')}"
        spec = f"{self.point}=stop"
        if self.point == "mid_produce":
            spec += f",after={25 + self.seed * 37}"  # a different record for every seed
        elif self.point in ("after_send_offsets", "before_commit"):
            spec += f",partition={self.seed % 2}"
        elif self.point == "after_commit":
            spec += f",partition={self.seed % 2},after={1 + self.seed % 2}"
        self.failpoint = spec

    def reach(self) -> None:
        if not self.job.wait_for(FAILPOINT_FIRED, self.reach_s):
            raise RuntimeError(f"the job never reached {self.point}:\n{self.job.tail()}")

    def inject(self) -> None:
        if not self.job.kill():
            raise RuntimeError(f"the job never reached {self.point}:\n{self.job.tail()}")
        self.result.kills += 1

    def finish(self) -> int | None:
        return None  # the kill ended the run

    def retry(self) -> None:
        self.lab.recover(self.shop, self.extra)


def kill_at_step(lab: Lab, point: str, seed: int, *, records: int = 600) -> TrialResult:
    """Stop the job exactly at ``point`` (the worker SIGSTOPs itself), SIGKILL the group, restart."""
    return StepKill(lab=lab, scenario="kill_at_step", seed=seed, point=point, records=records).run()


# -- 2. random hard kills while a backlog drains ----------------------------------------------------
def random_kills(lab: Lab, *, records: int = 100_000, kills: int = 20, seed: int = 1, partitions: int = 4,
                 chunk_records: int = 2000) -> TrialResult:
    """SIGKILL the job at random moments until ``kills`` kills landed, restarting it each time.

    Three kills in four land a random 0-4 s after a partition started publishing
    (mid-transaction, between transactions, during commit); the rest land at a
    random moment of start-up, planning or reading. When a run finishes the
    backlog between kills, more purchases arrive (as they would in production)
    so the next kill still lands on work.
    """
    rng = random.Random(seed)
    with trial("random_kills", f"{records} records, {kills} kills, seed={seed}") as result:
        shop = lab.make_shop(partitions, name="random-kills")
        stats = generate(shop.connection, shop.topics.purchases, records, invalid_share=0.05, seed=seed,
                         transaction_size=1000, abort_share=0.05)
        result.records = written(stats)
        extra = ["--chunk-records", str(chunk_records)]
        attempts = completed = topups = 0
        while result.kills < kills and attempts < kills * 3:
            attempts += 1
            job = lab.job(shop, extra).start()
            if rng.random() < 0.25:
                job.wait(rng.uniform(0.5, 12.0))
            elif job.wait_for(PUBLISHING, 300):
                job.wait(rng.uniform(0.0, 4.0))
            code = job.proc.poll()
            if job.kill():
                result.kills += 1
                continue
            if code != 0:
                raise RuntimeError(f"run {attempts} failed on its own with exit code {code}:\n{job.tail()}")
            completed += 1
            top_up = generate(shop.connection, shop.topics.purchases, max(1000, records // 10),
                              invalid_share=0.05, seed=seed * 1000 + attempts, transaction_size=1000,
                              abort_share=0.05)
            result.records += written(top_up)
            topups += 1
        lab.recover(shop, extra)
        result.detail = f"{attempts} runs, {completed} finished between kills, {topups} top-ups"
        lab.judge(result, shop)
    return result


# -- 3. broker SIGKILL and restart mid-run ----------------------------------------------------------
def broker_restart(lab: Lab, seed: int, *, records: int = 20_000, partitions: int = 4) -> TrialResult:
    """SIGKILL the broker while the job publishes, restart it; the job rides it out or the next run recovers."""
    if lab.broker is None:
        raise ValueError("broker_restart needs a lab that owns its broker")
    rng = random.Random(seed)
    with trial("broker_restart", f"seed={seed}") as result:
        shop, ends = shop_with_purchases(lab, result, partitions, "broker-restart", records,
                                          invalid_share=0.05, seed=seed, transaction_size=500, abort_share=0.05)
        extra = ["--chunk-records", "1000"]
        job = lab.job(shop, extra).start()
        if not job.wait_for(PUBLISHING, 300):
            raise RuntimeError(f"the job never started publishing:\n{job.tail()}")
        time.sleep(rng.uniform(0.0, 1.5))
        job_was_running = job.alive
        lab.broker.kill()
        result.kills = 1
        down = rng.uniform(0.0, 3.0)
        time.sleep(down)
        t_restart = time.monotonic()
        lab.broker.start()
        back = time.monotonic() - t_restart
        code = job.wait(300)
        if code is None:
            job.kill()
            outcome = ("hung for 300 s after the restart and was killed "
                       f"(log {lab.keep_log(job, 'broker-restart-hung')})")
        elif code == 0:
            outcome = "finished after the restart" if job_was_running else "had finished before the kill"
            if job.count("Timeout (") or job.count("Python worker exited unexpectedly"):
                outcome += (f", after the stall watchdog crashed a stuck task "
                            f"(log {lab.keep_log(job, 'broker-restart-watchdog')})")
        else:
            outcome = (f"failed (exit {code}, log {lab.keep_log(job, 'broker-restart-failed')}); "
                       "the next run recovered")
        lab.recover(shop, extra)
        result.detail = f"broker down {down:.1f}s + {back:.1f}s start-up; job {outcome}"
        lab.judge(result, shop, ends)
    return result


# -- 4. zombie: a paused attempt, a new one takes over, the old one resumes --------------------------
def _outputs_of_run(lab: Lab, shop, run_id: str) -> int:
    return sum(r.headers.get(H_RUN_ID) == run_id.encode()
               for t in shop.topics.outputs for r in read_topic(lab.connection, t))


def zombie(lab: Lab, seed: int) -> TrialResult:
    with trial("zombie", f"seed={seed}") as result:
        shop, ends = shop_with_purchases(lab, result, 1, "zombie", 600,
                                          invalid_share=0.1, seed=seed, transaction_size=100, abort_share=0.1)
        extra = ["--chunk-records", "100"]
        zombie_id, successor_id = f"zombie-{seed}", f"successor-{seed}"
        old = lab.job(shop, extra + ["--run-id", zombie_id],
                      failpoints=f"mid_produce=stop,after={150 + seed * 17},{once('zombie')}").start()
        # Wait for the worker's own SIGSTOP, not only its log line: a SIGCONT sent before it stopped
        # itself would leave it stopped for good (a hang that is the harness's, not the job's).
        if not old.wait_for_failpoint_stop(240):
            raise RuntimeError(f"the first attempt never reached mid_produce:\n{old.tail()}")
        old.pause()  # the whole attempt freezes mid-transaction (a paused VM)
        result.kills = 1
        lab.recover(shop, extra + ["--run-id", successor_id])
        visible_before = _outputs_of_run(lab, shop, zombie_id)
        old.resume()
        code = old.wait(240)
        if code is None:
            old.kill()
        visible_after = _outputs_of_run(lab, shop, zombie_id)
        fenced = "fenced" in old.stderr.lower()
        if visible_after != visible_before:
            result.violations["zombie_published"] = visible_after - visible_before
        if not fenced:
            result.violations["zombie_not_fenced"] = 1
        result.detail = (f"zombie fenced={fenced}, exit {code}; its outputs visible before/after resume "
                         f"{visible_before}/{visible_after} (earlier commits only)")
        lab.judge(result, shop, ends)
    return result


# -- 5. two runs of the same window at once ---------------------------------------------------------
def concurrent_runs(lab: Lab, seed: int) -> TrialResult:
    with trial("concurrent_runs", f"seed={seed}") as result:
        shop, ends = shop_with_purchases(lab, result, 2, "concurrent", 4000,
                                          invalid_share=0.05, seed=seed, transaction_size=200, abort_share=0.1)
        extra = ["--chunk-records", "200"]
        jobs = [lab.job(shop, extra + ["--run-id", f"twin-{i}-{seed}"]).start() for i in (1, 2)]
        codes = [j.wait(600) for j in jobs]
        for j in jobs:
            j.kill()
        fenced = sum(j.count("fenced") > 0 for j in jobs)
        if 0 not in codes:
            lab.recover(shop, extra)
        result.detail = f"exit codes {codes}; {fenced} of 2 saw fencing"
        lab.judge(result, shop, ends)
    return result


# -- 6. a transaction outliving transaction.timeout.ms -------------------------------------------------
def transaction_timeout(lab: Lab, seed: int, *, timeout_ms: int = 6000) -> TrialResult:
    """Freeze the job just before commit until the broker aborts the transaction itself."""
    with trial("transaction_timeout", f"timeout={timeout_ms}ms seed={seed}") as result:
        shop, ends = shop_with_purchases(lab, result, 1, "txn-timeout", 400, invalid_share=0.1, seed=seed)
        extra = ["--chunk-records", "100000", "--transaction-timeout-ms", str(timeout_ms),
                 "--chunk-seconds", str(timeout_ms / 2000)]
        job = lab.job(shop, extra, failpoints=f"before_commit=stop,{once('timeout')}").start()
        if not job.wait_for_failpoint_stop(240):  # stopped itself: only then may it be resumed
            raise RuntimeError(f"the job never reached before_commit:\n{job.tail()}")
        job.pause()
        result.kills = 1
        t0 = time.monotonic()
        admin = lab.admin
        open_outputs = sum(o.high_watermark for t in shop.topics.outputs
                           for o in admin.offsets(t, admin.partitions(t)).values())
        aborted_by_broker = open_outputs > 0 and lab.outputs_settled(shop, timeout_s=timeout_ms / 1000 + 60)
        waited = time.monotonic() - t0
        if not aborted_by_broker:
            result.violations["not_aborted_by_broker"] = 1
        visible = sum(len(read_topic(lab.connection, t)) for t in shop.topics.outputs)
        if visible:
            result.violations["visible_before_commit"] = visible
        job.resume()
        code = job.wait(240)
        if code is None:
            job.kill()
        lab.recover(shop, extra)
        result.detail = (f"{open_outputs} uncommitted outputs aborted by the broker after {waited:.1f}s stalled; "
                         f"the stalled attempt then exited {code}")
        lab.judge(result, shop, ends)
    return result


# -- 7. aborted transactions, markers and hostile records in the input -----------------------------
def hostile_input(lab: Lab, seed: int) -> TrialResult:
    rng = random.Random(seed)
    with trial("hostile_input", f"seed={seed}") as result:
        shop = lab.make_shop(2, name="hostile")
        stats = generate(shop.connection, shop.topics.purchases, 1000, invalid_share=0.3, seed=seed,
                         transaction_size=50, abort_share=0.3)
        in_log = written(stats)
        conf = shop.connection.client_config()
        conf.update({"transactional.id": f"hostile-writer-{seed}-{shop.group}", "message.max.bytes": 2_000_000,
                     "log_level": 3})
        producer = Producer(conf)
        producer.init_transactions(30)
        corpus = hostile_purchases(shop.max_payload_bytes)
        for round_ in range(3):  # the corpus three times: two committed, one aborted
            producer.begin_transaction()
            for i, (key, value) in enumerate(corpus):
                producer.produce(shop.topics.purchases, value, key, partition=(i + round_) % 2)
            producer.flush(60)
            (producer.abort_transaction if round_ == 1 else producer.commit_transaction)(60)
            in_log += len(corpus)
        result.records = in_log
        ends = lab.input_ends(shop)
        extra = ["--chunk-records", "100"]
        job = lab.job(shop, extra, failpoints=f"mid_produce=stop,after={rng.randrange(50, 400)}").start()
        if job.wait_for(FAILPOINT_FIRED, 240):
            result.kills = int(job.kill())
        else:
            job.kill()
        lab.recover(shop, extra)
        dead = read_topic(lab.connection, shop.topics.dead_letters)
        unexplained = sum(not r.headers.get("dlq_reason") for r in dead)
        if unexplained:
            result.violations["dead_letter_without_reason"] = unexplained
        result.detail = f"{len(corpus)} hostile records x3 (one copy aborted); {len(dead)} dead letters"
        lab.judge(result, shop, ends)
    return result


# -- 7b. a pause longer than the broker keeps the group's offsets -------------------------------------
#: Where the pause past the offsets retention falls: between two complete windows; between an attempt
#: killed mid-window (its transaction aborted by the broker's timeout) and its retry; while a frozen
#: zombie holds a transaction, resumed after the retry took over.
EXPIRY_POINTS = ("between_windows", "killed_attempt", "zombie")
_KILL_POINTS = ("mid_produce", "after_send_offsets", "before_commit", "after_commit")


def offsets_expired(lab: Lab, point: str, seed: int, *, records: int = 2000,
                    expiry_timeout_s: float = 240) -> TrialResult:
    """Pause past the broker's ``offsets.retention.minutes`` at ``point``, then run on: the group's
    offsets are gone and the pipeline's position comes from its checkpoint topic; nothing twice.

    Needs a lab whose broker has a short offsets retention (the soak's runs one with 1 minute)."""
    rng = random.Random(seed)
    with trial("offsets_expired", f"{point} seed={seed}") as result:
        shop = lab.make_shop(2, name=f"expired-{point.replace('_', '-')}")
        options = dict(invalid_share=0.05, transaction_size=100, abort_share=0.1)
        result.records = written(generate(shop.connection, shop.topics.purchases, records, seed=seed, **options))
        # A short transaction timeout: an attempt's open transaction (which holds the group's offsets
        # back from expiring) is aborted by the broker within seconds of the attempt's death.
        extra = ["--chunk-records", "200", "--transaction-timeout-ms", "10000", "--chunk-seconds", "4"]
        lab.recover(shop, extra)  # the first window: committed offsets to lose
        result.records += written(generate(shop.connection, shop.topics.purchases, records // 2, seed=seed + 1,
                                            **options))
        job = None
        if point != "between_windows":
            step = rng.choice(_KILL_POINTS)
            spec = f"{step}=stop,partition={seed % 2}" + (f",after={rng.randint(20, 150)}" if step == "mid_produce"
                                                          else ",after=1" if step == "after_commit" else "")
            spec += f",{once('expired')}"  # a resumed zombie's retried task must not stop itself again
            job = lab.job(shop, extra, failpoints=spec).start()
            if not job.wait_for_failpoint_stop(240):
                raise RuntimeError(f"the attempt never reached {step}:\n{job.tail()}")
            if point == "killed_attempt":
                job.kill()
            else:
                job.pause()  # frozen mid-window, transaction open, until the retry took over
            result.kills = 1
            result.detail = f"attempt stopped at {step}; "
        waited = lab.wait_for_expired_offsets(shop, expiry_timeout_s)
        result.kills += 1  # the pause past the retention is this scenario's fault
        t0 = time.monotonic()
        lab.recover(shop, extra)
        result.recovery_s = round(time.monotonic() - t0, 1)
        if point == "zombie":
            job.resume()
            resumed = time.monotonic()
            code = job.wait(240)
            if code is None:
                job.kill()
                result.detail += ("the resumed attempt still ran after 240s "
                                  f"(killed; log {lab.keep_log(job, 'zombie')}); ")
            else:
                result.detail += f"the resumed attempt exited {code} after {time.monotonic() - resumed:.0f}s; "
            if "fenced" not in job.stderr.lower() and code == 0:
                result.violations["zombie_not_fenced"] = 1
        result.detail += f"group offsets expired {waited:.0f}s after the pause began; the next run took over"
        lab.judge(result, shop)
    return result


# -- 8. misconfiguration: one clear error, nothing published, no offsets moved ----------------------
def misconfiguration(lab: Lab) -> list[TrialResult]:
    results = []
    cases: list[tuple[str, Callable]] = [
        ("broker unreachable", lambda shop, args: _replace(args, "--bootstrap-servers", f"127.0.0.1:{free_port()}")),
        ("missing output topic", lambda shop, args: _replace(args, "--shipments-topic", f"missing-{shop.group}")),
        ("wrong SASL password", None),
    ]
    for name, mutate in cases:
        with trial("misconfiguration", name) as result:
            shop = lab.make_shop(1, name="misconfig")
            result.records = written(generate(shop.connection, shop.topics.purchases, 50, seed=3))
            env = {}
            args = run_window_args(shop)
            if mutate is None:
                if not lab.sasl_bootstrap_servers:
                    raise RuntimeError("the lab's broker has no SASL listener")
                args = _replace(args, "--bootstrap-servers", lab.sasl_bootstrap_servers)
                args += ["--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512",
                         "--sasl-username", lab.sasl_user, "--ssl-ca-location", str(lab.sasl_ca_file)]
                env = {"EOS_ETL_KAFKA_PASSWORD": "not-the-password"}
            else:
                args = mutate(shop, args)
            t0 = time.monotonic()
            job = JobProcess(args, env=env).start()
            code = job.wait(120)
            took = time.monotonic() - t0
            job.kill()
            errors = error_lines(job.stderr)
            # Bad configuration: exit 2 in particular, not just any clear failure.
            if code != 2 or not failed_clearly(code, job.stderr):
                result.violations["no_clear_error"] = 1
            if "not-the-password" in job.stderr + job.stdout:
                result.violations["secret_logged"] = 1
            admin = lab.admin
            published = sum(o.high_watermark for t in shop.topics.outputs
                            for o in admin.offsets(t, admin.partitions(t)).values())
            if published:
                result.violations["published"] = published
            moved = admin.committed_offsets(shop.group, shop.topics.purchases, admin.partitions(shop.topics.purchases))
            if any(v is not None for v in moved.values()):
                result.violations["offsets_moved"] = 1
            result.detail = f"exit {code} after {took:.1f}s: {errors[0][:160] if errors else job.tail(3)!r}"
            result.lso_settled = lab.outputs_settled(shop)
        results.append(result)
    return results


def _replace(args: list[str], option: str, value: str) -> list[str]:
    args = list(args)
    args[args.index(option) + 1] = value
    return args


# -- 9. a broker lost while a run starts (connect, metadata, offsets, fencing, preflight, planning) -------
#: What a run may end with when a broker dies under its start phase: done, or one diagnosed error
#: (1 once the broker it reached is lost, 2 while it never answered).
START_PHASE_EXITS = (0, *CLEAR_EXITS)


def start_phase_broker_kill(lab: Lab, seed: int, *, records: int = 1000, partitions: int = 2,
                            kill_within_s: float = 10.0, down_s: tuple[float, float] = (2.0, 5.0),
                            job_timeout_s: float = 300) -> TrialResult:
    """SIGKILL one broker (a random node of ``lab.broker``) at a random moment of a run's first
    ``kill_within_s`` seconds, restart it a few seconds later.

    Pass: the run exits 0, or fails clearly (:mod:`.clear_failure`: exit 1 or 2 with exactly one
    ``error:`` line; on a single node "cannot reach Kafka" is the expected answer while it is down),
    never by a signal, never with a Python traceback; after a clean recovery run the checker is exact.
    """
    if lab.broker is None:
        raise ValueError("start_phase_broker_kill needs a lab that owns its broker")
    rng = random.Random(seed)
    with trial("start_phase_broker_kill", f"seed={seed}") as result:
        # The input's ends are taken when judging, not here: right after the generator's last commit
        # a cluster may not have written its markers yet, and the ends would be one marker short.
        shop, _ = shop_with_purchases(lab, result, partitions, "start-kill", records,
                                       invalid_share=0.05, seed=seed, transaction_size=500, abort_share=0.05)
        extra = ["--chunk-records", "500"]
        node = rng.choice(lab.broker.nodes)
        kill_at, down = rng.uniform(0.0, kill_within_s), rng.uniform(*down_s)
        job = lab.job(shop, extra).start()
        job.wait(kill_at)
        job_was_running = job.alive
        node.kill()
        result.kills = 1
        time.sleep(down)
        node.start(timeout=300)  # generous: a KRaft node restarting on a loaded 2-core machine
        code = job.wait(job_timeout_s)
        if code is None:
            job.kill()
        errors = error_lines(job.stderr)
        verdict = start_phase_verdict(code, job.stderr)
        result.exit_code = code
        kept = lab.keep_log(job, "start-phase-broker-kill") if verdict else ""
        if len(lab.broker.nodes) > 1:
            lab.broker.wait_in_sync(300)  # the next run (and the next trial) starts from a whole cluster
        ends = lab.input_ends(shop)
        # The next scheduled run: needed when the faulted run failed, or when it planned its
        # window while a new partition leader's offsets still lagged (then it ended early).
        recovered = code != 0 or _committed(lab, shop) != ends
        if recovered:
            lab.recover(shop, extra)
        last = job.stderr.strip().splitlines()[-1:] if verdict else []
        result.detail = (f"exit={code} node={node.node_id} killed_at={kill_at:.1f}s "
                         f"({'running' if job_was_running else 'already finished'}) down={down:.1f}s "
                         f"traceback={'Traceback' in job.stderr} crash_stack={'Fatal Python error' in job.stderr}"
                         f" error_lines={len(errors)} recovery_run={recovered}"
                         f"{' error=' + errors[0][:200] if errors else ''}"
                         f"{' last_line=' + last[0][:200] if last else ''}{' log=' + kept if kept else ''}")
        lab.judge(result, shop, ends)
        result.violations.update(verdict)  # after the checker's verdict, which judge() sets
    return result


def _committed(lab: Lab, shop) -> dict[int, int | None]:
    admin = lab.admin
    topic = shop.topics.purchases
    return admin.committed_offsets(shop.group, topic, admin.partitions(topic))


def start_phase_verdict(code: int | None, stderr: str) -> dict[str, int]:
    """Violations of "finishes, or fails with one clear error": hang, signal, traceback, other exit, error lines
    (:func:`eos_etl_lab.faults.clear_failure.run_violations`)."""
    return run_violations(code, stderr)
