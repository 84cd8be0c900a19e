"""A Spark Connect server: one long-lived Spark application that every window's run joins.

A spark-submit per window starts a fresh Spark application: a JVM, its class
loading and JIT compilation (HotSpot C1/C2 and Janino for the transform),
planning on a cold JVM, Python workers. For a small window that is most of the
run (docs/performance-history.md, "A Spark application that stays up"). Spark's
own Connect server (``org.apache.spark.sql.connect.service.SparkConnectServer``
from the pyspark wheel's jars, started with the wheel's ``bin/spark-submit``)
stays up instead; each run is a thin client (``SPARK_REMOTE``) with a session of
its pipeline's on the server and pays none of the JVM's start after the server's
first window. (Python workers stay up for windows less than a minute apart;
see ``spark.pyspark_daemon`` for their daemon's end.)

Exactly-once does not depend on the route: the publishing tasks run on the
server's executors exactly as under spark-submit, one transactional id per input
partition, so a retried or duplicate run (another client, another server) fences
what an earlier attempt left open. A client that dies leaves its tasks running
until they finish or a new attempt fences them, as a killed spark-submit driver
would not: either way nothing is visible without its offsets.

Security: the server listens on loopback only (``spark.connect.grpc.binding.address``)
unless a host is configured, and requires a pre-shared token from every client.
The token is made at the first start, kept in ``<home>/token`` (mode 0600) and
handed to the server and to clients in their environment
(``SPARK_CONNECT_AUTHENTICATE_TOKEN``, the variable Spark reads on both sides),
never on a command line. The Spark UI stays off, as for every session here.

Layout under ``home`` (default ``var/spark-connect``): ``server.json`` (port,
master, start time), ``server.pid``, ``token``, ``logs/server.out`` (Spark logs to the
console: warnings, the server's own start line and the publishing tasks' log lines;
kept as ``server.out.1`` at a start once it passed 10 MB), ``local/`` (Spark's
scratch space), ``conf/log4j2.properties`` (its log configuration, given by a JVM
option: Spark reads no configuration directory here, so no stray spark-defaults.conf
either). The server imports this package from the directory it was started from,
once; it records a hash of the sources it started with (``spark.eos_etl.sourceDigest``)
and a client whose code differs refuses to run on it (one error: restart the
server, ``python -m eos_etl spark-connect restart``).

Usage::

    server = SparkConnectServer.local().start()   # idempotent; waits until it accepts clients
    os.environ.update(server.client_env())        # SPARK_REMOTE + the token, for this process's children
    server.stop()
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from .. import paths
from ..arguments import switch_on
from ..errors import StackError
from ..host.ports import free_port, port_accepts, port_is_free, require_free_port
from ..host.process import PidFile
from ..spark.config import (
    CONNECT_DEFAULT_PORT,
    DEFAULT_MASTER,
    MASTER_ENV,
    REMOTE_ENV,
    SOURCE_DIGEST_CONF,
    TOKEN_ENV,
    connector_jars,
    spark_conf,
    spark_home,
)
from ..spark.connect_probe import PROBE_TIMEOUT_S, STALL_BOUND_S, probe, wait_answering
from ..spark.package_zip import package_dir, source_digest
from ..spark.pyspark_daemon import IDLE_EXIT_ENV as DAEMON_IDLE_EXIT_ENV
from . import connect_server_state as state
from .spark_cluster import STOP_TIMEOUT_S

log = logging.getLogger(__name__)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = CONNECT_DEFAULT_PORT
PORT_ENV = "EOS_ETL_SPARK_CONNECT_PORT"
DRIVER_HOST_ENV = "EOS_ETL_SPARK_CONNECT_DRIVER_HOST"  # the driver's address for executors elsewhere
# How long a session's Python worker daemon stays up without a worker (spark.pyspark_daemon): longer
# than the default schedule's hour, so an hourly window finds its session's daemon up and pays only
# its workers' fork. Spark stops the workers themselves after a minute idle. One daemon (~45 MB) per
# session that ran in the last hour: the pipeline's windows share a session a day.
DAEMON_IDLE_EXIT_S = 3900
MEMORY_ENV = "EOS_ETL_SPARK_CONNECT_MEMORY"  # the server JVM's heap (driver and local executors)
DEFAULT_MEMORY = "1g"
#: The executors' pool of Kafka consumers (``spark.kafka.consumer.cache.capacity``), per GB of the server's
#: heap. Spark's consumer is one per topic partition, and each keeps its topic's whole metadata while idle:
#: about 0.8 KB per partition of the topic (1,024 pooled consumers of a 1,024-partition topic: 843 MB of
#: live heap after a full GC, 1,048,576 PartitionInfo), so the pool's weight grows with the square of the
#: partitions; 1,700 of them (left by windows of 4 to 1,024 partitions) ran a 1 GB server out of heap
#: mid-window. 256 keeps every consumer of a window of up to 256 partitions; a wider window reads with the
#: oldest idle ones cleared as it borrows (a 1,024-partition window of one record each: 10 s to read, 3 s
#: with every consumer pooled; docs/design-writer-slots.md).
KAFKA_CONSUMERS_PER_HEAP_GB = 256


def kafka_consumer_pool(memory: str) -> int:
    """The consumer pool's capacity for a JVM heap given as Spark writes it (``1g``, ``1536m``)."""
    units = {"k": 1 / (1024 * 1024), "m": 1 / 1024, "g": 1, "t": 1024}
    text = memory.strip().lower().removesuffix("b")
    gb = float(text[:-1]) * units[text[-1]] if text[-1:] in units else float(text) / 1024 ** 3
    return max(64, int(gb * KAFKA_CONSUMERS_PER_HEAP_GB))  # 64: Spark's own default
# A cold JVM with the connector jars starts in 10-20 s on a busy 2-core machine.
READY_TIMEOUT_S = 120.0
_STARTED_MARKER = "Spark Connect server started at"
LOG_ROTATE_BYTES = 10 * 1024 * 1024  # server.out is moved to server.out.1 at a start once it is this big
# Spark's default is INFO for everything: ~30 KB of configuration dumps per window, for the server's life.
# Warnings only, but the line the start waits for.
_LOG4J2 = f"""\
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.server.name = {SERVER_CLASS}
logger.server.level = info
"""
# An operation no client is attached to any more (its client was killed) is cancelled, with its
# jobs, after this: Spark's default is 5 minutes, checked every 30 s, and until then a retry's
# tasks queue behind the orphan's. A living client is attached all along (it reattaches at once).
DETACHED_TIMEOUT = "15s"
MAINTENANCE_INTERVAL = "5s"
# The server notices a vanished client only when the response stream it serves ends: it never
# looks for a cancelled call, so a stream waiting for a long job's result lasts its full duration
# (Spark's default 2 minutes) before the operation even counts as detached. A living client
# reattaches at the end of each stream: one small request per this interval per running window.
SENDER_MAX_STREAM_DURATION = "10s"
# A session unused this long goes (Spark's default: 60 minutes). The windows of one pipeline share a
# session per day (spark.connect_client): it must outlive a day of windows at any schedule.
SESSION_TIMEOUT = "25h"
# Spark 4.1 makes a Python worker factory (and an "Idle Worker Monitor" thread) per client session
# and never frees it (SPARK-54055). The pipeline's windows share a session per day, so one leaks a
# day per pipeline; a server holding more than this many is restarted between windows.
MAX_IDLE_WORKER_MONITORS = 16
# Redaction of the Kafka login in what the server shows and logs (plans, event logs, the UI): Spark
# redacts option and configuration values whose key matches; a JAAS string holds the password.
REDACTION = {
    "spark.redaction.regex": "(?i)secret|password|token|access[.]?key|jaas",
    "spark.sql.redaction.options.regex": "(?i)url|jaas|password|secret|token",
    "spark.sql.redaction.string.regex": "(?i)password\\s*=\\s*\"[^\"]*\"",
}
# The server's event log (Spark's own listener, JSON lines): how each window's task attempts ended,
# which a client cannot ask the server's status store for (about 100 KB per small window). Rolled at
# this size (Spark's least); between windows the supervisor keeps the newest files only.
EVENT_LOG_ROLL = "2m"
EVENT_LOG_KEEP = 2
# `make up` and the demo run the DAGs' windows on the project's server unless this is "off".
SWITCH_ENV = "EOS_ETL_SPARK_CONNECT"


@dataclass
class SparkConnectServer:
    """One Spark Connect server (a spark-submit JVM) with its home directory."""

    home: Path
    port: int | None = None  # None: the stored one, else a free port chosen at the first start
    master: str | None = None  # None: $EOS_ETL_SPARK_MASTER, else local[*,4] (spark.config)
    host: str = "127.0.0.1"  # where clients reach it (gRPC)
    # Where executors reach its driver: loopback serves local mode and the local standalone cluster;
    # executors on other machines need an address of this machine they can reach.
    driver_host: str | None = None
    # Seconds a session's Python worker daemon stays up without a worker; None: $EOS_ETL_PYTHON_DAEMON_IDLE_EXIT_S,
    # else DAEMON_IDLE_EXIT_S.
    daemon_idle_exit_s: float | None = None

    def __post_init__(self) -> None:
        self.home = Path(self.home).absolute()

    @classmethod
    def local(cls, master: str | None = None) -> "SparkConnectServer":
        """The project's own server: var/spark-connect on $EOS_ETL_SPARK_CONNECT_PORT (15002)."""
        return cls(home=paths.var_dir() / "spark-connect", port=int(os.environ.get(PORT_ENV, DEFAULT_PORT)),
                   master=master, driver_host=os.environ.get(DRIVER_HOST_ENV) or None)

    @classmethod
    def at(cls, home: Path) -> "SparkConnectServer":
        """The server whose home is ``home``, on the port and master it was started with."""
        server = cls(home=home)
        state = server._state()
        server.port, server.master = state.get("port"), state.get("master") or None
        return server

    def airflow_connection(self) -> dict:
        """The provider's ``spark_connect`` connection to this server (the token as password)."""
        return {"conn_type": "spark_connect", "host": "localhost", "port": self.bound_port, "password": self.token()}

    # -- files -------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.home / "server.json"

    @property
    def token_file(self) -> Path:
        return self.home / "token"

    @property
    def log4j_file(self) -> Path:
        return self.home / "conf" / "log4j2.properties"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "server.out"

    @property
    def event_log_dir(self) -> Path:
        return self.home / "events"

    def _state(self) -> dict:
        return json.loads(self.state_file.read_text()) if self.state_file.is_file() else {}

    def token(self) -> str:
        """The pre-shared token (made at the first start, readable by this user only)."""
        if not self.token_file.is_file():
            self.home.mkdir(parents=True, exist_ok=True)
            # Written whole under a private name, then linked into place: two first starts at once both
            # end up with the one token that won, and nobody ever reads a half-written file.
            draft = self.home / f".token.{os.getpid()}"
            fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(32))
            try:
                os.link(draft, self.token_file)
            except FileExistsError:
                pass
            finally:
                draft.unlink()
        return self.token_file.read_text().strip()

    # -- state -------------------------------------------------------------------------
    @property
    def pid_file(self) -> Path:
        return self.home / "server.pid"

    def pid(self) -> int | None:
        """The server JVM's pid while it runs (paused included); never another process's that got the number."""
        return PidFile(self.pid_file).pid()

    def is_running(self) -> bool:
        return self.pid() is not None

    @property
    def bound_port(self) -> int:
        port = self._state().get("port") or self.port
        if not port:
            raise StackError(f"the Spark Connect server in {self.home} was never started")
        return port

    @property
    def url(self) -> str:
        """The clients' ``sc://`` address. ``localhost``, not an IP: pyspark sends the token over a
        plain local channel only to ``localhost`` (any other host needs TLS)."""
        host = "localhost" if self.host in ("127.0.0.1", "localhost", "::1") else self.host
        return f"sc://{host}:{self.bound_port}"

    def client_env(self) -> dict[str, str]:
        """What a client process needs in its environment (the token is a secret: never log this)."""
        return {REMOTE_ENV: self.url, TOKEN_ENV: self.token()}

    # -- lifecycle ---------------------------------------------------------------------
    def command(self) -> list[str]:
        """spark-submit of Spark's Connect server, with the settings of every session here."""
        master = self.master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER
        conf = spark_conf(master=master)
        conf.pop("spark.jars", None)  # --jars below: spark-submit puts them on the driver's class path too
        # A long-lived JVM's heap grows to its maximum over its life, whatever one window needs: the
        # maximum is what the server costs. Windows stream through it (bounded Arrow batches per task).
        # The heap starts at that size (-Xms): G1 otherwise starts small and widens its young generation
        # window after window, so the server's RSS rose with its age (835 -> 1,074 MB over seven windows,
        # 100,000-purchase windows after 1,000,000-purchase ones included) and measured as growth with the
        # window; sized once, its footprint is what it will be from the first windows on.
        memory = os.environ.get(MEMORY_ENV, DEFAULT_MEMORY)
        conf["spark.driver.memory"] = memory
        conf["spark.driver.extraJavaOptions"] += f" -Xms{memory} -Dlog4j2.configurationFile={self.log4j_file}"
        # Python workers are reused (Spark's default), within a window and across windows less than a
        # minute apart: Spark 4.1 keeps a pool per client session and stops a worker idle for 60 s.
        # The pipeline's windows share one session a day (spark.connect_client), so that is one pool of
        # at most a window's concurrent tasks, not one per window. A fresh worker per task cost a fork,
        # its start-up and a gap before the next wave: 2.69 vs 1.76 s for a 10,000-purchase window
        # (docs/performance-history.md, "Python workers kept for the next task").
        conf["spark.python.worker.reuse"] = "true"
        # Windows take their Kafka consumers from the executors' pool (engine.tasks.connect_route.pooled_reader_group):
        # a consumer per input partition, kept until idle for Spark's 5 minutes; past this count Spark drops
        # the oldest idle ones on every new borrow (its default, 64, is less than one window of 128 partitions).
        conf["spark.kafka.consumer.cache.capacity"] = str(kafka_consumer_pool(memory))
        conf.update(REDACTION)
        conf.update({
            "spark.connect.execute.manager.detachedTimeout": DETACHED_TIMEOUT,
            "spark.connect.execute.manager.maintenanceInterval": MAINTENANCE_INTERVAL,
            "spark.connect.execute.reattachable.senderMaxStreamDuration": SENDER_MAX_STREAM_DURATION,
            "spark.connect.session.manager.defaultSessionTimeout": SESSION_TIMEOUT,
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": self.event_log_dir.as_uri(),
            "spark.eventLog.rolling.enabled": "true",
            "spark.eventLog.rolling.maxFileSize": EVENT_LOG_ROLL,
            "spark.eventLog.compress": "false",
        })
        if self.driver_host:
            conf.update({"spark.driver.host": self.driver_host, "spark.driver.bindAddress": self.driver_host})
        conf.update({
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(self.bound_port),
            SOURCE_DIGEST_CONF: source_digest(),  # what clients compare their own code with
        })
        args = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS,
                "--name", "eos-etl Spark Connect server", "--master", master,
                "--jars", ",".join(connector_jars())]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return [*args, "spark-internal"]

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        env.update({
            "SPARK_HOME": str(spark_home()),
            # No SPARK_CONF_DIR: the wheel's (absent) one, as when the class-data archive was trained.
            # HotSpot maps that archive only for the class path it was made with, whose first entry
            # is the configuration directory; SPARK_* is not inherited, so no stray spark-defaults.conf.
            "SPARK_LOCAL_DIRS": str(self.home / "local"),
            "SPARK_LOCAL_IP": self.driver_host or self.host,
            # The server's Python workers run the publishing tasks: this package, this interpreter.
            "PYTHONPATH": str(package_dir().parent),
            "PYSPARK_PYTHON": sys.executable,
            # Spark 4.1 starts a Python worker daemon per client session and keeps it until the application
            # ends (SPARK-54055, fixed after 4.1): one more idle daemon (~45 MB) per session on a long-lived
            # server. The project's daemon (spark.pyspark_daemon) exits once it has had no worker this long
            # (Spark stops workers idle for a minute); Spark starts a new one if that session needs it again.
            DAEMON_IDLE_EXIT_ENV: str(self.daemon_idle_exit_s or os.environ.get(DAEMON_IDLE_EXIT_ENV)
                                      or DAEMON_IDLE_EXIT_S),
            TOKEN_ENV: self.token(),
        })
        return env

    def start(self, timeout: float = READY_TIMEOUT_S) -> "SparkConnectServer":
        """Start the server unless it runs already (on the same master); wait until it accepts clients."""
        if self.is_running():
            if self._state().get("master", "") == (self.master or ""):
                self._wait_ready(timeout)
                return self
            log.warning("the Spark Connect server runs on another master; restarting it on %s",
                        self.master or "the default")
            self.stop()
        port = self._state().get("port") or self.port or free_port(self.host)
        # A server of this home that was just killed is gone as a process a moment before the kernel
        # has closed its listening socket (its threads still exit): give the port that moment.
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while not port_is_free(port, self.host) and time.monotonic() < deadline:
            time.sleep(0.2)
        require_free_port(port, "the Spark Connect server", self.host)
        for sub in ("logs", "local", "conf", "events"):
            (self.home / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        self.log4j_file.write_text(_LOG4J2)
        self.rotate_log()
        self._write_state({"port": port})
        offset = self.log_file.stat().st_size if self.log_file.is_file() else 0
        with open(self.log_file, "ab") as out:
            # spark-submit execs the JVM, so this pid is the server's own; its own session outlives the CLI.
            proc = subprocess.Popen(self.command(), env=self._env(), cwd=self.home, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        PidFile(self.pid_file).record(proc.pid)
        self._write_state({"port": port, "master": self.master or "",
                           "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "health_session": str(uuid.uuid4())})
        log.info("Spark Connect server starting (pid %d) on %s:%d, log %s", proc.pid, self.host, port, self.log_file)
        self._wait_ready(timeout, log_offset=offset)
        return self

    def exec_in_foreground(self) -> NoReturn:
        """Become the server: this process is replaced by the server's JVM, which logs to this
        process's stderr. For a container's main process, supervised by the container's restart
        policy (``python -m eos_etl spark-connect run``); :meth:`start` is for a machine.

        A token in ``$SPARK_CONNECT_AUTHENTICATE_TOKEN`` (the container's secret) becomes the
        server's token file, replacing any earlier one; without it the token file's (made at the
        first start) is used, as :meth:`start` does."""
        if given := os.environ.get(TOKEN_ENV, "").strip():
            self._store_token(given)
        port = self._state().get("port") or self.port or DEFAULT_PORT
        for sub in ("local", "conf", "events"):
            (self.home / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        self.log4j_file.write_text(_LOG4J2)
        self.prune_event_log()
        self._write_state({"port": port, "master": self.master or "",
                           "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "health_session": str(uuid.uuid4())})
        command, env = self.command(), self._env()
        PidFile(self.pid_file).record(os.getpid())  # spark-submit and spark-class exec: the JVM keeps this pid
        log.info("Spark Connect server in the foreground on %s:%d", self.host, port)
        os.chdir(self.home)
        os.execve(command[0], command, env)

    def _store_token(self, token: str) -> None:
        """Replace the token file with ``token`` (written whole under a private name, then renamed)."""
        self.home.mkdir(parents=True, exist_ok=True)
        draft = self.home / f".token.{os.getpid()}"
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token)
        draft.replace(self.token_file)

    def _wait_ready(self, timeout: float, log_offset: int | None = None) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if not self.is_running():
                raise StackError(f"the Spark Connect server exited while starting; last lines of "
                                 f"{self.log_file}:\n{self.tail_log()}")
            started = log_offset is None or _STARTED_MARKER in self.log_since(log_offset)
            if started and port_accepts(self.bound_port, self.host):
                return
            if time.monotonic() > deadline:
                raise StackError(f"the Spark Connect server did not accept clients within {timeout:.0f}s; "
                                 f"last lines of {self.log_file}:\n{self.tail_log()}")
            time.sleep(0.2)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (Spark stops its application and Python workers; a paused server is continued
        first); SIGKILL after ``timeout``."""
        port = self._state().get("port")
        pid = PidFile(self.pid_file).end("the Spark Connect server", timeout=timeout,
                                         ports=(port,) if port else (), host=self.host)
        if pid is not None:
            log.info("Spark Connect server (pid %d) stopped", pid)

    # -- supervision -------------------------------------------------------------------
    def health(self, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
        """None when the server answers a trivial request within ``timeout_s``; else why not.

        Asked in a session of its own, the same one every time (no session piles up on the
        server), on a connection of its own."""
        return probe(self.probe_url(), timeout_s)

    def probe_url(self) -> str:
        """The server's address with its token and the one session every probe of a supervisor uses
        (no session piles up on the server). Carries the token: never logged."""
        session = self._state().get("health_session") or str(uuid.uuid4())
        return f"{self.url}/;token={self.token()};session_id={session}"

    def ensure_running(self, stall_bound_s: float = STALL_BOUND_S) -> "SparkConnectServer":
        """Make sure the server is up and answering before a window: start it when it is not
        running; restart it when it has answered no probe for ``stall_bound_s`` (stuck, or paused);
        between windows, rotate its log and restart a server whose per-session threads piled up.
        One supervisor at a time (a lock in the home); same port, token and master."""
        with self._lock("supervisor.lock", fcntl.LOCK_EX):
            self.rotate_log()
            if self._no_window_in_flight():  # a window reads the event log files it started in
                self.prune_event_log()
            if not self.is_running():
                log.warning("the Spark Connect server (%s) is not running; starting it", self.home)
                return self.start()
            if self.context_stopped():  # it answers probes, and fails every window: "a stopped SparkContext"
                log.warning("the Spark Connect server (pid %s) runs without its Spark application (it ended); "
                            "restarting it", self.pid())
                self.stop(timeout=10.0)
                return self.start()
            reason = wait_answering(self.probe_url(), stall_bound_s)
            if reason is not None:
                log.warning("the Spark Connect server (pid %s) answered no probe for %.0fs (%s); restarting it",
                            self.pid(), stall_bound_s, reason)
                self.stop(timeout=10.0)
                return self.start()
            monitors = self.idle_worker_monitors()
            if monitors > MAX_IDLE_WORKER_MONITORS and self._no_window_in_flight():
                log.warning("the Spark Connect server holds %d per-session Python worker monitors; restarting it "
                            "between windows", monitors)
                self.stop()
                return self.start()
        return self

    @contextlib.contextmanager
    def window(self) -> Iterator[None]:
        """Held (shared) by every window the project runs on this server: a restart for
        housekeeping waits for no window, it only happens when none holds it."""
        with self._lock("windows.lock", fcntl.LOCK_SH):
            yield

    def _no_window_in_flight(self) -> bool:
        try:
            with self._lock("windows.lock", fcntl.LOCK_EX | fcntl.LOCK_NB):
                return True
        except BlockingIOError:
            return False

    @contextlib.contextmanager
    def _lock(self, name: str, mode: int) -> Iterator[None]:
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / name, "a") as f:
            fcntl.flock(f, mode)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def python_workers(self) -> int:
        """The Python workers the server's executors hold now, running a task or kept idle for the next
        one (:func:`.connect_server_state.python_workers`); 0 when it is not running."""
        return state.python_workers(self.pid())

    def idle_worker_monitors(self) -> int:
        """Threads of the server JVM that watch a Python worker factory (one per factory)."""
        return state.idle_worker_monitors(self.pid())

    def context_stopped(self) -> bool:
        """The server's JVM runs but its Spark application ended (:func:`.connect_server_state.context_stopped`)."""
        return self.is_running() and state.context_stopped(self.event_log_dir)

    def prune_event_log(self) -> None:
        state.prune_event_log(self.event_log_dir, EVENT_LOG_KEEP)

    def rotate_log(self) -> None:
        state.rotate_log(self.log_file, LOG_ROTATE_BYTES)

    def describe(self) -> str:
        state = self._state()
        if not self.is_running():
            return f"Spark Connect server ({self.home}): not running"
        return (f"Spark Connect server ({self.home}): running, pid {self.pid()}, {self.url}, "
                f"master {state.get('master') or 'default'}, started {state.get('started_at')}")

    # -- files -------------------------------------------------------------------------
    def _write_state(self, state: dict) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self.state_file)

    def log_since(self, offset: int) -> str:
        """What the server logged from byte ``offset`` of :attr:`log_file` on (a size read earlier, before
        a run started: what it logged since); "" while there is no log file."""
        return state.read_from(self.log_file, offset)

    def tail_log(self, lines: int = 25) -> str:
        return "\n".join(self.log_since(0).splitlines()[-lines:]) or "(empty)"

def start_for_windows(master: str | None = None) -> SparkConnectServer | None:
    """The project's server (:meth:`SparkConnectServer.local`), started, for the DAGs' windows
    (``make up``, the demo); None with ``EOS_ETL_SPARK_CONNECT=off``: a spark-submit per window then."""
    if not switch_on(SWITCH_ENV):
        return None
    server = SparkConnectServer.local(master)
    if server.is_running() and server._state().get("master", "") != (master or ""):
        server.start()  # restarts it on this master
    server.ensure_running()
    print(server.describe(), flush=True)
    return server

