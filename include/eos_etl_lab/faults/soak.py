"""The soak: every fault scenario at full counts against a private broker.

``python -m eos_etl_lab soak`` (or ``make soak``) starts its own Kafka broker
(PLAINTEXT + SASL_SSL/SCRAM) under ``var/soak/kafka``, so it can SIGKILL and
restart it freely, runs the scenarios, and writes the results table to
``docs/reliability.md`` and every trial to ``var/soak/results.json``. With
``--duration`` the scenario list repeats, with new seeds, until that many
seconds have passed.
"""

from __future__ import annotations

import json
import logging
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from eos_etl import paths
from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.embedded.spark_cluster import SparkStandalone
from eos_etl.embedded.spark_connect import SparkConnectServer
from eos_etl.host.ports import free_port
from eos_etl.jars.versions import KAFKA_VERSION, SPARK_VERSION
from eos_etl.kafka.connection import KafkaConnection

from . import broker_scenarios as sc
from . import reliability_page as page
from .clear_failure import CLEAR_EXITS, by_signal, trial_failed_clearly
from .cluster_scenarios import CLUSTER_SCENARIOS, MIN_ISR_BOUND_S, PAUSE_S, RUN_BOUND_S, rolling_restart
from .connect_client_kills import client_kills
from .connect_endurance import run_endurance
from .connect_scenarios import CONNECT_SCENARIOS
from .lab import Lab, TrialResult
from .reliability_page import CLUSTER_SECTION, SINGLE_NODE_SECTION
from .spark_scenarios import SPARK_SCENARIOS  # importing it registers them among CLUSTER_SCENARIOS

log = logging.getLogger(__name__)

#: The Spark Connect server of the connect_* scenarios: local mode, retried tasks (``local[N,F]``).
CONNECT_MASTER = "local[2,4]"

SOAK_USER = "soak"
SOAK_PASSWORD = secrets.token_urlsafe(18)  # one per soak process: no password is written down anywhere

SCENARIOS = ("kill_at_step", "random_kills", "broker_restart", "zombie", "concurrent_runs",
             "transaction_timeout", "hostile_input", "misconfiguration", "start_phase_broker_kill",
             "offsets_expired", *CONNECT_SCENARIOS, "connect_endurance")
#: The offsets_expired scenario's broker deletes a group's committed offsets a minute after its last
#: commit (checked every 2 s), so a trial's pause past the retention takes about a minute, not 7 days.
SHORT_RETENTION = {"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "2000"}


@dataclass
class SoakOptions:
    records: int = 100_000  # backlog of the random-kills scenario
    kills: int = 20  # random kills in that scenario
    seeds: int = 3  # seeds per step boundary, and trials of zombie / concurrent / timeout / hostile
    broker_restarts: int = 5
    start_phase_kills: int = 30  # broker SIGKILLs in a run's first 10 s (start_phase_broker_kill trials)
    duration_s: float = 0.0  # repeat the scenario list until this long has passed (0: once)
    endurance_windows: int = 500  # consecutive windows of the connect_endurance run
    client_kills: int = 300  # client SIGKILLs mid-window of the connect_client_kills run (not in the default list)
    scenarios: tuple[str, ...] = SCENARIOS
    out: Path | None = None  # the markdown table; default docs/reliability.md


def _plan(opts: SoakOptions, round_: int, short_retention: Callable[[], Lab], connect: Callable[[Lab], Lab]
          ) -> list[tuple[str, Callable[[Lab], list[TrialResult]]]]:
    """(scenario, run) pairs for one pass; seeds differ between passes. ``short_retention()``: the lab
    whose broker keeps a group's offsets one minute (offsets_expired runs there); ``connect(lab)``: the
    lab with its Spark Connect server started (the connect_* scenarios)."""
    base = round_ * 100
    seeds = [base + s for s in range(1, opts.seeds + 1)]
    steps: list = []
    for name in opts.scenarios:
        if name == "kill_at_step":
            steps += [(name, lambda lab, p=p, s=s: [sc.kill_at_step(lab, p, s)])
                      for s in seeds for p in sc.STEP_POINTS]
        elif name == "random_kills":
            steps.append((name, lambda lab: [sc.random_kills(lab, records=opts.records, kills=opts.kills,
                                                             seed=base + 1)]))
        elif name == "broker_restart":
            steps += [(name, lambda lab, s=s: [sc.broker_restart(lab, base + s)])
                      for s in range(1, opts.broker_restarts + 1)]
        elif name == "zombie":
            steps += [(name, lambda lab, s=s: [sc.zombie(lab, s)]) for s in seeds]
        elif name == "concurrent_runs":
            steps += [(name, lambda lab, s=s: [sc.concurrent_runs(lab, s)]) for s in seeds]
        elif name == "transaction_timeout":
            steps += [(name, lambda lab, s=s: [sc.transaction_timeout(lab, s)]) for s in seeds]
        elif name == "hostile_input":
            steps += [(name, lambda lab, s=s: [sc.hostile_input(lab, s)]) for s in seeds]
        elif name == "misconfiguration":
            steps.append((name, sc.misconfiguration))
        elif name == "offsets_expired":
            steps += [(name, lambda _lab, p=p, s=s: [sc.offsets_expired(short_retention(), p, s)])
                      for s in seeds for p in sc.EXPIRY_POINTS]
        elif name in CONNECT_SCENARIOS:
            steps += [(name, lambda lab, s=s, run=CONNECT_SCENARIOS[name]: [run(connect(lab), s)]) for s in seeds]
        elif name == "connect_endurance":
            steps.append((name, lambda lab: [run_endurance(connect(lab), opts.endurance_windows,
                                                           out_dir=(opts.out or paths.project_root() / "docs" /
                                                                    "reliability.md").parent)]))
        elif name == "connect_client_kills":  # `make soak-connect-kills`: about 35 s a kill on 2 cores
            # --duration bounds this loop itself (the count it reached is reported), not a repeat of it.
            steps.append((name, lambda lab: [client_kills(connect(lab), base + 1, opts.client_kills,
                                                          duration_s=opts.duration_s or None)]))
        elif name == "start_phase_broker_kill":
            steps += [(name, lambda lab, s=s: [sc.start_phase_broker_kill(lab, base + s)])
                      for s in range(1, opts.start_phase_kills + 1)]
        else:
            raise ValueError(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    return steps


def run_soak(opts: SoakOptions) -> tuple[list[TrialResult], float]:
    home = paths.var_dir() / "soak" / "kafka"
    shutil.rmtree(home, ignore_errors=True)
    broker = KafkaCluster(home=home, port=free_port(), sasl_users={SOAK_USER: SOAK_PASSWORD})
    broker.start()
    lab = Lab(KafkaConnection(broker.bootstrap_servers), broker=broker,
              sasl_bootstrap_servers=broker.sasl_bootstrap_servers, sasl_user=SOAK_USER, sasl_password=SOAK_PASSWORD,
              sasl_ca_file=broker.ca_file,
              log_dir=paths.var_dir() / "soak" / "logs")
    short: list[KafkaCluster] = []

    def short_retention() -> Lab:
        if not short:
            short_home = paths.var_dir() / "soak" / "kafka-short-retention"
            shutil.rmtree(short_home, ignore_errors=True)
            short.append(KafkaCluster(home=short_home, port=free_port(), overrides=SHORT_RETENTION).start())
        return Lab(KafkaConnection(short[0].bootstrap_servers), log_dir=paths.var_dir() / "soak" / "logs")

    def connect(lab_: Lab) -> Lab:
        if lab_.connect is None:
            connect_home = paths.var_dir() / "soak" / "spark-connect"
            shutil.rmtree(connect_home, ignore_errors=True)
            lab_.connect = SparkConnectServer(home=connect_home, port=free_port(), master=CONNECT_MASTER).start()
        return lab_

    results: list[TrialResult] = []
    t0 = time.monotonic()
    round_ = 0
    try:
        while True:
            for _name, run in _plan(opts, round_, short_retention, connect):
                if not broker.is_running():  # a failed broker trial must not sink the rest
                    broker.start()
                results += run(lab)
                save_results(results, time.monotonic() - t0)
            round_ += 1
            if time.monotonic() - t0 >= opts.duration_s:
                break
    finally:
        if lab.connect is not None:
            lab.connect.stop()
        broker.stop()
        for b in short:
            b.stop()
    return results, time.monotonic() - t0


def save_results(results: list[TrialResult], wall: float, out: Path | None = None, command: str = "") -> None:
    out = out or paths.var_dir() / "soak" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"wall_seconds": round(wall, 1), "command": command,
                               "trials": [r.to_dict() for r in results]}, indent=1))


def load_results(path: Path) -> tuple[list[TrialResult], float, str]:
    """A soak's results.json: (trials, wall seconds, the command that ran it)."""
    data = json.loads(Path(path).read_text())
    return [TrialResult.from_dict(t) for t in data["trials"]], data["wall_seconds"], data.get("command", "")


def merge_rerun(earlier: list[TrialResult], rerun: list[TrialResult]) -> list[TrialResult]:
    """The earlier soak's trials with those of every scenario in ``rerun`` replaced by the re-run's."""
    replaced = {r.scenario for r in rerun}
    return [r for r in earlier if r.scenario not in replaced] + rerun


START_PHASE_VERDICT_KEYS = frozenset({"hung", "killed_by_signal", "unexpected_exit", "traceback",
                                      "not_one_error_line"})


def start_phase_outcomes(results: list[TrialResult], topology: str) -> dict | None:
    """The start-phase table's row: how the start-phase broker-kill runs ended (None when there were none)."""
    runs = [r for r in results if r.scenario == "start_phase_broker_kill" and not r.error]
    if not runs:
        return None
    codes = [r.exit_code for r in runs]
    one_line = sum(1 for r in runs if trial_failed_clearly(r))
    signals = sum(1 for c in codes if by_signal(c))
    other = sum(1 for r in runs if r.exit_code not in (0, *CLEAR_EXITS, None) and not by_signal(r.exit_code)
                or "traceback" in r.violations)
    exact = sum(1 for r in runs if r.lso_settled and not set(r.violations) - START_PHASE_VERDICT_KEYS)
    return {"topology": topology, "runs": len(runs), "exit_0": codes.count(0), "failed_clearly": one_line,
            "other": other, "signals": signals, "hung": codes.count(None), "exact": exact}


def summarize(results: list[TrialResult]) -> list[dict]:
    """One row per scenario (both soaks): trials, records, faults, violations, trials not carried out,
    hangs, longest recovery and summed trial time."""
    rows: dict[str, dict] = {}
    for r in results:
        row = rows.setdefault(r.scenario, {"scenario": r.scenario, "trials": 0, "records": 0, "faults": 0,
                                           "violations": 0, "errors": 0, "hangs": 0, "longest_recovery_s": None,
                                           "longest_fail_s": None, "seconds": 0.0})
        row["trials"] += 1
        row["records"] += r.records
        row["faults"] += r.kills
        row["violations"] += r.violation_count
        row["errors"] += bool(r.error)
        row["hangs"] += int(r.hung)
        row["seconds"] += r.seconds
        if r.recovery_s is not None:
            row["longest_recovery_s"] = max(row["longest_recovery_s"] or 0.0, r.recovery_s)
        if r.fail_s is not None:
            row["longest_fail_s"] = max(row["longest_fail_s"] or 0.0, r.fail_s)
    return list(rows.values())


def write_markdown(results: list[TrialResult], wall: float, opts: SoakOptions, command: str) -> Path:
    """The single-node soak's section of docs/reliability.md (``templates/soak.md.j2``)."""
    out = opts.out or paths.project_root() / "docs" / "reliability.md"
    rows = summarize(results)
    totals = {k: sum(r[k] for r in rows) for k in ("trials", "records", "faults", "violations", "errors", "hangs")}
    # A run of some scenarios only gets a section of its own: it must not replace the full soak's table.
    subset = tuple(opts.scenarios) != SCENARIOS
    section = f"{SINGLE_NODE_SECTION}: {', '.join(opts.scenarios)}" if subset else SINGLE_NODE_SECTION
    text = page.render(
        "soak.md.j2", subset=subset, scenarios=opts.scenarios, command=command,
        generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M}", machine=page.machine(),
        kafka_version=KAFKA_VERSION, spark_version=SPARK_VERSION, rows=rows, totals=totals,
        ok=totals["violations"] == 0 and totals["errors"] == 0, wall_min=wall / 60,
        start_phase=start_phase_outcomes(results, "one node"),
        endurance_chart=any(r.scenario == "connect_endurance" for r in results), trials=page.trial_rows(results),
        connect_master=CONNECT_MASTER if any(r.scenario.startswith("connect_") for r in results) else None)
    page.write_section(out, section, text)
    return out


# -- the cluster soak: broker-side faults on three nodes (faults.cluster_scenarios) -------------------
@dataclass
class ClusterSoakOptions:
    seeds: int = 3  # trials per scenario (seeds 1..N; rolling_restart included)
    start_phase_kills: int = 30  # trials of start_phase_broker_kill (enough for a rare start-phase race to show)
    scenarios: tuple[str, ...] = ()  # default: every registered cluster scenario
    rolling_records: int = 200_000  # window of the rolling restart
    command: str = ""  # as typed, kept in results.json
    out: Path | None = None  # default docs/reliability.md (its cluster section)


def _cluster_plan(opts: ClusterSoakOptions) -> list[tuple[str, Callable[[Lab], TrialResult]]]:
    names = opts.scenarios or tuple(CLUSTER_SCENARIOS)
    unknown = [n for n in names if n not in CLUSTER_SCENARIOS]
    if unknown:
        raise ValueError(f"unknown cluster scenario(s) {unknown}; choose from {', '.join(CLUSTER_SCENARIOS)}")
    steps = []
    trials = {name: opts.start_phase_kills if name == "start_phase_broker_kill" else opts.seeds for name in names}
    for seed in range(1, max(trials.values(), default=0) + 1):  # seed-major: every scenario gets a trial first
        for name in names:
            if seed > trials[name]:
                continue
            run = CLUSTER_SCENARIOS[name]
            if run is rolling_restart:
                steps.append((name, lambda lab, s=seed: rolling_restart(lab, s, records=opts.rolling_records)))
            else:
                steps.append((name, lambda lab, s=seed, run=run: run(lab, s)))
    return steps


def run_cluster_soak(opts: ClusterSoakOptions, on_trial: Callable[[list[TrialResult], float], None] | None = None
                     ) -> tuple[list[TrialResult], float]:
    """Every cluster scenario on a private 3-node cluster under var/soak-cluster.

    ``on_trial(results, wall)`` after every trial (the CLI rewrites the table, so a long soak shows progress).
    """
    root = paths.var_dir() / "soak-cluster"
    shutil.rmtree(root / "kafka", ignore_errors=True)
    shutil.rmtree(root / "spark", ignore_errors=True)
    cluster = KafkaCluster(home=root / "kafka", size=3)
    plan = _cluster_plan(opts)
    # The Spark standalone cluster only when a Spark-side scenario is planned (two more JVMs and executors).
    spark = SparkStandalone(root / "spark") if any(name in SPARK_SCENARIOS for name, _ in plan) else None
    cluster.start()
    if spark is not None:
        spark.start()
    lab = Lab(KafkaConnection(cluster.bootstrap_servers), broker=cluster, log_dir=root / "logs", spark=spark)
    if any(name == "connect_executor_kill" for name, _ in plan):
        shutil.rmtree(root / "spark-connect", ignore_errors=True)
        lab.connect = SparkConnectServer(home=root / "spark-connect", port=free_port(), master=spark.master_url)
    results: list[TrialResult] = []
    t0 = time.monotonic()
    try:
        for _name, run in plan:
            results.append(run(lab))
            save_results(results, time.monotonic() - t0, root / "results.json", opts.command)
            if on_trial is not None:
                on_trial(results, time.monotonic() - t0)
    finally:
        if lab.connect is not None:
            lab.connect.stop()
        if spark is not None:
            spark.stop()
        cluster.stop()
    return results, time.monotonic() - t0


def write_cluster_markdown(results: list[TrialResult], wall: float, opts: ClusterSoakOptions, command: str,
                           section: str = CLUSTER_SECTION) -> Path:
    """The cluster soak's section of docs/reliability.md (``templates/cluster_soak.md.j2``); a run of some
    scenarios that is not merged into an earlier soak passes a ``section`` of its own, so it never replaces
    the full soak's table."""
    out = opts.out or paths.project_root() / "docs" / "reliability.md"
    rows = summarize(results)
    totals = {k: sum(r[k] for r in rows) for k in ("trials", "records", "faults", "violations", "errors", "hangs")}
    text = page.render(
        "cluster_soak.md.j2", own_section=section != CLUSTER_SECTION, scenarios=opts.scenarios, command=command,
        generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M}", machine=page.machine(),
        kafka_version=KAFKA_VERSION, spark_version=SPARK_VERSION, rows=rows, totals=totals,
        ok=totals["violations"] == 0 and totals["errors"] == 0, wall_min=wall / 60,
        run_bound_s=RUN_BOUND_S, min_isr_bound_s=MIN_ISR_BOUND_S, pause_s=PAUSE_S,
        rolling_records=opts.rolling_records, start_phase=start_phase_outcomes(results, "three nodes"),
        trials=page.trial_rows(results))
    page.write_section(out, section, text)
    return out
