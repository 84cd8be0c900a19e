"""The Spark Connect route survives its server: bounded failures, a supervisor that restarts, clean kills.

A real server of this module's own (it is killed and stopped here), real
``python -m eos_etl run-window`` clients, the session's real broker. Each fault
is followed by what production does next: the supervisor's
``ensure_running`` (the run task's first step) and a retry, whose output the
independent checker must find exact. The soak's Connect scenarios run the same
faults at full counts (``make soak``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from eos_etl.checker import check_shop, read_topic
from eos_etl.embedded.spark_connect import SparkConnectServer
from eos_etl.engine.publishing.client_lease import LEASE_TTL_S
from eos_etl.host.ports import free_port
from eos_etl.host.process import PidFile
from eos_etl.kafka.group_offsets import GroupOffsetsReader
from eos_etl.shop.generator import generate
from eos_etl.spark.connect_probe import STALL_BOUND_S
from eos_etl_lab.faults.landing import python_task_workers
from tests.conftest import SASL_PASSWORD
from tests.support.cli import cli, shop_args

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("spark-connect-faults")]

#: A window whose server dies or stalls fails within this (the watch's bound, a probe, the exit).
FAIL_BOUND_S = STALL_BOUND_S + 15


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = SparkConnectServer(home=tmp_path_factory.mktemp("spark-connect"), port=free_port(), master="local[2,4]")
    try:
        s.start()
        yield s
    finally:
        s.stop()


def client(shop, server, failpoints: str = "", extra: tuple[str, ...] = ()) -> subprocess.Popen:
    env = {**os.environ, **server.client_env(), "EOS_ETL_FAILPOINTS": failpoints}
    return subprocess.Popen([sys.executable, "-m", "eos_etl", "run-window", "--bootstrap-servers",
                             shop.connection.bootstrap_servers, *shop_args(shop), "--compact", *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def wait_in_server_log(server, text: str, since: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in server.log_since(since):
        assert time.monotonic() < deadline, f"{text!r} never appeared in {server.log_file}"
        time.sleep(0.3)


def task_workers(server) -> list[int]:
    """The server's Python workers that run a task now (children of its worker daemons)."""
    return python_task_workers([server.pid()])


def retry_exactly_once(shop, server, stats) -> None:
    server.ensure_running()
    res = cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop),
              "--compact", env=server.client_env())
    assert res.returncode == 0, res.stderr[-3000:]
    report = check_shop(shop)
    assert report.ok, report.violations
    assert len(read_topic(shop.connection, shop.topics.invoices)) == stats.valid


def one_error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return errors[0]


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGSTOP"])
def test_a_server_that_dies_or_stalls_mid_window_fails_it_within_the_bound_and_the_retry_is_exact(
        shop_factory, server, fault):
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 400, invalid_share=0.0, seed=61)
    since = server.log_file.stat().st_size
    job = client(shop, server, "mid_produce=sleep:300,partition=0,after=20")
    wait_in_server_log(server, "failpoint mid_produce fired", since)
    os.kill(server.pid(), getattr(signal, fault))
    t0 = time.monotonic()
    try:
        _, stderr = job.communicate(timeout=FAIL_BOUND_S + 30)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    failed_after = time.monotonic() - t0
    assert job.returncode == 1 and failed_after < FAIL_BOUND_S, (job.returncode, failed_after, stderr[-3000:])
    assert f"Spark Connect server at localhost:{server.bound_port}" in one_error_line(stderr)
    # The supervisor finds it dead (or answering nothing for its bound) and starts it again.
    pid = server.pid()
    retry_exactly_once(shop, server, stats)
    assert server.pid() != pid and server.is_running()


def test_sigterm_interrupts_the_windows_operations_and_releases_its_session(shop_factory, server):
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 400, invalid_share=0.0, seed=62)
    server.ensure_running()
    since = server.log_file.stat().st_size
    job = client(shop, server, "mid_produce=sleep:300,partition=0,after=20")
    wait_in_server_log(server, "failpoint mid_produce fired", since)
    assert task_workers(server)
    job.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    _, stderr = job.communicate(timeout=60)
    assert job.returncode == 143 and time.monotonic() - t0 < 15, (job.returncode, stderr[-3000:])
    assert "terminated (SIGTERM)" in one_error_line(stderr)
    # Its tasks on the server end with it: no orphan keeps publishing (or a slot) for minutes.
    deadline = time.monotonic() + 30
    while task_workers(server):
        assert time.monotonic() < deadline, f"task workers still running: {task_workers(server)}"
        time.sleep(0.5)
    retry_exactly_once(shop, server, stats)


def test_the_kafka_password_is_never_in_a_debug_client_log_or_the_servers_logs(shop_factory, server, connection,
                                                                                sasl_connection):
    """pyspark's client prints whole plans (the Kafka options with the JAAS login) at debug level; the
    server's log and event log hold plans too."""
    shop = shop_factory(partitions=1, conn=sasl_connection)
    stats = generate(connection, shop.topics.purchases, 50, invalid_share=0.0, seed=63)
    server.ensure_running()
    c = sasl_connection
    res = cli("run-window", "--bootstrap-servers", c.bootstrap_servers, "--security-protocol", "SASL_SSL",
              "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", c.sasl_username, "--ssl-ca-location",
              c.ssl_ca_location, *shop_args(shop), "--compact",
              env={**server.client_env(), "EOS_ETL_KAFKA_PASSWORD": SASL_PASSWORD, "SPARK_CONNECT_LOG_LEVEL": "debug",
                   "EOS_ETL_LOG_LEVEL": "DEBUG"})
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout.strip().splitlines()[-1])["invoices"] == stats.valid
    assert "Executing plan" in res.stderr and "kafka.sasl.jaas.config" in res.stderr  # the plan was printed
    assert SASL_PASSWORD not in res.stdout + res.stderr
    assert server.token() not in res.stdout + res.stderr
    for path in [server.log_file, *server.event_log_dir.rglob("*")]:
        if path.is_file():
            assert SASL_PASSWORD.encode() not in path.read_bytes(), path


def test_a_recycled_pid_is_never_signalled(tmp_path):
    """A pid file whose process died and whose number now belongs to another process: reported gone,
    left alone by stop."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        pid_file = PidFile(tmp_path / "server.pid")
        pid_file.path.write_text(f"{other.pid} 1")  # the same number, another start time
        server = SparkConnectServer(home=tmp_path, port=free_port())
        assert server.pid() is None and not server.is_running()
        server.stop(timeout=1)
        assert other.poll() is None and psutil.pid_exists(other.pid)
        pid_file.record(other.pid)  # now it is the recorded process
        assert pid_file.pid() == other.pid
    finally:
        other.kill()
        other.wait()


def test_the_summary_counts_task_attempts_from_the_servers_event_log(shop_factory, server):
    """A crashed attempt (its Python worker dies mid-transaction) and its successful retry, seen by a
    client that cannot read the server's status store: through the server's event log."""
    from eos_etl.engine.failpoints import ENV as FAILPOINTS_ENV
    from eos_etl.engine.tasks.task_attempts import EVENT_LOG_ENV

    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 300, invalid_share=0.0, seed=64)
    server.ensure_running()
    once = server.home / f"crash-once-{shop.group}"
    res = cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop), "--compact",
              env={**server.client_env(), EVENT_LOG_ENV: str(server.event_log_dir),
                   FAILPOINTS_ENV: f"mid_produce=crash,partition=1,after=10,once={once}"})
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    attempts = summary["task_attempts"]
    assert attempts["visible"] is True and summary["fenced_attempts"] == attempts["fenced"]
    assert (attempts["total"], attempts["succeeded"], attempts["failed"]) == (3, 2, 1), attempts
    # Per input partition, how each attempt ended: the crashed worker is a killed attempt.
    assert attempts["partitions"] == {"0": ["finished"], "1": ["killed", "finished"]}, attempts
    assert summary["invoices"] == stats.valid and check_shop(shop).ok
    # Without the directory a client says it cannot see them.
    generate(shop.connection, shop.topics.purchases, 10, seed=65)
    res = cli("run-window", "--bootstrap-servers", shop.connection.bootstrap_servers, *shop_args(shop), "--compact",
              env=server.client_env())
    assert json.loads(res.stdout.strip().splitlines()[-1])["task_attempts"]["visible"] is False


#: How long past the lease's TTL after a client's death a commit may still land: the commit its task had
#: checked the lease for just before it expired, the sampling interval and a loaded 2-core machine.
LEASE_MARGIN_S = 4.0


def test_a_sigkilled_clients_tasks_commit_nothing_past_its_lease_and_the_next_run_is_exact(shop_factory, server,
                                                                                           admin):
    """A client SIGKILLed while its tasks stream and commit (every 200 records, each record slowed by 2 ms):
    the group's committed offsets, sampled from the kill on, stop moving within the lease's TTL (plus a
    margin) of the client's death, not when the server cancels the orphaned operation (up to 45 s)."""
    shop = shop_factory(partitions=2)
    topic = shop.topics.purchases
    stats = generate(shop.connection, topic, 40_000, invalid_share=0.0, seed=66, transaction_size=2000)
    ends = {p: o.high_watermark for p, o in admin.offsets(topic, [0, 1]).items()}
    server.ensure_running()
    job = client(shop, server, "mid_produce=throttle:0.002,after=100", ("--chunk-records", "200"))
    reader = GroupOffsetsReader(shop.connection.client_config(), shop.group)

    def committed() -> dict[int, int]:
        """What the group's commits that landed say (a pending transactional commit is not waited for)."""
        return {p: o or 0 for p, o in reader.unstable(topic, [0, 1], 10).items()}

    try:
        # Mid-stream: both partitions' ranges committed in part, the tasks running.
        deadline = time.monotonic() + 180
        while not all(0 < o < ends[p] for p, o in committed().items()):
            assert job.poll() is None and time.monotonic() < deadline, job.stderr.read()[-3000:]
            time.sleep(0.2)
        at_kill = committed()
        assert task_workers(server)
        os.killpg(job.pid, signal.SIGKILL)
        t_kill = time.monotonic()
        job.wait(30)
        # The committed offsets from the kill on: when did they last move?
        commits, last = [], at_kill
        while time.monotonic() - t_kill < LEASE_TTL_S + LEASE_MARGIN_S + 5 or (
                task_workers(server) and time.monotonic() - t_kill < 60):
            if (now := committed()) != last:
                commits.append(round(time.monotonic() - t_kill, 2))
                last = now
            time.sleep(0.2)
    finally:
        reader.close()
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    print(f"commits landed after the kill at (s): {commits}; committed {at_kill} at the kill, {last} at the end, "
          f"window ends {ends}")
    assert commits, "the orphaned tasks committed nothing after their client's death: the kill landed too late"
    assert commits[-1] <= LEASE_TTL_S + LEASE_MARGIN_S, commits
    assert all(o < ends[p] for p, o in last.items()), last  # the orphan stopped short of its window
    retry_exactly_once(shop, server, stats)
