"""What each backfill did, interval by interval: the "Backfills" report page.

Airflow records a backfill (its range and reprocess behaviour) and one row per
interval: the run it created or cleared, or why it made none ("already exists"
with reprocess ``none``, or an existing run that did not fail with ``failed``;
"in flight" for a run still running). The run's own ``history.jsonl`` (one line
per execution, written by its report task) says what that execution did. A run
reprocessed by a later backfill runs again under the same id, so a backfill's
execution is the first one reported after the backfill was created. A run
deleted from Airflow since (``run_replaced``: the plugin then passes the run now
at that date, if any) is said so: its reports, kept by run id, still tell what
the backfill's execution did.

No Airflow import here: the plugin passes the rows in (``list_backfills``).
"""

from __future__ import annotations

from datetime import datetime, timezone

from . import store
from .verdict import FAILED

RECENT_BACKFILLS = 20  # the page shows at most this many backfills of a DAG
KINDS = ("published", "no-op", "skipped", "running", "failed", "deleted")  # in the summary's order


def _iso(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)


def execution_for(history: list[dict], created_at: str | None, until: str | None = None) -> dict | None:
    """The first execution of a run reported at or after ``created_at`` (the backfill's) and, with
    ``until``, not after it."""
    def reported(e: dict) -> str:
        return str(e.get("generated_at") or "")

    return next((e for e in history if (created_at is None or reported(e) >= created_at)
                 and (until is None or reported(e) <= until)), None)


def outcome(row: dict, execution: dict | None, *, reprocessed: bool) -> tuple[str, str]:
    """(kind, sentence) for one interval of a backfill: kind is skipped | running | no-op | published |
    failed | deleted. ``reprocessed``: the run existed (had run) before the backfill, which cleared it."""
    if row.get("exception_reason"):
        return "skipped", f"no run: {row['exception_reason']}"
    how = "reprocessed the existing run" if reprocessed else "new run"
    if row.get("run_replaced"):
        how += " (since deleted from Airflow" + (", made again later)" if row.get("run_id") else ")")
    if execution is None:
        if row.get("run_replaced"):
            return "deleted", f"{how}: no report of this backfill's execution"
        return "running", f"{how}: not reported yet (state {row.get('state') or 'unknown'})"
    if execution.get("verdict") == FAILED:
        return "failed", f"{how}: failed"
    if not execution.get("records_read"):
        return "no-op", f"{how}: window of {execution.get('window_span') or 0} offsets, nothing new published"
    return "published", (f"{how}: read {execution['records_read']} purchases, published "
                         f"{execution.get('invoices', 0)} invoices, {execution.get('shipments', 0)} shipments and "
                         f"{execution.get('dead_letters', 0)} dead letters")


def describe_backfills(backfills: list[dict], dag_dir) -> list[dict]:
    """Each backfill (newest first) with one line per interval and its totals.

    ``backfills``: dicts with id, from_date, to_date, reprocess_behavior, created_at, completed_at
    and ``intervals`` (logical_date, run_id or None, state, exception_reason)."""
    out = []
    for backfill in backfills:
        created = _iso(backfill.get("created_at"))
        lines, totals = [], {"published": 0, "records_read": 0, "invoices": 0}
        for row in backfill.get("intervals", []):
            run_dir = store.contained(dag_dir, row["run_id"]) if dag_dir and row.get("run_id") else None
            history = store.read_history(run_dir) if run_dir else []
            # A run made again is another run: only what was reported while this backfill ran is its.
            execution = execution_for(history, created, _iso(backfill.get("completed_at"))
                                      if row.get("run_replaced") else None)
            kind, text = outcome(row, execution, reprocessed=bool(
                history and created and str(history[0].get("generated_at") or "") < created))
            if kind == "published":
                totals["published"] += 1
                totals["records_read"] += execution["records_read"]
                totals["invoices"] += execution.get("invoices", 0)
            lines.append({"logical_date": _iso(row.get("logical_date")), "run_id": row.get("run_id"),
                          "kind": kind, "text": text})
        kinds = [line["kind"] for line in lines]
        out.append({
            "id": backfill["id"], "from_date": _iso(backfill.get("from_date")),
            "to_date": _iso(backfill.get("to_date")),
            "reprocess_behavior": backfill.get("reprocess_behavior"), "created_at": created,
            "completed_at": _iso(backfill.get("completed_at")), "intervals": lines,
            "summary": ", ".join(f"{kinds.count(k)} {k}" for k in KINDS
                                 if kinds.count(k)) or "no intervals",
            **totals,
        })
    return out
