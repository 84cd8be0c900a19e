"""A run that SIGSTOPs itself right after its Nth log line: a GC pause, a frozen VM, a coordinator move
during its retries, at a point drawn among the lines it logs, with no race against a signal sent from
outside (``op_paused_run``).

:func:`pausing_env` is the environment of such a process: a ``sitecustomize`` of its own on
``PYTHONPATH`` that counts the records of the ``eos_etl`` loggers and, right after the Nth one was
handled (written to stderr), sends its own process SIGSTOP. It reads N from :data:`PAUSE_ENV` and takes
it out of the environment as it loads, so the processes the run starts (Spark's JVM, and through it the
Python workers, which load the same ``sitecustomize``) never pause themselves: only the run's own
process counts its lines. :func:`wait_paused` waits until that process has stopped; the harness then
stops the rest of its tree (:meth:`~..job_process.JobProcess.pause`) and resumes it all later.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil

from eos_etl.host.process import wait_stopped

from ..job_process import JobProcess

#: How many ``eos_etl`` log records the process handles before it stops itself (absent or 0: never).
PAUSE_ENV = "EOS_ETL_LAB_PAUSE_AFTER_LOG"

HOOK = f'''"""Written by eos_etl_lab.faults.model.pause_hook: SIGSTOP this process after its Nth eos_etl log record."""
import logging
import os
import signal

_AFTER = int(os.environ.pop({PAUSE_ENV!r}, "0") or 0)  # popped: the processes this one starts never pause

if _AFTER > 0:
    _seen = [0]
    _handle = logging.Logger.handle

    def _handle_then_pause(self, record):
        _handle(self, record)
        if record.name == "eos_etl" or record.name.startswith("eos_etl."):
            _seen[0] += 1
            if _seen[0] == _AFTER:
                os.kill(os.getpid(), signal.SIGSTOP)

    logging.Logger.handle = _handle_then_pause
'''


def pausing_env(where: Path, after: int, base: dict | None = None) -> dict:
    """The environment (on top of ``base``, e.g. a Spark Connect client's) of a process that stops itself
    right after its ``after``-th ``eos_etl`` log record; the hook is written to ``where``."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "sitecustomize.py").write_text(HOOK)
    base = dict(base or {})
    path = base.get("PYTHONPATH", os.environ.get("PYTHONPATH"))
    return {**base, PAUSE_ENV: str(after), "PYTHONPATH": os.pathsep.join(filter(None, [str(where), path]))}


def wait_paused(job: JobProcess, timeout_s: float) -> bool:
    """Wait until the job's own process stopped itself (every thread of it); False once it ended first, or
    on timeout (it never logged that many lines, or still runs)."""
    deadline = time.monotonic() + timeout_s
    while job.alive and time.monotonic() < deadline:
        try:
            stopped = psutil.Process(job.pid).status() == psutil.STATUS_STOPPED
        except psutil.NoSuchProcess:
            return False
        if stopped:
            return wait_stopped(job.pid)
        time.sleep(0.05)
    return False
