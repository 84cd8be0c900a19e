"""The soak: every fault scenario at full counts against a private broker.

``python -m eos_etl soak`` (or ``make soak``) starts its own Kafka broker
(PLAINTEXT + SASL_SSL/SCRAM) under ``var/soak/kafka``, so it can SIGKILL and
restart it freely, runs the scenarios, and writes the results table to
``docs/reliability.md`` and every trial to ``var/soak/results.json``. With
``--duration`` the scenario list repeats, with new seeds, until that many
seconds have passed.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .. import paths
from ..kafka.connection import KafkaConnection
from ..stack.kafka_cluster import KafkaCluster
from ..stack.spark_cluster import SparkStandalone
from ..stack.spark_connect import SparkConnectServer
from ..stack.tools import free_port
from ..stack.versions import KAFKA_VERSION, SPARK_VERSION
from . import scenarios as sc
from .cluster_scenarios import CLUSTER_SCENARIOS, MIN_ISR_BOUND_S, PAUSE_S, RUN_BOUND_S, rolling_restart
from .connect_endurance import run_endurance
from .connect_scenarios import CONNECT_SCENARIOS
from .lab import Lab, TrialResult
from .spark_scenarios import SPARK_SCENARIOS  # importing it registers them among CLUSTER_SCENARIOS

log = logging.getLogger(__name__)

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
            lab_.connect = SparkConnectServer(home=connect_home, port=free_port(), master="local[2,4]").start()
        return lab_

    results: list[TrialResult] = []
    t0 = time.monotonic()
    round_ = 0
    try:
        while True:
            for name, run in _plan(opts, round_, short_retention, connect):
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


def _verdict_cells(r: TrialResult) -> tuple[str, str]:
    """A trial's violations and detail as Markdown table cells."""
    v = ", ".join(f"{k}={n}" for k, n in r.violations.items()) or "0"
    if not r.lso_settled:
        v += ", hanging transaction"
    detail = (r.error and f"NOT CARRIED OUT: {r.error}") or r.detail
    return v, detail.replace("|", "/").replace("\n", " ")


START_PHASE_VERDICT_KEYS = frozenset({"hung", "killed_by_signal", "unexpected_exit", "traceback",
                                      "not_one_error_line"})


def start_phase_outcomes(results: list[TrialResult], topology: str) -> list[str]:
    """The start-phase table: how the start-phase broker-kill runs ended (empty when there were none)."""
    runs = [r for r in results if r.scenario == "start_phase_broker_kill" and not r.error]
    if not runs:
        return []
    codes = [r.exit_code for r in runs]
    one_line = sum(1 for r in runs if r.exit_code == 2 and "not_one_error_line" not in r.violations)
    signals = sum(1 for c in codes if c is not None and (c < 0 or c >= 128))
    other = sum(1 for r in runs if r.exit_code not in (0, 2, None) and not (r.exit_code < 0 or r.exit_code >= 128)
                or "traceback" in r.violations)
    exact = sum(1 for r in runs if r.lso_settled and not set(r.violations) - START_PHASE_VERDICT_KEYS)
    return [
        "| topology | runs | exit 0 | exit 2 (one error line) | other exit / traceback | by a signal | hung "
        "| checker exact |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        f"| {topology} | {len(runs)} | {codes.count(0)} | {one_line} | {other} | {signals} | {codes.count(None)} "
        f"| {exact} of {len(runs)} |",
        "",
    ]


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


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def write_markdown(results: list[TrialResult], wall: float, opts: SoakOptions, command: str) -> Path:
    out = opts.out or paths.project_root() / "docs" / "reliability.md"
    rows = summarize(results)
    total = {k: sum(r[k] for r in rows) for k in ("trials", "records", "faults", "violations", "errors")}
    ok = total["violations"] == 0 and total["errors"] == 0
    # A run of some scenarios only gets a section of its own: it must not replace the full soak's table.
    subset = tuple(opts.scenarios) != SCENARIOS
    section = f"{SINGLE_NODE_SECTION}: {', '.join(opts.scenarios)}" if subset else SINGLE_NODE_SECTION
    lines = [
        f"## Single-node soak, scenarios: {', '.join(opts.scenarios)}" if subset
        else "# Reliability: the fault-injection soak",
        "",
        f"Generated by `{command}` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; do not edit by hand.",
        f"Machine: {_machine()}. Apache Kafka {KAFKA_VERSION} (KRaft, one node), Spark {SPARK_VERSION} local mode.",
        "",
        f"**Verdict: {'zero violations in every scenario' if ok else 'VIOLATIONS OR FAILED TRIALS, see below'}.** "
        f"{total['trials']} trials, {total['faults']} faults landed, {total['records']:,} purchases written, "
        f"{total['violations']} violations, {total['errors']} trials that could not be carried out; "
        f"wall time {wall / 60:.1f} min.",
        "",
        "Every trial runs on fresh topics against a real broker and real `python -m eos_etl run-window` processes "
        "(the CLI, Spark's driver JVM and its Python workers; signals reach the whole process tree). After the faults, a clean run finishes the "
        "window; then the independent checker (`python -m eos_etl check`) must report no lost, duplicated, torn, "
        "beyond-commit or from-aborted-input output, no per-partition order violation, committed offsets equal to "
        "the input's last stable offsets, and every output partition's last stable offset must reach its high "
        "watermark (no hanging transaction). A violation column counts all of these plus scenario-specific checks "
        "(zombie output visible, zombie not fenced, broker did not abort a timed-out transaction, misconfiguration "
        "not failing fast with one clear error, anything published or any offset moved by a misconfigured run).",
        "",
        *start_phase_outcomes(results, "one node"),
        "| scenario | trials | records | faults | violations | hangs | longest time to fail | longest recovery "
        "| wall time |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        failed = f" ({r['errors']} not carried out)" if r["errors"] else ""
        fail = f"{r['longest_fail_s']:.0f} s" if r["longest_fail_s"] is not None else "-"
        recovery = f"{r['longest_recovery_s']:.0f} s" if r["longest_recovery_s"] is not None else "-"
        lines.append(f"| {r['scenario']} | {r['trials']} | {r['records']:,} | {r['faults']} | "
                     f"{r['violations']}{failed} | {r['hangs']} | {fail} | {recovery} | {r['seconds'] / 60:.1f} min |")
    lines.append(f"| **total** | **{total['trials']}** | **{total['records']:,}** | **{total['faults']}** | "
                 f"**{total['violations']}** | **{sum(r['hangs'] for r in rows)}** | | | **{wall / 60:.1f} min** |")
    lines += [
        "",
        "What each scenario does (code: `include/eos_etl/faults/scenarios.py`):",
        "",
        "- **kill_at_step**: the job stops itself exactly at a transaction step (after `init_transactions`, "
        "mid-produce, after `send_offsets_to_transaction`, with all outputs acked just before `commit_transaction`, "
        "after a commit, after the last commit but before the task reports to the driver); the harness freezes and SIGKILLs every "
        "process of the job and starts a new run. Each step with several seeds (different records / partitions).",
        "- **random_kills**: a backlog drained while the job is SIGKILLed at random moments (three in four within "
        "0-4 s after a partition started publishing, the rest anywhere in start-up, planning or reading) and "
        "restarted each time; when a run finishes between kills, more purchases arrive.",
        "- **broker_restart**: the broker is SIGKILLed while the job publishes and restarted after 0-3 s "
        "(KRaft recovery included); the job either rides it out or fails and the next run recovers.",
        "- **zombie**: an attempt freezes mid-transaction (SIGSTOP of its whole process tree); a new attempt runs the "
        "window to the end; the old one is resumed (SIGCONT) and must be fenced and add nothing visible.",
        "- **concurrent_runs**: two processes run the same window at once.",
        "- **transaction_timeout**: the job freezes with outputs produced and offsets sent but not committed, "
        "past `transaction.timeout.ms`; the broker must abort the transaction on its own (the output's last "
        "stable offset reaches the high watermark while the job is frozen, nothing visible); the job is then "
        "resumed and the next run recovers.",
        "- **hostile_input**: input with committed and aborted transactions (markers), malformed, empty, null, "
        "deeply nested, oversized, duplicate-key, out-of-range and unicode/quoting/control-character records and "
        "keys, and a kill mid-produce; every dead letter must carry a reason.",
        "- **misconfiguration**: broker unreachable, missing output topic, wrong SASL password on the broker's "
        "SASL listener: exit code 2 with exactly one `error:` line and no traceback, the secret never printed, "
        "nothing published, no offset committed.",
        "- **start_phase_broker_kill**: the broker is SIGKILLed at a random moment of a run's first 10 s "
        "(connect, metadata, committed offsets, fencing, preflight, planning, Spark start) and restarted "
        "2-5 s later: the run exits 0, or 2 with exactly one `error:` line (\"cannot reach Kafka\" while the "
        "only broker is down), never by a signal and never with a traceback; a clean run then finishes the window.",
        "- **offsets_expired**: on a broker that deletes a group's committed offsets one minute after the last "
        "commit, a pause past that retention (until the group's offsets are gone) between two complete windows, "
        "between an attempt killed at a random transaction step and its retry, and while a frozen attempt holds "
        "a transaction (resumed after the retry: it must be fenced); the next run resumes from the pipeline's "
        "checkpoint topic and publishes nothing twice.",
        "- **connect_\\***: a window on the long-lived Spark Connect server (`include/eos_etl/faults/"
        "connect_scenarios.py`): the server SIGKILLed mid-publish; SIGSTOPped past the stall bound; the client "
        "SIGKILLed (the server must end the orphaned operation); the Airflow task killed (`on_kill`: SIGTERM to "
        "the client); two clients running one window; the server restarted between two windows; the broker "
        "SIGKILLed during the window. Each faulted run must end within its bound (time to fail); the run task's "
        "next steps (`ensure_running`, a retry) must then finish the window exactly once (recovery).",
        "- **connect_endurance**: consecutive small windows on one Connect server, its threads, memory, open files, "
        "sessions and logs sampled after each (`include/eos_etl/faults/connect_endurance.py`); after the warm-up "
        "the largest value of the second half must stay within 1.1x of the first half's.",
        *(["", "![The Connect server's resources over the endurance run](connect_endurance.png)"]
          if any(r.scenario == "connect_endurance" for r in results) else []),
        "",
        "### Trials" if subset else "## Trials",
        "",
        "| scenario | trial | records | kills | violations | seconds | detail |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    for r in results:
        v, detail = _verdict_cells(r)
        lines.append(f"| {r.scenario} | {r.trial} | {r.records:,} | {r.kills} | {v} | {r.seconds:.0f} | {detail} |")
    lines += ["", "Reproduce: `make soak` (defaults as above) or `python -m eos_etl soak --help` for the options "
              "(records, kills, seeds, broker restarts, duration, scenarios). A fast subset runs in `make test` "
              "(`tests/test_faults.py`).", ""]
    write_section(out, section, "\n".join(lines))
    return out


# -- docs/reliability.md holds one section per soak; each writer replaces only its own ------------------
SINGLE_NODE_SECTION = "single-node soak"
CLUSTER_SECTION = "cluster soak"


def _markers(section: str) -> tuple[str, str]:
    return f"<!-- {section}: begin (generated) -->", f"<!-- {section}: end -->"


def write_section(out: Path, section: str, text: str) -> None:
    """Put ``text`` between ``section``'s markers in ``out``, leaving every other section as it is.

    A file written before the markers existed is the single-node soak's table: it is kept as that section.
    Sections appear in the order they were first written.
    """
    begin, end = _markers(section)
    block = f"{begin}\n{text.rstrip()}\n{end}\n"
    old = out.read_text() if out.is_file() else ""
    if old and "<!-- " not in old:
        legacy_begin, legacy_end = _markers(SINGLE_NODE_SECTION)
        old = f"{legacy_begin}\n{old.rstrip()}\n{legacy_end}\n"
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        new = (old.rstrip() + "\n\n" if old else "") + block
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(new)


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
    """The cluster soak's section of docs/reliability.md; a run of some scenarios that is not merged into an
    earlier soak passes a ``section`` of its own, so it never replaces the full soak's table."""
    out = opts.out or paths.project_root() / "docs" / "reliability.md"
    rows = summarize(results)
    total = {k: sum(r[k] for r in rows) for k in ("trials", "records", "faults", "violations", "errors", "hangs")}
    ok = total["violations"] == 0 and total["errors"] == 0
    lines = [
        "## Reliability on a three-node Kafka cluster and a Spark standalone cluster: the cluster fault soak"
        + ("" if section == CLUSTER_SECTION else f", scenarios: {', '.join(opts.scenarios)}"),
        "",
        f"Generated by `{command}` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; do not edit by hand.",
        f"Machine: {_machine()}. Apache Kafka {KAFKA_VERSION}, three KRaft nodes in combined mode on loopback "
        "(replication factor 3, min.insync.replicas 2, transaction state and offsets replicated 3 times, "
        f"unclean leader election off); Spark {SPARK_VERSION} in local mode, and for the Spark-side scenarios a "
        "Spark standalone master with two one-core workers, each on a loopback address of its own "
        "(127.0.0.2, 127.0.0.3), so Spark treats them as two machines.",
        "",
        f"**Verdict: {'zero violations and no hang in every scenario' if ok else 'VIOLATIONS, HANGS OR FAILED TRIALS, see below'}.** "
        f"{total['trials']} trials, {total['faults']} faults injected, {total['records']:,} purchases written, "
        f"{total['violations']} violations, {total['hangs']} hangs, {total['errors']} trials that could not be "
        f"carried out; wall time {wall / 60:.1f} min.",
        "",
        "The job is stopped at a failpoint (its publishing worker SIGSTOPs itself, so a transaction is open at a "
        "known step), the cluster is asked which node holds the role under test, that node is faulted and the job "
        "resumed. Bounds: a faulted run must finish, or fail with exit code 2 and one `error:` line, within "
        f"{RUN_BOUND_S:.0f} s of the fault (the rolling restart: {RUN_BOUND_S + 120:.0f} s after the first restart), "
        f"else it is a hang; with two of three nodes down the run must fail within {MIN_ISR_BOUND_S:.0f} s with an "
        "error naming min.insync.replicas. Then every node is back and in sync, a clean run finishes the window if "
        "needed, and the independent checker must report no lost, duplicated, torn, beyond-commit or "
        "from-aborted-input output, committed offsets equal to the input's ends and no hanging transaction. "
        "Recovery = from the fault to the faulted run finishing, or else to the next run finishing.",
        "",
        *start_phase_outcomes(results, "three nodes"),
        "| scenario | trials | records | faults injected | violations | longest recovery | hangs |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        failed = f" ({r['errors']} not carried out)" if r["errors"] else ""
        rec = f"{r['longest_recovery_s']:.0f} s" if r["longest_recovery_s"] is not None else "-"
        lines.append(f"| {r['scenario']} | {r['trials']} | {r['records']:,} | {r['faults']} | "
                     f"{r['violations']}{failed} | {rec} | {r['hangs']} |")
    lines += [
        f"| **total** | **{total['trials']}** | **{total['records']:,}** | **{total['faults']}** | "
        f"**{total['violations']}** | | **{total['hangs']}** |",
        "",
        "What each scenario does (code: `include/eos_etl/faults/cluster_scenarios.py`):",
        "",
        "- **partition_leader_kill**: SIGKILL of the leader of an output partition mid-produce (open transaction).",
        "- **txn_coordinator_kill_before_commit**: SIGKILL of the transaction coordinator of the job's "
        "transactional.id after `send_offsets_to_transaction`, before `commit_transaction`.",
        "- **txn_coordinator_kill_during_commit**: the coordinator is frozen (SIGSTOP) as the job resumes into "
        "`commit_transaction`, so its EndTxn is in flight there, then SIGKILLed 0.5-2 s later.",
        "- **group_coordinator_kill**: SIGKILL of the group's coordinator just before `send_offsets_to_transaction`.",
        "- **controller_kill**: SIGKILL of the active KRaft controller mid-transaction.",
        f"- **broker_pause**: an output partition's leader SIGSTOPped for {PAUSE_S:.0f} s (longer than "
        "`broker.session.timeout.ms`, 9 s) mid-transaction, then SIGCONT: the stand-in for a network partition.",
        f"- **rolling_restart**: all three nodes restarted one at a time (each back in sync before the next; odd seeds "
        f"SIGKILL, even seeds clean stop) while a {opts.rolling_records:,}-purchase window publishes.",
        "- **two_brokers_down**: two of three nodes SIGKILLed mid-transaction; the outputs cannot reach "
        "min.insync.replicas (and the controller quorum is lost). The run must fail with one clear error; once the "
        "nodes are back nothing of it is visible to read_committed readers and the group's offsets have not moved; "
        "the next run is exact.",
        "- **start_phase_broker_kill**: a random node SIGKILLed at a random moment of a run's first 10 s (connect, "
        "metadata, committed offsets, fencing, preflight, planning, Spark start) and restarted 2-5 s later: the run "
        "exits 0, or 2 with exactly one `error:` line, never by a signal, never with a traceback; the checker exact.",
        "- **executor_kill** (Spark standalone): a publishing task stops itself mid-transaction; the executor JVM "
        "running it and its Python workers are SIGKILLed; Spark retries the task (the retry fences the dead "
        "attempt's producer, which aborts its open transaction).",
        "- **worker_kill** (Spark standalone): the same, but the whole worker (daemon, executors, Python workers) "
        "is SIGKILLed, like a machine losing power; the task must be retried on the other worker.",
        "- **spark_speculation** (Spark standalone): `spark.speculation=true` and one publishing task stalled "
        "mid-transaction for 100 s; Spark runs a speculative copy on the other worker, which fences the "
        "original and finishes the partition, and kills the original as redundant. A trial in which no second "
        "copy ran on another host counts as not carried out. Which attempts ran where is read from the "
        "executors' own logs (detail column).",
        "",
        "### Cluster trials",
        "",
        "| scenario | trial | records | faults | violations | recovery | hung | detail |",
        "|---|---|---:|---:|---|---:|---|---|",
    ]
    for r in results:
        v, detail = _verdict_cells(r)
        rec = f"{r.recovery_s:.0f} s" if r.recovery_s is not None else "-"
        lines.append(f"| {r.scenario} | {r.trial} | {r.records:,} | {r.kills} | {v} | {rec} | "
                     f"{'yes' if r.hung else 'no'} | {detail} |")
    lines += ["", "Reproduce: `make soak-cluster` or `python -m eos_etl soak --cluster --help` (seeds, scenarios, "
              "rolling-restart records). A fast smoke runs in `make test` (`tests/test_cluster_faults.py`).", ""]
    write_section(out, section, "\n".join(lines))
    return out
