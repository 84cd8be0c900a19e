"""Per-run HTML/JSON reports and an index with a chart of recent runs.

Files (under ``var/reports/<dag_id>/``)::

    <run>/report.json   window, counts, transactions, durations, throughput, GE verdict
    <run>/report.html   the same, readable, with a link to the Great Expectations Data Docs
    index.html          recent runs: table + SVG chart (records and duration per run)

No plotting library: the chart is plain SVG so the report works anywhere.
"""

from __future__ import annotations

import html
import json
import time
from pathlib import Path

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#1f2933;max-width:1100px}
h1{font-size:1.5rem;margin-bottom:.2rem} h2{font-size:1.1rem;margin-top:1.6rem}
.muted{color:#616e7c} table{border-collapse:collapse;margin:.5rem 0 1rem} td,th{border:1px solid #d9e2ec;
padding:.3rem .6rem;text-align:right} th{background:#f0f4f8} td:first-child,th:first-child{text-align:left}
.ok{color:#0e7c3a;font-weight:600} .fail{color:#b42318;font-weight:600} .skip{color:#8a6d00;font-weight:600}
.cards{display:flex;gap:1rem;flex-wrap:wrap} .card{border:1px solid #d9e2ec;border-radius:8px;padding:.7rem 1rem;
min-width:9rem} .card b{display:block;font-size:1.4rem}
"""


def build_report(*, dag_id: str, run_id: str, window: dict, summary: dict | None, quality: dict | None,
                 plan_seconds: float | None = None) -> dict:
    """The report as data: everything an operator needs about one run."""
    summary = summary or {}
    records = summary.get("records_read", 0)
    seconds = summary.get("seconds") or 0.0
    outputs = summary.get("invoices", 0) + summary.get("shipments", 0) + summary.get("dead_letters", 0)
    verdict = "no-op" if not summary else ("passed" if (quality or {}).get("success") else
                                           "failed" if quality else "not validated")
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "window": window,
        "records_read": records,
        "records_published": summary.get("records_published", 0),
        "records_skipped": summary.get("records_skipped", 0),
        "invoices": summary.get("invoices", 0),
        "shipments": summary.get("shipments", 0),
        "dead_letters": summary.get("dead_letters", 0),
        "transactions": summary.get("transactions", 0),
        "aborts": summary.get("aborts", 0),
        "publish_seconds": seconds,
        "wall_seconds": summary.get("wall_seconds"),
        "plan_seconds": plan_seconds,
        "purchases_per_second": round(records / seconds, 1) if seconds else None,
        "outputs_per_second": round(outputs / seconds, 1) if seconds else None,
        "partitions": summary.get("partitions", []),
        "quality": quality,
        "verdict": verdict,
    }


def _cards(report: dict) -> str:
    items = [("purchases read", report["records_read"]), ("invoices", report["invoices"]),
             ("shipments", report["shipments"]), ("dead letters", report["dead_letters"]),
             ("transactions", report["transactions"]), ("publish seconds", report["publish_seconds"]),
             ("purchases/s", report["purchases_per_second"] or "–")]
    return "<div class=cards>" + "".join(f"<div class=card>{html.escape(k)}<b>{v}</b></div>" for k, v in items) + "</div>"


def render_run_html(report: dict) -> str:
    e = html.escape
    verdict = report["verdict"]
    cls = {"passed": "ok", "failed": "fail"}.get(verdict, "skip")
    rows = "".join(
        f"<tr><td>{p['partition']}</td><td>{p['transactional_id']}</td><td>[{p['start']}, {p['end']})</td>"
        f"<td>{p['committed_before'] if p['committed_before'] is not None else '–'}</td><td>{p['records_read']}</td>"
        f"<td>{p['records_published']}</td><td>{p['records_skipped']}</td><td>{p['transactions']}</td>"
        f"<td>{p['aborts']}</td><td>{p['seconds']}</td></tr>"
        for p in sorted(report["partitions"], key=lambda p: p["partition"])
    )
    if not rows:
        rows = "".join(f"<tr><td>{p}</td><td>–</td><td>[{se[0]}, {se[1]})</td>" + "<td>–</td>" * 7 + "</tr>"
                       for p, se in sorted((report["window"].get("partitions") or {}).items(), key=lambda x: int(x[0])))
    quality = report.get("quality") or {}
    failures = quality.get("failures") or []
    qhtml = ""
    if quality:
        qhtml = f"<p>Great Expectations: <span class={'ok' if quality.get('success') else 'fail'}>" \
                f"{'all critical expectations met' if quality.get('success') else 'FAILED'}</span>"
        if quality.get("data_docs_path"):
            qhtml += f" &middot; <a href='{e(Path(quality['data_docs_path']).as_uri())}'>Data Docs</a>"
        qhtml += "</p>"
        if failures:
            qhtml += "<ul>" + "".join(f"<li class=fail>{e(str(f))}</li>" for f in failures) + "</ul>"
    return f"""<!doctype html><html><head><meta charset=utf-8><title>{e(report['dag_id'])} {e(report['run_id'])}</title>
<style>{_CSS}</style></head><body>
<h1>{e(report['dag_id'])}: run report</h1>
<p class=muted>run <code>{e(report['run_id'])}</code> &middot; generated {e(report['generated_at'])} &middot;
verdict <span class={cls}>{e(verdict)}</span> &middot; <a href="../index.html">all runs</a></p>
{_cards(report)}
<h2>Window</h2>
<p>topic <code>{e(str(report['window'].get('topic')))}</code>, group <code>{e(str(report['window'].get('group')))}</code>;
publish {report['publish_seconds']} s, wall {report['wall_seconds'] or '–'} s, outputs/s {report['outputs_per_second'] or '–'}</p>
<table><tr><th>partition</th><th>transactional.id</th><th>window</th><th>committed before</th><th>read</th>
<th>published</th><th>skipped</th><th>transactions</th><th>aborts</th><th>seconds</th></tr>{rows}</table>
<h2>Data quality</h2>{qhtml or '<p class=muted>not validated (nothing to validate)</p>'}
</body></html>"""


def _chart(runs: list[dict]) -> str:
    """Bars: purchases read per run; line: publish seconds per run."""
    if not runs:
        return "<p class=muted>no runs yet</p>"
    w, h, pad = 900, 260, 40
    n = len(runs)
    bw = (w - 2 * pad) / n
    max_r = max(r["records_read"] for r in runs) or 1
    max_s = max(r["publish_seconds"] or 0 for r in runs) or 1
    bars, points = [], []
    for i, r in enumerate(runs):
        x = pad + i * bw
        bh = (h - 2 * pad) * r["records_read"] / max_r
        color = {"passed": "#3b82f6", "failed": "#dc2626"}.get(r["verdict"], "#9ca3af")
        bars.append(f"<rect x='{x + 2:.1f}' y='{h - pad - bh:.1f}' width='{max(bw - 4, 1):.1f}' height='{bh:.1f}' "
                    f"fill='{color}'><title>{html.escape(r['run_id'])}: {r['records_read']} purchases, "
                    f"{r['publish_seconds']} s</title></rect>")
        py = h - pad - (h - 2 * pad) * (r["publish_seconds"] or 0) / max_s
        points.append(f"{x + bw / 2:.1f},{py:.1f}")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' role='img' "
            f"aria-label='purchases and seconds per run'>"
            f"<line x1='{pad}' y1='{h - pad}' x2='{w - pad}' y2='{h - pad}' stroke='#9aa5b1'/>"
            + "".join(bars)
            + f"<polyline points='{' '.join(points)}' fill='none' stroke='#f59e0b' stroke-width='2'/>"
            f"<text x='{pad}' y='{pad - 12}' font-size='12' fill='#3b82f6'>purchases read (max {max_r})</text>"
            f"<text x='{w - pad}' y='{pad - 12}' font-size='12' fill='#f59e0b' text-anchor='end'>"
            f"publish seconds (max {max_s})</text></svg>")


def render_index_html(dag_id: str, runs: list[dict]) -> str:
    e = html.escape
    rows = "".join(
        f"<tr><td><a href='{e(r['_dir'])}/report.html'>{e(r['run_id'])}</a></td><td>{e(r['generated_at'])}</td>"
        f"<td>{r['records_read']}</td><td>{r['invoices']}</td><td>{r['dead_letters']}</td>"
        f"<td>{r['transactions']}</td><td>{r['publish_seconds']}</td>"
        f"<td class={ {'passed': 'ok', 'failed': 'fail'}.get(r['verdict'], 'skip') }>{e(r['verdict'])}</td></tr>"
        for r in reversed(runs)
    )
    return f"""<!doctype html><html><head><meta charset=utf-8><title>{e(dag_id)} runs</title><style>{_CSS}</style></head>
<body><h1>{e(dag_id)}: recent runs</h1><p class=muted>{len(runs)} runs</p>{_chart(runs)}
<table><tr><th>run</th><th>generated</th><th>purchases</th><th>invoices</th><th>dead letters</th>
<th>transactions</th><th>publish s</th><th>verdict</th></tr>{rows}</table></body></html>"""


def write_run_report(run_dir: Path, report: dict, *, keep: int = 50) -> Path:
    """Write report.json/html for one run and refresh the DAG's index; return report.html."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    page = run_dir / "report.html"
    page.write_text(render_run_html(report))
    dag_dir = run_dir.parent
    runs = []
    for f in dag_dir.glob("*/report.json"):
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        data["_dir"] = f.parent.name
        runs.append(data)
    runs.sort(key=lambda r: r.get("generated_at", ""))
    (dag_dir / "index.html").write_text(render_index_html(report["dag_id"], runs[-keep:]))
    return page
