"""The partition soak: every network-partition scenario, on clusters formatted with each transaction.version.

``python -m eos_etl_lab soak --partitions`` (``make soak-partitions``; ``make soak-cluster`` runs it after
the process-fault cluster soak) builds a :class:`~eos_etl_lab.faults.network_lab.NetworkLab` per
``transaction.version`` (1 and 2 by default) under ``var/soak-partitions``, checks that the cluster
finalised the version it was formatted with, runs every scenario of
:mod:`eos_etl_lab.faults.partition_scenarios` for ``seeds`` seeds on it, and writes the "partition soak"
section of ``docs/reliability.md`` (rendered from ``templates/partition_soak.md.j2``) and every trial
to ``var/soak-partitions/results.json``. Needs root (network namespaces, iptables).
"""

from __future__ import annotations

import inspect
import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from markupsafe import Markup

from eos_etl import paths
from eos_etl.errors import StackError
from eos_etl.jars.versions import KAFKA_VERSION, SPARK_VERSION
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.features import finalized_features

from . import reliability_page as page
from .clear_failure import trial_failed_clearly
from .lab import Lab, TrialResult
from .network_lab import NetworkLab
from .partition_scenarios import AFTER_HEAL_BOUND_S, LOSSY_BOUND_S, PARTITION_SCENARIOS
from .reliability_page import PARTITION_SECTION

log = logging.getLogger(__name__)



@dataclass
class PartitionSoakOptions:
    seeds: int = 3  # trials per scenario and transaction.version
    transaction_versions: tuple[int, ...] = (1, 2)
    scenarios: tuple[str, ...] = ()  # default: every scenario
    command: str = ""  # as typed, kept in results.json and on the page
    out: Path | None = None  # default docs/reliability.md (its partition section)


@dataclass
class ClusterFacts:
    """What a soak's cluster finalised, read back before its first trial."""

    variant: str
    transaction_version: int
    metadata_version: int | None
    subnet: str

    def to_dict(self) -> dict:
        return {"variant": self.variant, "transaction_version": self.transaction_version,
                "metadata_version": self.metadata_version, "subnet": self.subnet}


@dataclass
class PartitionSoakRun:
    results: list[TrialResult] = field(default_factory=list)
    clusters: list[ClusterFacts] = field(default_factory=list)
    wall_s: float = 0.0


def variant(transaction_version: int) -> str:
    return f"transaction.version={transaction_version}"


def plan(opts: PartitionSoakOptions) -> list[tuple[str, int]]:
    """(scenario, seed) pairs for one cluster, seed-major: every scenario gets a trial before any a second."""
    names = opts.scenarios or tuple(PARTITION_SCENARIOS)
    unknown = [n for n in names if n not in PARTITION_SCENARIOS]
    if unknown:
        raise ValueError(f"unknown partition scenario(s) {unknown}; choose from {', '.join(PARTITION_SCENARIOS)}")
    return [(name, seed) for seed in range(1, opts.seeds + 1) for name in names]


def run_partition_soak(opts: PartitionSoakOptions,
                       on_trial: Callable[[PartitionSoakRun], None] | None = None) -> PartitionSoakRun:
    """Every planned trial on a fresh lab per transaction.version; ``on_trial(run)`` after each trial."""
    root = paths.var_dir() / "soak-partitions"
    steps = plan(opts)
    run = PartitionSoakRun()
    t0 = time.monotonic()
    for tv in opts.transaction_versions:
        home = root / f"kafka-tv{tv}"
        shutil.rmtree(home, ignore_errors=True)
        net = NetworkLab(home, features={"transaction.version": str(tv)})
        try:
            net.start()
            lab = Lab(KafkaConnection(net.cluster.bootstrap_servers), broker=net.cluster, network=net,
                      log_dir=root / "logs")
            features = finalized_features(lab.connection)
            if features.transaction_version != tv:
                raise StackError(f"the cluster formatted with transaction.version={tv} finalised "
                                 f"{features.transaction_version}")
            run.clusters.append(ClusterFacts(variant(tv), tv, features.metadata_version, net.subnet))
            log.info("partition soak on %s: %s", net.status().describe(), features.describe())
            for name, seed in steps:
                result = PARTITION_SCENARIOS[name](lab, seed)
                result.variant = variant(tv)
                run.results.append(result)
                run.wall_s = time.monotonic() - t0
                save(run, root / "results.json", opts.command)
                if on_trial is not None:
                    on_trial(run)
        finally:
            net.stop()
    run.wall_s = time.monotonic() - t0
    return run


def save(run: PartitionSoakRun, path: Path, command: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"wall_seconds": round(run.wall_s, 1), "command": command,
                                "clusters": [c.to_dict() for c in run.clusters],
                                "trials": [r.to_dict() for r in run.results]}, indent=1))


def load(path: Path) -> tuple[PartitionSoakRun, str]:
    data = json.loads(Path(path).read_text())
    run = PartitionSoakRun([TrialResult.from_dict(t) for t in data["trials"]],
                           [ClusterFacts(**c) for c in data.get("clusters", [])], data["wall_seconds"])
    return run, data.get("command", "")


def summarize(results: list[TrialResult]) -> list[dict]:
    """One row per (scenario, variant): trials, faults, violations, not carried out, hangs, longest time
    to fail or recover, producers re-initialised after an unknown outcome, worker crashes, workers the
    watchdog ended."""
    rows: dict[tuple[str, str], dict] = {}
    for r in results:
        row = rows.setdefault((r.scenario, r.variant), {
            "scenario": r.scenario, "variant": r.variant, "trials": 0, "faults": 0, "violations": 0, "errors": 0,
            "hangs": 0, "longest_s": None, "new_epochs": 0, "worker_crashes": 0, "watchdog_ends": 0,
            "failed_clearly": 0})
        row["trials"] += 1
        row["faults"] += r.kills
        row["violations"] += r.violation_count
        row["errors"] += bool(r.error)
        row["hangs"] += int(r.hung)
        row["failed_clearly"] += int(trial_failed_clearly(r))
        row["new_epochs"] += r.counters.get("new_epochs", 0)
        row["worker_crashes"] += r.counters.get("worker_crashes", 0)
        row["watchdog_ends"] += r.counters.get("watchdog_ends", 0)
        if r.recovery_s is not None:
            row["longest_s"] = max(row["longest_s"] or 0.0, r.recovery_s)
    return sorted(rows.values(), key=lambda row: (list(dict.fromkeys(r.scenario for r in results)).index(
        row["scenario"]), row["variant"]))


def scenario_docs() -> list[dict]:
    """Each scenario's name, what it does (its docstring but the last paragraph) and what it would catch
    (that paragraph). The project's own text, so marked safe for the autoescaping template."""
    docs = []
    for name, run in PARTITION_SCENARIOS.items():
        text = (inspect.getdoc(run) or "").replace("``", "`")
        paragraphs = [Markup(" ".join(p.split())) for p in text.split("\n\n") if p.strip()]
        catches = next((p.removeprefix("Would catch: ") for p in paragraphs if p.startswith("Would catch:")), "")
        does = Markup(" ").join(p for p in paragraphs if not p.startswith("Would catch:"))
        docs.append({"name": name, "does": does, "catches": catches})
    return docs


def render(run: PartitionSoakRun, command: str) -> str:
    rows = summarize(run.results)
    totals = {k: sum(row[k] for row in rows) for k in ("trials", "faults", "violations", "errors", "hangs",
                                                         "new_epochs", "worker_crashes", "watchdog_ends")}
    return page.render(
        "partition_soak.md.j2",
        command=command, generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M}", machine=page.machine(),
        kafka_version=KAFKA_VERSION, spark_version=SPARK_VERSION, clusters=run.clusters, rows=rows,
        totals=totals, ok=totals["violations"] == 0 and totals["errors"] == 0, wall_min=run.wall_s / 60,
        after_heal_bound_s=AFTER_HEAL_BOUND_S, lossy_bound_s=LOSSY_BOUND_S, scenarios=scenario_docs(),
        trials=page.trial_rows(run.results))


def write_markdown(run: PartitionSoakRun, opts: PartitionSoakOptions, command: str) -> Path:
    out = opts.out or paths.project_root() / "docs" / "reliability.md"
    page.write_section(out, PARTITION_SECTION, render(run, command))
    return out
