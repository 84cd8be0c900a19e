"""The publishing task: what each Spark task of a run does with its writer slot's input partitions.

The driver runs ``mapInArrow(publish_task(config, window), result_schema())`` over the
transform's columns; Spark's Kafka source makes one Spark partition per input partition, or with
writer slots one per slot, its partitions one after another (:func:`~.kafka_source.read_window`),
and the transform keeps it (:mod:`.transform_contract`), so each task publishes one slot (without
slots: one partition):

1. wait for the first non-empty Arrow batch; with none, return no row (the driver commits the
   partitions' window ends without Spark: ranges of only aborted records or markers); its
   partition names the slot;
2. split the batches into one stream per run of one partition's rows (:class:`StreamDecoder`),
   decoded into input records (:func:`~.arrow_codec.arrow_records`);
3. publish them with :class:`~.publisher.SlotPublisher` under a :class:`~.watchdog.StallWatchdog`
   (a task with no progress for ``stall_timeout_s`` is crashed so that Spark retries it), which
   fails with :class:`~eos_etl.engine.errors.TransformContractError` on a partition of another slot
   or one that comes twice (the transform shuffled);
4. fenced by another attempt of itself (a retry, speculation): step aside until that attempt
   finishes the partition this one was publishing (:func:`~.superseded.step_aside`), then fail as
   fenced;
5. return a row per partition of the slot, ``partition INT, result STRING``: its
   :class:`~.publisher.PartitionResult` as JSON, with its share of the time spent waiting for
   Spark's batches (reading Kafka, running the transform) as ``read_seconds`` and the task's Spark
   partition (which names the input partitions of every attempt of that task in the summary).

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

from ...kafka import reachability
from ...logging_setup import configure_task_logging
from .. import failpoints
from ..errors import ProducerFencedError
from ..pipeline import PipelineConfig
from ..publishing.publisher import SlotPublisher
from ..publishing.superseded import step_aside
from ..window import Window
from .arrow_codec import arrow_records, result_batch
from .task_process import named_as_task
from .watchdog import StallWatchdog

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


class StreamDecoder:
    """Spark's Arrow batches of one task as ``(partition, records)`` streams, one per run of rows of one
    input partition (a writer slot's task reads its partitions one after another, and a batch may hold the
    end of one and the start of the next), each decoded into input records a batch slice at a time
    (:func:`~.arrow_codec.arrow_records`). ``seconds``: per partition, the time spent decoding."""

    def __init__(self, batches):
        self._batches = batches
        self.seconds: dict[int, float] = {}

    def _runs(self):
        """``(partition, batch slice)`` per run of one partition's rows, in order."""
        import pyarrow.compute as pc  # deferred: paid in the Python workers (see publish_task)

        for batch in self._batches:
            if not batch.num_rows:
                continue
            col = batch.column("partition")
            low, high = pc.min_max(col).values()
            if low == high:
                yield low.as_py(), batch
                continue
            parts = col.to_pylist()
            start = 0
            for i in range(1, len(parts) + 1):
                if i == len(parts) or parts[i] != parts[start]:
                    yield parts[start], batch.slice(start, i - start)
                    start = i

    def streams(self):
        for partition, runs in itertools.groupby(self._runs(), key=lambda run: run[0]):
            yield partition, self._records(partition, runs)

    def _records(self, partition: int, runs):
        for _p, batch in runs:
            t = time.monotonic()
            # A batch at a time (Spark's Arrow batches, 10,000 rows by default), so its decoding is timed
            # with two clock reads, not two per record.
            decoded = list(arrow_records(batch))
            self.seconds[partition] = self.seconds.get(partition, 0.0) + time.monotonic() - t
            yield from decoded


def publish_task(config_json: str, window_json: str, *, answered: bool = False):
    """Build the function each Spark task runs over its Arrow batches; ``answered``: the cluster answered the
    driver in this run (:func:`~eos_etl.kafka.reachability.has_answered`), so the task's process remembers it."""

    def publish(batches):
        with named_as_task():  # while it runs, `ps` names this worker (engine.tasks.task_process)
            yield from _publish(batches)

    def _publish(batches):
        # Deferred: pyspark's import is paid in the Python workers, not by everything that imports the engine.
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
        slot = config.slot_of(partition)
        ranges = {p: r for p, r in window.nonempty().items() if config.slot_of(p) == slot}
        log.info("task for %s[%d] (writer slot %d of %d partitions): first batch (%d rows) %.2fs after the task "
                 "function started", window.topic, partition, slot, len(ranges), first.num_rows,
                 time.monotonic() - t_task)
        decoding = StreamDecoder(itertools.chain([first], batches))
        try:
            with StallWatchdog(config.effective_stall_timeout_s) as watchdog:
                results = SlotPublisher(config, ranges, on_progress=watchdog.kick, call_bound=watchdog.bounded
                                        ).publish(decoding.streams())
        except ProducerFencedError as exc:
            # Another attempt of this task (speculation, a retry) took over: let it finish the partition this
            # one was publishing, if there is one.
            fenced = partition if exc.partition is None else exc.partition
            step_aside(config, fenced, window.ranges[fenced].end, exc)
            raise
        for result in results:
            failpoints.hit("before_report", result.partition)
        # The Python worker's CPU (its threads too: librdkafka's), for the per-record breakdown: the slot's
        # task is one process, so its partitions share it, each its part of the records read.
        cpu = time.process_time() - cpu_task
        read = max(1, sum(r.records_read for r in results))
        spark_partition = TaskContext.get().partitionId()
        for result in results:
            share = result.records_read / read if len(results) > 1 else 1.0
            result.read_seconds = round(batches.seconds * share, 3)
            result.decode_seconds = round(decoding.seconds.get(result.partition, 0.0), 3)
            result.worker_cpu_seconds = round(cpu * share, 3)
            result.spark_partition = spark_partition
            yield result_batch(result.partition, json.dumps(result.to_dict()))

    return publish
