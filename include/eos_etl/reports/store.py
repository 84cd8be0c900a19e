"""Per-run reports: what one run did, as JSON, written beside the run's other files.

The run's directory and its file names are :mod:`eos_etl.run_files`'s: this
module writes ``report.json``, ``report.html``, ``history.jsonl`` (what each
execution of the run did) and the DAG's ``index.html``.

The Airflow plugin renders the pages live from ``report.json`` (see
:mod:`eos_etl.reports.app`); the HTML files are a convenience copy of the same templates.
Reading is bounded: :func:`recent_reports` opens at most ``limit`` reports,
however long the history.
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from .. import paths
from ..run_files import DAG_INDEX, HISTORY, REPORT, REPORT_PAGE, reports_root
from .pages import render_dag_file, render_run_file
from .verdict import RunVerdict, judge_run

RECENT_RUNS = 200  # the trends page and the index never read more reports than this
#: What history.jsonl keeps of each execution of a run.
HISTORY_FIELDS = ("generated_at", "run_type", "clear_number", "window_span", "dry_run", "records_read",
                  "records_published", "invoices", "shipments", "dead_letters", "verdict")
MAX_EXECUTIONS_READ = 100  # a run's history.jsonl is read up to this many lines


def contained(root: Path, *names: str) -> Path | None:
    """``root/<safe_name(name)>/...`` if it stays inside ``root`` once resolved (symlinks too), else None.

    ``safe_name`` already removes separators and dot-names; the resolved check
    is the second lock, against a symlink planted inside the tree.
    """
    path = root.joinpath(*(paths.safe_name(n) for n in names))
    try:
        resolved = path.resolve()
        resolved.relative_to(root.resolve())
    except (OSError, ValueError):
        return None
    return resolved


def file_inside(root: Path, relative: str) -> Path | None:
    """The file ``relative`` (a URL path, ``/``-separated) names inside ``root``, or None.

    For paths that are not ids (Data Docs pages, static assets): empty, ``.``
    and ``..`` parts, backslashes, NULs and absolute paths are refused before
    the disk is touched; then the resolved path must still be inside ``root``.
    """
    if not relative or "\\" in relative or "\x00" in relative:
        return None
    pure = PurePosixPath(relative)
    if pure.is_absolute() or any(p in ("", ".", "..") for p in relative.split("/")):
        return None
    try:
        path = root.joinpath(*pure.parts).resolve()
        path.relative_to(root.resolve())
    except (OSError, ValueError):
        return None
    return path if path.is_file() else None


def _iso(ms: int | float | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def window_end_time(plan: dict | None, logical_date: datetime | None, generated_at: str) -> dict:
    """When the run's window ends in real time, and where that time comes from.

    A window is a set of per-partition offset ranges, so it has no end time of
    its own. The plan's ``until`` bound (scheduled runs, backfills, manual runs
    with ``until``) is the truest one; else the run's logical date; else the
    time the report was written.
    """
    if plan and plan.get("until_ms") is not None:
        return {"time": _iso(plan["until_ms"]), "source": "until"}
    if logical_date is not None:
        return {"time": logical_date.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "source": "logical_date"}
    return {"time": generated_at, "source": "generated_at"}


def build_report(*, dag_id: str, run_id: str, plan: dict | None, summary: dict | None, quality: dict | None,
                 verdict: RunVerdict | None = None, logical_date: datetime | None = None,
                 run_type: str | None = None, clear_number: int = 0) -> dict:
    """The report as data: everything an operator needs about one run."""
    verdict = verdict or judge_run(plan, summary, quality)
    summary = summary or {}
    records = summary.get("records_read", 0)
    seconds = summary.get("seconds") or 0.0
    outputs = summary.get("invoices", 0) + summary.get("shipments", 0) + summary.get("dead_letters", 0)
    generated_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "generated_at": generated_at,
        "run_type": run_type,
        "clear_number": clear_number,
        "window": (plan or {}).get("window", {}),
        "window_span": (plan or {}).get("span"),
        "dry_run": bool((plan or {}).get("dry_run")),
        "window_end": window_end_time(plan, logical_date, generated_at),
        "records_read": records,
        "records_published": summary.get("records_published", 0),
        "records_skipped": summary.get("records_skipped", 0),
        "invoices": summary.get("invoices", 0),
        "shipments": summary.get("shipments", 0),
        "dead_letters": summary.get("dead_letters", 0),
        "transactions": summary.get("transactions", 0),
        "aborts": summary.get("aborts", 0),
        "fenced_attempts": summary.get("fenced_attempts"),
        "task_attempts": summary.get("task_attempts"),
        "publish_seconds": seconds,
        "wall_seconds": summary.get("wall_seconds"),
        "route": summary.get("route"),  # where the window's Spark work ran (eos_etl.spark.session)
        "plan_seconds": (plan or {}).get("seconds"),
        "validate_seconds": (quality or {}).get("seconds"),
        "purchases_per_second": round(records / seconds, 1) if seconds else None,
        "outputs_per_second": round(outputs / seconds, 1) if seconds else None,
        "partitions": summary.get("partitions", []),
        "quality": quality,
        "verdict": verdict.status,
        "verdict_reasons": verdict.reasons,
    }


def write_run_report(run_dir: Path, report: dict, *, keep: int = 50) -> Path:
    """Write report.json/html for one run and refresh the DAG's index.html; return report.html."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / REPORT).write_text(json.dumps(report, indent=2, default=str) + "\n")
    with open(run_dir / HISTORY, "a") as history:  # one short line per execution
        history.write(json.dumps({k: report.get(k) for k in HISTORY_FIELDS}, default=str) + "\n")
    page = run_dir / REPORT_PAGE
    page.write_text(render_run_file(report))
    dag_dir = run_dir.parent
    (dag_dir / DAG_INDEX).write_text(render_dag_file(report["dag_id"], recent_reports(dag_dir, limit=keep)))
    return page


def read_history(run_dir: Path) -> list[dict]:
    """The run's executions, oldest first (at most :data:`MAX_EXECUTIONS_READ`)."""
    out = []
    try:
        with open(run_dir / HISTORY) as f:
            for line in itertools.islice(f, MAX_EXECUTIONS_READ):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    except OSError:
        return []
    return [e for e in out if isinstance(e, dict)]


def read_report(run_dir: Path) -> dict | None:
    try:
        data = json.loads((run_dir / REPORT).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def recent_reports(dag_dir: Path, *, limit: int | None = None) -> list[dict]:
    """The ``limit`` (default :data:`RECENT_RUNS`) most recently written reports of one DAG, oldest
    first, each with ``_dir``.

    Only directory entries are listed for all history; at most ``limit``
    report.json files are opened.
    """
    limit = limit or RECENT_RUNS
    candidates = []
    try:
        entries = list(os.scandir(dag_dir))
    except OSError:
        return []
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        try:
            candidates.append((os.stat(os.path.join(entry.path, REPORT)).st_mtime, entry.name))
        except OSError:
            continue
    runs = []
    for _, name in heapq.nlargest(limit, candidates):
        data = read_report(dag_dir / name)
        if data is not None:
            data["_dir"] = name
            runs.append(data)
    runs.sort(key=lambda r: (r.get("generated_at") or "", r["_dir"]))
    return runs


def dags_with_reports(root: Path | None = None) -> list[str]:
    """Directory names under the reports root that hold at least one run (they are DAG ids)."""
    root = root or reports_root()
    try:
        return sorted(e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False)
                      and not e.name.startswith("."))
    except OSError:
        return []
