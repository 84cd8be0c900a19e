"""A local Airflow 3 for development: the components ``airflow standalone`` runs, on SQLite, supervised.

Everything lives in one project-local ``AIRFLOW_HOME`` (``var/airflow`` by
default), never in ``~/airflow``: ``airflow.cfg`` (written by Airflow on first
use, with its generated fernet/JWT keys), ``airflow.db`` (SQLite),
``simple_auth_manager_passwords.json`` (the login, mode 0600),
``supervisord.conf`` and ``airflow.pid`` (supervisord's), and ``logs/``: one log
per component (``scheduler.log``, ``api-server.log``, ...), ``supervisord.log``
(every start and exit of a component) and the task logs.

It is what ``airflow standalone`` is (the same database set-up, LocalExecutor,
the Simple auth manager, the same four components) with one difference that
matters: the scheduler, DAG processor, triggerer and API server (which also
serves the UI) run under supervisord (:mod:`.airflow_supervisor`), which
restarts whichever dies, at once. ``standalone`` restarts nothing: a dead
scheduler stops every schedule while the UI still answers. supervisord runs in
its own session, so it outlives the CLI that started it and
:meth:`EmbeddedAirflow.stop` finds every process it ever started.

Login uses Airflow 3's default Simple auth manager: ``[core]
simple_auth_manager_users`` declares the user (``admin`` with role ``admin``)
and ``[core] simple_auth_manager_passwords_file`` points to a JSON file
``{"admin": "<password>"}`` that we write before the start, so Airflow never
generates (and prints) a random password. There is no default password:
``EOS_ETL_AIRFLOW_PASSWORD`` when set, else the one already in that file, else
a random one made on the first start and kept there (``make demo`` and
``python -m eos_etl status`` say where, never the password itself).

The API server listens on loopback only (``host``). The scheduler and the
triggerer also serve task logs on ``worker_log_server_port`` (8793) and
``trigger_log_server_port`` (8794), on all interfaces: a second Airflow on the
same machine needs other ports there too. ``parallelism`` (4) bounds the
LocalExecutor, which forks that many workers up front.

Usage::

    af = EmbeddedAirflow.local()          # var/airflow, port 8080
    af.start()                            # init DB, start, wait until healthy
    print(af.describe())                  # URL, login, logs
    print(af.status().describe())         # each component: running since, last death
    af.airflow_cmd("dags", "list")        # any CLI command, same config
    af.rest.call("GET", "/api/v2/dags", token=af.rest.token())  # its REST API (airflow_rest.py)
    af.stop()
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import xmlrpc.client
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths
from ..errors import StackError
from ..host.errors import PortInUseError
from ..host.ports import port_accepts, require_free_port
from ..host.process import PidFile, session_members
from ..host.tools import require_tool
from ..spark.connect_client import AIRFLOW_CONN_ID, AIRFLOW_ROUTE_ENV
from ..spark.connect_client import HOME_ENV as CONNECT_HOME_ENV
from .airflow_rest import AirflowRestClient
from .airflow_sqlite import LOCAL_SETTINGS
from .airflow_supervisor import (
    AFTER_API,
    API_SERVER,
    PROGRAMS,
    Component,
    Exit,
    SupervisorControl,
    config_text,
    exits,
    socket_path,
)

log = logging.getLogger(__name__)

DEFAULT_PORT = 8080
DEFAULT_USER = "admin"
# The database set-up, then four Python processes. Measured on 2 cores with warm
# bytecode caches: 10-15 s until every component heartbeats. The margin covers
# cold caches, slow disks and busy CI machines.
READY_TIMEOUT_S = 240.0
# supervisord gives each component STOP_WAIT_S after SIGTERM, in turn; this bounds the whole stop.
STOP_TIMEOUT_S = 150.0
# The components that heartbeat; ready means all of them do (the API server answers the check itself).
COMPONENTS = ("scheduler", "dag_processor", "triggerer")
# How often the scheduler looks for task instances a dead scheduler had queued or started (Airflow's
# default 300 s). With it, a run that was due when the scheduler died runs within DUE_RUN_BOUND_S of its
# restart: the dead one's heartbeat must age 30 s ([scheduler] scheduler_health_check_threshold) and the
# next check comes within this interval.
ORPHANED_TASKS_CHECK_INTERVAL_S = 30
DUE_RUN_BOUND_S = 120
SQLITE_BUSY_TIMEOUT_S = 30

_SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
# Lines in the API server's log that mean it could not bind its port.
_PORT_TAKEN_MARKERS = ("address already in use", "[errno 98]")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class AirflowStartError(StackError):
    """The embedded Airflow exited or did not become healthy in time."""


@dataclass
class AirflowStatus:
    running: bool
    pid: int | None  # supervisord's
    url: str
    # Component -> "healthy"/"unhealthy"/None, from the health endpoint;
    # empty when the API server does not answer.
    health: dict[str, str | None]
    home: str
    log_file: str
    # Each component's state now, from supervisord; empty when it does not answer.
    components: list[Component] = field(default_factory=list)
    # The last exit of each component that died since supervisord started it (which, when, how).
    deaths: dict[str, Exit] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        return self.running and all(self.health.get(c) == "healthy" for c in ("metadatabase", *COMPONENTS)) \
            and all(c.running for c in self.components)

    def describe(self) -> str:
        state = f"running (supervisord pid {self.pid})" if self.running else "stopped"
        lines = [f"Airflow: {state}", f"  url: {self.url}"]
        if self.running:
            health = ", ".join(f"{k} {v or 'absent'}" for k, v in self.health.items()) or "API not answering"
            lines.append(f"  health: {health}")
            for c in self.components:
                now = f"{c.state.lower()} (pid {c.pid}, up {c.uptime_s:.0f} s)" if c.pid else c.state.lower()
                death = self.deaths.get(c.name)
                if death is not None:
                    now += f"; last died {death.at} ({death.how}), restarted by supervisord"
                lines.append(f"  {c.name}: {now}")
        lines += [f"  home: {self.home}", f"  logs: {self.log_file} and one per component beside it"]
        return "\n".join(lines)


@dataclass
class EmbeddedAirflow:
    home: Path
    port: int = field(default_factory=lambda: int(os.environ.get("EOS_ETL_AIRFLOW_PORT", DEFAULT_PORT)))
    # Interface the API server binds; loopback keeps the dev login off the network.
    host: str = "127.0.0.1"
    username: str = DEFAULT_USER
    # None: $EOS_ETL_AIRFLOW_PASSWORD, else the home's passwords file, else a new random one.
    password: str | None = field(default=None, repr=False)
    dags_folder: Path = field(default_factory=lambda: paths.project_root() / "dags")
    plugins_folder: Path = field(default_factory=lambda: paths.project_root() / "plugins")
    # New DAGs run on their schedule without being unpaused first.
    dags_paused_at_creation: bool = False
    # The LocalExecutor forks this many workers up front (Airflow's default is 32).
    parallelism: int = 4
    # The scheduler and triggerer serve task logs to the UI on these ports, on
    # all interfaces; a second Airflow on the same machine needs other ones.
    worker_log_server_port: int = 8793
    trigger_log_server_port: int = 8794
    # Extra AIRFLOW__SECTION__KEY settings; applied last, so they win.
    overrides: dict[str, str] = field(default_factory=dict)
    # Airflow connections (conn_id -> JSON-able dict) and Variables, given to
    # every component as AIRFLOW_CONN_* / AIRFLOW_VAR_* environment variables.
    connections: dict[str, dict] = field(default_factory=dict, repr=False)
    variables: dict[str, str] = field(default_factory=dict)
    _proc: subprocess.Popen | None = field(default=None, init=False, repr=False, compare=False)
    _log_offsets: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Absolute: the paths go into env vars for processes started elsewhere.
        self.home = Path(self.home).absolute()
        self.dags_folder = Path(self.dags_folder).absolute()
        self.plugins_folder = Path(self.plugins_folder).absolute()
        if self.password is None:
            self.password = os.environ.get("EOS_ETL_AIRFLOW_PASSWORD") or self._stored_password() \
                or secrets.token_urlsafe(18)

    def _stored_password(self) -> str | None:
        try:
            return json.loads(self.passwords_file.read_text()).get(self.username) or None
        except (OSError, ValueError, AttributeError):
            return None

    @classmethod
    def local(cls, *, bootstrap_servers: str | None = None, spark_master: str | None = None,
              spark_connect=None) -> "EmbeddedAirflow":
        """The project's development Airflow: var/airflow, port from EOS_ETL_AIRFLOW_PORT or 8080.

        Its connections point at the embedded broker and local-mode Spark unless
        told otherwise (``demo --cluster`` passes the 3-node Kafka cluster and
        the standalone Spark master). With a running ``spark_connect`` server
        (:class:`.spark_connect.SparkConnectServer`) the DAGs run their windows
        on it (connection ``spark_connect_default``), else a spark-submit each.
        """
        kafka_port = int(os.environ.get("EOS_ETL_KAFKA_PORT", 9092))
        connections = {
            # spark-submit in local mode, 4 attempts per task; point it at
            # spark://host:7077 (or yarn, k8s://...) to run on a cluster.
            "spark_default": {"conn_type": "spark",
                              "host": spark_master or os.environ.get("EOS_ETL_SPARK_MASTER", "local[*,4]")},
            "kafka_purchases": {"conn_type": "generic", "host": bootstrap_servers or f"127.0.0.1:{kafka_port}",
                                "extra": {"security_protocol": "PLAINTEXT"}},
        }
        airflow = cls(home=paths.var_dir() / "airflow", connections=connections)
        if spark_connect is not None:
            airflow.use_spark_connect(spark_connect)
        return airflow

    def use_spark_connect(self, server) -> "EmbeddedAirflow":
        """Run the DAGs' windows (and their validation) on ``server``, a
        :class:`.spark_connect.SparkConnectServer`, instead of a spark-submit each; before it starts."""
        self.connections[AIRFLOW_CONN_ID] = server.airflow_connection()
        self.overrides[AIRFLOW_ROUTE_ENV] = AIRFLOW_CONN_ID
        # The run task makes sure this server runs and answers before each window.
        self.overrides[CONNECT_HOME_ENV] = str(server.home)
        return self

    # -- layout ---------------------------------------------------------------
    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def log_file(self) -> Path:
        """supervisord's log: every start and exit of a component."""
        return self.log_dir / "supervisord.log"

    def component_log(self, program: str) -> Path:
        return self.log_dir / f"{program}.log"

    @property
    def pid_file(self) -> Path:
        return self.home / "airflow.pid"

    @property
    def config_file(self) -> Path:
        return self.home / "supervisord.conf"

    @property
    def db_file(self) -> Path:
        return self.home / "airflow.db"

    @property
    def passwords_file(self) -> Path:
        return self.home / "simple_auth_manager_passwords.json"

    @property
    def connect_host(self) -> str:
        """Where clients on this machine reach the API server."""
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host

    @property
    def url(self) -> str:
        return f"http://{self.connect_host}:{self.port}"

    @property
    def login(self) -> tuple[str, str]:
        """(user, password) for the UI and for POST /auth/token."""
        return self.username, self.password

    # -- configuration --------------------------------------------------------
    def _bin_dir(self) -> Path:
        """The bin/ holding the `airflow` of this interpreter's environment."""
        venv_bin = Path(sys.prefix) / "bin"
        if (venv_bin / "airflow").is_file():
            return venv_bin
        return Path(require_tool("airflow", install_hint="pip install -r requirements.txt")).parent

    def env(self) -> dict[str, str]:
        """The environment to run any ``airflow`` command with.

        The caller's environment is inherited (other ``AIRFLOW__*`` settings
        pass through), but everything that locates state is pinned to
        ``home``, so no ``~/airflow`` or other AIRFLOW_HOME is touched.
        """
        env = dict(os.environ)
        bin_dir = str(self._bin_dir())
        # supervisord runs `airflow <component>` by absolute path; tasks and hooks may find it through PATH.
        env["PATH"] = os.pathsep.join([bin_dir] + [p for p in env.get("PATH", "").split(os.pathsep) if p != bin_dir])
        # Task supervisors call the execution API on loopback; never via a proxy.
        for var in ("NO_PROXY", "no_proxy"):
            hosts = [h for h in env.get(var, "").split(",") if h]
            env[var] = ",".join(hosts + [h for h in (*_LOOPBACK, self.connect_host) if h not in hosts])
        env.update(
            {
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW_CONFIG": str(self.home / "airflow.cfg"),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__CORE__PLUGINS_FOLDER": str(self.plugins_folder),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": str(self.dags_paused_at_creation),
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__AUTH_MANAGER": _SIMPLE_AUTH_MANAGER,
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{self.username}:admin",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.passwords_file),
                # Task supervisors talk to the API server; the default assumes port 8080.
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
                # SQLite has one writer: a writer waits up to this many seconds for the lock (pysqlite's
                # default is 5) before "database is locked". A refusal that comes at once (a read upgraded
                # to a write after another writer committed) still happens; airflow_sqlite makes it harmless.
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.db_file}?timeout={SQLITE_BUSY_TIMEOUT_S}",
                "AIRFLOW__API__HOST": self.host,
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.home / "logs"),
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.worker_log_server_port),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(self.trigger_log_server_port),
                # The OpenLineage listener emits from a forked child it kills after this many seconds
                # (default 10): on a busy worker that silently drops a window's lineage.
                "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "60",
                # A restarted scheduler takes over what a dead one queued within this (see DUE_RUN_BOUND_S).
                "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": str(ORPHANED_TASKS_CHECK_INTERVAL_S),
                # spark-submit's driver (and a local-mode executor) listens on loopback only, like Airflow here.
                "SPARK_LOCAL_IP": "127.0.0.1",
            }
        )
        for conn_id, conn in self.connections.items():
            env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
        for key, value in self.variables.items():
            env[f"AIRFLOW_VAR_{key.upper()}"] = value
        env.update(self.overrides)
        return env

    def _write_passwords_file(self) -> None:
        # Rewritten on every start so a changed EOS_ETL_AIRFLOW_PASSWORD takes effect.
        self.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.passwords_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({self.username: self.password}, f)
            f.write("\n")
        os.chmod(self.passwords_file, 0o600)

    @property
    def local_settings_file(self) -> Path:
        return self.home / "config" / "airflow_local_settings.py"

    def prepare_home(self) -> None:
        """What every Airflow process run with :meth:`env` needs in the home before it starts."""
        if not self.passwords_file.is_file():
            # Else a command that initialises the auth manager generates a random one.
            self._write_passwords_file()
        # Savepoints inside real SQLite transactions: a refused backfill rolls back whole (:mod:`.airflow_sqlite`).
        self.local_settings_file.parent.mkdir(parents=True, exist_ok=True)
        if not self.local_settings_file.is_file() or self.local_settings_file.read_text() != LOCAL_SETTINGS:
            self.local_settings_file.write_text(LOCAL_SETTINGS)

    def airflow_cmd(self, *args: str, check: bool = False, timeout: float | None = None) -> subprocess.CompletedProcess:
        """Run ``airflow *args`` with :meth:`env`; output is captured as text."""
        self.prepare_home()
        proc = subprocess.run(
            [str(self._bin_dir() / "airflow"), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise StackError(
                f"`airflow {' '.join(args)}` failed with exit code {proc.returncode}:\n"
                f"{_tail(proc.stdout + proc.stderr, 25)}"
            )
        return proc

    # -- process --------------------------------------------------------------
    def _recorded_pid(self) -> int | None:
        recorded = PidFile(self.pid_file).recorded()
        return recorded[0] if recorded is not None else None

    def pid(self) -> int | None:
        """Pid of supervisord if it is alive (and the same process: its start time)."""
        self._reap()
        return PidFile(self.pid_file).pid()

    def is_running(self) -> bool:
        return self.pid() is not None

    @property
    def socket(self) -> Path:
        return socket_path(self.home)

    def control(self) -> SupervisorControl:
        """supervisord's control socket (:mod:`.airflow_supervisor`)."""
        return SupervisorControl(self.socket)

    @property
    def settings_file(self) -> Path:
        return self.home / "connections.sha256"

    def _settings_digest(self) -> str:
        """A digest (never the values: they hold passwords) of the connections and Variables it runs with."""
        text = json.dumps({"connections": self.connections, "variables": self.variables}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def start(self, timeout: float = READY_TIMEOUT_S) -> "EmbeddedAirflow":
        """Start the components under supervisord (idempotent) and wait until every one is healthy.

        Connections are environment variables fixed when Airflow starts: one
        running with other connections (say the single broker, when the cluster
        demo wants the cluster) is restarted with these.
        """
        if self.is_running():
            stored = self.settings_file.read_text().strip() if self.settings_file.is_file() else None
            if stored == self._settings_digest():
                self._log_offsets["supervisord"] = _size(self.log_file)
                self._start_after_api(time.monotonic() + timeout)
                self.wait_ready(timeout)
                return self
            log.warning("Airflow runs with other connections; restarting it with the requested ones")
            self.stop()
        require_free_port(self.port, "the Airflow API server", host=self.host)
        # The log servers bind every interface, so check the wildcard address.
        require_free_port(self.worker_log_server_port, "the Airflow scheduler's log server", host="0.0.0.0")
        require_free_port(self.trigger_log_server_port, "the Airflow triggerer's log server", host="0.0.0.0")
        if not self.dags_folder.is_dir():
            raise StackError(f"the DAGs folder {self.dags_folder} does not exist")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._write_passwords_file()
        self.prepare_home()
        fd = os.open(self.settings_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self._settings_digest() + "\n")
        started = time.monotonic()
        deadline = started + timeout
        self._init_database(timeout)
        env = self.env()
        env["NO_COLOR"] = "1"  # the logs are files, not terminals
        env["PYTHONUNBUFFERED"] = "1"
        self.config_file.write_text(config_text(home=self.home, log_dir=self.log_dir,
                                                airflow=self._bin_dir() / "airflow", python=Path(sys.executable),
                                                socket=self.socket))
        self.config_file.chmod(0o600)
        self._log_offsets["supervisord"] = _size(self.log_file)
        for program in PROGRAMS:
            # Each start reads its own component's log from here on (port errors, start-up failures).
            self._log_offsets[program] = _size(self.component_log(program))
        with open(self.log_dir / "supervisord.out", "ab") as out:
            self._proc = subprocess.Popen(
                [str(self._bin_dir() / "supervisord"), "--nodaemon", "--configuration", str(self.config_file)],
                env=env,
                cwd=self.home,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # outlives the CLI; stop() finds every process of the session
            )
        PidFile(self.pid_file).record(self._proc.pid)
        log.info("Airflow starting under supervisord (pid %d) on %s, home %s, logs in %s",
                 self._proc.pid, self.url, self.home, self.log_dir)
        try:
            self._start_after_api(deadline)
            self.wait_ready(max(1.0, deadline - time.monotonic()))
        except AirflowStartError:
            self.stop()  # leave no half-started components behind; the logs stay
            raise
        log.info("Airflow is ready on %s after %.0f s", self.url, time.monotonic() - started)
        return self

    def _init_database(self, timeout: float) -> None:
        """Create or migrate the database, as ``airflow standalone`` does before its components start."""
        try:
            proc = subprocess.run(
                [sys.executable, "-c", "from airflow.utils.db import initdb; initdb()"],
                env=self.env(), cwd=self.home, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise AirflowStartError(f"Airflow's database set-up in {self.db_file} did not finish within "
                                    f"{timeout:.0f}s") from None
        if proc.returncode != 0:
            raise AirflowStartError(f"Airflow exited during start-up: its database set-up failed with exit code "
                                    f"{proc.returncode}:\n{_tail(proc.stdout + proc.stderr, 25)}")

    def _start_after_api(self, deadline: float) -> None:
        """Wait until the API server answers, then start the other components (a no-op for running ones)."""
        while not port_accepts(self.port, self.connect_host):
            self._check_alive()
            if time.monotonic() > deadline:
                raise AirflowStartError(f"the Airflow API server did not answer on {self.url} in time; "
                                        f"see {self.component_log(API_SERVER)}:\n{self.tail_log(API_SERVER)}")
            time.sleep(0.5)
        control = self.control()
        for program in AFTER_API:
            control.start(program)

    def _check_alive(self) -> None:
        """Raise if supervisord exited or a component died while starting (a crash loop is no start)."""
        if not self.is_running():
            raise AirflowStartError(
                f"Airflow exited during start-up (supervisord); last lines of {self.log_file}:\n"
                f"{self.tail_log()}\n{_tail(_read(self.log_dir / 'supervisord.out'), 10)}"
            )
        self._check_port_error()
        died = [e for e in exits(self.log_file, self._log_offsets.get("supervisord", 0)) if not e.expected]
        if died:
            raise AirflowStartError(
                f"Airflow exited during start-up: {died[0].program} died ({died[0].how}) at {died[0].at}; "
                f"last lines of {self.component_log(died[0].program)}:\n{self.tail_log(died[0].program)}"
            )

    @property
    def rest(self) -> AirflowRestClient:
        """Its REST API as :attr:`login` (:mod:`.airflow_rest`)."""
        return AirflowRestClient(self.url, self.username, self.password, password_source=str(self.passwords_file),
                                 db_file=self.db_file)

    def health(self, timeout: float = 5.0) -> dict[str, str | None]:
        """Component -> status from the health endpoint; empty if the API does not answer."""
        if not port_accepts(self.port, self.connect_host):
            return {}
        return self.rest.health(timeout)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Wait until the API answers and the metadatabase and all components report healthy."""
        deadline = time.monotonic() + timeout
        health: dict[str, str | None] = {}
        while time.monotonic() < deadline:
            self._check_alive()
            health = self.health()
            # supervisord calls a component started once it stayed up START_SECS.
            if health and all(health.get(c) == "healthy" for c in ("metadatabase", *COMPONENTS)) \
                    and all(c.running for c in self.components()):
                return
            time.sleep(1.0)
        state = ", ".join(f"{k} {v}" for k, v in health.items()) if health else "the API did not answer"
        raise AirflowStartError(
            f"Airflow did not become healthy on {self.url} within {timeout:.0f}s ({state}); "
            f"see the logs in {self.log_dir}:\n{self.tail_log()}"
        )

    def _check_port_error(self) -> None:
        # The port was free when we checked, but someone may have taken it during
        # the DB initialisation; the API server then fails (and is retried) while the rest lives on.
        text = _read(self.component_log(API_SERVER), self._log_offsets.get(API_SERVER, 0)).lower()
        if any(m in text for m in _PORT_TAKEN_MARKERS):
            tail = self.tail_log(API_SERVER)
            self.stop()
            raise PortInUseError(
                f"the Airflow API server could not listen on port {self.port} (address already in use); "
                f"stop whatever holds it (e.g. `ss -ltnp 'sport = :{self.port}'`) or set EOS_ETL_AIRFLOW_PORT. "
                f"Last lines of {self.component_log(API_SERVER)}:\n{tail}"
            )

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop every component through supervisord, then SIGTERM (and after ``timeout`` SIGKILL) what is left.

        supervisord stops the components in reverse order, each with SIGTERM to its process group and
        SIGKILL after its ``stopwaitsecs``. The session sweep after it finds what an earlier incarnation
        left (a component that died before the reaper ran, tasks in groups of their own).
        """
        legacy = PidFile(self.home / "standalone.pid")
        if (standalone := legacy.pid()) is not None:
            # An `airflow standalone` this project started before it ran supervisord: its session.
            log.info("stopping the earlier `airflow standalone` (session %d)", standalone)
            self._sweep(standalone, time.monotonic() + timeout, timeout)
        legacy.path.unlink(missing_ok=True)
        pid = self._recorded_pid()
        if pid is None or not session_members(pid):
            self.pid_file.unlink(missing_ok=True)
            self._reap()
            return
        log.info("stopping Airflow (supervisord session %d)", pid)
        deadline = time.monotonic() + timeout
        if self.is_running():
            try:
                self.control().shutdown()
            except (OSError, xmlrpc.client.Error) as exc:
                log.warning("supervisord did not take the shutdown (%s); signalling its session", exc)
            while self.is_running() and time.monotonic() < deadline:
                time.sleep(0.2)
        self._sweep(pid, deadline, timeout)
        self._reap()
        self.pid_file.unlink(missing_ok=True)

    def _sweep(self, sid: int, deadline: float, timeout: float) -> None:
        """SIGTERM every process group of session ``sid``; SIGKILL what is left at ``deadline``."""
        groups = set()
        for member in session_members(sid):
            try:
                groups.add(os.getpgid(member))
            except ProcessLookupError:
                pass
        for group in sorted(groups):
            try:
                os.killpg(group, signal.SIGTERM)
            except ProcessLookupError:
                pass
        while time.monotonic() < deadline:
            self._reap()
            if not session_members(sid):
                break
            time.sleep(0.2)
        left = session_members(sid)
        if left:
            log.warning("Airflow processes %s ignored SIGTERM for %.0fs; killing them", ", ".join(map(str, left)),
                        timeout)
            for member in left:
                try:
                    os.kill(member, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            kill_deadline = time.monotonic() + 30.0
            while session_members(sid):
                if time.monotonic() > kill_deadline:
                    raise StackError(
                        f"Airflow processes {', '.join(map(str, session_members(sid)))} survived SIGKILL "
                        f"(stuck in the kernel?); check them with `ps -o pid,stat,cmd -s {sid}`"
                    )
                self._reap()
                time.sleep(0.1)

    def _reap(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None

    def components(self) -> list[Component]:
        """Each component's state from supervisord; empty if it does not answer."""
        try:
            return self.control().components()
        except (OSError, xmlrpc.client.Error):
            return []

    def deaths(self) -> dict[str, Exit]:
        """The last unexpected exit of each component since supervisord last started."""
        pid = self.pid()
        if pid is None:
            return {}
        return {e.program: e for e in exits(self.log_file) if not e.expected}

    def status(self) -> AirflowStatus:
        pid = self.pid()
        return AirflowStatus(
            running=pid is not None,
            pid=pid,
            url=self.url,
            health=self.health() if pid is not None else {},
            home=str(self.home),
            log_file=str(self.log_file),
            components=self.components() if pid is not None else [],
            deaths=self.deaths(),
        )

    def describe(self) -> str:
        """URL, login and log file. The password stays in its file (mode 0600): a terminal's
        scrollback and a CI log keep what is printed."""
        return "\n".join(
            [
                f"Airflow UI: {self.url}",
                f"  login: {self.username}, password in {self.passwords_file} (mode 0600; "
                f"EOS_ETL_AIRFLOW_PASSWORD sets it)",
                f"  log: {self.log_file}",
                f"  home: {self.home}",
            ]
        )

    def tail_log(self, program: str | None = None, lines: int = 25) -> str:
        """The last lines of a component's log, or of supervisord's."""
        path = self.log_file if program is None else self.component_log(program)
        return _tail(_read(path), lines) if path.is_file() else "(no log yet)"

    def wipe(self) -> None:
        """Delete the home (database, config, logs); Airflow must be stopped."""
        if self.is_running():
            raise StackError("stop Airflow before wiping its home")
        shutil.rmtree(self.home, ignore_errors=True)


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


def _read(path: Path, offset: int = 0) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
