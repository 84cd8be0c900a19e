"""Where a fault struck a window, and the Python workers that were running tasks when it did.

A fault test counts only when its fault landed on work in progress: a task running with records still
to come, and (when the window streams) a range the run had committed in part. Every mid-stream
scenario, on the Connect server and on the standalone cluster, measures its landing here the moment
before the fault and records it on the trial; a fault that struck no work in progress fails the trial
as ``fault_not_mid_stream``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from eos_etl.engine.tasks.task_process import TASK_PROCESS_NAME

from .lab import TrialResult


def python_task_workers(jvm_pids: Iterable[int]) -> list[int]:
    """The Python workers running a publishing task now under these JVMs: children of their pyspark
    daemons named as a task (:mod:`eos_etl.engine.tasks.task_process`). A worker Spark keeps for the next task
    is a child too, but idle."""
    pids = []
    for pid in jvm_pids:
        try:
            workers = [w for daemon in psutil.Process(pid).children() for w in daemon.children()]
        except (psutil.Error, ValueError, TypeError):
            continue
        for worker in workers:
            try:
                if worker.name() == TASK_PROCESS_NAME:
                    pids.append(worker.pid)
            except psutil.Error:  # it ended meanwhile
                pass
    return pids


@dataclass(frozen=True)
class Landing:
    """Each partition's range, the group's committed offset the moment before the fault, and how many
    publishing tasks ran then."""

    ranges: dict[int, tuple[int, int]]
    committed: dict[int, int | None]
    tasks: int

    @classmethod
    def from_ends(cls, ends: dict[int, int], committed: dict[int, int | None], tasks: int) -> Landing:
        """Ranges that start at 0 (a fresh topic's first window)."""
        return cls({p: (0, end) for p, end in ends.items()}, dict(committed), tasks)

    def only(self, p: int) -> Landing:
        """This landing as seen by partition ``p`` alone."""
        return Landing({p: self.ranges[p]}, {p: self.committed.get(p)}, self.tasks)

    def _at(self, p: int) -> int:
        start, end = self.ranges[p]
        return min(max(self.committed.get(p) or start, start), end)

    @property
    def published(self) -> int:
        """Records the faulted run had committed (its committed offsets minus the ranges' starts)."""
        return sum(self._at(p) - start for p, (start, _) in self.ranges.items())

    @property
    def to_come(self) -> int:
        return sum(end - self._at(p) for p, (_, end) in self.ranges.items())

    @property
    def in_flight(self) -> bool:
        """A task ran and records were still to come."""
        return self.tasks > 0 and self.to_come > 0

    @property
    def mid_stream(self) -> bool:
        """In flight, with a partition's range committed in part: its task was streaming, not starting."""
        return self.in_flight and any(start < self._at(p) < end for p, (start, end) in self.ranges.items())

    def describe(self) -> str:
        return (f"{self.published:,} records committed by the run before the fault, {self.to_come:,} still to "
                f"come, {self.tasks} task(s) running (committed {self.committed})")

    def record(self, result: TrialResult, *, streaming: bool = True) -> None:
        """The landing's counters on the trial; ``fault_not_mid_stream`` when it struck no work in
        progress (``streaming=False``: a task in flight is enough, for windows held by a sleeping task)."""
        result.counters.update(published_before_fault=self.published, to_come_at_fault=self.to_come,
                               tasks_at_fault=self.tasks)
        if not (self.mid_stream if streaming else self.in_flight):
            result.violations["fault_not_mid_stream"] = 1
