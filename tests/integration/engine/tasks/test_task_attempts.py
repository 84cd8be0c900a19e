"""How a run's Spark task attempts ended, read from the real Spark driver's status store.

The names of the endings, without Spark: tests/unit/engine/tasks/test_task_attempts.py."""

from __future__ import annotations

import threading

from eos_etl.engine.errors import ProducerFencedError
from eos_etl.engine.tasks.task_attempts import AttemptTracker


def _job_losing_one_attempt(error: Exception):
    def task(rows):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
            raise error
        yield sum(1 for _ in rows)

    return task


def test_fenced_and_crashed_attempts_are_told_apart_per_run(spark):
    sc = spark.sparkContext
    outcomes, groups_after = {}, {}

    def run(name: str, error: Exception):
        with AttemptTracker(spark, name) as tracker:
            assert sc.parallelize(range(30), 3).mapPartitions(_job_losing_one_attempt(error)).sum() == 30
        outcomes[name] = tracker.attempts()
        groups_after[name] = sc.getLocalProperty("spark.jobGroup.id")

    # Concurrently, in two threads of one Spark application, as two runs would.
    threads = [threading.Thread(target=run, args=("fenced-run", ProducerFencedError("fenced by epoch 7"))),
               threading.Thread(target=run, args=("crashed-run", RuntimeError("stalled: crashed by the watchdog")))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert outcomes["fenced-run"].to_dict() == {
        "total": 4, "succeeded": 3, "failed": 1, "fenced": 1, "killed": 0, "visible": True,
        "partitions": {"task 0": ["finished"], "task 1": ["fenced", "finished"], "task 2": ["finished"]}}
    assert outcomes["crashed-run"].to_dict() == {
        "total": 4, "succeeded": 3, "failed": 1, "fenced": 0, "killed": 0, "visible": True,
        "partitions": {"task 0": ["finished"], "task 1": ["failed", "finished"], "task 2": ["finished"]}}
    # The results name each task's input partition; a task without a result keeps its Spark name.
    outcomes["fenced-run"].name_partitions({0: 5, 1: 3})
    assert outcomes["fenced-run"].partitions == {"5": ["finished"], "3": ["fenced", "finished"],
                                                 "task 2": ["finished"]}
    # Each thread's job group is restored: a later job of that thread is nobody's run.
    assert groups_after == {"fenced-run": None, "crashed-run": None}
