"""The embedded Airflow's components under supervisord: its configuration, its control socket, its log.

``airflow standalone`` starts the scheduler, DAG processor, triggerer and API
server as threads that only copy their output: a component that dies stays
dead while the UI still answers, and every schedule stops (docs/airflow-
supervision.md). supervisord (PyPI ``supervisor``, pinned) runs the same four
commands as programs of group ``airflow`` and restarts one the moment it
exits (``autorestart=true``), however it died.

* **Order**: the API server starts first; the others are started once it
  answers (:meth:`EmbeddedAirflow.start`), because a task queued before the
  execution API answers is killed by its supervisor after its retries.
* **Orphans**: a component that dies leaves its children in its process group
  (LocalExecutor workers that ignore SIGTERM, the log server holding its port).
  The ``reaper`` event listener (:mod:`.airflow_reaper`) SIGKILLs that group on
  ``PROCESS_STATE_EXITED``; supervisord put each program in a group of its own.
* **Control**: a Unix socket, mode 0700, no password; owner only. Its path
  must fit ``sun_path`` (108 bytes), so a deep home gets one under the
  temporary directory, named by the home's digest.
* **Which died, and when**: supervisord's log, one line per exit
  (``exited: scheduler (terminated by SIGKILL; not expected)``), read by
  :func:`exits`; the live state comes over the socket (:class:`SupervisorControl`).
* **Secrets**: the file names commands and paths only. Connections carry
  passwords, so the programs inherit them from supervisord's environment,
  never from ``environment=`` lines.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import xmlrpc.client
from dataclasses import dataclass
from pathlib import Path

from supervisor.xmlrpc import SupervisorTransport

GROUP = "airflow"
API_SERVER = "api-server"
# Started after the API server answers, in this order.
AFTER_API = ("scheduler", "dag-processor", "triggerer")
PROGRAMS = (API_SERVER, *AFTER_API)
# What a component gets after SIGTERM before supervisord SIGKILLs its group: the scheduler waits for
# its running tasks (their on_kill), uvicorn for open requests.
STOP_WAIT_S = 30
# Up this long = started; a component failing faster is retried this often with a growing delay
# (1, 2, 3 ... s), then FATAL: never restarted again (a configuration error, not a crash).
START_SECS = 5
START_RETRIES = 5
_SUN_PATH_MAX = 100

_EXIT_LINE = re.compile(r"^(?P<at>\S+ \S+) \w+ exited: (?P<program>[\w-]+) "
                        r"\((?P<how>[^;]+); (?P<expected>not )?expected\)")


def socket_path(home: Path) -> Path:
    """The control socket: in the home if its path fits ``sun_path``, else in a private temporary folder."""
    path = home / "supervisor.sock"
    if len(str(path)) <= _SUN_PATH_MAX:
        return path
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"eos_etl-supervisor-{digest}"
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.chmod(0o700)
    return folder / "sock"


def config_text(*, home: Path, log_dir: Path, airflow: Path, python: Path, socket: Path) -> str:
    """supervisord's configuration for the four components and the reaper."""
    programs = []
    for priority, name in enumerate(PROGRAMS, start=1):
        programs.append(
            f"[program:{name}]\n"
            f"command={airflow} {name}\n"
            f"directory={home}\n"
            f"priority={priority * 10}\n"
            f"autostart={'true' if name == API_SERVER else 'false'}\n"
            "autorestart=true\n"
            f"startsecs={START_SECS}\n"
            f"startretries={START_RETRIES}\n"
            "stopasgroup=true\n"
            "killasgroup=true\n"
            f"stopwaitsecs={STOP_WAIT_S}\n"
            "redirect_stderr=true\n"
            f"stdout_logfile={log_dir / name}.log\n"
            "stdout_logfile_maxbytes=20MB\n"
            "stdout_logfile_backups=3\n"
        )
    return (
        "; Written by eos_etl on every start; edits are lost.\n"
        "[unix_http_server]\n"
        f"file={socket}\n"
        "chmod=0700\n\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n"
        "[supervisorctl]\n"
        f"serverurl=unix://{socket}\n\n"
        "[supervisord]\n"
        "nodaemon=true\n"
        "silent=true\n"
        f"logfile={log_dir / 'supervisord.log'}\n"
        "logfile_maxbytes=5MB\n"
        "logfile_backups=2\n"
        f"pidfile={home / 'supervisord.pid'}\n"
        f"childlogdir={log_dir}\n\n"
        f"[group:{GROUP}]\n"
        f"programs={','.join(PROGRAMS)}\n\n"
        + "\n".join(programs)
        + "\n[eventlistener:reaper]\n"
        f"command={python} -m eos_etl.embedded.airflow_reaper\n"
        "events=PROCESS_STATE_EXITED\n"
        "autorestart=true\n"
        "stdout_logfile=NONE\n"  # the event protocol
        f"stderr_logfile={log_dir / 'reaper.log'}\n"
    )


@dataclass(frozen=True)
class Exit:
    """One exit of a component, as supervisord logged it."""

    program: str
    at: str  # supervisord's local time stamp, e.g. 2026-11-28 06:40:01,123
    how: str  # "terminated by SIGKILL", "exit status 1"
    expected: bool


def exits(log_file: Path, offset: int = 0) -> list[Exit]:
    """Every component exit since supervisord last started (and after byte ``offset``), oldest first."""
    try:
        with open(log_file, "rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        if " supervisord started with pid " in line:
            out = []  # an earlier incarnation's
        if (m := _EXIT_LINE.match(line)) and m["program"] in PROGRAMS:
            out.append(Exit(m["program"], m["at"], m["how"], m["expected"] is None))
    return out


@dataclass(frozen=True)
class Component:
    """A component's state now, from supervisord."""

    name: str
    state: str  # RUNNING, STARTING, BACKOFF, STOPPED, EXITED, FATAL, ...
    pid: int
    uptime_s: float

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


class SupervisorControl:
    """supervisord's XML-RPC interface over its Unix socket."""

    def __init__(self, socket: Path, timeout: float = 10.0):
        transport = SupervisorTransport(None, None, f"unix://{socket}")
        transport.timeout = timeout
        # The host part is ignored by the Unix-socket transport.
        self._rpc = xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport)

    def components(self) -> list[Component]:
        infos = self._rpc.supervisor.getAllProcessInfo()
        return [
            Component(i["name"], i["statename"], i["pid"], max(0.0, float(i["now"] - i["start"])) if i["pid"] else 0.0)
            for i in infos
            if i["group"] == GROUP
        ]

    def start(self, program: str) -> None:
        """Start ``program`` without waiting for its ``startsecs``; a running one is left alone."""
        try:
            self._rpc.supervisor.startProcess(f"{GROUP}:{program}", False)
        except xmlrpc.client.Fault as fault:
            if "ALREADY_STARTED" not in fault.faultString:
                raise

    def shutdown(self) -> None:
        """Stop every program (in reverse priority, SIGKILL after ``STOP_WAIT_S``), then supervisord."""
        self._rpc.supervisor.shutdown()
