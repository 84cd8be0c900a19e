"""The Airflow UI in a real browser: a backfill started from the UI publishes nothing new.

Headless Debian chromium driven by Playwright (its wheel bundles the driver;
no browser download: `scripts/install_browser.sh` installs chromium). The
test logs in through the Simple auth manager's form, opens the
`shop_invoicing` DAG, starts a backfill over already-processed hours from the
Trigger dialog, waits until the runs finish, checks in the UI that they show
Success, opens the pipeline's "Run report" tab and the "Exactly-once reports"
nav entry, and checks in Kafka that nothing at all was published (not even an
aborted attempt). Screenshots go to the test's tmp dir; the runs list is also
saved as docs/screenshots/airflow-backfill.png for humans.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import urllib.error
from pathlib import Path

import pytest

from eos_etl.checker import check_shop, read_topic
from eos_etl.shop.generator import generate
from eos_etl.stack.airflow import database_busy

from .test_dag import _api, airflow_for

ROOT = Path(__file__).resolve().parents[1]
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


def _wait_for_dag(af, token: str, timeout: float = 120.0) -> None:
    """The DAG processor parses the DAG folder shortly after start-up; wait until the API knows the DAG."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _api(af, "GET", f"/api/v2/dags/{DAG_ID}", None, token)
            return
        except urllib.error.HTTPError as e:
            if e.code != 404 or time.monotonic() > deadline:
                raise
        time.sleep(1)


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


def _pick_datetime(page, index: int, epoch_s: float) -> None:
    """Fill the Airflow 3 date-time popover (UTC) behind the index-th date field of the dialog."""
    page.get_by_test_id("datetime-input").nth(index).click()
    page.get_by_placeholder("YYYY/MM/DD").last.fill(time.strftime("%Y/%m/%d", time.gmtime(epoch_s)))
    page.get_by_placeholder("HH:mm").last.fill(time.strftime("%H:00", time.gmtime(epoch_s)))
    page.keyboard.press("Escape")  # closes the popover, not the dialog


def test_backfill_started_in_the_ui_succeeds_and_publishes_nothing(shop_factory, kafka_broker, spark, tmp_path):
    sync_playwright, expect = _playwright()
    from eos_etl.shop.job import run_shop_window

    shop = shop_factory(partitions=2)
    generate(shop.connection, shop.topics.purchases, 200, invalid_share=0.05, seed=51)
    # The pipeline is up to date: everything so far was processed.
    run_shop_window(spark, shop, shop.plan())
    before = {t: len(read_topic(shop.connection, t, isolation="read_uncommitted")) for t in shop.topics.outputs}
    assert before[shop.topics.invoices] > 0

    shots = tmp_path / "screenshots"
    shots.mkdir()
    af = airflow_for(shop, tmp_path / "af", kafka_broker)
    af.start()
    try:
        token = af.api_token()
        _wait_for_dag(af, token)
        _api(af, "PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False}, token)
        af.wait_for_runs_to_settle(DAG_ID, token)

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(UI_TIMEOUT_MS)
            expect.set_options(timeout=UI_TIMEOUT_MS)
            try:
                # Log in through the Simple auth manager's form.
                page.goto(af.url)
                page.wait_for_url(re.compile(r"/auth/login"))
                user, password = af.login
                page.get_by_label("Username").fill(user)
                page.get_by_label("Password").fill(password)
                page.get_by_role("button", name="Sign in").click()
                page.wait_for_url(lambda url: "/auth/login" not in url)

                # The DAG page; its Trigger dialog has a Backfill mode.
                page.goto(f"{af.url}/dags/{DAG_ID}")
                expect(page.get_by_role("heading", name=DAG_ID)).to_be_visible()
                page.get_by_role("button", name="Trigger Dag").click()
                dialog = page.get_by_role("dialog").first
                dialog.get_by_text("Backfill", exact=True).click()
                expect(dialog).to_contain_text("Run Backfill")
                # Hours that were already processed: from 3 hours ago to 1 hour ago, every run
                # (reprocess behaviour "All Runs"): windows are offset-based, so all are no-ops.
                now = time.time()
                _pick_datetime(page, 0, now - 3 * 3600)
                _pick_datetime(page, 1, now - 3600)
                dialog.get_by_text("All Runs", exact=True).click()
                announced = dialog.get_by_text(re.compile(r"\d+ runs? will be triggered"))
                expect(announced).to_be_visible()
                expected_runs = int(re.search(r"\d+", announced.inner_text()).group())
                assert expected_runs >= 2, announced.inner_text()
                page.screenshot(path=shots / "01-backfill-dialog.png")
                for attempt in range(3):
                    with page.expect_response(lambda r: r.url.rstrip("/").endswith("/backfills")
                                              and r.request.method == "POST") as created:
                        dialog.get_by_role("button", name="Run Backfill").click()
                    # SQLite only: a concurrent scheduler write makes the API refuse; ask again.
                    if not database_busy(created.value.status, created.value.text()) or not dialog.is_visible():
                        break
                    time.sleep(2 * (attempt + 1))
                assert created.value.ok, f"backfill POST: HTTP {created.value.status} {created.value.text()[:500]}"
                backfill = created.value.json()
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
            except Exception:
                page.screenshot(path=shots / "failure.png", full_page=True)
                print(f"browser screenshots (failure.png is the last page): {shots}")
                raise
            finally:
                browser.close()
    finally:
        af.stop()

    after = {t: len(read_topic(shop.connection, t, isolation="read_uncommitted")) for t in shop.topics.outputs}
    assert after == before  # not even an aborted attempt: nothing was published at all
    assert check_shop(shop).ok
