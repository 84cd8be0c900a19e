"""Windows on a long-lived Spark Connect server: the same exactly-once runs without a Spark application each.

One real server per module (Spark's own SparkConnectServer from the pyspark wheel,
started by ``eos_etl.embedded.spark_connect`` on a free loopback port); clients are
real ``python -m eos_etl run-window`` processes and a real Airflow DAG run, against
the session's real broker.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from eos_etl.checker import check_shop, read_topic
from eos_etl.embedded.spark_connect import SparkConnectServer
from eos_etl.host.ports import free_port
from eos_etl.jvm import class_data
from eos_etl.shop.generator import generate
from tests.conftest import SASL_PASSWORD
from tests.integration.orchestration.test_dag import airflow_for, dag_test, task_logs
from tests.support.cli import assert_untouched, cli, shop_args

#: The session daemons' idle exit on this module's server (the mechanism; the default is an hour).
DAEMON_EXIT_S = 10

# One server for the module: its tests share one xdist worker.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("spark-connect")]


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    # Daemons exit DAEMON_EXIT_S after their last worker here (an hour by default): the daemon-exit test waits for it.
    server = SparkConnectServer(home=tmp_path_factory.mktemp("spark-connect"), port=free_port(), master="local[2,4]",
                                daemon_idle_exit_s=DAEMON_EXIT_S)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def committed(admin, shop) -> dict[int, int | None]:
    return admin.committed_offsets(shop.group, shop.topics.purchases, admin.partitions(shop.topics.purchases))


def input_ends(admin, shop) -> dict[int, int]:
    topic = shop.topics.purchases
    return {p: o.high_watermark for p, o in admin.offsets(topic, admin.partitions(topic)).items()}


def test_the_server_listens_on_loopback_only_and_its_token_is_never_on_a_command_line(connect_server):
    server = connect_server
    token = server.token()
    assert stat.S_IMODE(server.token_file.stat().st_mode) == 0o600 and len(token) >= 32
    jvm = psutil.Process(server.pid())
    assert "org.apache.spark.sql.connect.service.SparkConnectServer" in jvm.cmdline()
    for proc in [jvm, *jvm.children(recursive=True)]:
        try:
            argv = proc.cmdline()
        except psutil.Error:  # exited meanwhile (or a zombie): no command line left
            continue
        assert not any(token in arg for arg in argv), argv
    listening = [c.laddr for c in jvm.net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == server.bound_port]
    assert listening and all(a.ip in ("127.0.0.1", "::ffff:127.0.0.1") for a in listening), listening
    assert server.url == f"sc://localhost:{server.bound_port}" and token not in server.describe()


def test_windows_on_the_server_publish_exactly_once_in_one_spark_application(shop_factory, admin, connect_server):
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 600, invalid_share=0.1, seed=17,
                     transaction_size=50, abort_share=0.1)
    server_pid = connect_server.pid()
    env = connect_server.client_env()
    first = cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop),
                "--max-records-per-partition", "150", "--chunk-records", "40", "--compact", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    second = cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop),
                 "--chunk-records", "40", "--compact", env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    runs = [json.loads(r.stdout.strip().splitlines()[-1]) for r in (first, second)]
    # Both windows ran on the one server application; a client cannot see task attempts, and says so.
    assert connect_server.pid() == server_pid
    assert [r["fenced_attempts"] for r in runs] == [None, None]
    assert all(r["task_attempts"]["visible"] is False for r in runs)
    assert [r["route"] for r in runs] == ["connect", "connect"]
    assert "not visible to a Spark Connect client" in first.stderr
    assert runs[0]["records_read"] > 0 and runs[1]["records_read"] > 0
    assert sum(r["invoices"] for r in runs) == stats.valid
    assert sum(r["dead_letters"] for r in runs) == sum(stats.invalid.values())
    report = check_shop(shop)
    assert report.ok, report.violations
    assert committed(admin, shop) == input_ends(admin, shop)
    assert connect_server.token() not in first.stderr + second.stderr
    # Two windows later the server's log has warnings and its own start line, not Spark's INFO stream.
    info = [line for line in connect_server.log_file.read_text(errors="replace").splitlines()
            if " INFO " in line and "eos_etl." not in line]  # the publishing tasks' own lines stay
    assert info and all(" INFO SparkConnectServer: " in line for line in info), info[:5]
    # HotSpot mapped the machine's class-data archive (it refuses one made for another class path).
    archive = class_data.usable_archive()
    if archive is not None:
        assert str(archive) in open(f"/proc/{server_pid}/maps").read()


def python_daemons(server) -> list[int]:
    jvm = psutil.Process(server.pid())
    out = []
    for proc in jvm.children():
        try:
            if "eos_etl.spark.pyspark_daemon" in proc.cmdline():
                out.append(proc.pid)
        except psutil.Error:
            continue
    return out


def test_python_daemons_of_ended_sessions_exit(shop_factory, connect_server):
    """Spark 4.1 starts a Python worker daemon per client session and never stops it (SPARK-54055):
    on a long-lived server each window would leave one behind. Ours exit once idle."""
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 50, seed=5)
    res = cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop), "--compact",
              env=connect_server.client_env())
    assert res.returncode == 0, res.stderr[-3000:]
    assert python_daemons(connect_server), "the window's session started no Python daemon"
    # Its worker is kept for the next window (spark.python.worker.reuse), idle.
    assert connect_server.python_workers() >= 1
    # Spark stops workers idle for 60 s; their daemon exits DAEMON_EXIT_S after its last worker.
    deadline = time.monotonic() + 60 + DAEMON_EXIT_S + 90
    while python_daemons(connect_server):
        assert time.monotonic() < deadline, f"daemons still running: {python_daemons(connect_server)}"
        time.sleep(2)
    assert connect_server.is_running() and connect_server.python_workers() == 0


def test_a_wrong_token_is_refused_with_one_clear_error_and_moves_nothing(shop_factory, admin, connect_server):
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 20)
    env = {**connect_server.client_env(), "SPARK_CONNECT_AUTHENTICATE_TOKEN": "not-the-token"}
    res = cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop), env=env,
              timeout=120)
    assert res.returncode == 2, res.stderr[-3000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "refused this client's token" in errors[0], res.stderr[-3000:]
    assert "Traceback" not in res.stderr and "not-the-token" not in res.stderr
    assert_untouched(shop, admin)

    # A server that is not there: one error at once (pyspark alone would retry for minutes).
    t0 = time.monotonic()
    res = cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop),
              env={**env, "SPARK_REMOTE": f"sc://localhost:{free_port()}"}, timeout=120)
    assert res.returncode == 2 and "cannot be reached" in res.stderr and time.monotonic() - t0 < 60, res.stderr
    # And --master makes no sense for a client: refused before anything connects.
    res = cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop),
              "--master", "local[1]", env=env, timeout=120)
    assert res.returncode == 2 and "runs on its server's master" in res.stderr, res.stderr
    assert_untouched(shop, admin)


def test_a_killed_client_leaves_nothing_visible_and_its_retry_publishes_exactly_once(shop_factory, admin,
                                                                                     connect_server):
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 400, invalid_share=0.0, seed=23)
    stall_s = 25
    env = {**os.environ, **connect_server.client_env(),
           "EOS_ETL_FAILPOINTS": f"mid_produce=sleep:{stall_s},partition=0,after=30"}
    client = subprocess.Popen([sys.executable, "-m", "eos_etl", "run-window", "--bootstrap-servers",
                               shop.connection.bootstrap_servers, *shop_args(shop), "--compact"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    t_killed = None
    try:
        # The server's task for partition 0 has produced (uncommitted) records and now stalls.
        deadline = time.monotonic() + 120
        while not read_topic(shop.connection, shop.topics.invoices, isolation="read_uncommitted"):
            assert client.poll() is None and time.monotonic() < deadline, client.stderr.read()[-3000:]
            time.sleep(0.5)
        os.killpg(client.pid, signal.SIGKILL)
        t_killed = time.monotonic()
        client.wait(30)
    finally:
        if client.poll() is None:
            os.killpg(client.pid, signal.SIGKILL)
    # The orphaned transaction (input partition 0) is invisible to a read_committed reader. (Input
    # partition 1's committed outputs may be too, for now: no read_committed reader reads past an open
    # transaction on the same output partition until it is resolved; the retry's fencing resolves it.)
    for topic in shop.topics.outputs:
        assert not [r for r in read_topic(shop.connection, topic) if r.headers.get("source_partition") == b"0"]
    retry = cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop),
                "--compact", env=connect_server.client_env())
    assert retry.returncode == 0, retry.stderr[-3000:]
    # Let the orphaned task wake up on the server: its producer was fenced by the retry, it commits nothing.
    time.sleep(max(0.0, t_killed + stall_s + 5 - time.monotonic()))
    report = check_shop(shop)
    assert report.ok, report.violations
    assert len(read_topic(shop.connection, shop.topics.invoices)) == stats.valid
    assert committed(admin, shop) == input_ends(admin, shop)


def test_the_dag_runs_its_window_on_the_connect_server(shop_factory, kafka_broker, connect_server, tmp_path):
    """The project's own Airflow (make up): the run task supervises the server, so a server that died
    since is started again before the window, and the task attempts come from its event log."""
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 500, invalid_share=0.05, seed=41)
    token = connect_server.token()
    af = airflow_for(shop, tmp_path / "af", kafka_broker, connections={"spark_connect_default": {
        "conn_type": "spark_connect", "host": "localhost", "port": connect_server.bound_port, "password": token}},
        overrides={"EOS_ETL_SPARK_CONNECT_CONN_ID": "spark_connect_default",
                   "EOS_ETL_SPARK_CONNECT_HOME": str(connect_server.home)})
    assert af.airflow_cmd("db", "migrate", timeout=300).returncode == 0
    os.kill(connect_server.pid(), signal.SIGKILL)  # it died since the last window
    state, run_id, out = dag_test(af, "shop_invoicing")
    assert state == "success", out[-6000:]
    logs = task_logs(af) + out
    assert "on the Spark Connect server of connection 'spark_connect_default'" in logs
    assert "is not running; starting it" in logs and connect_server.is_running()
    run_dir = next((tmp_path / "af" / "var" / "reports" / "shop_invoicing").glob("*/summary.json")).parent
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["task_attempts"]["visible"] and summary["task_attempts"]["succeeded"] == 2
    assert summary["route"] == "connect"
    page = next((tmp_path / "af" / "var" / "reports" / "shop_invoicing").glob("*/report.html")).read_text()
    assert "run_window wall clock (Spark Connect server)" in page and "spark-submit" not in page
    # Validated where the window ran: a client of the same server's application, no Spark of its own.
    quality = json.loads((run_dir / "quality.json").read_text())
    assert quality["success"] is True, quality["failures"]
    assert quality["spark"]["session"] == "connect"
    assert quality["spark"]["application_id"] == server_application_id(connect_server)
    assert "validating on the Spark Connect server of connection 'spark_connect_default'" in logs
    assert len(read_topic(shop.connection, shop.topics.invoices)) == stats.valid
    assert check_shop(shop).ok
    assert token not in logs and SASL_PASSWORD not in logs


def server_application_id(server) -> str:
    """The server's Spark application, as its own event log names it."""
    newest = max(server.event_log_dir.glob("eventlog_v2_*"), key=lambda d: d.stat().st_mtime)
    return newest.name.removeprefix("eventlog_v2_")


STALE_CLIENT = """
import json, sys
import eos_etl.spark.connect_client as client_module
from eos_etl.errors import ConfigurationError
from eos_etl.spark.session import spark_session
client_module.source_digest = lambda: "0123456789abcdef"  # as if this client's code had changed since
try:
    spark_session("stale-client")
    print("CONNECTED")
except ConfigurationError as exc:
    print("REFUSED " + str(exc))
"""


def test_a_client_with_other_code_than_the_server_is_refused(connect_server):
    """The server's Python workers run the tasks with the code they imported at its start."""
    env = {**os.environ, **connect_server.client_env()}
    res = subprocess.run([sys.executable, "-c", STALE_CLIENT], env=env, capture_output=True, text=True, timeout=120)
    assert "REFUSED" in res.stdout and "spark-connect restart" in res.stdout, res.stdout + res.stderr[-2000:]
    same = subprocess.run([sys.executable, "-c", STALE_CLIENT.replace("client_module.source_digest = ", "_ = ")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert "CONNECTED" in same.stdout, same.stdout + same.stderr[-2000:]


def _token_of(home: str, out) -> None:
    out.put(SparkConnectServer(home=Path(home), port=1).token())


def test_first_starts_at_once_share_one_whole_token(tmp_path):
    """Eight processes asking for the token of a new server home at the same moment: one token for all,
    mode 0600, no draft left behind (none of them fails on the file another one made)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    for attempt in range(5):
        home = tmp_path / f"home-{attempt}"
        out = ctx.Queue()
        procs = [ctx.Process(target=_token_of, args=(str(home), out)) for _ in range(8)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        assert [p.exitcode for p in procs] == [0] * 8
        tokens = {out.get(timeout=5) for _ in procs}
        assert len(tokens) == 1 and len(next(iter(tokens))) >= 32
        assert [f.name for f in home.iterdir()] == ["token"]
        assert stat.S_IMODE((home / "token").stat().st_mode) == 0o600


PING = """
from eos_etl.spark.session import spark_session
spark = spark_session()
print("COUNT", spark.range(5).count())
"""


def test_the_foreground_server_is_the_process_it_replaced_and_takes_the_environments_token(tmp_path):
    """`spark-connect run`, a container's command: the process becomes the server's JVM (same pid, so
    the container's init signals the JVM itself), logs to its own output, accepts exactly the token of
    $SPARK_CONNECT_AUTHENTICATE_TOKEN (kept 0600, on no command line) and stops on SIGTERM."""
    import secrets

    port, token = free_port(), secrets.token_urlsafe(32)
    env = {**os.environ, "EOS_ETL_VAR": str(tmp_path), "EOS_ETL_SPARK_CONNECT_PORT": str(port),
           "EOS_ETL_SPARK_MASTER": "local[1,4]", "EOS_ETL_SPARK_CONNECT_MEMORY": "512m",
           "SPARK_CONNECT_AUTHENTICATE_TOKEN": token}
    server = SparkConnectServer(home=tmp_path / "spark-connect", port=port)
    server.home.mkdir()
    server.token_file.write_text("an-older-token-the-environment-replaces")
    out = tmp_path / "server.out"
    with open(out, "wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "eos_etl", "spark-connect", "run"], env=env, stdout=sink,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while "Spark Connect server started at" not in out.read_text(errors="replace"):
            assert proc.poll() is None, out.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, out.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        jvm = psutil.Process(proc.pid)
        assert jvm.name() == "java" and server.pid() == proc.pid
        assert "org.apache.spark.sql.connect.service.SparkConnectServer" in jvm.cmdline()
        assert not any(token in arg for arg in jvm.cmdline())
        assert server.token() == token and stat.S_IMODE(server.token_file.stat().st_mode) == 0o600

        client = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
        client["SPARK_REMOTE"] = f"sc://localhost:{port}"
        ok = subprocess.run([sys.executable, "-c", PING], env={**client, "SPARK_CONNECT_AUTHENTICATE_TOKEN": token},
                            capture_output=True, text=True, timeout=120)
        assert "COUNT 5" in ok.stdout, ok.stdout + ok.stderr[-3000:]
        refused = subprocess.run([sys.executable, "-c", PING], capture_output=True, text=True, timeout=120,
                                 env={**client,
                                      "SPARK_CONNECT_AUTHENTICATE_TOKEN": "an-older-token-the-environment-replaces"})
        assert refused.returncode != 0 and "refused this client's token" in refused.stderr, refused.stderr[-3000:]

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) is not None
        assert not server.is_running()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
