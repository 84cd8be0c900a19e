"""Freezing a process: ``freeze`` returns only once every thread has stopped (broker-free)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from eos_etl.host.process import freeze, thread_states

#: Threads that keep running (busy) and threads that sleep in the kernel (blocked): both must stop.
THREADED = """
import threading, time
def busy():
    while True:
        pass
for _ in range(4):
    threading.Thread(target=busy, daemon=True).start()
for _ in range(12):
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
print("ready", flush=True)
time.sleep(3600)
"""


@pytest.fixture
def threaded():
    proc = subprocess.Popen([sys.executable, "-c", THREADED], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def test_freeze_returns_with_every_thread_stopped_and_resume_runs_them_again(threaded):
    for _ in range(20):
        assert freeze(threaded.pid)
        states = thread_states(threaded.pid)
        assert len(states) == 17 and set(states) <= {"t", "T"}, states
        os.kill(threaded.pid, signal.SIGCONT)
        deadline = time.monotonic() + 5
        while "R" not in thread_states(threaded.pid):
            assert time.monotonic() < deadline, "the busy threads did not run again"
            time.sleep(0.01)


def test_freeze_of_a_process_that_is_gone_is_false(threaded):
    threaded.kill()
    threaded.wait(10)
    assert freeze(threaded.pid) is False
    assert thread_states(threaded.pid) == []
