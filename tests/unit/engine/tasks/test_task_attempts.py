"""How a run's Spark task attempts ended (eos_etl.engine.tasks.task_attempts): the names of the endings.

Read from the real Spark driver's status store: tests/integration/engine/tasks/test_task_attempts.py."""

from __future__ import annotations

import pytest

from eos_etl.engine.tasks.task_attempts import ending


@pytest.mark.parametrize(("status", "error", "expected"), [
    ("SUCCESS", None, "finished"),
    ("KILLED", "TaskKilled (Stage cancelled: Job 3 cancelled as part of cancellation of all jobs)", "interrupted"),
    ("FAILED", "eos_etl.engine.errors.WindowEndNotReachedError: purchases[1]: the task's records stopped",
     "interrupted"),
    ("FAILED", "eos_etl.engine.errors.ProducerFencedError: fenced by epoch 7", "fenced"),
    ("FAILED", "ExecutorLostFailure (executor 1 exited caused by one of the running tasks)", "killed"),
    ("FAILED", "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)", "killed"),
    ("FAILED", "RuntimeError: stalled: crashed by the watchdog", "failed"),
])
def test_each_attempt_is_named_by_how_it_ended(status, error, expected):
    assert ending(status, error) == expected
