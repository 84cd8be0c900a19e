"""HTML pages of the run reports, rendered from Jinja2 templates with autoescaping.

Every value from a report (DAG ids, run ids, group prefixes, failure messages,
example rows) reaches the page through a template, so markup in it is shown,
never run. Pages carry no inline script or style: data for charts travels in a
``<script type="application/json">`` block (never executed) and the drawing
code is a static file, so the plugin's Content-Security-Policy can stay
``script-src 'self'``.

The same templates render the live pages (:mod:`eos_etl.reports.app`, URLs under the
plugin) and the convenience copies written next to each report (file URLs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape

from .. import paths
from .verdict import FAILED, PASSED

# Next to the package, not in it: the eos_etl code zip shipped to Spark executors
# (spark/package_zip.py takes .html/.css/.js too) has no use for megabytes of web assets.
TEMPLATES = paths.project_root() / "include" / "web" / "templates"
STATIC = paths.project_root() / "include" / "web" / "static"
EXAMPLE_ROWS = 5  # failure examples shown per expectation
# Lineage first: where a bad row came from is what an operator looks up next.
LINEAGE_COLUMNS = ("source_partition", "source_offset", "run_id")
#: Where a window's Spark work ran (the run summary's ``route``, see ``eos_etl.spark.session``), as
#: the phase table names it. Reports from before the summary said so name no route.
ROUTE_NAMES = {"spark-submit": "spark-submit", "standalone": "Spark standalone cluster",
               "connect": "Spark Connect server"}
_WINDOW_END_SOURCES = {"until": "the plan's until bound", "logical_date": "the run's logical date",
                       "generated_at": "when the report was written"}


def _environment():
    # Default (lenient) undefined on purpose: old reports miss newer keys and must still render.
    return Environment(loader=FileSystemLoader(str(TEMPLATES)),
                       autoescape=select_autoescape(["html"], default_for_string=True, default=True),
                       trim_blocks=True, lstrip_blocks=True)


_ENV = None


def render(template: str, **context) -> str:
    global _ENV
    if _ENV is None:
        _ENV = _environment()
    return _ENV.get_template(template).render(**context)


def seg(text: str) -> str:
    """One URL path segment (``/``, ``?``, ``#`` and the rest percent-encoded)."""
    return quote(str(text), safe="")


def verdict_class(verdict: str | None) -> str:
    return {PASSED: "ok", FAILED: "fail"}.get(verdict or "", "skip")


@dataclass(frozen=True)
class RunLinks:
    all_runs: str
    data_docs: str | None = None  # the Data Docs index
    # (suite, its validation page of this run); None once the page was pruned from the site.
    suite_docs: list[tuple[str, str | None]] = field(default_factory=list)


def _dash(value):
    return "–" if value is None or value == "" else value


def _cards(r: dict) -> list[tuple[str, object]]:
    return [("purchases read", r.get("records_read", 0)), ("invoices", r.get("invoices", 0)),
            ("shipments", r.get("shipments", 0)), ("dead letters", r.get("dead_letters", 0)),
            ("transactions committed", r.get("transactions", 0)), ("transactions aborted", r.get("aborts", 0)),
            ("fenced attempts", _dash(r.get("fenced_attempts"))),
            ("purchases/s", _dash(r.get("purchases_per_second")))]


def _timings(r: dict, quality: dict) -> list[tuple[str, object]]:
    route = ROUTE_NAMES.get(r.get("route") or "")
    return [("plan", _dash(r.get("plan_seconds"))),
            ("read + transform + publish (Spark job" + (f", {route})" if route else ")"),
             _dash(r.get("publish_seconds"))),
            ("validate", _dash(r.get("validate_seconds") if r.get("validate_seconds") is not None
                               else quality.get("seconds"))),
            ("run_window wall clock" + (f" ({route})" if route else ""), _dash(r.get("wall_seconds")))]


def _partitions(r: dict, quality: dict) -> list[dict]:
    """The Spark job's per-partition results joined with what validation counted per partition."""
    # Reports written before Great Expectations validated the window's own data counted per partition.
    counted = {int(p["partition"]): p for p in quality.get("per_partition") or [] if "partition" in p}
    committed = {int(o["partition"]): o.get("committed") for o in quality.get("offsets") or [] if "partition" in o}
    rows = []
    published = {int(p["partition"]): p for p in r.get("partitions") or []}
    window = {int(p): se for p, se in ((r.get("window") or {}).get("partitions") or {}).items()}
    attempts = (r.get("task_attempts") or {}).get("partitions") or {}
    for part in sorted(set(published) | set(window) | set(counted)):
        p, q = published.get(part, {}), counted.get(part, {})
        start, end = window.get(part, [p.get("start"), p.get("end")])
        rows.append({
            "partition": part, "transactional_id": _dash(p.get("transactional_id")),
            "start": _dash(start), "end": _dash(end),
            "committed_before": _dash(p.get("committed_before")),
            "committed_after": _dash(q.get("committed_offset", committed.get(part))),
            "read": _dash(p.get("records_read")), "published": _dash(p.get("records_published")),
            "skipped": _dash(p.get("records_skipped")), "inputs": _dash(q.get("inputs")),
            "invoices": _dash(q.get("invoices")),
            "shipments": _dash(q.get("shipments")), "dead_letters": _dash(q.get("dead_letters")),
            "transactions": _dash(p.get("transactions")), "aborts": _dash(p.get("aborts")),
            "seconds": _dash(p.get("seconds")),
            # How each Spark attempt of the partition's task ended; none for a range the driver committed.
            "attempts": _dash(", ".join(attempts.get(str(part), []))),
        })
    return rows


def _examples(rows) -> dict | None:
    rows = [row for row in (rows or []) if isinstance(row, dict)][:EXAMPLE_ROWS]
    if not rows:
        return None
    keys = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    columns = [c for c in LINEAGE_COLUMNS if c in keys] + [k for k in keys if k not in LINEAGE_COLUMNS]
    return {"columns": columns, "rows": [{c: _dash(row.get(c)) for c in columns} for row in rows]}


def _percent(value) -> object:
    return round(value, 3) if isinstance(value, (int, float)) else _dash(value)


def _expectations(quality: dict) -> list[dict]:
    out = []
    # Failures first (stable otherwise): they are what the page is opened for.
    for e in sorted(quality.get("expectations") or [], key=lambda e: bool(e.get("success"))):
        success = bool(e.get("success"))
        out.append({
            "suite": _dash(e.get("suite")), "check": _dash(e.get("check")),
            "expectation_type": _dash(e.get("expectation_type")), "severity": _dash(e.get("severity")),
            "success": success, "observed": _dash(e.get("observed_value")),
            "unexpected_count": _dash(e.get("unexpected_count")), "unexpected_percent": _percent(
                e.get("unexpected_percent")),
            "element_count": _dash(e.get("element_count")),
            "examples": None if success else _examples(e.get("examples")),
            "notes": e.get("notes") or "", "added_by_settings": bool(e.get("added_by_settings")),
        })
    return out


def run_page_context(report: dict, links: RunLinks, static: str) -> dict:
    quality = report.get("quality") or {}
    dead = quality.get("dead_letters_by_reason") or {}
    dead_sorted = sorted(((str(k), v) for k, v in dead.items()), key=lambda kv: (-(kv[1] or 0), kv[0]))
    end = report.get("window_end") or {}
    return {
        "r": report, "static": static, "links": links, "verdict_class": verdict_class(report.get("verdict")),
        "cards": _cards(report), "timings": _timings(report, quality),
        "validation_timings": sorted((quality.get("timings") or {}).items()),
        "partitions": _partitions(report, quality), "quality": quality or None,
        "partition_counts": bool(quality.get("per_partition")),
        "expectations": _expectations(quality), "failure_messages": quality.get("failures") or [],
        # A list, not a dict: tojson sorts a dict's keys, and the chart should keep the count order.
        "dead_letters": dead_sorted, "dead_letter_json": [list(kv) for kv in dead_sorted],
        "window_end_source": _WINDOW_END_SOURCES.get(end.get("source"), end.get("source")),
    }


def _epoch_ms(iso: str | None) -> int | None:
    if not iso:
        return None
    try:
        return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def trend_rows(runs: list[dict], run_url) -> list[dict]:
    """One point per run, on the window end time (falling back to when the report was written)."""
    rows = []
    for r in runs:
        end = (r.get("window_end") or {}).get("time") or r.get("generated_at")
        t = _epoch_ms(end)
        if t is None:
            continue
        records = r.get("records_read") or 0
        dead = r.get("dead_letters") or 0
        quality = r.get("quality") or {}
        rows.append({
            "t": t, "window_end": end, "run_id": r.get("run_id", r.get("_dir", "")), "url": run_url(r),
            "records": records, "invoices": r.get("invoices") or 0, "dead_letters": dead,
            "dead_letter_rate": round(100.0 * dead / records, 3) if records else None,
            "plan_s": r.get("plan_seconds"), "publish_s": r.get("publish_seconds"),
            "validate_s": r.get("validate_seconds") if r.get("validate_seconds") is not None
            else quality.get("seconds"),
            "failed_checks": len(quality.get("failures") or []) if quality else None,
            "verdict": r.get("verdict") or "–", "verdict_class": verdict_class(r.get("verdict")),
        })
    rows.sort(key=lambda row: row["t"])
    return rows


def dag_page_context(dag_id: str, runs: list[dict], *, static: str, index_url: str, run_url, limit: int) -> dict:
    return {"dag_id": dag_id, "runs": runs, "trend": trend_rows(runs, run_url), "static": static,
            "links": {"index": index_url}, "limit": limit}


#: Runs per DAG on the landing page (newest first), and failing expectations shown per run.
LANDING_RUNS = 5
LANDING_FAILURES = 3


def landing_rows(dag_id: str, runs: list[dict], *, base: str) -> dict:
    """One DAG on the reports' landing page: its newest runs (``runs`` oldest first, as
    :func:`eos_etl.reports.store.recent_reports` gives them) with their verdicts and failing expectations,
    and the links to its trends and its Data Docs."""
    latest = []
    for r in reversed(runs[-LANDING_RUNS:]):
        quality = r.get("quality") or {}
        failures = [str(f) for f in (quality.get("failures") or r.get("verdict_reasons") or [])]
        run_id = r.get("run_id") or r.get("_dir", "")
        latest.append({"run_id": run_id, "url": f"{base}runs/{seg(dag_id)}/{seg(run_id)}",
                       "window_end": (r.get("window_end") or {}).get("time") or r.get("generated_at"),
                       "verdict": r.get("verdict") or "–", "verdict_class": verdict_class(r.get("verdict")),
                       "failures": failures[:LANDING_FAILURES],
                       "more_failures": max(0, len(failures) - LANDING_FAILURES)})
    return {"dag_id": dag_id, "trends": f"{base}reports/{seg(dag_id)}/",
            "data_docs": f"{base}data-docs/{seg(dag_id)}/index.html", "runs": latest}


# -- the convenience copies written next to the reports (opened as files, without Airflow) ---------


def render_run_file(report: dict) -> str:
    docs = (report.get("quality") or {}).get("data_docs_path")
    links = RunLinks(all_runs="../index.html",
                     data_docs=Path(docs).as_uri() if docs and Path(docs).is_absolute() and Path(docs).is_file()
                     else None)
    return render("run_report.html", **run_page_context(report, links, STATIC.as_uri()))


def render_dag_file(dag_id: str, runs: list[dict]) -> str:
    return render("dag_trends.html", **dag_page_context(
        dag_id, runs, static=STATIC.as_uri(), index_url="../", limit=len(runs),
        run_url=lambda r: f"{seg(r['_dir'])}/report.html"))
