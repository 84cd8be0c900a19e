"""The README's demo: the whole product on the embedded defaults, end to end.

Starts the local broker and Airflow, creates the shop topics, writes demo
purchases (a share of them invalid, some in aborted transactions), triggers
the ``shop_invoicing`` DAG (plan, spark-submit, Great Expectations, report),
waits for it and prints where to look. ``--no-airflow`` runs the window
directly instead. ``--cluster`` runs the same on the local clusters (``cluster
up``): the 3-node Kafka cluster and the Spark standalone master with two
workers, with Airflow's ``kafka_purchases`` and ``spark_default`` connections
pointing at them.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
from datetime import datetime

from . import paths
from .embedded.airflow import EmbeddedAirflow
from .embedded.kafka_cluster import KafkaCluster
from .embedded.spark_cluster import SparkStandalone
from .embedded.spark_connect import start_for_windows
from .errors import ConfigurationError
from .kafka.admin import ClusterAdmin
from .kafka.connection import KafkaConnection
from .kafka.topics import ensure_topics
from .run_files import REPORT_PAGE, SUMMARY, direct_run_summary, run_dir
from .shop.generator import generate
from .shop.pipeline import run_shop_window, summary_dict
from .shop.settings import ShopSettings
from .spark.session import spark_session

CLUSTER_SIZE = 3


def run_demo(args) -> int:
    t0 = time.monotonic()
    cluster = getattr(args, "cluster", False)
    broker = KafkaCluster.local(CLUSTER_SIZE if cluster else 1)
    if not broker.plaintext:
        raise ConfigurationError("the demo administers the broker over its loopback PLAINTEXT listener, which "
                                 "EOS_ETL_KAFKA_PLAINTEXT=off turns off: unset it for the demo (docs/security.md)")
    broker.start()
    print(broker.status().describe(), flush=True)
    spark_master = None
    if cluster:
        spark_cluster = SparkStandalone.local().start()
        print(spark_cluster.status().describe(), flush=True)
        spark_master = spark_cluster.master_url
    airflow = None
    if not args.no_airflow:
        airflow = EmbeddedAirflow.local(bootstrap_servers=broker.bootstrap_servers if cluster else None,
                                          spark_master=spark_master,
                                          spark_connect=start_for_windows(spark_master)).start()
    conn = KafkaConnection(broker.bootstrap_servers)
    settings = ShopSettings(conn)
    t = settings.topics
    admin = ClusterAdmin(conn)
    ensure_topics(admin, settings.specs(args.partitions), allow_existing=True)
    for n in range(max(1, getattr(args, "windows", 1))):
        stats = generate(conn, t.purchases, args.count, invalid_share=args.invalid_share,
                         transaction_size=500, abort_share=0.05, progress=True, seed=int(time.time()) + n)
        print(f"generated: {json.dumps(stats.to_dict())}", flush=True)
        if airflow is None:
            _run_directly(settings, spark_master)
        else:
            _run_through_airflow(airflow)
    print(f"broker log: {broker.log_file}")
    if airflow is not None:
        print(airflow.describe())
    stop = "make down && make cluster-down" if cluster else "make down"
    print(f"demo finished in {time.monotonic() - t0:.0f}s; stop everything with: {stop}")
    return 0


def _run_directly(settings, spark_master: str | None = None) -> None:
    window = settings.plan(for_run=True)
    print(f"window: {window}", flush=True)
    spark = spark_session("eos-etl-demo", master=spark_master)
    try:
        summary = run_shop_window(spark, settings, window)
    finally:
        spark.stop()
    data = summary_dict(settings, summary)
    report = direct_run_summary(summary.run_id)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps({k: v for k, v in data.items() if k != "partitions"}, indent=2))
    print(f"\nrun summary: {report}")


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (_at(end) - _at(start)).total_seconds()


def task_durations(dag_run: dict, task_instances: list[dict]) -> str:
    """The run's tasks in the order they started, each with its duration as Airflow recorded it (its
    process's start and the DAG file's parse included) and the gap before it started (after the
    trigger or the previous task's end: scheduling, queueing, starting the task's process), then the
    whole run from its trigger (queued) to its last task's end: where a window's time goes."""
    tasks = sorted((t for t in task_instances if t.get("start_date")), key=lambda t: _at(t["start_date"]))
    began = dag_run.get("queued_at") or dag_run.get("start_date")
    lines, last_end, in_tasks, between = [], began, 0.0, 0.0
    for t in tasks:
        took = _seconds(t["start_date"], t.get("end_date")) or 0.0
        gap = max(0.0, _seconds(last_end, t["start_date"]) or 0.0) if last_end else 0.0
        in_tasks, between = in_tasks + took, between + gap
        lines.append(f"  {t['task_id']:<18} {t.get('state') or '?':<10} {took:7.1f} s   started {gap:5.1f} s "
                     "after the previous end")
        if t.get("end_date") and (last_end is None or _at(t["end_date"]) > _at(last_end)):
            last_end = t["end_date"]
    ends = [t["end_date"] for t in tasks if t.get("end_date")]
    whole = _seconds(began, max(ends, key=_at)) if ends else None
    lines.append(f"  {'in tasks / between tasks':<29} {in_tasks:7.1f} s / {between:.1f} s")
    lines.append(f"  {'trigger -> last task end':<29} {whole or 0:7.1f} s")
    return "task durations (Airflow's own record):\n" + "\n".join(lines)


def trigger(api, dag_id: str, token: str, *, attempts: int = 3, pause_s: float = 2.0) -> dict:
    """A manual run of ``dag_id``, as the UI's trigger button makes one. Asked again on a 500 or 503: on
    SQLite (the embedded stack) the API server answers 500 when the database stayed locked for its
    busy timeout, as it does while the scheduled run the unpausing started writes its task states; the
    failed request's transaction was rolled back, so asking again makes one run, not two."""
    for attempt in range(1, attempts + 1):
        try:
            return api.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {}}, token)
        except urllib.error.HTTPError as exc:
            if exc.code not in (500, 503) or attempt == attempts:
                raise
            time.sleep(pause_s)
    raise AssertionError("unreachable")


def _run_through_airflow(airflow, dag_id: str = "shop_invoicing", timeout_s: float = 900) -> None:
    """Trigger the DAG as the UI would (REST API), wait for it, print where the report is."""
    api = airflow.rest
    token = api.token(timeout=120)  # a busy API server may need more than the default 30 s
    deadline = time.monotonic() + 180
    while True:  # the DAG processor needs a moment to parse dags/ after a fresh start
        try:
            api.call("GET", f"/api/v2/dags/{dag_id}", token=token)
            break
        except urllib.error.HTTPError as exc:
            if exc.code != 404 or time.monotonic() > deadline:
                raise
            time.sleep(2)
    api.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False}, token)
    run = trigger(api, dag_id, token)
    run_id = run["dag_run_id"]
    print(f"triggered {dag_id} run {run_id}; follow it at {airflow.url}/dags/{dag_id}/runs/{run_id}", flush=True)
    deadline = time.monotonic() + timeout_s
    state = run["state"]
    while state not in ("success", "failed") and time.monotonic() < deadline:
        time.sleep(5)
        state = api.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}", token=token)["state"]
    print(task_durations(api.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}", token=token),
                         api.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances",
                                  token=token).get("task_instances", [])), flush=True)
    out = run_dir(dag_id, run_id)
    summary = out / SUMMARY
    if summary.is_file():
        data = json.loads(summary.read_text())
        print(json.dumps({k: v for k, v in data.items() if k != "partitions"}, indent=2))
    print(f"\nDAG run {run_id}: {state}")
    print(f"report: {out / REPORT_PAGE}")
    print(f"reports in the UI: {airflow.url}/eos-etl/reports/ (Browse > Exactly-once reports)")
    gx_docs = paths.var_dir() / "gx"
    print(f"Great Expectations Data Docs: {gx_docs}")
    if state != "success":
        raise SystemExit(f"the DAG run ended {state}; see the task logs in the UI")

