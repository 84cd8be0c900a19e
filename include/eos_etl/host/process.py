"""Processes the project started and recorded: find, check, signal, stop and wait for them.

Every long-lived process here (a Kafka node, a Spark daemon, the Spark Connect
server, Airflow) is recorded in a pid file as ``<pid> <start time>``, the start
time being the kernel's (clock ticks after boot, ``/proc/<pid>/stat`` field 22).
A pid the kernel gave to another process since (the recorded one crashed and the
number was reused) has another start time: it is reported gone and never
signalled. A pid file with a pid only (written before start times were
recorded) is trusted as it was.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import StackError
from .ports import port_is_free

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcStat:
    """What ``/proc/<pid>/stat`` says of a process."""

    state: str  # R, S, D, T (stopped), Z (zombie), ...
    ppid: int
    pgrp: int
    session: int
    start_ticks: int

    @classmethod
    def read(cls, pid: int) -> "ProcStat | None":
        return cls.read_path(f"/proc/{pid}/stat")

    @classmethod
    def read_path(cls, path: str) -> "ProcStat | None":
        """``/proc/<pid>/stat`` or one thread's ``/proc/<pid>/task/<tid>/stat``."""
        try:
            with open(path) as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after "pid (comm)", which may hold spaces
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return None
        return cls(fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except (FileNotFoundError, ProcessLookupError):
        return []


def all_pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        stat = ProcStat.read(pid)
        if stat is not None:
            children.setdefault(stat.ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return sorted(out)


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes of session ``sid`` (a process group leader's, with its groups)."""
    return [pid for pid in all_pids() if (s := ProcStat.read(pid)) is not None and s.session == sid and s.state != "Z"]


def thread_states(pid: int) -> list[str]:
    """The state of every thread of ``pid`` (empty once it is gone)."""
    states = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return []
    for task in tasks:
        stat = ProcStat.read_path(f"/proc/{pid}/task/{task}/stat")
        if stat is not None:
            states.append(stat.state)
    return states


#: A SIGSTOPped process whose threads are not all stopped after this long is reported, not waited on.
STOP_LANDS_S = 5.0


def freeze(pid: int, timeout_s: float = STOP_LANDS_S) -> bool:
    """SIGSTOP ``pid`` and return once every one of its threads is stopped; False if it is gone.

    ``kill()`` returns when the signal is queued, not when it has landed: each thread stops only when
    the kernel next schedules it, a few milliseconds later on a quiet machine and more on a loaded
    one, and meanwhile the process goes on serving. A harness that freezes a broker and then sends it
    a request must not have that request answered (measured: a commit sent right after the kill was
    answered once in 40 tries under load).
    """
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return False
    return wait_stopped(pid, timeout_s)


def wait_stopped(pid: int, timeout_s: float = STOP_LANDS_S) -> bool:
    """Wait until every thread of ``pid``, already sent SIGSTOP, has stopped; False if it is gone."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = thread_states(pid)
        if not states:
            return False
        if all(state in "tTZX" for state in states):  # stopped, or exited threads
            return True
        if time.monotonic() > deadline:
            raise StackError(f"process {pid} did not stop within {timeout_s:.0f}s of SIGSTOP "
                             f"(thread states: {''.join(sorted(states))})")
        time.sleep(0.0005)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)  # our child: reap it; anyone else's: nothing to do
    except ChildProcessError:
        pass


@dataclass(frozen=True)
class PidFile:
    """A pid file: the pid and start time of one process the project started."""

    path: Path

    def record(self, pid: int) -> None:
        stat = ProcStat.read(pid)
        self.path.write_text(f"{pid} {stat.start_ticks}" if stat is not None else str(pid))

    def recorded(self) -> tuple[int, int | None] | None:
        try:
            fields = self.path.read_text().split()
            return int(fields[0]), (int(fields[1]) if len(fields) > 1 else None)
        except (FileNotFoundError, ValueError, IndexError):
            return None

    def pid(self) -> int | None:
        """The recorded process's pid while it exists (running or stopped); None once it is gone,
        a zombie (reaped when it is our child) or a different process under the same number."""
        recorded = self.recorded()
        if recorded is None:
            return None
        pid, start = recorded
        stat = ProcStat.read(pid)
        if stat is None or (start is not None and stat.start_ticks != start):
            return None
        if stat.state == "Z":
            _reap(pid)
            return None
        return pid

    def state(self) -> str | None:
        pid = self.pid()
        stat = ProcStat.read(pid) if pid is not None else None
        return stat.state if stat is not None else None

    def send(self, sig: int) -> bool:
        """Send ``sig`` to the recorded process if it is still that process; False if it is gone."""
        pid = self.pid()
        if pid is None:
            return False
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return False
        return True

    def freeze(self) -> bool:
        """SIGSTOP the recorded process and wait until it has stopped (:func:`freeze`); False if it is gone."""
        pid = self.pid()
        return pid is not None and freeze(pid)

    def wait_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.pid() is not None:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def end(self, what: str, sig: int = signal.SIGTERM, timeout: float = 30.0, *, ports: tuple[int, ...] = (),
            host: str = "127.0.0.1") -> int | None:
        """Send ``sig`` (a stopped process is continued first, or it could not act on it), SIGKILL
        it if still there after ``timeout``, forget the pid file, then wait (30 s at most) until its
        ``ports`` are free again: a restart right away needs them released by the kernel. Returns
        the pid it ended (None: nothing of ours was running)."""
        pid = self.pid()
        if pid is not None:
            if sig != signal.SIGKILL and self.state() == "T":
                self.send(signal.SIGCONT)
            self.send(sig)
            if not self.wait_gone(timeout):
                log.warning("%s (pid %d) ignored %s for %.0fs; killing it", what, pid, signal.Signals(sig).name,
                            timeout)
                self.send(signal.SIGKILL)
                if not self.wait_gone(30.0):
                    raise StackError(f"{what} (pid {pid}) survived SIGKILL for 30 s (stuck in the kernel?); "
                                     f"check it with `ps -o pid,stat,cmd {pid}`")
        self.path.unlink(missing_ok=True)
        wait_ports_free(ports, what, host)
        return pid


def wait_ports_free(ports: tuple[int, ...], what: str, host: str = "127.0.0.1", timeout: float = 30.0, *,
                    is_free: Callable[[int], bool] | None = None) -> None:
    """Wait until every one of ``ports`` could be bound on ``host`` again (or, given ``is_free``,
    until it says so: a port of a process in another network namespace)."""
    is_free = is_free or (lambda port: port_is_free(port, host))
    deadline = time.monotonic() + timeout
    while not all(is_free(p) for p in ports):
        if time.monotonic() > deadline:
            raise StackError(f"ports {', '.join(map(str, ports))} of {what} still busy {timeout:.0f} s after it exited")
        time.sleep(0.05)
