"""The failpoints' throttle: a task slowed on every record from the N-th on, logged once, off again on reload."""

from __future__ import annotations

import logging
import os
import time

import pytest

from eos_etl.engine import failpoints


@pytest.fixture
def points():
    yield failpoints
    failpoints.load("")


def timed_hits(counts, partition: int = 0) -> float:
    t0 = time.monotonic()
    for n in counts:
        failpoints.hit("mid_produce", partition, n)
    return time.monotonic() - t0


def test_throttle_sleeps_on_every_hit_from_after_on_and_logs_only_the_first(points, caplog):
    points.load("mid_produce=throttle:0.02,partition=1,after=5")
    with caplog.at_level(logging.WARNING, logger=failpoints.__name__):
        assert timed_hits(range(1, 5), partition=1) < 0.02  # below after: no sleep
        assert timed_hits(range(5, 15), partition=0) < 0.02  # another partition: no sleep
        assert timed_hits(range(5, 15), partition=1) >= 10 * 0.02
    assert [r.getMessage() for r in caplog.records if "fired" in r.getMessage()] == [
        f"failpoint mid_produce fired: throttle (partition=1 count=5 pid={os.getpid()})"]


def test_a_reload_ends_a_throttle_and_once_slows_only_the_first_process(points, tmp_path):
    once = tmp_path / "claimed"
    points.load(f"mid_produce=throttle:0.02,once={once}")
    assert timed_hits(range(1, 6)) >= 5 * 0.02 and once.exists()
    points.load("")
    assert timed_hits(range(1, 6)) < 0.02
    # Claimed already (another process took it): this one is not slowed.
    points.load(f"mid_produce=throttle:0.02,once={once}")
    assert timed_hits(range(1, 6)) < 0.02
