"""Fault-injection harness: kill real job processes at chosen points, recover, check.

A trial runs ``python -m eos_etl run-window`` as its own process group with a
failpoint whose action is ``stop`` (the Spark Python worker SIGSTOPs itself
right after logging that it reached the point). The harness waits for that
line, then SIGKILLs the whole group (driver, JVM, Python workers: a machine
that lost power, as far as Kafka can tell), runs the job again without
failpoints, and judges the result with the independent checker. Nothing here
is mocked: the broker, Spark and the processes are real.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from .checker import check_shop
from .kafka.admin import ClusterAdmin

STEP_POINTS = ("after_init", "mid_produce", "after_send_offsets", "before_commit", "after_commit", "before_report")


@dataclass
class TrialResult:
    scenario: str
    point: str
    seed: int
    killed: bool
    violations: dict = field(default_factory=dict)
    lso_settled: bool = True
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.killed and not self.violations and self.lso_settled


def _cli_args(settings, extra: list[str]) -> list[str]:
    t = settings.topics
    c = settings.connection
    return [sys.executable, "-m", "eos_etl", "run-window", "--bootstrap-servers", c.bootstrap_servers,
            "--input-topic", t.purchases, "--invoices-topic", t.invoices, "--shipments-topic", t.shipments,
            "--dlq-topic", t.dead_letters, "--group", settings.group,
            "--transactional-id-prefix", settings.transactional_id_prefix, "--compact", *extra]


def run_until_failpoint(settings, failpoint: str, *, extra: list[str] = (), timeout_s: float = 180) -> bool:
    """Start a run with ``failpoint`` (action stop); SIGKILL its process group once it fires.

    Returns True if the point was reached and the group killed, False if the run
    finished without reaching it.
    """
    env = {**os.environ, "EOS_ETL_FAILPOINTS": failpoint, "EOS_ETL_SPARK_DRIVER_MEMORY": "1g"}
    proc = subprocess.Popen(_cli_args(settings, list(extra)), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    fired = threading.Event()

    def watch():
        for line in proc.stderr:
            if "failpoint" in line and "fired" in line:
                fired.set()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not fired.is_set() and proc.poll() is None:
        time.sleep(0.05)
    killed = fired.is_set()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)
    return killed


def recover(settings, *, extra: list[str] = (), timeout_s: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "EOS_ETL_SPARK_DRIVER_MEMORY": "1g"}
    env.pop("EOS_ETL_FAILPOINTS", None)
    return subprocess.run(_cli_args(settings, list(extra)), env=env, capture_output=True, text=True,
                          timeout=timeout_s)


def outputs_settled(settings, timeout_s: float = 30) -> bool:
    """No transaction left hanging: every output partition's LSO reaches its high watermark."""
    admin = ClusterAdmin(settings.connection)
    deadline = time.monotonic() + timeout_s
    while True:
        lagging = [(t, p) for t in settings.topics.outputs
                   for p, o in admin.offsets(t, admin.partitions(t)).items() if o.last_stable < o.high_watermark]
        if not lagging:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)


def kill_at_step(settings, point: str, seed: int, *, chunk_records: int = 100) -> TrialResult:
    """One trial: kill the job when it reaches ``point``, restart it, check everything."""
    t0 = time.monotonic()
    window = settings.plan()
    spec = f"{point}=stop"
    if point == "mid_produce":
        spec += f",after={25 + seed * 37}"  # a different record for every seed
    elif point in ("after_commit", "before_commit", "after_send_offsets"):
        spec += f",partition={seed % max(1, len(window.ranges))}"
    extra = ["--chunk-records", str(chunk_records)]
    killed = run_until_failpoint(settings, spec, extra=extra)
    res = recover(settings, extra=extra)
    if res.returncode != 0:
        raise RuntimeError(f"recovery run failed: {res.stderr[-2000:]}")
    report = check_shop(settings, expected_ends={p: r.end for p, r in window.ranges.items()})
    return TrialResult(scenario="kill_at_step", point=point, seed=seed, killed=killed,
                       violations=dict(report.violations), lso_settled=outputs_settled(settings),
                       seconds=round(time.monotonic() - t0, 1))
