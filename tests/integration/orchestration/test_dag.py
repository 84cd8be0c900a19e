"""The Airflow DAGs, end to end on the embedded stack.

Airflow runs in subprocesses pointed at a temporary AIRFLOW_HOME (never
imported into the pytest process); the Kafka connection is the session
broker's SASL listener, so credentials flow from an Airflow connection to the
Spark job, and the tests check they never reach a task log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
from confluent_kafka import Producer

from eos_etl.arguments import attempt_run_id
from eos_etl.checker import check_shop, read_topic
from eos_etl.embedded.airflow import EmbeddedAirflow
from eos_etl.host.ports import free_port
from eos_etl.kafka.acls import grant
from eos_etl.shop.generator import generate
from tests.conftest import SASL_PASSWORD, SASL_USER
from tests.support import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def shop_variable(shop) -> str:
    t = shop.topics
    return json.dumps({"topics": {"purchases": t.purchases, "invoices": t.invoices, "shipments": t.shipments,
                                  "dead_letters": t.dead_letters},
                       "group": shop.group, "transactional_id_prefix": shop.transactional_id_prefix,
                       "chunk_records": 200})


def grant_roles(shop, replay_version: str | None = None) -> None:
    """Give the Airflow connection's principal the pipeline and validator ACLs on ``shop`` (or on
    its replay under ``replay_version``), through the shop's super-user connection."""
    settings = shop.replay(replay_version) if replay_version else shop
    resources = settings.pipeline().resources()
    grant(shop.connection, SASL_USER, [*resources.grants("pipeline"), *resources.grants("validator")])


def airflow_for(shop, home: Path, kafka_broker, connections: dict | None = None, overrides: dict | None = None,
                spark_connect=None, **kw) -> EmbeddedAirflow:
    """Airflow whose Kafka connection is SASL_SSL/SCRAM as a principal holding only the
    pipeline and validator ACLs on ``shop`` (plus ``connections`` and environment ``overrides``).
    With ``spark_connect`` (a running server) its windows run there, the default route; else a
    spark-submit each."""
    grant_roles(shop)
    airflow = EmbeddedAirflow(
        home=home,
        port=free_port(),
        worker_log_server_port=free_port(),
        trigger_log_server_port=free_port(),
        connections={
            "spark_default": {"conn_type": "spark", "host": "local[2,4]"},
            "kafka_purchases": {"conn_type": "generic", "host": kafka_broker.sasl_bootstrap_servers,
                                "login": SASL_USER, "password": SASL_PASSWORD,
                                "extra": {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                                          "ssl_ca_location": str(kafka_broker.ca_file)}},
            **(connections or {}),
        },
        variables={"eos_etl_shop": shop_variable(shop)},
        overrides={"EOS_ETL_VAR": str(home / "var"), "EOS_ETL_SPARK_DRIVER_MEMORY": "1g", **(overrides or {})},
        **kw,
    )
    return airflow.use_spark_connect(spark_connect) if spark_connect is not None else airflow


def dag_test(af: EmbeddedAirflow, dag_id: str, conf: dict | None = None) -> tuple[str, str, str]:
    af.prepare_home()
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "dag_runner.py"), dag_id,
                           json.dumps(conf or {})], env=af.env(), capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    state = next((ln.split("=", 1)[1] for ln in proc.stdout.splitlines() if ln.startswith("DAGRUN_STATE=")), None)
    run_id = next((ln.split("=", 1)[1] for ln in proc.stdout.splitlines() if ln.startswith("DAGRUN_ID=")), "")
    assert state is not None, out[-5000:]
    return state, run_id, out


def task_logs(af: EmbeddedAirflow) -> str:
    return "\n".join(p.read_text(errors="replace") for p in (af.home / "logs").rglob("*.log"))


@pytest.fixture(scope="module")
def dag_home(tmp_path_factory):
    return tmp_path_factory.mktemp("airflow")


def test_dag_integrity(tmp_path):
    af = EmbeddedAirflow(home=tmp_path, port=free_port())  # no connections: every DAG parses without them
    script = """
import json, sys
from pathlib import Path
from airflow.models import DagBag
bag = DagBag(dag_folder=sys.argv[1], bundle_path=Path(sys.argv[1]))
out = {"errors": {k: str(v)[:500] for k, v in bag.import_errors.items()}, "dags": {}}
for dag_id, dag in bag.dags.items():
    out["dags"][dag_id] = {"tags": sorted(dag.tags), "schedule": str(dag.schedule),
        "max_active_runs": dag.max_active_runs, "catchup": dag.catchup, "params": sorted(dag.params),
        "doc": bool(dag.doc_md), "deadline": repr(dag.deadline),
        "tasks": {t.task_id: {"retries": t.retries,
                              "trigger_rule": getattr(t.trigger_rule, "value", str(t.trigger_rule)),
                              "outlets": sorted(repr(o) for o in t.outlets),
                              "failure_callback": bool(t.on_failure_callback)} for t in dag.tasks}}
print("DAGBAG=" + json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", script, str(ROOT / "dags")], env=af.env(), capture_output=True,
                          text=True, timeout=300)
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("DAGBAG="))
    bag = json.loads(line.split("=", 1)[1])
    assert bag["errors"] == {}
    main = bag["dags"]["shop_invoicing"]
    assert main["schedule"] == "@hourly" and main["max_active_runs"] == 1 and main["catchup"] is False
    assert {"eos-etl", "exactly-once"} <= set(main["tags"]) and main["doc"]
    assert set(main["params"]) == {"max_records_per_partition", "chunk_records", "until", "dry_run"}
    assert set(main["tasks"]) == {"plan_window", "has_new_records", "run_window", "validate", "report"}
    assert main["tasks"]["run_window"]["retries"] == 2 and main["tasks"]["report"]["trigger_rule"] == "all_done"
    assert main["tasks"]["run_window"]["outlets"] == sorted(
        f"AssetAlias(name='shop_invoicing.{o}', group='asset')" for o in ("invoices", "shipments", "dead_letters"))
    assert main["tasks"]["report"]["failure_callback"] and main["deadline"] == "None"  # EOS_ETL_RUN_DEADLINE_S unset
    replay = bag["dags"]["shop_invoicing_replay"]
    assert replay["schedule"] == "None" and "version" in replay["params"]
    assert "shop_invoicing_replay.invoices" in replay["tasks"]["run_window"]["outlets"][1]
    arrivals = bag["dags"]["shop_invoicing_on_arrival"]
    assert "shop_invoicing.purchases_arrivals" in arrivals["schedule"] and "event-driven" in arrivals["tags"]
    assert set(arrivals["tasks"]) == set(main["tasks"]) and arrivals["max_active_runs"] == 1
    revenue = bag["dags"]["shop_revenue"]
    assert "shop_invoicing.invoices" in revenue["schedule"] and set(revenue["tasks"]) == {"revenue_per_currency"}


def test_full_dag_run_over_sasl_then_no_op_then_seeded_defect_fails(shop_factory, kafka_broker, dag_home):
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 1500, invalid_share=0.05, seed=31,
                     transaction_size=100, abort_share=0.1)
    af = airflow_for(shop, dag_home, kafka_broker)
    assert af.airflow_cmd("db", "migrate", timeout=300).returncode == 0

    state, run_id, out = dag_test(af, "shop_invoicing")
    assert state == "success", out[-6000:]
    run_dir = next((dag_home / "var" / "reports" / "shop_invoicing").glob("*/summary.json")).parent
    summary = json.loads((run_dir / "summary.json").read_text())
    quality = json.loads((run_dir / "quality.json").read_text())
    report = json.loads((run_dir / "report.json").read_text())
    invalid = sum(stats.invalid.values())
    assert (summary["records_read"], summary["invoices"], summary["shipments"], summary["dead_letters"]) == (
        stats.produced, stats.valid, stats.valid, invalid)
    assert summary["transactions"] >= 8  # chunk_records=200 from the Variable
    assert summary["run_id"] == attempt_run_id(run_id, 1)  # what the outputs' run_id header says: run and attempt
    assert quality["success"] is True and Path(quality["data_docs_path"]).is_file()
    assert report["verdict"] == "passed" and (run_dir / "report.html").is_file()
    # The Spark connection's local master through spark-submit; the report's phases say so.
    assert summary["route"] == report["route"] == "spark-submit"
    assert "run_window wall clock (spark-submit)" in (run_dir / "report.html").read_text()
    assert all(Path(s["docs_page"]).is_file() for s in quality["suites"].values())  # this run's own pages
    assert (dag_home / "var" / "reports" / "shop_invoicing" / "index.html").is_file()
    assert check_shop(shop).ok
    # SASL credentials came from the Airflow connection and never reach a log.
    logs = task_logs(af) + out
    assert "run_window" in logs and SASL_PASSWORD not in logs

    # A second run finds nothing new: a clean, fast no-op that says so.
    t0 = time.monotonic()
    state, _, out = dag_test(af, "shop_invoicing")
    assert state == "success", out[-4000:]
    assert "nothing new" in out + task_logs(af)
    assert time.monotonic() - t0 < 120
    assert read_topic(shop.connection, shop.topics.invoices).__len__() == stats.valid

    # Seed a defect: a hand-written orphan invoice (no shipment) that claims to
    # come from a new purchase in the next window. Validation must fail the run.
    generate(shop.connection, shop.topics.purchases, 50, invalid_share=0.0, seed=99)
    time.sleep(1)
    window_end = max(json.loads((run_dir / "report.json").read_text())["window"]["partitions"]["0"])
    orphan = {"invoice_id": "inv_orphan", "purchase_id": "p-orphan", "user_id": "u-1", "user_full_name": "X",
              "product_id": "sku-1", "quantity": 1, "unit_price": "1.00", "total": "1.00", "currency": "EUR",
              "purchase_time": "2026-11-21T10:00:00.000Z", "issued_at": "2026-11-21T10:00:00.000Z"}
    p = Producer(shop.connection.client_config())
    p.produce(shop.topics.invoices, json.dumps(orphan).encode(), b"p-orphan", headers=[
        ("source_topic", shop.topics.purchases.encode()), ("source_partition", b"0"),
        ("source_offset", str(window_end).encode()), ("run_id", b"forged")])
    p.flush(10)
    state, run_id, out = dag_test(af, "shop_invoicing")
    assert state == "failed", out[-4000:]
    failed_dir = [d for d in (dag_home / "var" / "reports" / "shop_invoicing").iterdir()
                  if (d / "quality.json").is_file() and not json.loads((d / "quality.json").read_text())["success"]]
    assert failed_dir, "no failed validation recorded"
    failures = json.loads((failed_dir[0] / "quality.json").read_text())["failures"]
    assert any("shipment" in str(f) for f in failures), failures
    assert json.loads((failed_dir[0] / "report.json").read_text())["verdict"] == "failed"


def test_replay_writes_a_new_version_exactly_once(shop_factory, kafka_broker, spark, spark_connect_server, tmp_path):
    from eos_etl.shop.pipeline import run_shop_window

    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 300, invalid_share=0.1, seed=51)
    run_shop_window(spark, shop, shop.plan())  # the live pipeline already published everything
    live = {t: len(read_topic(shop.connection, t, isolation="read_uncommitted")) for t in shop.topics.outputs}
    af = airflow_for(shop, tmp_path / "af", kafka_broker, spark_connect=spark_connect_server)
    grant_roles(shop, replay_version="v2")
    assert af.airflow_cmd("db", "migrate", timeout=300).returncode == 0

    state, _, out = dag_test(af, "shop_invoicing_replay", {"version": "v2"})
    assert state == "success", out[-6000:]
    v2 = {t: f"{t}.v2" for t in shop.topics.outputs}
    counts = {t: len(read_topic(shop.connection, v2[t])) for t in shop.topics.outputs}
    assert counts == {shop.topics.invoices: stats.valid, shop.topics.shipments: stats.valid,
                      shop.topics.dead_letters: sum(stats.invalid.values())}
    # The live topics were not touched; a second replay of v2 publishes nothing.
    assert {t: len(read_topic(shop.connection, t, isolation="read_uncommitted")) for t in shop.topics.outputs} == live
    state, _, out = dag_test(af, "shop_invoicing_replay", {"version": "v2"})
    assert state == "success", out[-4000:]
    assert {t: len(read_topic(shop.connection, v2[t], isolation="read_uncommitted"))
            for t in shop.topics.outputs} == counts


def _api(af: EmbeddedAirflow, method: str, path: str, body: dict | None = None, token: str | None = None):
    return af.rest.call(method, path, body, token)


def _unpause(af: EmbeddedAirflow, token: str, dag_id: str, timeout_s: float = 180) -> None:
    """Unpause ``dag_id`` once the DAG processor has parsed it (shortly after the start)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _api(af, "PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False}, token)
            return
        except Exception:  # noqa: BLE001 - any refusal until the deadline, which names it
            assert time.monotonic() < deadline, f"{dag_id} never appeared"
            time.sleep(2)


def _wait_for_run(af: EmbeddedAirflow, token: str, dag_id: str, *, run_type: str | None = None,
                  timeout_s: float = 600) -> dict:
    """The first run of ``dag_id`` (of ``run_type``) to finish, through the REST API."""
    query = f"?run_type={run_type}" if run_type else ""
    deadline = time.monotonic() + timeout_s
    runs: list = []
    while time.monotonic() < deadline:
        runs = _api(af, "GET", f"/api/v2/dags/{dag_id}/dagRuns{query}", None, token)["dag_runs"]
        done = [r for r in runs if r["state"] in ("success", "failed")]
        if done:
            return done[0]
        time.sleep(3)
    raise AssertionError(f"no {run_type or ''} run of {dag_id} finished within {timeout_s}s: {runs}")


def _screenshot_asset_graph(af: EmbeddedAirflow, token: str, topic: str, target: Path) -> None:
    """The Airflow UI's page of the ``topic`` Kafka asset, with its graph (producer -> alias -> consumer)."""
    from tests.integration.orchestration.test_ui_browser import CHROMIUM, CHROMIUM_ARGS, _log_in, _playwright

    sync_playwright, _ = _playwright()
    asset = next(a for a in _api(af, "GET", "/api/v2/assets?limit=100", None, token)["assets"]
                 if a["uri"].endswith(f"/{topic}"))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 800})
            _log_in(page, af)
            page.goto(f"{af.url}/assets/{asset['id']}")
            page.wait_for_load_state("networkidle")
            time.sleep(3)  # the graph lays itself out after the data arrived
            target.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(target))
        finally:
            browser.close()


def test_a_published_window_triggers_the_revenue_dag_with_exactly_its_invoices(shop_factory, kafka_broker, spark,
                                                                                spark_connect_server, tmp_path):
    """Assets through the scheduler: the run_window task resolves the `shop_invoicing.invoices` alias to
    the Kafka topic with the window's offset ranges; `shop_revenue`, scheduled on that alias, is triggered
    and totals exactly that window's invoices (not the history before it) per currency."""
    from decimal import Decimal

    from eos_etl.shop.pipeline import run_shop_window

    shop = shop_factory(partitions=2)
    # History: a first window processed outside Airflow; the downstream must not count it.
    generate(shop.connection, shop.topics.purchases, 200, invalid_share=0.1, seed=61)
    first = shop.plan()
    run_shop_window(spark, shop, first)
    stats = generate(shop.connection, shop.topics.purchases, 300, invalid_share=0.1, seed=62, transaction_size=50,
                     abort_share=0.2)

    af = airflow_for(shop, tmp_path / "af", kafka_broker, parallelism=4, spark_connect=spark_connect_server)
    lineage_file = tmp_path / "openlineage.jsonl"
    af.overrides["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(
        {"type": "file", "log_file_path": str(lineage_file), "append": True})
    af.start()
    try:
        token = af.rest.token()
        for dag_id in ("shop_revenue", "shop_invoicing"):
            _unpause(af, token, dag_id)
        af.rest.wait_for_runs_to_settle("shop_invoicing", token)  # the schedule's run (bounded by its interval)
        _api(af, "POST", "/api/v2/dags/shop_invoicing/dagRuns", {"logical_date": None, "conf": {}}, token)
        published = _wait_for_run(af, token, "shop_invoicing", run_type="manual")
        assert published["state"] == "success", published
        revenue_run = _wait_for_run(af, token, "shop_revenue", run_type="asset_triggered", timeout_s=300)
        assert revenue_run["state"] == "success", revenue_run
        xcom = _api(af, "GET", f"/api/v2/dags/shop_revenue/dagRuns/{revenue_run['dag_run_id']}/taskInstances/"
                               "revenue_per_currency/xcomEntries/return_value", None, token)
        result = xcom["value"] if isinstance(xcom["value"], dict) else json.loads(xcom["value"])
        # Clearing run_window re-runs the published window: the publisher skips it, and the task
        # does not announce it again, so shop_revenue is not triggered a second time.
        run_path = f"/api/v2/dags/shop_invoicing/dagRuns/{urllib.parse.quote(published['dag_run_id'], safe='')}"
        _api(af, "POST", "/api/v2/dags/shop_invoicing/clearTaskInstances", {
            "dry_run": False, "only_failed": False, "task_ids": ["run_window"],
            "dag_run_id": published["dag_run_id"], "include_downstream": False}, token)
        deadline = time.monotonic() + 300
        while (rerun := _api(af, "GET", f"{run_path}/taskInstances/run_window", None, token))["try_number"] < 2 \
                or rerun["state"] != "success" or _api(af, "GET", run_path, None, token)["state"] != "success":
            assert rerun["state"] not in ("failed", "upstream_failed"), rerun
            assert time.monotonic() < deadline, f"the cleared run_window did not finish: {rerun}"
            time.sleep(3)
        time.sleep(10)  # a second asset event would have queued a revenue run by now
        revenue_runs = _api(af, "GET", "/api/v2/dags/shop_revenue/dagRuns", None, token)["dag_runs"]
        if os.environ.get("EOS_ETL_UPDATE_SCREENSHOTS"):  # docs/airflow.md's Asset graph, refreshed on request
            _screenshot_asset_graph(af, token, shop.topics.invoices, ROOT / "docs" / "screenshots" /
                                    "airflow-asset-graph.png")
    finally:
        af.stop()

    # Independently: the invoices of purchases after the first window, summed per currency.
    expected: dict[str, Decimal] = {}
    for record in read_topic(shop.connection, shop.topics.invoices):
        p, o = int(record.headers["source_partition"]), int(record.headers["source_offset"])
        if o >= first.ranges[p].end:
            invoice = json.loads(record.value)
            expected[invoice["currency"]] = expected.get(invoice["currency"], Decimal(0)) + Decimal(invoice["total"])
    assert [(w["invoices"], w["published"]) for w in result["windows"]] == [(stats.valid, stats.valid)], result
    assert result["revenue"] == {c: str(v) for c, v in sorted(expected.items())}
    assert result["windows"][0]["topic"] == shop.topics.invoices
    assert [r["dag_run_id"] for r in revenue_runs] == [revenue_run["dag_run_id"]]  # not re-triggered

    # OpenLineage (file transport): the operator reports its own inputs and outputs, since the
    # transactional writes bypass Spark's writers; the facet carries the window and the counts.
    events = [json.loads(line) for line in lineage_file.read_text().splitlines()]
    windows = {}  # the run_window COMPLETE events, by the publishing attempt
    for e in events:
        if e["eventType"] == "COMPLETE" and e["job"]["name"] == "shop_invoicing.run_window":
            windows.setdefault(e["run"]["facets"].get("eosEtlWindow", {}).get("publishRunId"), []).append(e)
    done = windows.get(attempt_run_id(published["dag_run_id"], 1), [])
    assert len(done) == 1, [(e["eventType"], e["job"]["name"], sorted(e["run"]["facets"])) for e in events
                            if e["job"]["name"] == "shop_invoicing.run_window"]
    [rerun_event] = windows[attempt_run_id(published["dag_run_id"], 2)]  # the cleared try: nothing new
    assert {d["outputFacets"]["outputStatistics"]["rowCount"] for d in rerun_event["outputs"]} == {0}
    namespace = f"kafka://{kafka_broker.sasl_bootstrap_servers.split(',')[0]}"
    assert [(d["namespace"], d["name"]) for d in done[0]["inputs"]] == [(namespace, shop.topics.purchases)]
    facet = done[0]["run"]["facets"]["eosEtlWindow"]
    assert {d["name"]: d["outputFacets"]["outputStatistics"]["rowCount"] for d in done[0]["outputs"]
            if d["namespace"] == namespace} == {
        shop.topics.invoices: stats.valid, shop.topics.shipments: stats.valid,
        shop.topics.dead_letters: facet["counts"]["dead_letters"]}
    assert facet["counts"]["invoices"] == stats.valid and facet["window"]["topic"] == shop.topics.purchases
    assert {int(p): start for p, (start, _) in facet["window"]["partitions"].items()} == {
        p: r.end for p, r in first.ranges.items()}  # the window starts where the first one ended
    assert set(facet["outputRanges"]) == {shop.topics.invoices, shop.topics.shipments, shop.topics.dead_letters}
    assert SASL_PASSWORD not in lineage_file.read_text()


def test_a_failed_run_alerts_once_with_its_error_and_report_and_a_late_run_alerts(shop_factory, kafka_broker,
                                                                                  tmp_path):
    """Forced failure: the Variable names an input topic that does not exist. The run fails (plan_window,
    at once: a missing topic is bad configuration, which is not retried); the report task's notifier
    writes one `run_failed` alert with the error and the report link; the run outlives a 5 s deadline, so
    the triggerer writes a `run_late` alert too."""
    shop = shop_factory(partitions=1)
    broken = shop.__class__(connection=shop.connection, topics=shop.topics.__class__(
        purchases=f"{shop.topics.purchases}-missing", invoices=shop.topics.invoices,
        shipments=shop.topics.shipments, dead_letters=shop.topics.dead_letters),
        group=shop.group, transactional_id_prefix=shop.transactional_id_prefix)
    af = airflow_for(broken, tmp_path / "af", kafka_broker)
    af.overrides["EOS_ETL_RUN_DEADLINE_S"] = "5"
    alerts_file = tmp_path / "af" / "var" / "alerts" / "alerts.jsonl"
    af.start()
    try:
        token = af.rest.token()
        _unpause(af, token, "shop_invoicing")
        run = _wait_for_run(af, token, "shop_invoicing", timeout_s=420)
        assert run["state"] == "failed", run
        plan = _api(af, "GET", f"/api/v2/dags/shop_invoicing/dagRuns/{urllib.parse.quote(run['dag_run_id'], safe='')}"
                               "/taskInstances/plan_window", None, token)
        assert plan["state"] == "failed" and plan["try_number"] == 1, plan  # not retried: bad configuration
        deadline = time.monotonic() + 120
        alerts: list = []
        while time.monotonic() < deadline:
            alerts = ([json.loads(line) for line in alerts_file.read_text().splitlines()]
                      if alerts_file.is_file() else [])
            if {"run_failed", "run_late"} <= {a["alert"] for a in alerts if a["run_id"] == run["dag_run_id"]}:
                break
            time.sleep(3)
    finally:
        af.stop()
    mine = [a for a in alerts if a["run_id"] == run["dag_run_id"]]
    failed = [a for a in mine if a["alert"] == "run_failed"]
    late = [a for a in mine if a["alert"] == "run_late"]
    assert len(failed) == 1 and len(late) >= 1, alerts
    assert "plan_window failed" in failed[0]["error"] and failed[0]["dag_id"] == "shop_invoicing"
    assert broken.topics.purchases in failed[0]["task_errors"]["plan_window"], failed[0]  # the cause, named
    assert failed[0]["report"].endswith("/eos-etl/runs/shop_invoicing/"
                                        f"{urllib.parse.quote(run['dag_run_id'], safe='')}")
    assert failed[0]["window"] is None  # planning is what failed
    assert late[0]["allowed_s"] == 5.0 and late[0]["dag_id"] == "shop_invoicing"
    assert alerts_file.stat().st_mode & 0o777 == 0o600
    assert SASL_PASSWORD not in alerts_file.read_text()


def test_a_burst_of_purchases_makes_one_event_driven_run(shop_factory, kafka_broker, spark_connect_server, tmp_path):
    """AssetWatcher with the Kafka provider's message-queue trigger: a burst of purchases (several
    transactions, two partitions) makes exactly one asset event and one run, which waits for the burst to
    end and publishes all of it once."""
    from eos_etl.orchestration.arrivals import WATCH_CONN_ID

    shop = shop_factory(partitions=2)
    resources = shop.pipeline().resources()
    watch_group = resources.watch_group
    grant(shop.connection, SASL_USER, resources.grants("watcher"))  # the role `eos-etl acl grant` gives
    af = airflow_for(shop, tmp_path / "af", kafka_broker, parallelism=4, spark_connect=spark_connect_server)
    af.connections[WATCH_CONN_ID] = {"conn_type": "kafka", "extra": {
        "bootstrap.servers": kafka_broker.sasl_bootstrap_servers, "group.id": watch_group,
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": SASL_USER,
        "sasl.password": SASL_PASSWORD, "ssl.ca.location": str(kafka_broker.ca_file),
        "isolation.level": "read_committed", "auto.offset.reset": "earliest", "enable.auto.commit": "false"}}
    dag_id = "shop_invoicing_on_arrival"
    af.start()
    try:
        token = af.rest.token()
        _unpause(af, token, dag_id)
        af.rest.wait_for_runs_to_settle(dag_id, token)  # a sweep the unpausing may start (bounded by its time)
        # The watcher's group starts at the earliest offset: no need to wait for it to join.
        stats = generate(shop.connection, shop.topics.purchases, 400, invalid_share=0.05, seed=71,
                         transaction_size=40, abort_share=0.1)
        run = _wait_for_run(af, token, dag_id, run_type="asset_triggered", timeout_s=420)
        assert run["state"] == "success", run
        time.sleep(8)  # longer than the quiet gap: a second event from the same burst would have come by now
        runs = _api(af, "GET", f"/api/v2/dags/{dag_id}/dagRuns?run_type=asset_triggered", None, token)["dag_runs"]
        plan = _api(af, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances/plan_window/"
                               "xcomEntries/return_value", None, token)["value"]
        plan = plan if isinstance(plan, dict) else json.loads(plan)
        events = _api(af, "GET", "/api/v2/assets/events?limit=100", None, token)
    finally:
        af.stop()
    assert len(runs) == 1, [(r["dag_run_id"], r["state"]) for r in runs]
    assert plan["arrivals"]["events"] == 1 and plan["arrivals"]["waited_s"] >= 5, plan["arrivals"]
    watched = [e for e in events["asset_events"] if e["extra"].get("from_trigger")]
    assert len(watched) == 1, watched
    assert set(watched[0]["extra"]["payload"]) == {"topic", "partition", "offset", "timestamp_ms"}  # no payload
    invoices = read_topic(shop.connection, shop.topics.invoices)
    assert len(invoices) == stats.valid and check_shop(shop).ok
