"""A real ``python -m eos_etl run-window`` process the harness can kill, pause and resume.

The job runs in its own session, and signals go to its whole process tree:
the CLI, Spark's JVM and the Python workers (pyspark's daemon puts itself and
its workers in a process group of their own, so signalling only the job's
group would miss the very process that holds the Kafka producer). A kill
first freezes every process of the tree, then SIGKILLs them all: a machine
losing power, as far as Kafka can tell. SIGSTOP of the tree is a paused VM
or a long GC pause. stderr is read continuously by a thread (a full pipe would
block the job) and kept, so the harness can wait for log lines such as a
failpoint firing or a partition starting to publish.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from eos_etl.host.process import wait_stopped

#: Logged by the publisher when a partition starts publishing (engine.publishing.publisher).
PUBLISHING = "publishing "
#: Logged by a failpoint when it fires (engine.failpoints).
FAILPOINT_FIRED = "fired:"


def run_window_args(settings, extra: list[str] = ()) -> list[str]:
    """The CLI command line of one run of the shop pipeline described by ``settings``."""
    c = settings.connection
    args = [sys.executable, "-m", "eos_etl", "run-window", "--bootstrap-servers", c.bootstrap_servers,
            *settings.to_args(), "--compact"]
    if c.security_protocol != "PLAINTEXT":
        args += ["--security-protocol", c.security_protocol, "--sasl-mechanism", c.sasl_mechanism,
                 "--sasl-username", c.sasl_username]
    if c.ssl_ca_location:
        args += ["--ssl-ca-location", c.ssl_ca_location]
    return args + list(extra)


#: How long :meth:`JobProcess.wait` waits for an exited process's output to be read to its end.
DRAIN_S = 10.0


class JobProcess:
    """One run of the job as an OS process group."""

    def __init__(self, args: list[str], *, failpoints: str = "", env: dict | None = None):
        self.args = args
        self.env = {**os.environ, "EOS_ETL_SPARK_DRIVER_MEMORY": "1g", **(env or {})}
        self.env.pop("EOS_ETL_FAILPOINTS", None)
        if failpoints:
            self.env["EOS_ETL_FAILPOINTS"] = failpoints
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self.signals: list[str] = []

    def start(self) -> "JobProcess":
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, errors="replace", start_new_session=True)
        self._stdout: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(stream, is_stderr), daemon=True)
                         for stream, is_stderr in ((self.proc.stderr, True), (self.proc.stdout, False))]
        for reader in self._readers:
            reader.start()
        return self

    def _read(self, stream, is_stderr: bool) -> None:
        for line in stream:
            with self._cond:
                (self.lines if is_stderr else self._stdout).append(line)
                self._cond.notify_all()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def stderr(self) -> str:
        with self._cond:
            return "".join(self.lines)

    @property
    def stdout(self) -> str:
        with self._cond:
            return "".join(self._stdout)

    def count(self, needle: str) -> int:
        with self._cond:
            return sum(needle in line for line in self.lines)

    def wait_for(self, needle: str, timeout_s: float, *, occurrences: int = 1) -> bool:
        """Wait until ``needle`` appeared in ``occurrences`` stderr lines; False on timeout or exit."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                if sum(needle in line for line in self.lines) >= occurrences:
                    return True
                if self.proc.poll() is not None or time.monotonic() >= deadline:
                    return False
                self._cond.wait(0.1)

    def wait_for_failpoint_stop(self, timeout_s: float) -> bool:
        """Wait until a ``stop`` failpoint fired *and* its process is stopped; False on timeout or exit.

        The failpoint logs before it SIGSTOPs itself: a harness that resumed the job
        as soon as it read the line could send SIGCONT first, and the worker would
        then stop for good (seen as a hang in the broker_pause scenario).
        """
        deadline = time.monotonic() + timeout_s
        if not self.wait_for(FAILPOINT_FIRED, timeout_s):
            return False
        while time.monotonic() < deadline and self.alive:
            for p in self.tree():
                try:
                    if p.status() == psutil.STATUS_STOPPED:
                        return True
                except psutil.NoSuchProcess:
                    pass
            time.sleep(0.05)
        return False

    def tree(self) -> list[psutil.Process]:
        """The job's processes: the CLI and all its descendants (JVM, pyspark daemon, workers)."""
        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def signal(self, sig: int, procs: list[psutil.Process] | None = None) -> bool:
        """Send ``sig`` to every process of the job; False if it is already gone."""
        procs = self.tree() if procs is None else procs
        sent = False
        for p in procs:
            try:
                p.send_signal(sig)
                sent = True
            except psutil.NoSuchProcess:
                pass
        try:
            os.killpg(self.proc.pid, sig)
            sent = True
        except ProcessLookupError:
            pass
        if sent:
            self.signals.append(signal.Signals(sig).name)
        return sent

    def kill(self) -> bool:
        """Freeze, then SIGKILL every process of the job; True if it was still running."""
        landed = self.alive
        procs = self.tree()
        if procs:
            self.signal(signal.SIGSTOP, procs)  # nobody gets to react to the others dying
            self.signal(signal.SIGKILL, procs)
        self.proc.wait(60)
        return landed

    def pause(self) -> bool:
        """SIGSTOP every process of the job; returns once all their threads have stopped."""
        procs = self.tree()
        sent = self.signal(signal.SIGSTOP, procs)
        for p in procs:
            wait_stopped(p.pid)
        return sent

    def resume(self) -> bool:
        return self.signal(signal.SIGCONT)

    def wait(self, timeout_s: float) -> int | None:
        """The exit code, or None if it still runs after ``timeout_s``. Once it has exited, its output is
        read to its end before this returns (the readers drain the pipes after the exit: a caller that
        reads ``stderr`` right after would otherwise miss its last lines), at most :data:`DRAIN_S` more (a
        child that inherited the pipes may hold them open)."""
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None
        for reader in self._readers:
            reader.join(DRAIN_S)
        return code

    def save(self, path) -> None:
        """Write everything the job printed (stderr, then stdout) to ``path``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.stderr + "\n--- stdout ---\n" + self.stdout)

    def tail(self, n: int = 15) -> str:
        with self._cond:
            return "".join(self.lines[-n:])
