"""The reports web app: run reports, trends and Data Docs behind Airflow's login.

:func:`create_app` builds the FastAPI app the Airflow plugin mounts under
``/eos-etl``. Authentication and authorisation are injected, not imported, so
this module never imports Airflow (tests can build the app with stand-ins;
the plugin passes Airflow's own security dependencies):

* ``current_user`` - a FastAPI dependency returning the logged-in user or
  raising 401 (Airflow: ``security.get_user``, JWT from the Authorization
  header or the UI's ``_token`` cookie);
* ``require_dag_read`` - a dependency raising 403 unless that user may read
  the ``dag_id`` path parameter's runs (Airflow: ``requires_access_dag``);
* ``readable_dag_ids(user, dag_ids)`` - the subset the user may read (the
  index lists only those);
* ``list_backfills(dag_id, limit)`` - the DAG's newest backfills with their
  intervals (Airflow: its ``backfill`` tables), for the Backfills page.

Every response carries a Content-Security-Policy: self only, no inline
script or style. Data Docs pages (GE's own HTML, with inline scripts and
styles and Vega's compiled expressions) get a looser policy that is still
self-only for every load: no page can pull anything from elsewhere.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from pathlib import Path

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

from . import backfills, data_docs, store
from .pages import LANDING_RUNS, STATIC, RunLinks, dag_page_context, landing_rows, render, run_page_context, seg

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'")
DATA_DOCS_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; "
                 "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
                 "object-src 'none'; base-uri 'self'; form-action 'none'; frame-ancestors 'self'")


def _landing(dag_id: str, base: str) -> dict:
    """A DAG's rows on the landing page: only the runs it shows are read."""
    dag_dir = _dag_dir(dag_id)
    return landing_rows(dag_id, store.recent_reports(dag_dir, limit=LANDING_RUNS) if dag_dir else [], base=base)


def create_app(*, current_user: Callable, require_dag_read: Callable,
               readable_dag_ids: Callable[[object, set[str]], set[str]],
               list_backfills: Callable[[str, int], list[dict]] | None = None) -> FastAPI:
    app = FastAPI(title="eos-etl reports", docs_url=None, redoc_url=None, openapi_url=None)
    dag_read = [Depends(require_dag_read)]

    @app.middleware("http")
    async def security_headers(request: Request, call_next):
        response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Cache-Control"] = "no-store"  # reports are per user's access: never cache them shared
        return response

    @app.get("/reports/", response_class=HTMLResponse)
    def index(request: Request, user=Depends(current_user)) -> str:
        base = _base(request)
        dags = sorted(readable_dag_ids(user, set(store.dags_with_reports())))
        return render("reports_index.html", static=base + "static", dags=[_landing(d, base) for d in dags])

    @app.get("/reports/{dag_id}", dependencies=dag_read)
    def dag_redirect(dag_id: str):
        return RedirectResponse(f"{seg(dag_id)}/", status_code=307)

    @app.get("/reports/{dag_id}/", response_class=HTMLResponse, dependencies=dag_read)
    @app.get("/reports/{dag_id}/index.html", response_class=HTMLResponse, dependencies=dag_read)
    def dag_trends(request: Request, dag_id: str) -> str:
        dag_dir = _dag_dir(dag_id)
        runs = store.recent_reports(dag_dir) if dag_dir else []
        base = _base(request)
        return render("dag_trends.html", **dag_page_context(
            dag_id, runs, static=base + "static", index_url=base + "reports/", limit=store.RECENT_RUNS,
            run_url=lambda r: f"{base}runs/{seg(dag_id)}/{seg(r.get('run_id') or r['_dir'])}"))

    @app.get("/backfills/{dag_id}/", response_class=HTMLResponse, dependencies=dag_read)
    def dag_backfills(request: Request, dag_id: str) -> str:
        base = _base(request)
        rows = list_backfills(dag_id, backfills.RECENT_BACKFILLS) if list_backfills else []
        described = backfills.describe_backfills(rows, _dag_dir(dag_id))
        for b in described:
            for line in b["intervals"]:
                line["url"] = f"{base}runs/{seg(dag_id)}/{seg(line['run_id'])}" if line["run_id"] else None
        return render("backfills.html", dag_id=dag_id, backfills=described, limit=backfills.RECENT_BACKFILLS,
                      static=base + "static", runs_url=f"{base}reports/{seg(dag_id)}/")

    # :path - a run id may hold a (percent-encoded) "/"; safe_name turns it into "_" like the writer did.
    @app.get("/runs/{dag_id}/{run_id:path}", response_class=HTMLResponse, dependencies=dag_read)
    def run_report(request: Request, dag_id: str, run_id: str) -> str:
        return _run_page(dag_id, run_id, base=_base(request))

    @app.get("/reports/{dag_id}/{run_id}/report.html", response_class=HTMLResponse, dependencies=dag_read)
    def run_report_file(request: Request, dag_id: str, run_id: str) -> str:
        return _run_page(dag_id, run_id, base=_base(request))

    @app.get("/data-docs/{dag_id}/{page:path}", dependencies=dag_read)
    def data_docs_page(request: Request, dag_id: str, page: str):
        root = data_docs.site_root()
        path = store.file_inside(root, page)
        if path is None:
            raise HTTPException(404, "no such Data Docs page (validation pages of old runs are pruned)")
        if not data_docs.page_allowed(page, _groups(dag_id)):
            raise HTTPException(403, "this Data Docs page belongs to another pipeline")
        if path.suffix != ".html":
            return FileResponse(path, media_type=mimetypes.guess_type(path.name)[0])
        base = _base(request)
        html = data_docs.rewrite_cdn_urls(path.read_text(errors="replace"), vendor_url=base + "static/vendor",
                                          site_url=base + f"data-docs/{seg(dag_id)}")
        return HTMLResponse(html, headers={"Content-Security-Policy": DATA_DOCS_CSP})

    @app.get("/static/{asset:path}", dependencies=[Depends(current_user)])
    def static(asset: str):
        path = store.file_inside(STATIC, asset)
        if path is None:
            raise HTTPException(404, "no such file")
        return FileResponse(path, media_type=mimetypes.guess_type(path.name)[0])

    return app


def _base(request: Request) -> str:
    """The app's own path prefix (``/eos-etl/`` once mounted): links are same-origin paths, never
    relative to a URL whose depth a percent-encoded "/" in a run id could change."""
    return request.scope.get("root_path", "").rstrip("/") + "/"


def _dag_dir(dag_id: str) -> Path | None:
    path = store.contained(store.reports_root(), dag_id)
    return path if path is not None and path.is_dir() else None


def _groups(dag_id: str) -> set[str]:
    """The pipeline groups this DAG's recent runs validated (their Data Docs pages are its own)."""
    dag_dir = _dag_dir(dag_id)
    return {r["window"]["group"] for r in (store.recent_reports(dag_dir) if dag_dir else [])
            if isinstance(r.get("window"), dict) and r["window"].get("group")}


def _existing_page(docs_path: str | None) -> str | None:
    """A Data Docs page recorded in a report -> its path in the site, if the site still has it."""
    page = data_docs.relative_page(docs_path)
    return page if page and store.file_inside(data_docs.site_root(), page) is not None else None


def _run_page(dag_id: str, run_id: str, *, base: str) -> str:
    run_dir = store.contained(store.reports_root(), dag_id, run_id)
    report = store.read_report(run_dir) if run_dir else None
    if report is None:
        raise HTTPException(404, "this run has no report (yet)")
    quality = report.get("quality") or {}
    docs_base = f"{base}data-docs/{seg(dag_id)}/"
    index_page = _existing_page(quality.get("data_docs_path"))
    suite_docs = []
    for name, suite in sorted((quality.get("suites") or {}).items()):
        if isinstance(suite, dict) and data_docs.relative_page(suite.get("docs_page")):
            # A recorded page that is gone was pruned with its validation result: named, not linked.
            page = _existing_page(suite["docs_page"])
            suite_docs.append((name, docs_base + page if page else None))
    links = RunLinks(all_runs=f"{base}reports/{seg(dag_id)}/",
                     data_docs=docs_base + index_page if index_page else None, suite_docs=suite_docs)
    return render("run_report.html", **run_page_context(report, links, base + "static"))
