"""A local Airflow 3 for development: ``airflow standalone`` on SQLite.

Everything lives in one project-local ``AIRFLOW_HOME`` (``var/airflow`` by
default), never in ``~/airflow``: ``airflow.cfg`` (written by Airflow on first
use, with its generated fernet/JWT keys), ``airflow.db`` (SQLite),
``simple_auth_manager_passwords.json`` (the login, mode 0600),
``standalone.pid`` and ``logs/`` (``standalone.log`` holds the output of all
components; task logs go next to it).

``airflow standalone`` runs the scheduler, DAG processor, triggerer and API
server (which also serves the UI) as child processes of one parent. The
parent is started in its own session, so it outlives the CLI that started it
and :meth:`AirflowStandalone.stop` can signal every component at once.

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

    af = AirflowStandalone.local()        # var/airflow, port 8080
    af.start()                            # init DB, start, wait until healthy
    print(af.describe())                  # URL, login, log file
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
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths
from .airflow_rest import AirflowRestClient
from .errors import PortInUseError, StackError
from .process import PidFile, session_members
from .spark_connect import AIRFLOW_CONN_ID, AIRFLOW_ROUTE_ENV
from .spark_connect import HOME_ENV as CONNECT_HOME_ENV
from .tools import port_accepts, require_free_port, require_tool

log = logging.getLogger(__name__)

DEFAULT_PORT = 8080
DEFAULT_USER = "admin"
# `airflow standalone` initialises the DB and then starts four Python processes.
# Measured on 2 cores with warm bytecode caches: 10-15 s until every component
# heartbeats. The margin covers cold caches, slow disks and busy CI machines.
READY_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 60.0
# The components `airflow standalone` runs; ready means all of them heartbeat.
COMPONENTS = ("scheduler", "dag_processor", "triggerer")

_SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
# Lines in the standalone log that mean the API server could not bind its port.
_PORT_TAKEN_MARKERS = ("address already in use", "[errno 98]")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class AirflowStartError(StackError):
    """``airflow standalone`` exited or did not become healthy in time."""


@dataclass
class AirflowStatus:
    running: bool
    pid: int | None
    url: str
    # Component -> "healthy"/"unhealthy"/None, from the health endpoint;
    # empty when the API server does not answer.
    health: dict[str, str | None]
    home: str
    log_file: str

    @property
    def healthy(self) -> bool:
        return self.running and all(self.health.get(c) == "healthy" for c in ("metadatabase", *COMPONENTS))

    def describe(self) -> str:
        state = f"running (pid {self.pid})" if self.running else "stopped"
        lines = [f"Airflow standalone: {state}", f"  url: {self.url}"]
        if self.running:
            health = ", ".join(f"{k} {v or 'absent'}" for k, v in self.health.items()) or "API not answering"
            lines.append(f"  health: {health}")
        lines += [f"  home: {self.home}", f"  log: {self.log_file}"]
        return "\n".join(lines)


@dataclass
class AirflowStandalone:
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
    _log_offset: int = field(default=0, init=False, repr=False, compare=False)

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
              spark_connect=None) -> "AirflowStandalone":
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
        overrides = {}
        if spark_connect is not None:
            connections[AIRFLOW_CONN_ID] = spark_connect.airflow_connection()
            overrides[AIRFLOW_ROUTE_ENV] = AIRFLOW_CONN_ID
            # The run task makes sure this server runs and answers before each window.
            overrides[CONNECT_HOME_ENV] = str(spark_connect.home)
        return cls(home=paths.var_dir() / "airflow", connections=connections, overrides=overrides)

    # -- layout ---------------------------------------------------------------
    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "standalone.log"

    @property
    def pid_file(self) -> Path:
        return self.home / "standalone.pid"

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
        # standalone spawns `airflow <component>` through PATH: it must be ours.
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
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.db_file}",
                "AIRFLOW__API__HOST": self.host,
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.home / "logs"),
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.worker_log_server_port),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(self.trigger_log_server_port),
                # The OpenLineage listener emits from a forked child it kills after this many seconds
                # (default 10): on a busy worker that silently drops a window's lineage.
                "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "60",
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

    def airflow_cmd(self, *args: str, check: bool = False, timeout: float | None = None) -> subprocess.CompletedProcess:
        """Run ``airflow *args`` with :meth:`env`; output is captured as text."""
        if not self.passwords_file.is_file():
            # Else a command that initialises the auth manager generates a random one.
            self._write_passwords_file()
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
        """Pid of the standalone parent process if it is alive (and the same process: its start time)."""
        self._reap()
        return PidFile(self.pid_file).pid()

    def is_running(self) -> bool:
        return self.pid() is not None

    @property
    def settings_file(self) -> Path:
        return self.home / "connections.sha256"

    def _settings_digest(self) -> str:
        """A digest (never the values: they hold passwords) of the connections and Variables it runs with."""
        text = json.dumps({"connections": self.connections, "variables": self.variables}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def start(self, timeout: float = READY_TIMEOUT_S) -> "AirflowStandalone":
        """Start ``airflow standalone`` (idempotent) and wait until every component is healthy.

        Connections are environment variables fixed when Airflow starts: one
        running with other connections (say the single broker, when the cluster
        demo wants the cluster) is restarted with these.
        """
        if self.is_running():
            stored = self.settings_file.read_text().strip() if self.settings_file.is_file() else None
            if stored == self._settings_digest():
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
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self._write_passwords_file()
        fd = os.open(self.settings_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self._settings_digest() + "\n")
        env = self.env()
        env["NO_COLOR"] = "1"  # the log is a file, not a terminal
        env["PYTHONUNBUFFERED"] = "1"
        started = time.monotonic()
        with open(self.log_file, "ab") as out:
            self._log_offset = out.tell()
            self._proc = subprocess.Popen(
                [str(self._bin_dir() / "airflow"), "standalone"],
                env=env,
                cwd=self.home,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # outlives the CLI; stop() signals the whole group
            )
        PidFile(self.pid_file).record(self._proc.pid)
        log.info(
            "Airflow standalone starting (pid %d) on %s, home %s, log %s",
            self._proc.pid,
            self.url,
            self.home,
            self.log_file,
        )
        try:
            self.wait_ready(timeout)
        except AirflowStartError:
            self.stop()  # leave no half-started components behind; the log stays
            raise
        log.info("Airflow is ready on %s after %.0f s", self.url, time.monotonic() - started)
        return self

    @property
    def rest(self) -> AirflowRestClient:
        """Its REST API as :attr:`login` (:mod:`.airflow_rest`)."""
        return AirflowRestClient(self.url, self.username, self.password, password_source=str(self.passwords_file))

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
            if not self.is_running():
                raise AirflowStartError(
                    f"airflow standalone exited during start-up; last lines of {self.log_file}:\n{self.tail_log()}"
                )
            self._check_port_error()
            health = self.health()
            if health and all(health.get(c) == "healthy" for c in ("metadatabase", *COMPONENTS)):
                return
            time.sleep(1.0)
        state = ", ".join(f"{k} {v}" for k, v in health.items()) if health else "the API did not answer"
        raise AirflowStartError(
            f"Airflow did not become healthy on {self.url} within {timeout:.0f}s ({state}); "
            f"see {self.log_file}:\n{self.tail_log()}"
        )

    def _check_port_error(self) -> None:
        # The port was free when we checked, but someone may have taken it during
        # the DB initialisation; the API server then dies while standalone lives on.
        try:
            with open(self.log_file, "rb") as f:
                f.seek(self._log_offset)
                text = f.read().decode("utf-8", errors="replace").lower()
        except FileNotFoundError:
            return
        if "api-server" in text and any(m in text for m in _PORT_TAKEN_MARKERS):
            tail = self.tail_log()
            self.stop()
            raise PortInUseError(
                f"the Airflow API server could not listen on port {self.port} (address already in use); "
                f"stop whatever holds it (e.g. `ss -ltnp 'sport = :{self.port}'`) or set EOS_ETL_AIRFLOW_PORT. "
                f"Last lines of {self.log_file}:\n{tail}"
            )

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM every component (the process group), SIGKILL what is left after ``timeout``."""
        # The session id is the recorded pid; components orphaned by a parent
        # that died are still found (and stopped) through it.
        pid = self._recorded_pid()
        if pid is None or not session_members(pid):
            self.pid_file.unlink(missing_ok=True)
            self._reap()
            return
        log.info("stopping Airflow standalone (session %d)", pid)
        # Normally one group (the parent's); running tasks have their own.
        groups = set()
        for member in session_members(pid):
            try:
                groups.add(os.getpgid(member))
            except ProcessLookupError:
                pass
        for group in sorted(groups):
            try:
                os.killpg(group, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._reap()
            if not session_members(pid):
                break
            time.sleep(0.2)
        left = session_members(pid)
        if left:
            log.warning(
                "Airflow processes %s ignored SIGTERM for %.0fs; killing them", ", ".join(map(str, left)), timeout
            )
            for member in left:
                try:
                    os.kill(member, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            kill_deadline = time.monotonic() + 30.0
            while session_members(pid):
                if time.monotonic() > kill_deadline:
                    raise StackError(
                        f"Airflow processes {', '.join(map(str, session_members(pid)))} survived SIGKILL "
                        f"(stuck in the kernel?); check them with `ps -o pid,stat,cmd -s {pid}`"
                    )
                self._reap()
                time.sleep(0.1)
        self._reap()
        self.pid_file.unlink(missing_ok=True)

    def _reap(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None

    def status(self) -> AirflowStatus:
        pid = self.pid()
        return AirflowStatus(
            running=pid is not None,
            pid=pid,
            url=self.url,
            health=self.health() if pid is not None else {},
            home=str(self.home),
            log_file=str(self.log_file),
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

    def tail_log(self, lines: int = 25) -> str:
        if not self.log_file.is_file():
            return "(no log yet)"
        return _tail(self.log_file.read_text(errors="replace"), lines)

    def wipe(self) -> None:
        """Delete the home (database, config, logs); Airflow must be stopped."""
        if self.is_running():
            raise StackError("stop Airflow before wiping its home")
        shutil.rmtree(self.home, ignore_errors=True)


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"
