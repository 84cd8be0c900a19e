"""Where a fault landed (faults/landing.py), broker-free: a trial counts only when its fault struck a task
with records to come and, for a streaming window, a range the run had committed in part."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from eos_etl.engine.tasks.task_process import TASK_PROCESS_NAME
from eos_etl_lab.faults.lab import TrialResult
from eos_etl_lab.faults.landing import Landing, python_task_workers


def _recorded(landing: Landing, **kwargs) -> TrialResult:
    result = TrialResult("driver_kill_midstream", "seed=1")
    landing.record(result, **kwargs)
    return result


def test_a_fault_counts_as_mid_stream_only_on_a_task_with_part_of_its_range_committed():
    ends = {0: 1000, 1: 2000}
    streaming = Landing.from_ends(ends, {0: 400, 1: None}, tasks=2)
    assert streaming.mid_stream and (streaming.published, streaming.to_come) == (400, 2600)
    result = _recorded(streaming)
    assert "fault_not_mid_stream" not in result.violations
    assert result.counters == {"published_before_fault": 400, "to_come_at_fault": 2600, "tasks_at_fault": 2}
    # Nothing committed yet (still starting), all of it committed (done), or no task running: no landing.
    for missed in (Landing.from_ends(ends, {0: None, 1: None}, 2), Landing.from_ends(ends, {0: 1000, 1: 2000}, 2),
                   Landing.from_ends(ends, {0: 400, 1: None}, 0)):
        assert not missed.mid_stream and _recorded(missed).violations == {"fault_not_mid_stream": 1}, missed


def test_ranges_that_start_past_zero_count_from_their_start():
    # A later window: [5000, 6000) and [7000, 7000) (empty); committed 5300 means 300 published, 700 to come.
    landing = Landing({0: (5000, 6000), 1: (7000, 7000)}, {0: 5300, 1: 7000}, tasks=1)
    assert (landing.published, landing.to_come) == (300, 700) and landing.mid_stream
    # A committed offset from before the window (the previous window's end) is the range's start.
    assert Landing({0: (5000, 6000)}, {0: 4000}, 1).published == 0
    assert Landing({0: (5000, 6000), 1: (0, 10)}, {0: 5300, 1: 4}, 1).only(0).to_come == 700


def test_a_window_held_by_a_sleeping_task_needs_a_task_in_flight_not_a_partial_range():
    held = Landing.from_ends({0: 600}, {0: None}, tasks=1)
    assert not held.mid_stream and held.in_flight
    assert "fault_not_mid_stream" not in _recorded(held, streaming=False).violations
    assert _recorded(Landing.from_ends({0: 600}, {0: None}, 0), streaming=False).violations


#: The workers of the stand-in tree: one runs a publishing task (named as one), one idles (Spark keeps it).
_TASK = ("from eos_etl.engine.tasks.task_process import named_as_task; import time\n"
         "with named_as_task(): time.sleep(30)\n")
_IDLE = "import time; time.sleep(30)\n"


def _spawning(*programs: str) -> str:
    """A Python program that starts each of ``programs`` as a child process, then sleeps."""
    return ("import subprocess, sys, time\n"
            + "".join(f"subprocess.Popen([sys.executable, '-c', {p!r}])\n" for p in programs)
            + "time.sleep(30)\n")


def test_task_workers_are_the_grandchildren_of_a_jvm_that_run_a_task():
    # A stand-in tree (jvm -> daemon -> two workers, one running a task, one idle) made of real processes.
    tree = subprocess.Popen([sys.executable, "-c", _spawning(_spawning(_TASK, _IDLE))])
    try:
        deadline = time.monotonic() + 10
        while not (workers := python_task_workers([tree.pid])) and time.monotonic() < deadline:
            time.sleep(0.05)
        grandchildren = [w for d in psutil.Process(tree.pid).children() for w in d.children()]
        assert len(workers) == 1 and workers[0] != tree.pid, workers
        assert len(grandchildren) == 2 and psutil.Process(workers[0]).name() == TASK_PROCESS_NAME, grandchildren
        assert python_task_workers([2 ** 22 + 7]) == []  # no such process: none, no error
    finally:
        for p in psutil.Process(tree.pid).children(recursive=True):
            p.kill()
        tree.kill()
