"""The publishing task: what each Spark task of a run does with its input partition.

The driver runs ``mapInArrow(publish_task(config, window), result_schema())`` over the
transform's columns; Spark's Kafka source makes one Spark partition per input partition and the
transform keeps it (:mod:`.transform_contract`), so each task publishes one input partition:

1. wait for the first non-empty Arrow batch; with none, return no row (the driver commits the
   partition's window end without Spark: a range of only aborted records or markers);
2. decode the batches into input records (:func:`~.arrow_codec.arrow_records`), failing with
   :class:`~eos_etl.engine.errors.TransformContractError` on a batch that holds another input
   partition (the transform shuffled);
3. publish them with :class:`~.publisher.PartitionPublisher` under a
   :class:`~.watchdog.StallWatchdog`: a task with no progress for ``stall_timeout_s`` is crashed
   so that Spark retries it;
4. fenced by another attempt of itself (a retry, speculation): step aside until that attempt
   finishes (:func:`~.superseded.step_aside`), then fail as fenced;
5. return one row, ``partition INT, result STRING``: its
   :class:`~.publisher.PartitionResult` as JSON, with the time spent waiting for Spark's
   batches (reading Kafka, running the transform) as ``read_seconds`` and the task's Spark
   partition (which names the input partition of every attempt of that task in the summary).

The function is built on the driver and pickled to the executors with its JSON arguments (the
pipeline's config and the window) and what the driver knows of the cluster: that it answered
this run (its preflight and planning did), which the task's own process cannot know. A broker
that stops answering a task is then a broker lost under a run that was set up right
(:class:`~eos_etl.kafka.errors.BrokerLostError`, exit code 1, retried), as on the driver, not a
cluster that never answered (exit code 2: :mod:`eos_etl.kafka.reachability`).
"""

from __future__ import annotations

import itertools
import json
import logging
import time

from ..kafka import reachability
from ..logging_setup import configure_task_logging
from . import failpoints
from .arrow_codec import arrow_records, result_batch
from .errors import ProducerFencedError, TransformContractError
from .pipeline import PipelineConfig
from .publisher import PartitionPublisher
from .superseded import step_aside
from .task_process import named_as_task
from .watchdog import StallWatchdog
from .window import Window

log = logging.getLogger(__name__)


def result_schema():
    """Each publishing task's one row: ``partition INT, result STRING`` (its PartitionResult as JSON)."""
    # Deferred: the engine's modules load no Spark code until a run builds its query.
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    return StructType([StructField("partition", IntegerType()), StructField("result", StringType())])


class ReadTimer:
    """Iterates Spark's Arrow batches, adding up the time spent waiting for the next one
    (reading Kafka and running the transform), as opposed to publishing."""

    def __init__(self, batches):
        self._batches = iter(batches)
        self.seconds = 0.0

    def __iter__(self):
        return self

    def __next__(self):
        t = time.monotonic()
        try:
            return next(self._batches)
        finally:
            self.seconds += time.monotonic() - t


def publish_task(config_json: str, window_json: str, *, answered: bool = False):
    """Build the function each Spark task runs over its Arrow batches; ``answered``: the cluster answered the
    driver in this run (:func:`~eos_etl.kafka.reachability.has_answered`), so the task's process remembers it."""

    def publish(batches):
        with named_as_task():  # while it runs, `ps` names this worker (engine.task_process)
            yield from _publish(batches)

    def _publish(batches):
        # Deferred: pyarrow's and pyspark's imports are paid in the Python workers, not by everything that
        # imports the engine.
        import pyarrow.compute as pc
        from pyspark import TaskContext

        t_task, cpu_task = time.monotonic(), time.process_time()
        configure_task_logging()
        config = PipelineConfig.from_json(config_json)
        window = Window.from_json(window_json)
        if answered:
            reachability.mark_answered(config.connection)
        batches = ReadTimer(batches)
        first = next((b for b in batches if b.num_rows), None)
        if first is None:
            return  # no rows in this Spark partition; the driver commits its offsets
        partition = first.column("partition")[0].as_py()
        log.info("task for %s[%d]: first batch (%d rows) %.2fs after the task function started",
                 window.topic, partition, first.num_rows, time.monotonic() - t_task)

        decode_seconds = 0.0  # the time spent turning batches into records

        def records():
            nonlocal decode_seconds
            for batch in itertools.chain([first], batches):
                if not batch.num_rows:
                    continue
                t = time.monotonic()
                col = batch.column("partition")
                if pc.min(col).as_py() != partition or pc.max(col).as_py() != partition:
                    raise TransformContractError("a Spark partition holds several Kafka partitions; no shuffle allowed")
                # A batch at a time (Spark's Arrow batches, 10,000 rows by default), so its decoding is timed
                # with two clock reads, not two per record.
                decoded = list(arrow_records(batch))
                decode_seconds += time.monotonic() - t
                yield from decoded

        try:
            with StallWatchdog(config.effective_stall_timeout_s) as watchdog:
                result = PartitionPublisher(config, partition, window.ranges[partition],
                                            on_progress=watchdog.kick, call_bound=watchdog.bounded
                                            ).publish(records())
        except ProducerFencedError as exc:
            # Another attempt of this task (speculation, a retry) took over: let it finish, if there is one.
            step_aside(config, partition, window.ranges[partition].end, exc)
            raise
        failpoints.hit("before_report", partition)
        result.read_seconds = round(batches.seconds, 3)
        result.decode_seconds = round(decode_seconds, 3)
        # The Python worker's CPU (its threads too: librdkafka's), for the per-record breakdown.
        result.worker_cpu_seconds = round(time.process_time() - cpu_task, 3)
        result.spark_partition = TaskContext.get().partitionId()
        yield result_batch(partition, json.dumps(result.to_dict()))

    return publish
