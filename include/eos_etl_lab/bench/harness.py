"""Measure one subprocess and everything it starts: wall time, CPU time, peak memory.

The process tree (the case's Python process, Spark's JVM, its Python workers)
is sampled with psutil every ``interval`` seconds:

* CPU seconds: per process (pid, create time) the last seen user+system time,
  summed over the tree. Compared with ``getrusage(RUSAGE_CHILDREN)`` after
  the wait (exact, but only for descendants that were waited for); the larger
  one is reported. A process that dies between two samples loses at most one
  interval of CPU in the sampled figure.
* Peak RSS: the maximum over samples of the tree's summed RSS. Pages shared
  between processes (e.g. forked Python workers) are counted once per
  process, so this is an upper bound.

A case whose work runs in a long-lived process (a Spark Connect server: the
tasks run in its JVM and Python workers) names that process in ``also``: its
tree is sampled alongside, its CPU counted from the case's start (what it had
used before is not the case's), its RSS added to every sample (the server's
memory is what the route costs, whatever earlier windows left in it).

The case writes its own result (including the timing of its job part, which
excludes interpreter and Spark start-up) as JSON to ``result_path``.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

log = logging.getLogger(__name__)


@dataclass
class Measurement:
    argv: list[str]
    returncode: int
    wall_s: float
    cpu_s: float
    cpu_sampled_s: float
    cpu_rusage_s: float
    peak_rss_mb: float
    processes_seen: int
    result: dict = field(default_factory=dict)
    log_path: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and bool(self.result)


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class TreeSampler:
    """Samples CPU time and RSS of a process and all its descendants."""

    def __init__(self, pid: int, *, from_now: bool = False):
        self.root = psutil.Process(pid)
        self.cpu: dict[tuple[int, float], float] = {}
        self.peak_rss = 0
        self.samples = 0
        # CPU the tree had used before (from_now: a long-lived process) is not counted.
        self.base: dict[tuple[int, float], float] = {}
        if from_now:
            self.sample()
            self.base, self.peak_rss, self.samples = dict(self.cpu), 0, 0

    def sample(self) -> int:
        """Read the tree once; returns its RSS now (bytes)."""
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return 0
        rss = 0
        for p in procs:
            try:
                with p.oneshot():
                    key = (p.pid, p.create_time())
                    t = p.cpu_times()
                    mem = p.memory_info().rss
            except psutil.Error:
                continue
            self.cpu[key] = t.user + t.system
            rss += mem
        self.peak_rss = max(self.peak_rss, rss)
        self.samples += 1
        return rss

    @property
    def cpu_seconds(self) -> float:
        return sum(v - self.base.get(k, 0.0) for k, v in self.cpu.items())


def measure(
    argv: list[str],
    *,
    result_path: Path,
    log_path: Path,
    timeout_s: float = 3600.0,
    interval_s: float = 0.1,
    env: dict | None = None,
    also: tuple[int, ...] = (),
) -> Measurement:
    """Run ``argv`` to completion, sampling its process tree (and the trees of the long-lived
    processes ``also`` names); stdout/stderr go to ``log_path``."""
    result_path.unlink(missing_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cpu_before = _children_cpu()
    t0 = time.monotonic()
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env or dict(os.environ))
        sampler = TreeSampler(proc.pid)
        others = [TreeSampler(pid, from_now=True) for pid in also]
        peak_rss = 0
        try:
            while proc.poll() is None:
                peak_rss = max(peak_rss, sampler.sample() + sum(o.sample() for o in others))
                if time.monotonic() - t0 > timeout_s:
                    log.error("%s exceeded %.0fs; killing it", argv[-2:], timeout_s)
                    _kill_tree(proc.pid)
                    break
                time.sleep(interval_s)
        finally:
            rc = proc.wait()
    wall = time.monotonic() - t0
    for other in others:
        other.sample()  # what it used up to the case's end
    cpu_others = sum(o.cpu_seconds for o in others)
    cpu_rusage = _children_cpu() - cpu_before
    result = {}
    if result_path.is_file():
        try:
            result = json.loads(result_path.read_text())
        except json.JSONDecodeError:
            result = {}
    m = Measurement(
        argv=argv,
        returncode=rc,
        wall_s=round(wall, 3),
        cpu_s=round(max(sampler.cpu_seconds, cpu_rusage) + cpu_others, 3),
        cpu_sampled_s=round(sampler.cpu_seconds + cpu_others, 3),
        cpu_rusage_s=round(cpu_rusage, 3),
        peak_rss_mb=round(max(peak_rss, sampler.peak_rss) / 2**20, 1),
        processes_seen=len({pid for s in (sampler, *others) for pid, _ in s.cpu}),
        result=result,
        log_path=str(log_path),
    )
    return m


def _kill_tree(pid: int) -> None:
    """Kill a process we started and its descendants (by pid, never by name)."""
    try:
        root = psutil.Process(pid)
        procs = [*root.children(recursive=True), root]
    except psutil.Error:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


def process_cpu_seconds(pid: int | None) -> float | None:
    """User+system CPU of one process (e.g. the bench's broker), None if it is gone."""
    if pid is None:
        return None
    try:
        t = psutil.Process(pid).cpu_times()
        return t.user + t.system
    except psutil.Error:
        return None
