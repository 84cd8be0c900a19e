"""The soak: every fault scenario at full counts against a private broker.

``python -m eos_etl soak`` (or ``make soak``) starts its own Kafka broker
(PLAINTEXT + SASL/PLAIN) under ``var/soak/kafka``, so it can SIGKILL and
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
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .. import paths
from ..kafka.connection import KafkaConnection
from . import scenarios as sc
from .lab import Lab, TrialResult

log = logging.getLogger(__name__)

SOAK_USER = "soak"
SOAK_PASSWORD = "soak-secret"

SCENARIOS = ("kill_at_step", "random_kills", "broker_restart", "zombie", "concurrent_runs",
             "transaction_timeout", "hostile_input", "misconfiguration")


@dataclass
class SoakOptions:
    records: int = 100_000  # backlog of the random-kills scenario
    kills: int = 20  # random kills in that scenario
    seeds: int = 3  # seeds per step boundary, and trials of zombie / concurrent / timeout / hostile
    broker_restarts: int = 5
    duration_s: float = 0.0  # repeat the scenario list until this long has passed (0: once)
    scenarios: tuple[str, ...] = SCENARIOS
    out: Path | None = None  # the markdown table; default docs/reliability.md


def _plan(opts: SoakOptions, round_: int) -> list[tuple[str, Callable[[Lab], list[TrialResult]]]]:
    """(scenario, run) pairs for one pass; seeds differ between passes."""
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
        else:
            raise ValueError(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    return steps


def run_soak(opts: SoakOptions) -> tuple[list[TrialResult], float]:
    from ..stack.kafka_cluster import KafkaCluster
    from ..stack.tools import free_port

    home = paths.var_dir() / "soak" / "kafka"
    shutil.rmtree(home, ignore_errors=True)
    broker = KafkaCluster(home=home, port=free_port(), sasl_users={SOAK_USER: SOAK_PASSWORD})
    broker.start()
    lab = Lab(KafkaConnection(broker.bootstrap_servers), broker=broker,
              sasl_bootstrap_servers=broker.sasl_bootstrap_servers, sasl_user=SOAK_USER, sasl_password=SOAK_PASSWORD,
              log_dir=paths.var_dir() / "soak" / "logs")
    results: list[TrialResult] = []
    t0 = time.monotonic()
    round_ = 0
    try:
        while True:
            for name, run in _plan(opts, round_):
                if not broker.is_running():  # a failed broker trial must not sink the rest
                    broker.start()
                results += run(lab)
                _save_json(results, time.monotonic() - t0)
            round_ += 1
            if time.monotonic() - t0 >= opts.duration_s:
                break
    finally:
        broker.stop()
    return results, time.monotonic() - t0


def _save_json(results: list[TrialResult], wall: float) -> None:
    out = paths.var_dir() / "soak" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"wall_seconds": round(wall, 1), "trials": [r.to_dict() for r in results]}, indent=1))


def summarize(results: list[TrialResult]) -> list[dict]:
    rows: dict[str, dict] = {}
    for r in results:
        row = rows.setdefault(r.scenario, {"scenario": r.scenario, "trials": 0, "records": 0, "kills": 0,
                                           "violations": 0, "errors": 0, "seconds": 0.0})
        row["trials"] += 1
        row["records"] += r.records
        row["kills"] += r.kills
        row["violations"] += r.violation_count
        row["errors"] += bool(r.error)
        row["seconds"] += r.seconds
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
    from ..stack.versions import KAFKA_VERSION, SPARK_VERSION

    out = opts.out or paths.project_root() / "docs" / "reliability.md"
    rows = summarize(results)
    total = {k: sum(r[k] for r in rows) for k in ("trials", "records", "kills", "violations", "errors")}
    ok = total["violations"] == 0 and total["errors"] == 0
    lines = [
        "# Reliability: the fault-injection soak",
        "",
        f"Generated by `{command}` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; do not edit by hand.",
        f"Machine: {_machine()}. Apache Kafka {KAFKA_VERSION} (KRaft, one node), Spark {SPARK_VERSION} local mode.",
        "",
        f"**Verdict: {'zero violations in every scenario' if ok else 'VIOLATIONS OR FAILED TRIALS, see below'}.** "
        f"{total['trials']} trials, {total['kills']} faults landed, {total['records']:,} purchases written, "
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
        "| scenario | trials | records | kills | violations | wall time |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        failed = f" ({r['errors']} not carried out)" if r["errors"] else ""
        lines.append(f"| {r['scenario']} | {r['trials']} | {r['records']:,} | {r['kills']} | "
                     f"{r['violations']}{failed} | {r['seconds'] / 60:.1f} min |")
    lines.append(f"| **total** | **{total['trials']}** | **{total['records']:,}** | **{total['kills']}** | "
                 f"**{total['violations']}** | **{wall / 60:.1f} min** |")
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
        "",
        "## Trials",
        "",
        "| scenario | trial | records | kills | violations | seconds | detail |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    for r in results:
        v = ", ".join(f"{k}={n}" for k, n in r.violations.items()) or "0"
        if not r.lso_settled:
            v += ", hanging transaction"
        detail = (r.error and f"NOT CARRIED OUT: {r.error}") or r.detail
        lines.append(f"| {r.scenario} | {r.trial} | {r.records:,} | {r.kills} | {v} | {r.seconds:.0f} | "
                     f"{detail.replace('|', '/').replace(chr(10), ' ')} |")
    lines += ["", "Reproduce: `make soak` (defaults as above) or `python -m eos_etl soak --help` for the options "
              "(records, kills, seeds, broker restarts, duration, scenarios). A fast subset runs in `make test` "
              "(`tests/test_faults.py`).", ""]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    return out
