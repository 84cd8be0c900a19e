"""The task watchdog's bound on one blocking client call (librdkafka#5456: a call that ignores its timeout).

Broker-free: the watchdog ends the process, so it runs in a child; the real-broker
case (a stalled task crashed and retried, exact output) is in tests/integration/engine/test_window_job.py.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from eos_etl.engine.publishing.producer import OVERDUE_MARGIN_S, TransactionalProducer


def _child(body: str) -> tuple[subprocess.CompletedProcess, float]:
    code = textwrap.dedent("""
        import time
        from eos_etl.engine.tasks.watchdog import StallWatchdog
        with StallWatchdog(60) as watchdog:
    """) + textwrap.indent(textwrap.dedent(body), "    ")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return proc, time.monotonic() - t0


def test_a_call_overrunning_its_bound_ends_the_task_with_its_stack():
    proc, took = _child("""
        def send_offsets_that_never_returns():
            time.sleep(50)
        with watchdog.bounded(1.0):
            send_offsets_that_never_returns()
        print("returned")
    """)
    assert proc.returncode != 0 and "returned" not in proc.stdout
    assert took < 30, took  # the bound (1 s), not the call (50 s) or the stall timeout (60 s)
    assert "Timeout" in proc.stderr and "send_offsets_that_never_returns" in proc.stderr


def test_after_the_call_the_stall_timeout_applies_again():
    proc, _ = _child("""
        with watchdog.bounded(1.0):
            pass
        time.sleep(3)  # past the call's bound: only the 60 s stall timeout counts now
        print("alive")
    """)
    assert proc.returncode == 0, proc.stderr
    assert "alive" in proc.stdout


def test_frequent_kicks_keep_a_task_alive_and_a_stall_still_ends_it_within_the_timeout():
    code = textwrap.dedent("""
        import time
        from eos_etl.engine.tasks.watchdog import StallWatchdog
        with StallWatchdog(2.0) as watchdog:
            until = time.monotonic() + 4.0
            while time.monotonic() < until:  # progress, kicked far more often than it re-arms
                watchdog.kick()
                time.sleep(0.01)
            print("progressed", flush=True)
            time.sleep(30)  # a stall
            print("survived the stall")
    """)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert "progressed" in proc.stdout and "survived" not in proc.stdout and proc.returncode != 0, proc.stderr
    assert took < 4.0 + 2.0 + 5.0, took  # within the stall timeout of the last progress (plus start-up)


def test_every_blocking_producer_call_is_bounded_by_its_timeout_plus_the_margin():
    bounds: list[float] = []

    class Recording:
        def __init__(self, seconds):
            bounds.append(seconds)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    producer = TransactionalProducer({"transactional.id": "bound-test", "bootstrap.servers": "127.0.0.1:1"},
                                     op_timeout_s=7.0, call_bound=Recording)
    try:
        assert producer._call("send_offsets_to_transaction", fn=lambda: 42) == 42
    finally:
        producer.close()
    assert bounds == [7.0 + OVERDUE_MARGIN_S]
