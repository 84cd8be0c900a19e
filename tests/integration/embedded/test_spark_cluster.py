"""run-window on a real Spark standalone cluster (master + 2 workers from the pyspark wheel) and 3 Kafka nodes.

The driver runs in a child process (the real CLI, or a small script): one
process can hold only one SparkContext, and the suite's local-mode session may
already be the one in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from eos_etl.checker import check_shop
from eos_etl.embedded.spark_cluster import SparkStandalone
from eos_etl.jvm import class_data
from eos_etl.jvm.options import jvm_options
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.topics import ensure_topics
from eos_etl.shop.generator import generate
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings
from eos_etl.spark.package_zip import package_dir, package_zip

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# A driver on the 2-worker cluster: JVM + executor launch ~20 s on an idle 2-core machine (minutes when the
# machine is shared), the window a few seconds more. The bound fails a hang instead of eating the suite timeout.
DRIVER_TIMEOUT_S = 420
DRIVER_ENV = {**os.environ, "EOS_ETL_SPARK_DRIVER_MEMORY": "1g"}


def _cluster_shop(kafka_cluster) -> ShopSettings:
    tag = uuid.uuid4().hex[:10]
    topics = ShopTopics(purchases=f"purchases-{tag}", invoices=f"invoices-{tag}",
                        shipments=f"shipments-{tag}", dead_letters=f"purchases-{tag}.dlq")
    connection = KafkaConnection(kafka_cluster.bootstrap_servers)
    shop = ShopSettings(connection=connection, topics=topics, group=f"shop-{tag}",
                        transactional_id_prefix=f"shop-{tag}")
    ensure_topics(ClusterAdmin(connection), shop.specs(2))  # replication factor 3, min ISR 2 on 3 nodes
    return shop


def test_run_window_on_the_standalone_cluster_is_exact(kafka_cluster, spark_cluster: SparkStandalone) -> None:
    shop = _cluster_shop(kafka_cluster)
    stats = generate(shop.connection, shop.topics.purchases, 2_000, invalid_share=0.1, seed=7,
                     transaction_size=250, abort_share=0.25)
    admin = ClusterAdmin(shop.connection)
    # The generator's last abort returns before its markers land: take the end once they did.
    ends = {p: o.last_stable for p, o in admin.settled_offsets(shop.topics.purchases, [0, 1]).items()}

    t = shop.topics
    proc = subprocess.run(
        [sys.executable, "-m", "eos_etl", "run-window", "--master", spark_cluster.master_url,
         "--bootstrap-servers", kafka_cluster.bootstrap_servers, "--input-topic", t.purchases,
         "--invoices-topic", t.invoices, "--shipments-topic", t.shipments, "--dlq-topic", t.dead_letters,
         "--group", shop.group, "--transactional-id-prefix", shop.transactional_id_prefix,
         "--chunk-records", "400", "--compact"],
        check=False, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S, env=DRIVER_ENV,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["route"] == "standalone"

    # The generator counts committed purchases only; the aborted ones must stay invisible.
    assert stats.aborted > 0
    assert summary["records_read"] == stats.produced
    assert summary["invoices"] == summary["shipments"] == stats.valid
    assert summary["dead_letters"] == sum(stats.invalid.values())
    report = check_shop(shop, expected_ends=ends)
    assert report.ok, report.to_dict()

    # It ran on the cluster: the master saw the application, and both workers ran an executor for it.
    apps = [a for a in (spark_cluster.master_state() or {}).get("completedapps", [])
            if a.get("name") == f"eos-etl-{t.purchases}"]
    assert len(apps) == 1, spark_cluster.master_state()
    app_dirs = [w.work_dir / apps[0]["id"] for w in spark_cluster.worker_nodes]
    assert all(d.is_dir() for d in app_dirs), f"not every worker ran an executor: {app_dirs}"
    # Its executors mapped the machine's class-data archive: HotSpot says so on an executor's stdout
    # when it refuses one (a class path other than the training's, as a worker's own conf dir made it).
    if class_data.usable_archive() is not None:
        outs = [f.read_text(errors="replace") for d in app_dirs for f in d.glob("*/stdout")]
        assert outs and not [o for o in outs if "Unable to use shared archive" in o], outs


def test_the_spark_connect_server_runs_windows_on_the_standalone_cluster(kafka_cluster, spark_cluster, tmp_path):
    """The default route on a cluster: the Connect server is the application, its executors are the
    workers' (on 127.0.0.2 and 127.0.0.3), its driver on an address they reach."""
    from eos_etl.embedded.spark_connect import SparkConnectServer
    from eos_etl.host.ports import free_port

    shop = _cluster_shop(kafka_cluster)
    stats = generate(shop.connection, shop.topics.purchases, 1_000, invalid_share=0.1, seed=9)
    server = SparkConnectServer(home=tmp_path / "connect", port=free_port(), master=spark_cluster.master_url)
    try:
        server.start()
        t = shop.topics
        proc = subprocess.run(
            [sys.executable, "-m", "eos_etl", "run-window", "--bootstrap-servers", kafka_cluster.bootstrap_servers,
             "--input-topic", t.purchases, "--invoices-topic", t.invoices, "--shipments-topic", t.shipments,
             "--dlq-topic", t.dead_letters, "--group", shop.group, "--transactional-id-prefix",
             shop.transactional_id_prefix, "--compact"],
            capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S, env={**DRIVER_ENV, **server.client_env()})
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert json.loads(proc.stdout.strip().splitlines()[-1])["invoices"] == stats.valid
        app = next(a for a in (spark_cluster.master_state() or {}).get("activeapps", [])
                   if a.get("name") == "eos-etl Spark Connect server")
        hosts = {e.host for e in spark_cluster.executors() if e.app_id == app["id"]}
        assert hosts == {w.host for w in spark_cluster.worker_nodes}, hosts
    finally:
        server.stop()
    assert check_shop(shop).ok


_WHERE_IS_THE_CODE = textwrap.dedent("""
    import json, sys
    from eos_etl.spark.session import spark_session

    spark = spark_session("eos-etl-shipped-code", master=sys.argv[1])
    sc = spark.sparkContext

    def where(_):
        import os, eos_etl
        yield {"file": eos_etl.__file__, "cwd": os.getcwd(), "python": sys.executable, "pid": os.getpid()}

    rows = sc.parallelize(range(8), 8).mapPartitions(where).collect()
    print(json.dumps({"app_id": sc.applicationId, "rows": rows}), flush=True)
    sys.stdin.readline()  # the test inspects the running application's executors meanwhile
    spark.stop()
""")


def test_executors_import_the_shipped_code_zip(spark_cluster: SparkStandalone) -> None:
    zip_path = package_zip()
    driver = subprocess.Popen([sys.executable, "-c", _WHERE_IS_THE_CODE, spark_cluster.master_url],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=DRIVER_ENV)
    try:
        line = _read_line(driver, DRIVER_TIMEOUT_S)
        assert line, f"the driver printed nothing; stderr:\n{driver.stderr.read()[-3000:]}"
        result = json.loads(line)

        # Every task imported eos_etl from the zip the driver shipped, never from the checkout.
        files = {r["file"] for r in result["rows"]}
        assert all(f"{zip_path.name}/eos_etl/__init__.py" in f for f in files), files
        assert not any(f.startswith(str(package_dir())) for f in files), files
        assert {r["python"] for r in result["rows"]} == {sys.executable}

        # The hooks fault tests use: one executor JVM per worker for this application, with their pids,
        # each running in its worker's work dir, where it fetched the zip from the driver.
        executors = spark_cluster.wait_for_executors(2, app_id=result["app_id"], timeout=30)
        assert sorted(e.worker_id for e in executors) == [1, 2]
        assert all(e.is_running() for e in executors)
        for e in executors:
            work = spark_cluster.worker(e.worker_id).work_dir / e.app_id / e.executor_id
            assert (work / zip_path.name).is_file(), sorted(p.name for p in work.iterdir())
        assert {r["cwd"] for r in result["rows"]} <= {
            str(spark_cluster.worker(e.worker_id).work_dir / e.app_id / e.executor_id) for e in executors}
        status = spark_cluster.status()
        assert [w.state for w in status.workers] == ["ALIVE", "ALIVE"]
        assert sorted(e.pid for w in status.workers for e in w.executors) == sorted(e.pid for e in executors)

        # $EOS_ETL_JVM_OPTIONS (the suite sets it, conftest.py) reached the executors and the daemons.
        wanted = [o.encode() for o in jvm_options()]
        daemons = [spark_cluster.master, *spark_cluster.worker_nodes]
        for pid in [*(e.pid for e in executors), *(d.pid() for d in daemons)]:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            assert wanted and all(o in args for o in wanted), (pid, args)
    finally:
        _finish(driver)


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sel.select(timeout=1.0):
            return proc.stdout.readline().strip()
        if proc.poll() is not None:
            return proc.stdout.readline().strip()
    raise AssertionError(f"the driver printed nothing within {timeout}s")


def _finish(driver: subprocess.Popen) -> None:
    try:
        driver.communicate("done\n", timeout=60)
    except subprocess.TimeoutExpired:
        driver.kill()
        driver.communicate()


def test_standalone_cluster_layout_and_status(tmp_path: Path) -> None:
    """Ports are fixed at the first start and found again by another instance (as `cluster status` does)."""
    first = SparkStandalone(tmp_path, workers=2)
    again = SparkStandalone(tmp_path, workers=2)
    assert again.master_url == first.master_url
    assert [w.address for w in again.worker_nodes] == [w.address for w in first.worker_nodes]
    status = again.status()
    assert not status.running and [w.state for w in status.workers] == [None, None]
    assert "stopped" in status.describe()
    # Each worker on a loopback address of its own: to Spark's scheduler, two machines (speculative
    # copies and retries after a lost worker need another host); the master stays on 127.0.0.1.
    assert [w.host for w in first.worker_nodes] == ["127.0.0.2", "127.0.0.3"]
    assert first.master_url.startswith("spark://127.0.0.1:")
    shared = SparkStandalone(tmp_path / "shared", workers=2, distinct_worker_hosts=False)
    assert {w.host for w in shared.worker_nodes} == {"127.0.0.1"}


def test_spark_settings_the_job_needs_are_fixed_and_the_rest_are_the_users() -> None:
    from eos_etl.spark.config import DEFAULT_CONF, REQUIRED_CONF, parse_conf_pairs, spark_conf

    assert spark_conf()["spark.speculation"] == "false"  # off by default (wasted work, not a risk)
    assert spark_conf({"spark.speculation": "true"})["spark.speculation"] == "true"
    pinned = spark_conf({"spark.sql.session.timeZone": "Europe/Berlin"})
    assert pinned["spark.sql.session.timeZone"] == "UTC"
    assert not set(REQUIRED_CONF) & set(DEFAULT_CONF)
    assert parse_conf_pairs(["spark.speculation=true", " spark.speculation.quantile = 0.5"]) == {
        "spark.speculation": "true", "spark.speculation.quantile": "0.5"}
    for bad in ("spark.speculation", "speculation=true", "spark.x=", "spark.sql.session.timeZone=UTC"):
        with pytest.raises(ValueError):
            parse_conf_pairs([bad])


def test_a_killed_worker_is_seen_dead_and_comes_back(spark_cluster: SparkStandalone) -> None:
    """The hooks the executor/worker fault tests stand on: kill a worker, the master notices, start it again."""
    worker = spark_cluster.worker(2)
    before = worker.pid()
    worker.kill()
    assert worker.pid() is None
    deadline = time.monotonic() + 60
    while spark_cluster.status().workers[1].state == "ALIVE":
        assert time.monotonic() < deadline, "the master still lists the killed worker ALIVE after 60 s"
        time.sleep(0.5)
    worker.start()  # waits until the master lists the new registration ALIVE
    status = spark_cluster.status()
    assert [w.state for w in status.workers] == ["ALIVE", "ALIVE"]
    assert status.workers[1].pid not in (None, before)
    spark_cluster.start()  # idempotent: everything already runs
    assert spark_cluster.worker(2).pid() == status.workers[1].pid
