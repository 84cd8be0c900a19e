"""The reports web app without Airflow: verdicts, pages, escaping, paths, CSP, Data Docs assets.

The app is built with stand-ins for Airflow's security dependencies (a user
from a test header, a per-user deny list), so these tests are fast and never
import Airflow. The real dependencies (401 from Airflow's ``get_user``, 403
from ``requires_access_dag`` for a logged-in user without a role, the happy
path with a real login) are tested against a running Airflow in
tests/integration/orchestration/test_ui_browser.py::test_reports_plugin_behind_the_airflow_login.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from fastapi import Depends, HTTPException, Request
from fastapi.testclient import TestClient

from eos_etl.reports import data_docs, store
from eos_etl.reports.app import CSP, DATA_DOCS_CSP, create_app
from eos_etl.reports.pages import ROUTE_NAMES, STATIC, seg
from eos_etl.reports.verdict import judge_run

HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>']
DAG = "shop_invoicing"
OTHER_DAG = "shop_replay"


def _user(request: Request) -> str:
    name = request.headers.get("x-test-user")
    if not name:
        raise HTTPException(401, "Not authenticated")
    return name


DENIED = {"carol": {OTHER_DAG}}


def _require_dag_read(request: Request, user: str = Depends(_user)) -> None:
    if request.path_params.get("dag_id") in DENIED.get(user, set()):
        raise HTTPException(403, "Forbidden")


def _readable(user, dag_ids: set[str]) -> set[str]:
    return {d for d in dag_ids if d not in DENIED.get(user, set())}


@pytest.fixture
def var(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("EOS_ETL_VAR", str(tmp_path / "var"))
    return tmp_path / "var"


@pytest.fixture
def client(var) -> TestClient:
    app = create_app(current_user=_user, require_dag_read=_require_dag_read, readable_dag_ids=_readable)
    return TestClient(app, headers={"x-test-user": "alice"})


def quality(group: str = "shop-invoicing", *, success: bool = True, docs: Path | None = None) -> dict:
    """quality.json as QualityResult.to_dict writes it, with the per-expectation keys."""
    failed = {
        "suite": "invoices", "check": "invoice_id_unique", "expectation_type": "expect_column_values_to_be_unique",
        "severity": "critical", "success": False, "observed_value": None, "unexpected_count": 2,
        "unexpected_percent": 0.4, "element_count": 500,
        "examples": [{"invoice_id": "inv_1", "source_partition": 1, "source_offset": 17, "run_id": "r-1"},
                     {"invoice_id": "inv_1", "source_partition": 2, "source_offset": 3, "run_id": "r-1"}],
    }
    passed = {"suite": "reconciliation", "check": "total_matches",
              "expectation_type": "expect_column_values_to_be_between",
              "severity": "critical", "success": True, "observed_value": 12345.5, "unexpected_count": 0,
              "unexpected_percent": 0.0, "element_count": 1, "examples": []}
    return {
        "run_id": "r-1", "window": {"topic": "purchases", "group": group, "partitions": {"0": [0, 250], "1": [0, 250]}},
        "success": success, "failures": [] if success else ["invoices: 2 duplicate invoice ids"],
        "suites": {"invoices": {"name": "invoices", "success": success, "evaluated": 5,
                                "successful": 5 if success else 4,
                                "docs_page": str(docs.parent / "validations" / group / "invoices" / "p.html")
                                if docs else None}},
        "expectations": [passed] if success else [passed, failed],
        "dead_letters_by_reason": {"negative_quantity": 7, "missing_field": 3},
        "per_partition": [{"partition": 0, "window_start": 0, "window_end": 250, "committed_offset": 250,
                           "inputs": 250, "invoices": 240, "shipments": 240, "dead_letters": 10}],
        "counts": {}, "offsets": [], "data_docs_path": str(docs) if docs else None, "seconds": 4.2,
        "timings": {"read": 1.5, "ge_invoices": 0.7},
    }


def summary() -> dict:
    return {"run_id": "r-1", "records_read": 500, "records_published": 500, "records_skipped": 0, "invoices": 490,
            "shipments": 490, "dead_letters": 10, "transactions": 4, "aborts": 1, "fenced_attempts": 1,
            "seconds": 3.5, "partitions": [{"partition": 0, "transactional_id": "shop-0", "start": 0, "end": 250,
                                            "committed_before": 0, "records_read": 250, "records_published": 250,
                                            "records_skipped": 0, "transactions": 2, "aborts": 1, "seconds": 1.7}]}


def plan(group: str = "shop-invoicing", *, until_ms: int | None = 1_795_000_000_000, **kw) -> dict:
    return {"window": {"topic": "purchases", "group": group, "partitions": {"0": [0, 250], "1": [0, 250]}},
            "empty": False, "dry_run": False, "until_ms": until_ms, "seconds": 0.8, **kw}


def write(var: Path, dag_id: str, run_id: str, report: dict) -> Path:
    return store.write_run_report(var / "reports" / dag_id / store.paths.safe_name(run_id), report)


# -- the verdict -----------------------------------------------------------------------------


def test_one_function_decides_every_verdict():
    good, bad = {"success": True}, {"success": False, "failures": ["x failed"]}
    assert judge_run(None, None, None).status == "failed"
    assert judge_run(plan(dry_run=True), None, None).status == "dry run"
    assert judge_run(plan(empty=True), None, None).status == "no-op"
    assert judge_run(plan(), None, None).reasons == ["run_window did not complete"]
    assert judge_run(plan(), summary(), None).reasons == ["validate did not complete"]
    assert judge_run(plan(), summary(), None, require_validation=False).status == "not validated"
    failed = judge_run(plan(), summary(), bad)
    assert failed.failed and "x failed" in failed.reasons[0]
    assert judge_run(plan(), summary(), good).status == "passed" and not judge_run(plan(), summary(), good).reasons


def test_build_report_takes_the_verdict_and_window_end_from_the_plan():
    r = store.build_report(dag_id=DAG, run_id="r-1", plan=plan(), summary=summary(), quality=quality())
    assert r["verdict"] == "passed" and r["window_end"] == {"time": "2026-11-18T11:06:40Z", "source": "until"}
    assert (r["plan_seconds"], r["publish_seconds"], r["validate_seconds"]) == (0.8, 3.5, 4.2)
    manual = store.build_report(dag_id=DAG, run_id="m", plan=plan(until_ms=None), summary=None, quality=None)
    assert manual["verdict"] == "failed" and manual["window_end"]["source"] == "generated_at"


# -- pages -----------------------------------------------------------------------------------


def test_run_report_shows_expectations_examples_partitions_and_timings(var, client):
    report = store.build_report(dag_id=DAG, run_id="scheduled__2026-11-23T12:00:00+00:00", plan=plan(),
                                summary=summary(), quality=quality(success=False))
    write(var, DAG, report["run_id"], report)
    resp = client.get(f"/runs/{DAG}/scheduled__2026-11-23T12:00:00+00:00")
    assert resp.status_code == 200, resp.text
    page = resp.text
    assert 'data-testid="verdict">failed<' in page and "data quality checks failed" in page
    assert "expect_column_values_to_be_unique" in page and "FAIL" in page and "0.4" in page
    # failure examples lead with their lineage columns
    examples = page[page.index("example-rows"):]
    assert examples.index("source_partition") < examples.index("source_offset") < examples.index("invoice_id")
    assert "<td>17</td>" in examples
    assert "negative_quantity" in page and 'id="dead-letter-data"' in page
    # committed before/after, read, published, skipped, committed inputs, invoices of partition 0
    assert ("<td>shop-0</td><td>[0, 250)</td><td>0</td><td>250</td><td>250</td><td>250</td><td>0</td><td>250</td>"
            "<td>240</td>" in page.replace("\n", ""))
    assert "fenced attempts<b>1</b>" in page and "transactions aborted<b>1</b>" in page
    for phase in ("plan", "read + transform + publish", "validate"):
        assert f"<td>{phase}" in page
    assert not re.search(r"<script(?![^>]*(type=\"application/json\"|src=))", page)  # no inline script
    assert " style=" not in page and "<style" not in page  # no inline style


def test_an_old_report_without_the_new_keys_still_renders(var, client):
    old = {"dag_id": DAG, "run_id": "old", "generated_at": "2026-11-01T00:00:00Z", "window": {},
           "records_read": 5, "invoices": 5, "shipments": 5, "dead_letters": 0, "transactions": 1, "aborts": 0,
           "publish_seconds": 1.0, "partitions": [], "verdict": "passed",
           "quality": {"success": True, "failures": [], "data_docs_path": "/elsewhere/index.html"}}
    run_dir = var / "reports" / DAG / "old"
    run_dir.mkdir(parents=True)
    (run_dir / "report.json").write_text(json.dumps(old))
    page = client.get(f"/runs/{DAG}/old").text
    assert "predates per-expectation results" in page and "not recorded in this report" in page
    assert client.get(f"/reports/{DAG}/").status_code == 200


@pytest.mark.parametrize("hostile", HOSTILE)
def test_ids_and_values_from_reports_cannot_inject_markup(var, client, hostile):
    q = quality(group=hostile, success=False)
    q["failures"] = [hostile]
    q["dead_letters_by_reason"] = {hostile: 1}
    q["expectations"][1]["examples"][0]["invoice_id"] = hostile
    s = summary()
    s["partitions"][0]["transactional_id"] = hostile + "-0"  # the transactional-id prefix
    report = store.build_report(dag_id=DAG, run_id=hostile, plan=plan(group=hostile), summary=s, quality=q)
    write(var, DAG, hostile, report)
    # The run id travels percent-encoded in the URL, as the UI's tab sends it.
    for url in (f"/runs/{DAG}/{seg(hostile)}", f"/reports/{DAG}/", f"/reports/{DAG}/index.html"):
        resp = client.get(url)
        assert resp.status_code == 200, (url, resp.text)
        assert hostile not in resp.text, url
        assert "alert(1)" in resp.text  # it is there, escaped
    assert hostile not in (var / "reports" / DAG / store.paths.safe_name(hostile) / "report.html").read_text()
    assert hostile not in (var / "reports" / DAG / "index.html").read_text()


def test_trends_page_reads_a_bounded_number_of_reports_on_window_end_time(var, client, monkeypatch):
    for i in range(5):
        r = store.build_report(dag_id=DAG, run_id=f"run-{i}", plan=plan(until_ms=1_795_000_000_000 + i * 3_600_000),
                               summary=summary(), quality=quality())
        write(var, DAG, f"run-{i}", r)
    opened = []
    real = store.read_report
    monkeypatch.setattr(store, "read_report", lambda d: opened.append(d.name) or real(d))
    monkeypatch.setattr(store, "RECENT_RUNS", 3)
    assert [r["_dir"] for r in store.recent_reports(var / "reports" / DAG, limit=3)] == ["run-2", "run-3", "run-4"]
    assert len(opened) == 3
    page = client.get(f"/reports/{DAG}/").text
    data = json.loads(re.search(r'id="trend-data">(.*?)</script>', page, re.S).group(1))
    assert [d["t"] for d in data] == sorted(d["t"] for d in data) and len(data) == 3
    assert data[0]["window_end"] == "2026-11-18T13:06:40Z" and data[0]["dead_letter_rate"] == 2.0
    assert data[0]["url"].startswith("/runs/shop_invoicing/run-")
    assert "chart.js@4.6.1/dist/chart.umd.min.js" in page and "trends.js" in page


def test_the_landing_page_shows_each_dags_latest_runs_newest_first_with_what_failed(var, client, monkeypatch):
    for i in range(7):
        r = store.build_report(dag_id=DAG, run_id=f"run-{i}", plan=plan(until_ms=1_795_000_000_000 + i * 3_600_000),
                               summary=summary(), quality=quality(success=i != 6))
        r["generated_at"] = f"2026-11-18T1{i}:00:00Z"  # written in this order
        write(var, DAG, f"run-{i}", r)
    opened = []
    real = store.read_report
    monkeypatch.setattr(store, "read_report", lambda d: opened.append(d.name) or real(d))
    page = client.get("/reports/").text
    assert len(opened) == 5  # the landing page reads only the runs it shows
    assert re.findall(r'href="/runs/shop_invoicing/(run-\d)"', page) == ["run-6", "run-5", "run-4", "run-3", "run-2"]
    newest = page[page.index("run-6"):page.index("run-5")]
    assert 'class="fail">failed<' in newest and "invoices: 2 duplicate invoice ids" in newest
    assert page.count('class="ok">passed<') == 4
    assert f'href="/reports/{DAG}/"' in page and f'href="/data-docs/{DAG}/index.html"' in page
    assert f'<h2><a href="/reports/{DAG}/">{DAG}</a></h2>' in page  # the DAG's name opens its trends


# -- access ------------------------------------------------------------------------------------


def test_every_route_needs_a_user_and_the_dag_needs_read_access(var, client):
    for dag in (DAG, OTHER_DAG):
        write(var, dag, "r-1", store.build_report(dag_id=dag, run_id="r-1", plan=plan(), summary=summary(),
                                                  quality=quality()))
    urls = ["/reports/", f"/reports/{DAG}/", f"/runs/{DAG}/r-1", f"/reports/{DAG}/r-1/report.html",
            f"/data-docs/{DAG}/index.html", "/static/reports.css"]
    for url in urls:
        assert client.get(url, headers={"x-test-user": ""}).status_code == 401, url
    carol = {"x-test-user": "carol"}
    for url in (f"/reports/{OTHER_DAG}/", f"/runs/{OTHER_DAG}/r-1", f"/data-docs/{OTHER_DAG}/index.html"):
        assert client.get(url, headers=carol).status_code == 403, url
    assert client.get(f"/runs/{DAG}/r-1", headers=carol).status_code == 200
    index = client.get("/reports/", headers=carol).text
    assert f">{DAG}<" in index and OTHER_DAG not in index
    assert OTHER_DAG in client.get("/reports/").text  # alice may read both


def test_every_response_carries_the_csp(var, client):
    write(var, DAG, "r-1", store.build_report(dag_id=DAG, run_id="r-1", plan=plan(), summary=summary(),
                                              quality=quality()))
    for url, status in [("/reports/", 200), (f"/runs/{DAG}/r-1", 200), ("/static/trends.js", 200),
                        (f"/runs/{DAG}/nope", 404), ("/reports/", 401)]:
        resp = client.get(url, headers={"x-test-user": ""} if status == 401 else {})
        assert resp.status_code == status, url
        assert resp.headers["content-security-policy"] == CSP, url
        assert "'unsafe-inline'" not in resp.headers["content-security-policy"]
    assert "script-src 'self'" in CSP and "https:" not in CSP + DATA_DOCS_CSP and "*" not in CSP + DATA_DOCS_CSP


@pytest.mark.parametrize("url", [
    "/runs/..%2F..%2F/x", "/runs/%2e%2e/%2e%2e", f"/runs/{DAG}/..", f"/runs/{DAG}/%2e%2e",
    f"/data-docs/{DAG}/..%2F..%2F..%2Freports%2Fsecret.txt", f"/data-docs/{DAG}/%2e%2e/%2e%2e/secret.txt",
    f"/data-docs/{DAG}//etc/passwd", f"/data-docs/{DAG}/%2Fetc%2Fpasswd",
    f"/data-docs/{DAG}/static/..%5c..%5csecret.txt",
    "/static/..%2F..%2Fpaths.py", "/static/%2e%2e/reports/app.py", "/static//etc/passwd",
    "/static/%2Fetc%2Fpasswd", f"/reports/{DAG}/..%2F..%2Fsecret.txt/report.html",
])
def test_paths_cannot_leave_their_directory(var, client, url):
    (var / "reports").mkdir(parents=True)
    (var / "reports" / "secret.txt").write_text("secret")
    (var / "secret.txt").write_text("secret")
    site = data_docs.site_root()
    site.mkdir(parents=True)
    (site / "index.html").write_text("<html>docs</html>")
    resp = client.get(url)
    assert resp.status_code in (403, 404), (url, resp.status_code)
    assert "secret" not in resp.text and "root:" not in resp.text and "import" not in resp.text


def test_a_symlink_out_of_the_reports_tree_is_refused(var, client, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "report.json").write_text(json.dumps({"dag_id": DAG, "run_id": "x", "verdict": "passed"}))
    (var / "reports" / DAG).mkdir(parents=True)
    (var / "reports" / DAG / "evil").symlink_to(outside)
    assert client.get(f"/runs/{DAG}/evil").status_code == 404


# -- Data Docs ------------------------------------------------------------------------------------


def _ge_template_urls() -> set[str]:
    """Every CSS/JS CDN URL in the installed Great Expectations' Data Docs templates."""
    spec = importlib.util.find_spec("great_expectations")
    templates = Path(spec.origin).parent / "render" / "view" / "templates"
    urls = set()
    for f in templates.rglob("*"):
        if f.is_file():
            urls |= set(re.findall(r"(?:src|href)=\"(https://[^\"{]+)\"", f.read_text(errors="replace")))
    return {u for u in urls if re.search(r"\.(css|js)$|/npm/vega", u)}


def test_every_cdn_asset_of_ge_data_docs_is_vendored():
    urls = _ge_template_urls()
    assert len(urls) >= 12, urls  # the templates really were read
    html = "".join(f'<link href="{u}"><script src="{u}"></script>' for u in sorted(urls))
    rewritten = data_docs.rewrite_cdn_urls(html, vendor_url="/v", site_url="/s")
    assert "https://" not in rewritten
    for target in set(re.findall(r'(?:src|href)="/v/([^"]+)"', rewritten)):
        assert (STATIC / "vendor" / target).is_file(), target
    for package in {t.split("/dist/")[0].split("/build/")[0] for t in data_docs.CDN_TO_VENDOR.values()}:
        licence = [p for p in (STATIC / "vendor" / package).iterdir() if p.name.lower().startswith("licen")]
        manifest = json.loads((STATIC / "vendor" / package / "package.json").read_text())
        assert licence or manifest.get("license"), package
    assert (STATIC / "vendor" / "chart.js@4.6.1" / "dist" / "chart.umd.min.js").is_file()


def test_data_docs_pages_are_served_rewritten_and_scoped_to_the_dags_groups(var, client):
    site = data_docs.site_root()
    page = site / "validations" / "shop-invoicing" / "invoices" / "p.html"
    other = site / "validations" / "other-pipeline" / "invoices" / "p.html"
    for f in (page, other, site / "index.html"):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text('<link href="https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css">'
                     '<img src="https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/logo-long.png?d=1">'
                     "<style>a{background: url('https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/"
                     "full_logo_dark.png') 0 0}</style>")
    (site / "static" / "styles").mkdir(parents=True)
    (site / "static" / "styles" / "x.css").write_text("body{}")
    report = store.build_report(dag_id=DAG, run_id="r-1", plan=plan(), summary=summary(),
                                quality=quality(docs=site / "index.html"))
    write(var, DAG, "r-1", report)
    run_page = client.get(f"/runs/{DAG}/r-1").text
    assert 'href="/data-docs/shop_invoicing/index.html"' in run_page and "file://" not in run_page
    assert 'href="/data-docs/shop_invoicing/validations/shop-invoicing/invoices/p.html"' in run_page
    resp = client.get(f"/data-docs/{DAG}/validations/shop-invoicing/invoices/p.html")
    assert resp.status_code == 200
    assert 'href="/static/vendor/bootstrap@4.3.1/dist/css/bootstrap.min.css"' in resp.text
    assert 'src="/data-docs/shop_invoicing/static/images/logo-long.png"' in resp.text
    assert "https://" not in resp.text and resp.text.count("/data-docs/shop_invoicing/static/images/logo-long.png") == 2
    assert resp.headers["content-security-policy"] == DATA_DOCS_CSP
    assert client.get(f"/data-docs/{DAG}/static/styles/x.css").headers["content-type"].startswith("text/css")
    assert client.get(f"/data-docs/{DAG}/validations/other-pipeline/invoices/p.html").status_code == 403


def test_a_pruned_validation_page_is_named_not_linked(var, client):
    """GE deletes the pages of pruned validation results: the run page keeps naming the suite but
    links only pages the site still has, and the pruned page's URL says why it is gone."""
    site = data_docs.site_root()
    kept = site / "validations" / "shop-invoicing" / "invoices" / "p.html"
    pruned = site / "validations" / "shop-invoicing" / "shipments" / "p.html"
    for f in (kept, site / "index.html"):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("<html>page</html>")
    q = quality(docs=site / "index.html")
    q["suites"]["shipments"] = {"name": "shipments", "success": True, "docs_page": str(pruned)}
    write(var, DAG, "r-1", store.build_report(dag_id=DAG, run_id="r-1", plan=plan(), summary=summary(), quality=q))
    page = client.get(f"/runs/{DAG}/r-1").text
    assert 'href="/data-docs/shop_invoicing/validations/shop-invoicing/invoices/p.html">invoices</a>' in page
    assert "shipments/p.html" not in page
    assert re.search(r'shipments\s*<span class="muted" data-testid="pruned-page">\(pruned\)</span>', page)
    assert 'href="/data-docs/shop_invoicing/index.html"' in page
    gone = client.get(f"/data-docs/{DAG}/validations/shop-invoicing/shipments/p.html")
    assert gone.status_code == 404 and "pruned" in gone.json()["detail"]
    # Once the index is gone too (a cleaned site), no link leads to it.
    (site / "index.html").unlink()
    kept.unlink()
    page = client.get(f"/runs/{DAG}/r-1").text
    assert "/data-docs/" not in page and page.count('data-testid="pruned-page"') == 2


@pytest.mark.parametrize(("route", "name"), [("spark-submit", "spark-submit"),
                                             ("standalone", "Spark standalone cluster"),
                                             ("connect", "Spark Connect server")])
def test_the_phase_table_names_the_route_the_window_ran_on(var, client, route, name):
    s = {**summary(), "route": route, "wall_seconds": 9.1}
    report = store.build_report(dag_id=DAG, run_id="r-1", plan=plan(), summary=s, quality=quality())
    assert report["route"] == route
    write(var, DAG, "r-1", report)
    for page in (client.get(f"/runs/{DAG}/r-1").text, (var / "reports" / DAG / "r-1" / "report.html").read_text()):
        timings = page[page.index('class="timings"'):page.index("</table>", page.index('class="timings"'))]
        assert f"<td>run_window wall clock ({name})</td><td>9.1</td>" in timings
        assert f"<td>read + transform + publish (Spark job, {name})</td><td>3.5</td>" in timings
        others = set(ROUTE_NAMES.values()) - {name}
        assert not [o for o in others if o in timings], timings


def test_a_report_without_a_route_names_none(var, client):
    write(var, DAG, "r-1", store.build_report(dag_id=DAG, run_id="r-1", plan=plan(), summary=summary(),
                                                quality=quality()))
    page = client.get(f"/runs/{DAG}/r-1").text
    timings = page[page.index('class="timings"'):page.index("</table>", page.index('class="timings"'))]
    assert "<td>run_window wall clock</td>" in timings and "<td>read + transform + publish (Spark job)</td>" in timings
    assert not [n for n in ROUTE_NAMES.values() if n in timings]


def test_links_carry_the_mount_prefix_of_the_api_server(var):
    from fastapi import FastAPI

    write(var, DAG, "r-1", store.build_report(dag_id=DAG, run_id="r-1", plan=plan(), summary=summary(),
                                              quality=quality()))
    server = FastAPI()
    server.mount("/eos-etl", create_app(current_user=_user, require_dag_read=_require_dag_read,
                                        readable_dag_ids=_readable))
    client = TestClient(server, headers={"x-test-user": "alice"})
    page = client.get(f"/eos-etl/runs/{DAG}/r-1").text
    assert 'href="/eos-etl/static/reports.css"' in page and 'href="/eos-etl/reports/shop_invoicing/"' in page
    assert client.get("/eos-etl/static/reports.css").status_code == 200


# -- the Backfills page ----------------------------------------------------------------------


def test_the_backfills_page_says_what_each_backfill_did_per_interval(var):
    """Backfill 1 (reprocess none) made two runs, one published; backfill 2 (completed) cleared both,
    which found nothing new; a third interval was skipped. The run's history (one line per execution)
    tells the two executions apart; hostile ids are escaped; the DAG's read access applies."""
    from datetime import datetime, timezone

    def at(hour: int, minute: int = 0) -> datetime:
        return datetime(2026, 11, 24, hour, minute, tzinfo=timezone.utc)

    hostile = HOSTILE[0]
    runs = {"backfill__h1": plan(), hostile: plan(empty=True, span=0)}
    for run_id, p in runs.items():  # first execution (backfill 1), then the reprocessing (backfill 2)
        published = summary() if not p.get("empty") else None
        with _frozen_report_time("2026-11-24T10:05:00Z"):
            write(var, DAG, run_id, store.build_report(dag_id=DAG, run_id=run_id, plan=p, summary=published,
                                                       quality=quality() if published else None))
        with _frozen_report_time("2026-11-24T11:05:00Z"):
            write(var, DAG, run_id, store.build_report(dag_id=DAG, run_id=run_id, plan=plan(empty=True, span=0),
                                                       summary=None, quality=None, clear_number=1))
    rows = [
        {"id": 2, "from_date": at(1), "to_date": at(3), "created_at": at(11), "completed_at": at(11, 10),
         "reprocess_behavior": "completed", "intervals": [
             {"logical_date": at(1), "run_id": "backfill__h1", "state": "success", "exception_reason": None},
             {"logical_date": at(2), "run_id": hostile, "state": "success", "exception_reason": None},
             {"logical_date": at(3), "run_id": None, "state": None, "exception_reason": "in flight"}]},
        {"id": 1, "from_date": at(1), "to_date": at(3), "created_at": at(10), "completed_at": at(10, 10),
         "reprocess_behavior": "none", "intervals": [
             {"logical_date": at(1), "run_id": "backfill__h1", "state": "success", "exception_reason": None},
             {"logical_date": at(2), "run_id": hostile, "state": "success", "exception_reason": None},
             {"logical_date": at(3), "run_id": None, "state": None, "exception_reason": "already exists"}]},
    ]
    asked = []

    def list_backfills(dag_id: str, limit: int) -> list[dict]:
        asked.append((dag_id, limit))
        return rows

    app = create_app(current_user=_user, require_dag_read=_require_dag_read, readable_dag_ids=_readable,
                     list_backfills=list_backfills)
    client = TestClient(app, headers={"x-test-user": "alice"})
    page = client.get(f"/backfills/{DAG}/").text
    assert asked == [(DAG, 20)]
    newest, oldest = page.split('data-testid="backfill-1"')
    assert "<strong>2 no-op, 1 skipped</strong>" in newest and newest.count("reprocessed the existing run") == 2
    assert "no run: in flight" in newest
    assert "<strong>1 published, 1 no-op, 1 skipped</strong>" in oldest
    assert "new run: read 500 purchases, published 490 invoices, 490 shipments and 10 dead letters" in oldest
    assert "no run: already exists" in oldest and "reprocessed" not in oldest
    assert hostile not in page and "&lt;script&gt;" in page
    assert client.get(f"/backfills/{DAG}/", headers={"x-test-user": ""}).status_code == 401
    assert client.get(f"/backfills/{OTHER_DAG}/", headers={"x-test-user": "carol"}).status_code == 403


def test_a_backfill_whose_run_airflow_deleted_still_says_what_it_did(var):
    """Airflow 3.3 on SQLite: a backfill that reprocesses runs and then meets "database is locked"
    deletes every run carrying its id, runs it had only cleared included; its retry makes them again
    under the same run id. The earlier backfill's interval then points at a run that is gone: the page
    reads what it did from the run id's reports (the run now at that date), counts only what was
    reported while that backfill ran, and says when nothing is left to tell."""
    from datetime import datetime, timezone

    def at(hour: int, minute: int = 0) -> datetime:
        return datetime(2026, 11, 24, hour, minute, tzinfo=timezone.utc)

    with _frozen_report_time("2026-11-24T10:05:00Z"):  # backfill 1's execution, before the deletion
        write(var, DAG, "backfill__h1", store.build_report(dag_id=DAG, run_id="backfill__h1", plan=plan(),
                                                           summary=summary(), quality=quality()))
    for run_id in ("backfill__h1", "scheduled__h2"):  # the runs made again, executed after backfill 1
        with _frozen_report_time("2026-11-24T12:05:00Z"):
            write(var, DAG, run_id, store.build_report(dag_id=DAG, run_id=run_id, plan=plan(empty=True, span=0),
                                                       summary=None, quality=None))
    rows = [{"id": 1, "from_date": at(1), "to_date": at(3), "created_at": at(10), "completed_at": at(10, 10),
             "reprocess_behavior": "none", "intervals": [
                 {"logical_date": at(1), "run_id": "backfill__h1", "state": "success", "exception_reason": None,
                  "run_replaced": True},
                 {"logical_date": at(2), "run_id": "scheduled__h2", "state": "success", "exception_reason": None,
                  "run_replaced": True},
                 {"logical_date": at(3), "run_id": None, "state": None, "exception_reason": None,
                  "run_replaced": True}]}]
    app = create_app(current_user=_user, require_dag_read=_require_dag_read, readable_dag_ids=_readable,
                     list_backfills=lambda dag_id, limit: rows)
    page = TestClient(app, headers={"x-test-user": "alice"}).get(f"/backfills/{DAG}/").text
    assert "<strong>1 published, 2 deleted</strong>" in page
    assert ("new run (since deleted from Airflow, made again later): read 500 purchases, published 490 invoices"
            in page)
    assert page.count("no report of this backfill&#39;s execution") == 2
    assert "new run (since deleted from Airflow): no report" in page and "not reported yet" not in page


def _frozen_report_time(stamp: str):
    """Reports written as if at ``stamp`` (their generated_at), to order executions."""
    import time as time_module
    from unittest import mock

    parsed = time_module.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
    return mock.patch.object(store.time, "gmtime", lambda *_: parsed)
