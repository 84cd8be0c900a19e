"""What a Spark Connect server's processes and files say about it, read without asking the server.

:class:`~.spark_connect.SparkConnectServer`'s supervision reads these between windows: its Python workers
and per-session worker monitors (the kernel's process table), whether its Spark application still runs (its
event log), and its log and event-log files, which it keeps bounded.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ..host.process import ProcStat, all_pids

_IDLE_WORKER_MONITOR = "Idle Worker Mon"  # Spark's thread name as the kernel keeps it (15 characters)
# Spark's rolling event log marks a running application with this file; its end renames it.
_RUNNING_MARK = "appstatus_*.inprogress"
# Spark flushes its event log at every job's start and end.
_JOB_EVENT = re.compile(rb'"Event":"SparkListenerJob(Start|End)","Job ID":(\d+)')


def python_workers(pid: int | None) -> int:
    """The children of the pyspark daemons of the JVM ``pid`` (its Python workers); 0 without one."""
    if pid is None:
        return 0
    parent = {p: stat.ppid for p in all_pids() if (stat := ProcStat.read(p)) is not None}
    daemons = {p for p, ppid in parent.items() if ppid == pid}
    return sum(1 for ppid in parent.values() if ppid in daemons)


def idle_worker_monitors(pid: int | None) -> int:
    """Threads of the JVM ``pid`` that watch a Python worker factory (one per factory)."""
    if pid is None or not os.path.isdir(f"/proc/{pid}/task"):
        return 0
    count = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            count += Path(f"/proc/{pid}/task/{tid}/comm").read_text().startswith(_IDLE_WORKER_MONITOR)
        except OSError:
            continue
    return count


def _applications(event_log_dir: Path) -> list[Path]:
    return sorted(event_log_dir.glob("eventlog_v2_*"), key=lambda p: p.stat().st_mtime)


def context_stopped(event_log_dir: Path) -> bool:
    """True when the newest application's event log says it ended: its SparkContext stopped (an executor
    lost to an uncaught error in local mode takes it) while the JVM, and its gRPC service, run on. Such a
    server answers probes and fails every window ("Cannot call methods on a stopped SparkContext")."""
    apps = _applications(event_log_dir)
    return bool(apps) and not any(apps[-1].glob(_RUNNING_MARK))


def jobs_in_flight(event_log_dir: Path) -> set[int]:
    """The ids of the newest application's jobs that started and did not end yet, per its event log (the
    files the supervisor kept: it prunes only with no window in flight)."""
    apps = _applications(event_log_dir)
    started: set[int] = set()
    ended: set[int] = set()
    for path in apps[-1].glob("events_*") if apps else ():
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # pruned, or rolled and renamed, while read
            continue
        for kind, job in _JOB_EVENT.findall(data):
            (started if kind == b"Start" else ended).add(int(job))
    return started - ended


def jobs_ended(event_log_dir: Path) -> int:
    """How many jobs the newest application has ended, per its event log (job ids count up from 0, so the
    highest ended id + 1): the difference over a span is the jobs of the span when nothing else ran."""
    apps = _applications(event_log_dir)
    last = -1
    for path in apps[-1].glob("events_*") if apps else ():
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # pruned, or rolled and renamed, while read
            continue
        last = max([last, *(int(job) for kind, job in _JOB_EVENT.findall(data) if kind == b"End")])
    return last + 1


def prune_event_log(event_log_dir: Path, keep: int) -> None:
    """Keep the newest ``keep`` event log files of the newest application (the file being written among
    them) and nothing of earlier ones (earlier starts of the server)."""
    apps = _applications(event_log_dir)
    for ended in apps[:-1]:
        shutil.rmtree(ended, ignore_errors=True)
    if apps:
        files = sorted(apps[-1].glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
        for old in files[:-keep]:
            old.unlink(missing_ok=True)


def rotate_log(log_file: Path, limit: int) -> None:
    """Copy ``log_file`` to ``<name>.1`` and empty it once it passed ``limit`` bytes.

    While the server runs: it writes with O_APPEND, so after the truncation its next line starts the
    emptied file (lines written between the copy and the truncation are lost)."""
    if log_file.is_file() and log_file.stat().st_size >= limit:
        shutil.copyfile(log_file, log_file.with_name(log_file.name + ".1"))
        with open(log_file, "r+b") as f:
            f.truncate(0)


def read_from(path: Path, offset: int) -> str:
    """The file from byte ``offset`` on; "" while there is none."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""
