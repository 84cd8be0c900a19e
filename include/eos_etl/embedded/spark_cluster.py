"""A Spark standalone cluster on loopback, from the pyspark wheel's own classes.

One master and N workers (default 2, one core each), each a plain
``bin/spark-class org.apache.spark.deploy.{master.Master,worker.Worker}``
process of the installed pyspark package (``SPARK_HOME`` = the package
directory, ``SPARK_LOCAL_IP`` = a loopback address, so every port, web UIs
included, listens on loopback only). Each worker gets a loopback address of its
own (127.0.0.2, 127.0.0.3, ...) and so looks like a machine of its own to the
scheduler: Spark never runs a speculative copy of a task on a host where the
task already ran, and re-runs tasks of a lost worker elsewhere, exactly as on
real machines. Scheduling, executor launch and task retries are Spark's own;
nothing here schedules anything.

Layout under ``home``: ``cluster.json`` (ports, fixed at the first start so
``status`` in another process finds the same cluster), ``master/`` and one
``worker-<id>/`` per worker, each with its ``*.pid`` and ``logs/*.out`` (the
daemon's stdout and stderr: Spark logs to the console by default), and
``worker-<id>/work/`` where the worker runs its executors (``<app>/<exec>/``
holds an executor's stderr and the jars and code zip it fetched from the
driver).

Usage::

    spark = SparkStandalone(home).start()     # master + 2 workers, waits until both are ALIVE
    spark.master_url                          # 'spark://127.0.0.1:<port>'
    spark.worker(1).kill(); spark.worker(1).start()
    spark.executors()                         # CoarseGrainedExecutorBackend JVMs: pid, app, executor id
    spark.stop()

Fault tests find the executors a running job got with :meth:`SparkStandalone.wait_for_executors`
and SIGKILL one (:meth:`ExecutorProcess.kill`) or its whole worker (:meth:`SparkWorker.kill`).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths
from ..errors import StackError
from ..host.ports import free_port, port_accepts, require_free_port
from ..host.process import PidFile, ProcStat, all_pids, cmdline, descendants
from ..host.tools import require_tool
from ..jvm.options import jvm_options_string
from ..spark.config import spark_home

log = logging.getLogger(__name__)

DEFAULT_MASTER_PORT = 7077
DEFAULT_MASTER_UI_PORT = 8090
DEFAULT_WORKERS = 2
# A master and a worker JVM each start in 5-10 s on an idle 2-core machine; the
# margin covers a machine busy with Kafka nodes and other Spark jobs.
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
# 2 workers x 2g for executors (1g heap each by default, see spark/config.py) leaves
# most of this 24 GB machine to Kafka, Airflow and the driver.
WORKER_MEMORY = "2g"
# Master and worker daemons only keep bookkeeping; Spark's default is 1g each.
DAEMON_MEMORY = "512m"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
_REGISTERED_MARKER = "Successfully registered with master"
# Talks to our own master directly, even when an http(s)_proxy is set.
_local_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _arg(argv: list[str], name: str) -> str | None:
    try:
        return argv[argv.index(name) + 1]
    except (ValueError, IndexError):
        return None


@dataclass(frozen=True)
class ExecutorProcess:
    """One ``CoarseGrainedExecutorBackend`` JVM a worker launched for an application."""

    pid: int
    executor_id: str
    app_id: str
    worker_id: int | None
    worker_url: str
    host: str = ""  # the executor's --hostname: its worker's address

    def is_running(self) -> bool:
        stat = ProcStat.read(self.pid)
        return stat is not None and stat.state != "Z"

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the executor JVM (SIGKILL by default: a lost executor, as a crashed machine would)."""
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def python_workers(self) -> list[int]:
        """Pids of the executor's Python processes (the pyspark daemon and the workers it forked)."""
        return descendants(self.pid)

    def stopped_python_workers(self) -> list[int]:
        """Those of :meth:`python_workers` that are stopped (SIGSTOP: a task paused at a failpoint)."""
        return [pid for pid in self.python_workers() if (s := ProcStat.read(pid)) is not None and s.state == "T"]


def list_executors() -> list[ExecutorProcess]:
    """Every executor JVM on this machine, whichever worker launched it."""
    found = []
    for pid in all_pids():
        argv = cmdline(pid)
        if EXECUTOR_CLASS not in argv or (stat := ProcStat.read(pid)) is None or stat.state == "Z":
            continue
        found.append(ExecutorProcess(pid=pid, executor_id=_arg(argv, "--executor-id") or "?",
                                     app_id=_arg(argv, "--app-id") or "?", worker_id=None,
                                     worker_url=_arg(argv, "--worker-url") or "",
                                     host=_arg(argv, "--hostname") or ""))
    return sorted(found, key=lambda e: e.pid)


@dataclass
class WorkerStatus:
    worker_id: int
    running: bool
    pid: int | None
    address: str
    ui_port: int
    state: str | None  # the master's view: ALIVE, DEAD, ... (None: the master does not list it)
    cores: int
    memory: str
    executors: list[ExecutorProcess]
    log_file: str

    def describe(self) -> str:
        proc = f"running (pid {self.pid})" if self.running else "stopped"
        execs = ", ".join(f"{e.app_id}/{e.executor_id} pid {e.pid}" for e in self.executors) or "none"
        return (f"  worker {self.worker_id} {self.address} [{self.cores} core{'s' if self.cores > 1 else ''}, "
                f"{self.memory}]: {proc}, master sees {self.state or 'nothing'}; executors: {execs}; "
                f"log {self.log_file}")


@dataclass
class SparkClusterStatus:
    master_url: str
    ui_port: int
    ui_url: str
    master_pid: int | None
    master_state: str | None
    workers: list[WorkerStatus]
    home: str
    master_log: str

    @property
    def running(self) -> bool:
        return self.master_pid is not None

    def describe(self) -> str:
        master = f"running (pid {self.master_pid}), {self.master_state or 'not answering'}" \
            if self.running else "stopped"
        alive = sum(w.state == "ALIVE" for w in self.workers)
        lines = [f"Spark standalone ({len(self.workers)} workers, {alive} alive): master {self.master_url}",
                 f"  master: {master}; UI {self.ui_url} (port {self.ui_port}); log {self.master_log}"]
        lines += [w.describe() for w in self.workers]
        lines.append(f"  home: {self.home}")
        return "\n".join(lines)


@dataclass
class _SparkDaemon:
    """One master or worker JVM: a ``spark-class`` process with a pid file and a log."""

    cluster: "SparkStandalone" = field(repr=False)
    name: str  # "master", "worker-1", ...
    port: int
    ui_port: int
    host: str  # the loopback (or configured) address this daemon binds to
    # Where this process's start of the daemon begins in its log (None: started by another process).
    _log_offset: int | None = field(default=None, init=False, repr=False)

    @property
    def home(self) -> Path:
        return self.cluster.home / self.name

    @property
    def pid_file(self) -> Path:
        return self.home / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / f"{self.name}.out"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def pid(self) -> int | None:
        return PidFile(self.pid_file).pid()

    def is_running(self) -> bool:
        return self.pid() is not None

    def _main_args(self) -> list[str]:
        raise NotImplementedError

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        # Executors import the code the driver ships (--py-files), never a path inherited from here.
        env.pop("PYTHONPATH", None)
        env.update({
            "SPARK_HOME": str(self.cluster.spark_home),
            "SPARK_LOCAL_IP": self.host,
            # No SPARK_CONF_DIR (SPARK_* is not inherited: no stray spark-defaults.conf): a worker puts
            # its configuration directory first on its executors' class path, and HotSpot maps the
            # class-data archive only for the class path it was trained with, the wheel's (absent) one.
            "SPARK_DAEMON_MEMORY": self.cluster.daemon_memory,
            "SPARK_LOCAL_DIRS": str(self.home / "local"),
        })
        if options := jvm_options_string():
            env["SPARK_DAEMON_JAVA_OPTS"] = options
        return env

    def spawn(self) -> None:
        """Start the JVM in its own session (it outlives the CLI that started it); returns without waiting."""
        for port in (self.port, self.ui_port):
            require_free_port(port, f"the Spark {self.name}", self.host)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        (self.home / "local").mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_file.stat().st_size if self.log_file.is_file() else 0
        spark_class = self.cluster.spark_home / "bin" / "spark-class"
        with open(self.log_file, "ab") as out:
            # spark-class execs the JVM, so this pid is the daemon's own.
            proc = subprocess.Popen(
                [str(spark_class), *self._main_args()], env=self._env(), cwd=self.home,
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        PidFile(self.pid_file).record(proc.pid)
        log.info("Spark %s starting (pid %d) on %s, log %s", self.name, proc.pid, self.address, self.log_file)

    def log_since_start(self) -> str:
        try:
            with open(self.log_file, "rb") as f:
                f.seek(self._log_offset or 0)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def tail_log(self, lines: int = 25) -> str:
        if not self.log_file.is_file():
            return "(no log yet)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (the daemon deregisters and, for a worker, stops its executors); SIGKILL after ``timeout``."""
        self._signal_and_wait(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL, as a crashed machine would."""
        self._signal_and_wait(signal.SIGKILL, 10.0)

    def _signal_and_wait(self, sig: int, timeout: float) -> None:
        PidFile(self.pid_file).end(f"the Spark {self.name}", sig, timeout, ports=(self.port, self.ui_port),
                                   host=self.host)


@dataclass
class SparkMaster(_SparkDaemon):
    def _main_args(self) -> list[str]:
        return ["org.apache.spark.deploy.master.Master", "--host", self.host,
                "--port", str(self.port), "--webui-port", str(self.ui_port)]

    def _env(self) -> dict[str, str]:
        env = super()._env()
        # The REST submission server would take the fixed port 6066 (a second cluster could not
        # start) and is only used for cluster deploy mode, which nothing here uses.
        env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"
        return env

    @property
    def url(self) -> str:
        return f"spark://{self.address}"


@dataclass
class SparkWorker(_SparkDaemon):
    worker_id: int = 0

    @property
    def work_dir(self) -> Path:
        return self.home / "work"

    @property
    def rpc_url(self) -> str:
        """How executors name their worker (``--worker-url``)."""
        return f"spark://Worker@{self.address}"

    def _main_args(self) -> list[str]:
        c = self.cluster
        return ["org.apache.spark.deploy.worker.Worker", c.master_url, "--host", self.host,
                "--port", str(self.port), "--webui-port", str(self.ui_port),
                "--cores", str(c.cores), "--memory", c.memory, "--work-dir", str(self.work_dir)]

    def _env(self) -> dict[str, str]:
        env = super()._env()
        # Finished applications' directories (logs, fetched jars and code) go after a day, not never.
        env["SPARK_WORKER_OPTS"] = "-Dspark.worker.cleanup.enabled=true -Dspark.worker.cleanup.appDataTtl=86400"
        return env

    def start(self, timeout: float = READY_TIMEOUT_S) -> "SparkWorker":
        """Start this worker (idempotent; the master must be running) and wait until the master lists it ALIVE."""
        if not self.is_running():
            self.spawn()
        self.cluster.wait_ready(timeout, workers=[self])
        return self

    def executors(self) -> list[ExecutorProcess]:
        """The executor JVMs this worker launched (found even after the worker itself died)."""
        return [ExecutorProcess(e.pid, e.executor_id, e.app_id, self.worker_id, e.worker_url, e.host)
                for e in list_executors() if e.worker_url == self.rpc_url]

    def kill(self) -> None:
        """SIGKILL the worker; its executors notice the lost worker and exit on their own within seconds."""
        super().kill()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        super().stop(timeout)
        # Executors orphaned by an earlier kill must not outlive a stop.
        for e in self.executors():
            e.kill()


@dataclass
class SparkStandalone:
    """A Spark standalone master and ``workers`` workers on loopback."""

    home: Path
    workers: int = DEFAULT_WORKERS
    # None: a free port, chosen at the first start and kept in cluster.json.
    master_port: int | None = None
    ui_port: int | None = None
    cores: int = 1
    memory: str = WORKER_MEMORY
    daemon_memory: str = DAEMON_MEMORY
    host: str = "127.0.0.1"
    # Workers on loopback addresses of their own (see the module doc); False: all on ``host``.
    distinct_worker_hosts: bool = True
    master: SparkMaster = field(init=False)
    worker_nodes: list[SparkWorker] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.home = Path(self.home).absolute()
        if self.workers < 1:
            raise StackError("a Spark standalone cluster needs at least one worker")
        self._layout()

    @classmethod
    def local(cls) -> "SparkStandalone":
        """The project's own cluster: var/spark-cluster, master on $EOS_ETL_SPARK_MASTER_PORT (7077),
        its web UI on $EOS_ETL_SPARK_MASTER_UI_PORT (8090), $EOS_ETL_SPARK_WORKERS (2) workers."""
        return cls(home=paths.var_dir() / "spark-cluster",
                   workers=int(os.environ.get("EOS_ETL_SPARK_WORKERS", DEFAULT_WORKERS)),
                   master_port=int(os.environ.get("EOS_ETL_SPARK_MASTER_PORT", DEFAULT_MASTER_PORT)),
                   ui_port=int(os.environ.get("EOS_ETL_SPARK_MASTER_UI_PORT", DEFAULT_MASTER_UI_PORT)))

    # -- layout: ports fixed at the first start, so other processes find the same cluster --
    @property
    def layout_file(self) -> Path:
        return self.home / "cluster.json"

    def _layout(self) -> None:
        stored = json.loads(self.layout_file.read_text()) if self.layout_file.is_file() else None
        if stored and self._layout_fits(stored):
            self._build(stored)
            return
        if stored:
            self._build(stored)
            if self.master.is_running() or any(w.is_running() for w in self.worker_nodes):
                raise StackError(f"the Spark cluster in {self.home} runs with another layout "
                                 f"({len(stored['workers'])} workers, master port {stored['master']['port']}); "
                                 "stop it first")
        hosts = [self._worker_host(i + 1) for i in range(self.workers)]
        layout = {
            "master": {"port": self.master_port or free_port(self.host),
                       "ui_port": self.ui_port or free_port(self.host)},
            "workers": [{"id": i + 1, "host": h, "port": free_port(h), "ui_port": free_port(h)}
                        for i, h in enumerate(hosts)],
        }
        self.home.mkdir(parents=True, exist_ok=True)
        self.layout_file.write_text(json.dumps(layout, indent=1))
        self._build(layout)

    def _worker_host(self, worker_id: int) -> str:
        """127.0.0.1 -> 127.0.0.<id + 1> per worker (all of 127/8 is loopback); any other host is shared."""
        if self.distinct_worker_hosts and self.host == "127.0.0.1":
            return f"127.0.0.{worker_id + 1}"
        return self.host

    def _layout_fits(self, stored: dict) -> bool:
        return (len(stored["workers"]) == self.workers
                and [w.get("host", self.host) for w in stored["workers"]]
                == [self._worker_host(i + 1) for i in range(self.workers)]
                and self.master_port in (None, stored["master"]["port"])
                and self.ui_port in (None, stored["master"]["ui_port"]))

    def _build(self, layout: dict) -> None:
        m = layout["master"]
        self.master = SparkMaster(self, "master", m["port"], m["ui_port"], self.host)
        self.worker_nodes = [SparkWorker(self, f"worker-{w['id']}", w["port"], w["ui_port"], w.get("host", self.host),
                                         worker_id=w["id"])
                             for w in layout["workers"]]

    @property
    def spark_home(self) -> Path:
        return spark_home()

    @property
    def master_url(self) -> str:
        return self.master.url

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.master.ui_port}"

    def worker(self, worker_id: int) -> SparkWorker:
        for w in self.worker_nodes:
            if w.worker_id == worker_id:
                return w
        raise StackError(f"no worker {worker_id} in this {len(self.worker_nodes)}-worker cluster")

    # -- processes ----------------------------------------------------------------------
    def start(self, timeout: float = READY_TIMEOUT_S) -> "SparkStandalone":
        """Start the master and every worker not running (idempotent); wait until all workers are ALIVE."""
        require_tool("java", install_hint="apt-get install openjdk-17-jre-headless")
        if not (self.spark_home / "bin" / "spark-class").is_file():
            raise StackError(f"{self.spark_home} has no bin/spark-class; is pyspark installed from its wheel?")
        if not self.master.is_running():
            self.master.spawn()
        # Workers retry a refused registration only every 5-15 s: start them once the master listens.
        deadline = time.monotonic() + timeout
        while not port_accepts(self.master.port, self.host):
            self._require_running([self.master])
            if time.monotonic() > deadline:
                self.wait_ready(0, workers=[])  # raises, naming the master's log
            time.sleep(0.2)
        for w in self.worker_nodes:
            if not w.is_running():
                w.spawn()
        self.wait_ready(timeout)
        return self

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop the workers (and any executor they left), then the master."""
        errors = []
        for daemon in (*self.worker_nodes, self.master):
            try:
                daemon.stop(timeout)
            except StackError as exc:  # stop the others anyway, then report
                errors.append(str(exc))
        if errors:
            raise StackError("; ".join(errors))

    def kill(self) -> None:
        for daemon in (*self.worker_nodes, self.master):
            daemon.kill()

    def is_running(self) -> bool:
        return self.master.is_running() and all(w.is_running() for w in self.worker_nodes)

    def master_state(self, timeout: float = 2.0) -> dict | None:
        """The master's own JSON view (``/json/``: workers, applications), None if it does not answer."""
        try:
            with _local_http.open(f"{self.ui_url}/json/", timeout=timeout) as resp:
                return json.load(resp)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def _worker_states(self, state: dict | None) -> dict[str, str]:
        """host:port -> the master's state of the newest registration at that address."""
        newest: dict[str, tuple[int, str]] = {}
        for w in (state or {}).get("workers", []):
            addr = f"{w.get('host')}:{w.get('port')}"
            beat = int(w.get("lastheartbeat", 0))
            if addr not in newest or beat >= newest[addr][0]:
                newest[addr] = (beat, w.get("state"))
        return {addr: s for addr, (_, s) in newest.items()}

    def wait_ready(self, timeout: float = READY_TIMEOUT_S, workers: list[SparkWorker] | None = None) -> None:
        """Wait until the master answers ALIVE and lists each of ``workers`` (default all) ALIVE.

        A worker counts once its own log says it registered since it was started
        here: the master may still list a killed predecessor at the same address.
        """
        workers = self.worker_nodes if workers is None else workers
        deadline = time.monotonic() + timeout
        waiting_for = "the master"
        while time.monotonic() < deadline:
            self._require_running([self.master, *workers])
            state = self.master_state()
            if state and state.get("status") == "ALIVE":
                states = self._worker_states(state)
                pending = [w for w in workers
                           if states.get(w.address) != "ALIVE"
                           or (w._log_offset is not None and _REGISTERED_MARKER not in w.log_since_start())]
                if not pending:
                    return
                waiting_for = ", ".join(w.name for w in pending)
            time.sleep(0.5)
        logs = "\n".join(f"--- {d.name}: {d.log_file} ---\n{d.tail_log(15)}" for d in (self.master, *workers))
        raise StackError(f"the Spark cluster at {self.master_url} was not ready within {timeout:.0f}s "
                         f"(waiting for {waiting_for}; master UI {self.ui_url}/json/):\n{logs}")

    @staticmethod
    def _require_running(daemons: list[_SparkDaemon]) -> None:
        for daemon in daemons:
            if not daemon.is_running():
                raise StackError(f"the Spark {daemon.name} exited during start-up; last lines of "
                                 f"{daemon.log_file}:\n{daemon.tail_log()}")

    # -- what fault tests need: the executors a job got ------------------------------------
    def executors(self, app_id: str | None = None) -> list[ExecutorProcess]:
        """Executor JVMs launched by this cluster's workers (of one application, if given)."""
        return [e for w in self.worker_nodes for e in w.executors() if app_id in (None, e.app_id)]

    def wait_for_executors(self, count: int = 1, app_id: str | None = None,
                           timeout: float = 60.0) -> list[ExecutorProcess]:
        """Wait until at least ``count`` executors run (a job has started); StackError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.executors(app_id)
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                raise StackError(f"{len(found)} of {count} executors running on {self.master_url} "
                                 f"after {timeout:.0f}s: {found}")
            time.sleep(0.2)

    def applications(self) -> list[dict]:
        """Running applications as the master lists them (id, name, cores, state)."""
        return list((self.master_state() or {}).get("activeapps", []))

    def status(self) -> SparkClusterStatus:
        state = self.master_state() if self.master.is_running() else None
        states = self._worker_states(state)
        workers = [WorkerStatus(worker_id=w.worker_id, running=w.is_running(), pid=w.pid(), address=w.address,
                                ui_port=w.ui_port, state=states.get(w.address), cores=self.cores,
                                memory=self.memory, executors=w.executors(), log_file=str(w.log_file))
                   for w in self.worker_nodes]
        return SparkClusterStatus(master_url=self.master_url, ui_port=self.master.ui_port, ui_url=self.ui_url,
                                  master_pid=self.master.pid(), master_state=(state or {}).get("status"),
                                  workers=workers, home=str(self.home), master_log=str(self.master.log_file))

    def tail_log(self, lines: int = 25) -> str:
        return "\n".join(f"--- {d.name} ---\n{d.tail_log(lines)}" for d in (self.master, *self.worker_nodes))
