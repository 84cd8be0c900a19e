"""A Spark job whose tasks ended in one of the project's errors fails the run with that error (a real
SparkSession). The diagnosis from an error's text alone: tests/unit/engine/tasks/test_task_errors.py."""

from __future__ import annotations

import pytest

from eos_etl.engine.errors import ProducerFencedError, TransformContractError
from eos_etl.engine.tasks.task_errors import diagnosed


@pytest.mark.spark
def test_a_spark_job_whose_tasks_keep_failing_ends_in_their_error(spark):
    def publish(rows):
        from eos_etl.engine.errors import TransformContractError

        raise TransformContractError("a Spark partition holds several Kafka partitions; no shuffle allowed")
        yield  # a generator, as Spark's mapPartitions wants

    with pytest.raises(Exception) as failed:  # Spark's own exception, whichever its class
        spark.sparkContext.parallelize(range(4), 2).mapPartitions(publish).collect()
    error = diagnosed(failed.value)
    assert type(error) is TransformContractError and error.exit_code == 2, str(failed.value)[-2000:]
    assert "no shuffle allowed" in str(error)

    def fenced(rows):
        from eos_etl.engine.errors import ProducerFencedError

        raise ProducerFencedError("commit_transaction failed for transactional.id t-1: fenced by a newer instance")
        yield

    with pytest.raises(Exception) as failed:
        spark.sparkContext.parallelize(range(4), 2).mapPartitions(fenced).collect()
    error = diagnosed(failed.value)
    assert type(error) is ProducerFencedError and error.exit_code == 1, str(failed.value)[-2000:]
