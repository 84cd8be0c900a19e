"""The Airflow UI in a real browser, and backfills from the CLI and the UI.

Headless Debian chromium driven by Playwright (its wheel bundles the driver;
no browser download: `scripts/install_browser.sh` installs chromium).

The backfills test runs one Airflow over one shop: `airflow backfill create`
with each reprocess behaviour (none, none again, failed, completed), then a
backfill of every run started from the Trigger dialog after logging in through
the Simple auth manager's form. It checks that only the first backfill's run
published (exactly once) and nothing else was published at all, not even an
aborted attempt; that the UI shows the runs as successful backfill runs; the
pipeline's "Run report" tab, the "Exactly-once reports" nav entry and the
DAG's "Backfills report" tab, whose page says what each backfill did. The
screenshots go to the test's tmp dir; the runs list is also saved as
docs/screenshots/airflow-backfill.png for humans (EOS_ETL_UPDATE_SCREENSHOTS).

The reports plugin test starts Airflow once over reports written by the
project's own functions (with real Great Expectations Data Docs): no
credential gets 401, a role-less login 403, the admin's browser session sees
the run report, the Data Docs styled by the vendored Bootstrap and the trends
chart drawn, and nothing is fetched from outside Airflow. With
EOS_ETL_UPDATE_SCREENSHOTS set, docs/screenshots/reports-*.png are refreshed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
from pathlib import Path

import pytest

from eos_etl.checker import check_shop, read_topic
from eos_etl.embedded.airflow import EmbeddedAirflow
from eos_etl.embedded.airflow_rest import database_busy
from eos_etl.host.ports import free_port
from eos_etl.shop.generator import generate
from tests.conftest import SASL_PASSWORD
from tests.integration.orchestration.test_dag import _api, _unpause, airflow_for
from tests.support import ROOT
from tests.support.forged_outputs import forge_second_invoice

DOCS_SCREENSHOT = ROOT / "docs" / "screenshots" / "airflow-backfill.png"
CHROMIUM = os.environ.get("EOS_ETL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-proxy-server"]
DAG_ID = "shop_invoicing"
UI_TIMEOUT_MS = 30_000
BACKFILL_TIMEOUT_S = 300

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _playwright():
    """The sync Playwright API, or a failure that says how to install it (never a skip)."""
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        pytest.fail("Playwright for Python is missing: pip install -r requirements.txt (it pins playwright); "
                    "do not run `playwright install`, the test uses the system chromium")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"Chromium is missing at {CHROMIUM}: run scripts/install_browser.sh "
                    "(as root: apt-get update && apt-get install -y chromium) or set EOS_ETL_CHROMIUM")
    return sync_playwright, expect


def _wait_for_backfill(af, token: str, backfill_id: int, expected_runs: int) -> tuple[list[dict], dict]:
    """Poll the REST API until the backfill's runs are all finished and the backfill is marked completed."""
    deadline = time.monotonic() + BACKFILL_TIMEOUT_S
    runs: list[dict] = []
    backfill: dict = {}
    while time.monotonic() < deadline:
        runs = _api(af, "GET", f"/api/v2/dags/{DAG_ID}/dagRuns?run_type=backfill", None, token)["dag_runs"]
        backfill = _api(af, "GET", f"/api/v2/backfills/{backfill_id}", None, token)
        if (len(runs) >= expected_runs and all(r["state"] in ("success", "failed") for r in runs)
                and backfill.get("completed_at")):
            break
        time.sleep(2)
    return runs, backfill


def _keep_failure_screenshot(page, shots: Path) -> None:
    """The page a browser test failed on, next to its other screenshots."""
    page.screenshot(path=shots / "failure.png", full_page=True)
    print(f"browser screenshots (failure.png is the last page): {shots}")


def _log_in(page, af) -> None:
    """Log in through the Simple auth manager's form."""
    page.goto(af.url)
    page.wait_for_url(re.compile(r"/auth/login"))
    user, password = af.login
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/auth/login" not in url)


def _pick_datetime(page, index: int, epoch_s: float) -> None:
    """Fill the Airflow 3 date-time popover (UTC) behind the index-th date field of the dialog."""
    page.get_by_test_id("datetime-input").nth(index).click()
    page.get_by_placeholder("YYYY/MM/DD").last.fill(time.strftime("%Y/%m/%d", time.gmtime(epoch_s)))
    page.get_by_placeholder("HH:mm").last.fill(time.strftime("%H:00", time.gmtime(epoch_s)))
    page.keyboard.press("Escape")  # closes the popover, not the dialog


def _produce_stamped(shop, count: int, stamp_ms: int, seed: int) -> dict[str, int]:
    """``count`` purchases (5% invalid) carrying the record timestamp ``stamp_ms``; returns valid/invalid."""
    from confluent_kafka import Producer

    from eos_etl.shop.generator import purchases

    producer = Producer({**shop.connection.client_config(), "enable.idempotence": True})
    counts = {"valid": 0, "invalid": 0}
    for key, value, kind in purchases(count, invalid_share=0.05, seed=seed):
        producer.produce(shop.topics.purchases, value, key, timestamp=stamp_ms)
        counts["invalid" if kind else "valid"] += 1
    assert producer.flush(30) == 0
    return counts


def _unfinished_backfills(af, token: str) -> list[dict]:
    return [b for b in _api(af, "GET", f"/api/v2/backfills?dag_id={DAG_ID}&order_by=-id", None, token)["backfills"]
            if not b.get("completed_at")]


#: Clicks on "Run Backfill" before giving up: under the whole suite's load on 2 cores, three clicks
#: once all met SQLite's one-writer lock (standalone Airflow; the compose stack runs Postgres).
CLICKS = 5


def _refused_by_sqlite_lock(failures: list[tuple[int, str]]) -> bool:
    """Whether every failed try of one click was SQLite's one-writer lock, or the 409 "already a running
    backfill" a retry meets once an earlier try left a half-made backfill (its row committed, its runs not)."""
    busy_seen = False
    for status, body in failures:
        if database_busy(status, body):
            busy_seen = True
        elif not (busy_seen and status == 409 and "already a running backfill" in body):
            return False
    return busy_seen


def _submit_backfill_dialog(page, dialog, af, token: str) -> tuple[dict, bool]:
    """Click the dialog's "Run Backfill"; return the backfill the UI created and whether SQLite's lock
    refused a try first.

    The UI's query client retries a mutation that got a 5xx three times by itself, keeping the
    button in its loading state meanwhile, so the test waits for that to settle rather than clicking
    a disabled button. On SQLite a concurrent scheduler write can fail every try ("database is
    locked"; then 409 for the UI's next tries, once one left a half-made backfill behind); the
    half-made backfill is cancelled before clicking again (seen in CI: 503, 503, 500, 409)."""
    posts: list = []
    page.on("response", lambda r: posts.append(r) if r.request.method == "POST"
            and r.url.rstrip("/").endswith("/backfills") else None)
    button = dialog.get_by_role("button", name="Run Backfill")
    for attempt in range(CLICKS):
        posts.clear()
        button.click()
        deadline = time.monotonic() + 120
        while True:
            page.wait_for_timeout(500)  # lets Playwright deliver the response events
            created = [r for r in posts if r.ok]
            if created:
                return created[-1].json(), attempt > 0 or len(posts) > 1
            settled = posts and (button.count() == 0 or button.get_attribute("data-loading") is None)
            if settled:
                break
            assert time.monotonic() < deadline, f"the backfill POST never settled: {[r.status for r in posts]}"
        failures = [(r.status, r.text()) for r in posts]
        assert _refused_by_sqlite_lock(failures), (
            f"backfill POST failed: {[(status, body[:300]) for status, body in failures]}")
        for orphan in _unfinished_backfills(af, token):
            _api(af, "PUT", f"/api/v2/backfills/{orphan['id']}/cancel", None, token)
        time.sleep(3 * (attempt + 1))
    raise AssertionError(f"the backfill was never created: SQLite stayed busy through {CLICKS} clicks")


def _backfill_cli(af, token: str, start: float, end: float, behavior: str) -> tuple[dict, bool]:
    """``airflow backfill create`` over [start, end] (hourly logical dates), then wait until it completed;
    returns the backfill and whether SQLite's lock refused a try first."""
    stamp = "%Y-%m-%dT%H:00:00+00:00"
    for attempt in range(4):
        proc = af.airflow_cmd("backfill", "create", "--dag-id", DAG_ID, "--from-date",
                              time.strftime(stamp, time.gmtime(start)), "--to-date",
                              time.strftime(stamp, time.gmtime(end)),
                              "--reprocess-behavior", behavior, "--max-active-runs", "1", timeout=120)
        if proc.returncode == 0 or "database is locked" not in proc.stdout + proc.stderr:
            break
        # SQLite only: the scheduler's write lock refused the CLI. Airflow commits the backfill row
        # before its runs; its clean-up after the lock error deletes the runs it tagged (a reprocessed
        # run with them: the supervised scheduler that held it dies and is restarted) and may leave
        # the backfill row, which would refuse the next attempt as "another backfill is running"
        # (the scheduler closes such orphans only after two minutes). The 30 s busy timeout of the
        # embedded stack makes the lock error rare.
        for orphan in _unfinished_backfills(af, token):
            _api(af, "PUT", f"/api/v2/backfills/{orphan['id']}/cancel", None, token)
        time.sleep(3 * (attempt + 1))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    deadline = time.monotonic() + BACKFILL_TIMEOUT_S
    while True:
        newest = _api(af, "GET", f"/api/v2/backfills?dag_id={DAG_ID}&order_by=-id&limit=1", None, token)
        backfill = newest["backfills"][0]
        if backfill["reprocess_behavior"] == behavior and backfill.get("completed_at"):
            return backfill, attempt > 0
        assert time.monotonic() < deadline, f"backfill {behavior} never completed: {backfill}"
        time.sleep(3)


def test_backfills_from_the_cli_and_the_ui_never_duplicate(shop_factory, kafka_broker, spark_connect_server, tmp_path):
    """One Airflow over one shop: `airflow backfill create` with reprocess none, none again, failed and
    completed over the same two hours, then a backfill of every run started from the UI's Trigger
    dialog. Purchases stamped two hours ago arrive after the scheduled run: the first backfill's run for
    the hour after them publishes them (a window ends at its run's logical date); every later
    execution plans an empty window and publishes nothing, not even an aborted attempt. The UI shows
    the runs as successful backfill runs, the run report and the Backfills report say what each
    backfill did, interval by interval."""
    sync_playwright, expect = _playwright()
    shop = shop_factory(partitions=2)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    af = airflow_for(shop, tmp_path / "af", kafka_broker, parallelism=4, spark_connect=spark_connect_server)
    af.start()
    try:
        token = af.rest.token()
        _unpause(af, token, DAG_ID)
        af.rest.wait_for_runs_to_settle(DAG_ID, token)  # the schedule's own run, before the purchases
        hour = time.time() // 3600 * 3600
        start, end = hour - 2 * 3600, hour - 3600
        counts = _produce_stamped(shop, 300, int((start + 600) * 1000), seed=91)

        made = [_backfill_cli(af, token, start, end, "none")]
        assert not [r for r in _api(af, "GET", f"/api/v2/dags/{DAG_ID}/dagRuns?run_type=backfill", None,
                                    token)["dag_runs"] if r["state"] != "success"]
        published = {t: len(read_topic(shop.connection, t, isolation="read_uncommitted"))
                     for t in shop.topics.outputs}
        made.append(_backfill_cli(af, token, start, end, "none"))
        # A failed run for "failed" to reprocess: the run that published, marked failed.
        second = time.strftime("%Y-%m-%dT%H:00:00", time.gmtime(hour - 3600))
        run = next(r for r in _api(af, "GET", f"/api/v2/dags/{DAG_ID}/dagRuns", None, token)["dag_runs"]
                   if r["logical_date"].startswith(second))
        _api(af, "PATCH", f"/api/v2/dags/{DAG_ID}/dagRuns/{urllib.parse.quote(run['dag_run_id'], safe='')}",
             {"state": "failed"}, token)
        made.append(_backfill_cli(af, token, start, end, "failed"))
        made.append(_backfill_cli(af, token, start, end, "completed"))
        made.append(_backfill_in_the_ui(af, token, start, end, shots, sync_playwright, expect))
        runs = _api(af, "GET", f"/api/v2/dags/{DAG_ID}/dagRuns", None, token)["dag_runs"]
        status, _, page = _get(f"{af.url}/eos-etl/backfills/{DAG_ID}/", token)
        assert status == 200, page[:500]
    finally:
        af.stop()

    after = {t: len(read_topic(shop.connection, t, isolation="read_uncommitted")) for t in shop.topics.outputs}
    assert after == published  # nothing at all after the first backfill, not even an aborted attempt
    assert after[shop.topics.invoices] == counts["valid"] and after[shop.topics.dead_letters] == counts["invalid"]
    assert check_shop(shop).ok
    assert all(r["state"] == "success" for r in runs), [(r["dag_run_id"], r["state"]) for r in runs]

    def section(backfill_id: int) -> str:
        return re.search(rf'data-testid="backfill-{backfill_id}">(.*?)</section>', page, re.S).group(1)

    sections = [section(b["id"]) for b, _ in made]
    summaries = [re.search(r"<strong>(.*?)</strong>", s).group(1) for s in sections]
    # Hourly logical dates H-2 and H-1, each window ending at its logical date: H-1's publishes.
    texts = [" ".join(re.sub(r"<[^>]+>", " ", s).split()) for s in sections]  # each section whole, when one fails
    # A try that SQLite's lock refused after it had re-tagged existing runs made Airflow 3.3.2 delete them
    # (its clean-up: DELETE ... WHERE backfill_id; docs/airflow-supervision.md); the try that then
    # succeeded made new runs for those intervals. Such a backfill is held to publishing nothing.
    refused = [was_refused for _, was_refused in made]
    expected = ["1 published, 1 no-op", "2 skipped", "1 no-op, 1 skipped", "2 no-op", "2 no-op"]
    assert [s for s, r in zip(summaries, refused, strict=True) if not r] == \
        [e for e, r in zip(expected, refused, strict=True) if not r], texts
    assert all("published" not in s for s, r in zip(summaries[1:], refused[1:], strict=True) if r), texts
    print(f"backfills refused by SQLite's lock before they were made: {refused}")
    assert f"new run: read {counts['valid'] + counts['invalid']} purchases, published {counts['valid']} invoices" in (
        sections[0]), (counts, texts[0])
    assert "no run: already exists" in sections[1]
    for i in (3, 4):
        reprocessed = sections[i].count("reprocessed the existing run")
        assert reprocessed == 2 or (refused[i] and reprocessed + sections[i].count("new run") == 2), texts[i]
    assert SASL_PASSWORD not in page


def _backfill_in_the_ui(af, token: str, start: float, end: float, shots: Path, sync_playwright,
                        expect) -> tuple[dict, bool]:
    """Log in, start a backfill of every run over [start, end] from the DAG's Trigger dialog, wait until
    its runs finish; check in the UI that they show Success, the "Run report" tab of one of them, the
    "Exactly-once reports" nav entry and the DAG's "Backfills report" tab. Returns the backfill and
    whether SQLite's lock refused a try first."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(UI_TIMEOUT_MS)
        expect.set_options(timeout=UI_TIMEOUT_MS)
        try:
            _log_in(page, af)

            # The DAG page; its Trigger dialog has a Backfill mode.
            page.goto(f"{af.url}/dags/{DAG_ID}")
            expect(page.get_by_role("heading", name=DAG_ID)).to_be_visible()
            page.get_by_role("button", name="Trigger Dag").click()
            dialog = page.get_by_role("dialog").first
            dialog.get_by_text("Backfill", exact=True).click()
            expect(dialog).to_contain_text("Run Backfill")
            _pick_datetime(page, 0, start)
            _pick_datetime(page, 1, end)
            dialog.get_by_text("All Runs", exact=True).click()
            announced = dialog.get_by_text(re.compile(r"\d+ runs? will be triggered"))
            expect(announced).to_be_visible()
            expected_runs = int(re.search(r"\d+", announced.inner_text()).group())
            assert expected_runs == round((end - start) / 3600) + 1, announced.inner_text()
            page.screenshot(path=shots / "01-backfill-dialog.png")
            backfill, refused = _submit_backfill_dialog(page, dialog, af, token)
            assert backfill["reprocess_behavior"] == "completed", backfill
            expect(page.get_by_text("Backfill in progress")).to_be_visible()
            page.screenshot(path=shots / "02-backfill-started.png")

            runs, backfill = _wait_for_backfill(af, token, backfill["id"], expected_runs)
            assert len(runs) == expected_runs and all(r["state"] == "success" for r in runs), runs
            assert backfill.get("completed_at"), f"backfill not completed after {BACKFILL_TIMEOUT_S}s: {backfill}"
            # Success because every window was planned and found empty, not because a
            # failed plan_window was swallowed by the all_done report task.
            for run in runs:
                tis = _api(af, "GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances",
                           None, token)["task_instances"]
                states = {ti["task_id"]: ti["state"] for ti in tis}
                assert states == {"plan_window": "success", "has_new_records": "success",
                                  "run_window": "skipped", "validate": "skipped", "report": "success"}, (
                    run["dag_run_id"], states)

            # The UI shows every backfill run as a successful Backfill run.
            page.goto(f"{af.url}/dags/{DAG_ID}/runs")
            for run in runs:
                row = page.locator("tbody tr").filter(has_text=run["dag_run_id"])
                expect(row).to_have_count(1)
                expect(row).to_contain_text("Success")
                expect(row).to_contain_text("Backfill")
            expect(page.get_by_text("Backfill in progress")).to_have_count(0)
            page.screenshot(path=shots / "03-backfill-runs-success.png")
            if os.environ.get("EOS_ETL_UPDATE_SCREENSHOTS"):  # refresh the committed copy on request
                DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(shots / "03-backfill-runs-success.png", DOCS_SCREENSHOT)

            # The plugin's "Run report" tab of one backfill run: a no-op, nothing read.
            last = max(runs, key=lambda r: r["logical_date"])["dag_run_id"]
            page.locator("tbody tr").filter(has_text=last).get_by_role("link", name=last).click()
            page.get_by_role("link", name="Run report").click()
            report = page.frame_locator("iframe[title='Run report']").locator("body")
            expect(report).to_contain_text("run report")
            expect(report).to_contain_text(last)
            expect(report).to_contain_text("verdict no-op")
            page.screenshot(path=shots / "04-run-report.png")

            # The navigation entry "Exactly-once reports" (under Browse) lists the DAG.
            page.get_by_role("button", name="Browse").click()
            page.get_by_role("menuitem", name="Exactly-once reports").click()
            index = page.frame_locator("iframe[title='Exactly-once reports']").locator("body")
            expect(index).to_contain_text("Exactly-once pipeline reports")
            expect(index.get_by_role("link", name=DAG_ID)).to_be_visible()
            page.screenshot(path=shots / "05-reports-index.png")

            # The DAG's "Backfills report" tab lists this backfill.
            page.goto(f"{af.url}/dags/{DAG_ID}")
            page.get_by_role("link", name="Backfills report").click()
            listed = page.frame_locator("iframe[title='Backfills report']").locator("body")
            expect(listed).to_contain_text(f"Backfill {backfill['id']}")
            page.screenshot(path=shots / "06-backfills-report.png")
            return backfill, refused
        except Exception:
            _keep_failure_screenshot(page, shots)
            raise
        finally:
            browser.close()


# -- the reports plugin behind Airflow's login -------------------------------------------------

REPORT_SCREENSHOTS = {name: ROOT / "docs" / "screenshots" / f"{name}.png"
                      for name in ("reports-run", "reports-data-docs", "reports-trends", "reports-landing",
                                   "reports-data-docs-failing")}
# A JWT for a user the Simple auth manager knows but gives no role: authenticated, allowed nothing.
_ROLELESS_TOKEN = """
from airflow.api_fastapi.app import create_auth_manager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
print("TOKEN=" + create_auth_manager().generate_jwt(SimpleAuthManagerUser(username="nobody", role=None)))
"""


def _get(url: str, token: str | None = None) -> tuple[int, dict, str]:
    """GET without a proxy; (status, headers, body) for any status."""
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with opener.open(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode(errors="replace")


def _write_reports(shop, spark, var) -> list[str]:
    """Two runs' reports through the project's own functions, with real Great Expectations Data Docs: the
    older run's window with a forged invoice (failed, validated again at SUMMARY), the newer one clean."""
    from eos_etl.quality import validate_window
    from eos_etl.reports.store import build_report, write_run_report
    from eos_etl.run_files import run_dir
    from eos_etl.shop.pipeline import run_shop_window, summary_dict

    generate(shop.connection, shop.topics.purchases, 300, invalid_share=0.1, seed=61)
    window = shop.plan()
    summary = run_shop_window(spark, shop, window)
    untils = [int((time.time() - hours_ago * 3600) * 1000) for hours_ago in (2, 1)]
    run_ids = [f"scheduled__{time.strftime('%Y-%m-%dT%H:00:00+00:00', time.gmtime(u / 1000))}" for u in untils]
    clean = validate_window(spark, shop, window, run_id=run_ids[1], context_root=var / "gx")
    forge_second_invoice(shop, "inv_forged_0001")
    failing = validate_window(spark, shop, window, run_id=run_ids[0], context_root=var / "gx")
    assert clean.success and not failing.success and failing.summary_run
    for run_id, until, quality in zip(run_ids, untils, (failing, clean), strict=True):
        plan = {"window": window.to_dict(), "empty": False, "dry_run": False, "until_ms": until, "seconds": 0.4}
        report = build_report(dag_id=DAG_ID, run_id=run_id, plan=plan, summary=summary_dict(shop, summary),
                              quality=json.loads(json.dumps(quality.to_dict(), default=str)))
        write_run_report(run_dir(DAG_ID, run_id), report)
    return run_ids


def test_reports_plugin_behind_the_airflow_login(shop_factory, spark, tmp_path, monkeypatch):
    sync_playwright, expect = _playwright()
    home = tmp_path / "af"
    var = home / "var"
    monkeypatch.setenv("EOS_ETL_VAR", str(var))  # run_dir() and validate write where the plugin reads
    run_ids = _write_reports(shop_factory(partitions=2), spark, var)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    af = EmbeddedAirflow(home=home, port=free_port(), worker_log_server_port=free_port(),
                           trigger_log_server_port=free_port(), overrides={"EOS_ETL_VAR": str(var)})
    af.start()
    try:
        run_url = f"{af.url}/eos-etl/runs/{DAG_ID}/{run_ids[-1]}"
        # No credential: Airflow's get_user refuses; every route, static files too.
        for url in (run_url, f"{af.url}/eos-etl/reports/", f"{af.url}/eos-etl/static/reports.css",
                    f"{af.url}/eos-etl/data-docs/{DAG_ID}/index.html"):
            status, headers, _ = _get(url)
            assert status == 401, url
            assert headers.get("content-security-policy", "").startswith("default-src 'self'"), url
        # A valid login whose role may read nothing: requires_access_dag refuses, the index lists nothing.
        proc = subprocess.run([sys.executable, "-c", _ROLELESS_TOKEN], env=af.env(), capture_output=True,
                              text=True, timeout=120)
        roleless = next((ln[6:] for ln in proc.stdout.splitlines() if ln.startswith("TOKEN=")), None)
        assert roleless, proc.stdout + proc.stderr[-3000:]
        assert _get(run_url, roleless)[0] == 403
        assert _get(f"{af.url}/eos-etl/reports/{DAG_ID}/", roleless)[0] == 403
        status, _, body = _get(f"{af.url}/eos-etl/reports/", roleless)
        assert status == 200 and DAG_ID not in body and "no reports yet" in body
        # The admin may: the happy path through the same dependencies.
        status, headers, body = _get(run_url, af.rest.token())
        assert status == 200 and "verdict" in body and run_ids[-1] in body
        assert "script-src 'self';" in headers["content-security-policy"]

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                anonymous = browser.new_page()
                assert anonymous.goto(run_url).status == 401

                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_timeout(UI_TIMEOUT_MS)
                expect.set_options(timeout=UI_TIMEOUT_MS)
                requests, problems = [], []
                try:
                    _log_in(page, af)
                    # From here on only the plugin's pages load: watch what they fetch and refuse.
                    page.on("request", lambda r: requests.append(r.url))
                    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
                    page.on("pageerror", lambda e: problems.append(str(e)))

                    # The run report, at the URL the DAG run's "Run report" tab opens (the UI's cookie).
                    page.goto(run_url)
                    expect(page.get_by_test_id("verdict")).to_have_text("passed")
                    expect(page.get_by_test_id("expectations")).to_contain_text("expect_")
                    expect(page.get_by_test_id("dead-letter-chart")).to_be_visible()
                    page.wait_for_function("() => !!Chart.getChart(document.getElementById('dead-letter-chart'))")
                    page.screenshot(path=shots / "reports-run.png", full_page=True)

                    # Data Docs, served by the plugin, styled by the vendored Bootstrap, its scripts running.
                    page.get_by_test_id("data-docs-link").click()
                    page.wait_for_url(re.compile(r"/eos-etl/data-docs/"))
                    button = page.locator(".btn-primary").first
                    expect(button).to_have_css("background-color", "rgb(0, 123, 255)")  # bootstrap 4 primary
                    expect(page.locator("nav.navbar").first).to_have_css("display", "flex")
                    expect(page.locator(".bootstrap-table").first).to_be_attached()  # jQuery + bootstrap-table ran
                    page.screenshot(path=shots / "reports-data-docs.png", full_page=True)

                    # Trends: the chart of recent runs is drawn.
                    page.goto(f"{af.url}/eos-etl/reports/{DAG_ID}/")
                    page.wait_for_function("() => { const c = Chart.getChart(document.getElementById('records-chart'));"
                                           " return !!c && c.data.datasets[0].data.length === 2; }")
                    drawn = page.evaluate("""() => { const c = document.getElementById('records-chart');
                        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                        let n = 0; for (let i = 3; i < d.length; i += 4) { if (d[i]) n++; } return n; }""")
                    assert drawn > 1000, drawn
                    page.screenshot(path=shots / "reports-trends.png", full_page=True)

                    # The landing page: each run's verdict and what failed, newest first.
                    page.goto(f"{af.url}/eos-etl/reports/")
                    landing = page.get_by_test_id(f"dag-{DAG_ID}")
                    expect(landing.locator("tr").nth(1)).to_contain_text("passed")
                    expect(landing.locator("tr").nth(2)).to_contain_text("failed")
                    expect(landing).to_contain_text("column_values_to_be_lineage_ids(invoice_id): 1 unexpected")
                    expect(landing).to_contain_text("and 2 more")
                    page.screenshot(path=shots / "reports-landing.png", full_page=True)

                    # The failed run's report links its failing suite's Data Docs page of the run, which
                    # lists the forged invoice's row with its source position (GE's SUMMARY).
                    page.goto(f"{af.url}/eos-etl/runs/{DAG_ID}/{run_ids[0]}")
                    expect(page.get_by_test_id("verdict")).to_have_text("failed")
                    page.get_by_test_id("expectations").get_by_role("link", name="invoices.records").first.click()
                    page.wait_for_url(re.compile(r"/eos-etl/data-docs/.*validations/"))
                    expect(page.locator("body")).to_contain_text("source_partition")
                    expect(page.locator("body")).to_contain_text("inv_forged_0001")
                    page.screenshot(path=shots / "reports-data-docs-failing.png", full_page=True)
                except Exception:
                    _keep_failure_screenshot(page, shots)
                    raise
            finally:
                browser.close()
        # Nothing left the machine, and nothing was refused by a Content-Security-Policy.
        assert requests and not [u for u in requests if not u.startswith((af.url, "data:", "blob:", "about:"))]
        assert not [p for p in problems if "Content Security Policy" in p or "Refused" in p], problems
        if os.environ.get("EOS_ETL_UPDATE_SCREENSHOTS"):
            for name, target in REPORT_SCREENSHOTS.items():
                shutil.copyfile(shots / f"{name}.png", target)
    finally:
        af.stop()
