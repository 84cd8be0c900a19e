"""Airflow plugin: the pipeline's run reports inside the Airflow UI.

Serves ``var/reports`` under ``/eos-etl`` (a FastAPI sub-app of the API
server) and adds two UI entries: "Exactly-once reports" in the navigation
(the index with the chart of recent runs) and a "Run report" tab on every
DAG run of the shop DAGs.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

from eos_etl import paths

app = FastAPI(title="eos-etl reports")


def _reports():
    return paths.var_dir() / "reports"


@app.get("/reports/", response_class=HTMLResponse)
def index() -> str:
    root = _reports()
    dags = sorted(p.name for p in root.iterdir() if (p / "index.html").is_file()) if root.is_dir() else []
    items = "".join(f"<li><a href='{d}/index.html'>{d}</a></li>" for d in dags) or "<li>no reports yet</li>"
    return f"<!doctype html><html><body style='font-family:system-ui'><h1>Exactly-once pipeline reports</h1><ul>{items}</ul></body></html>"


@app.get("/reports/{dag_id}/index.html")
def dag_index(dag_id: str):
    page = _reports() / paths.safe_name(dag_id) / "index.html"
    if not page.is_file():
        raise HTTPException(404, "no reports for this DAG yet")
    return FileResponse(page)


@app.get("/reports/{dag_id}/{run}/report.html")
def run_report_file(dag_id: str, run: str):
    return run_report(dag_id, run)


@app.get("/runs/{dag_id}/{run_id}")
def run_report(dag_id: str, run_id: str):
    page = _reports() / paths.safe_name(dag_id) / paths.safe_name(run_id) / "report.html"
    if not page.is_file():
        raise HTTPException(404, "this run has no report (yet)")
    return FileResponse(page)


class EosEtlReportsPlugin(AirflowPlugin):
    name = "eos_etl_reports"
    fastapi_apps = [{"app": app, "url_prefix": "/eos-etl", "name": "eos-etl reports"}]
    external_views = [
        {"name": "Exactly-once reports", "href": "/eos-etl/reports/", "destination": "nav",
         "category": "browse", "url_route": "eos-etl-reports"},
        {"name": "Run report", "href": "/eos-etl/runs/{DAG_ID}/{RUN_ID}", "destination": "dag_run",
         "url_route": "eos-etl-run-report"},
    ]
