"""Run one window: Spark reads it read_committed, a transform maps records to
outputs, and one Spark task per input partition publishes them exactly once.

The transform is the only domain-specific part. It gets Spark's Kafka source
DataFrame (key, value, topic, partition, offset, timestamp, ...) and must
return, without reordering or shuffling, the columns of :data:`OUTPUT_SCHEMA`:
``partition``, ``offset`` and ``outputs``, an array of
``struct<topic, key, value, headers>`` per input record (an empty array drops
the record; its offset is still committed).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..kafka.admin import ClusterAdmin
from ..kafka.errors import AuthenticationError, AuthorizationError, BrokerUnreachableError
from . import checkpoint_log, failpoints, offsets_retention
from .errors import ProducerFencedError, TransformContractError
from .pipeline import PipelineConfig
from .publisher import PartitionPublisher, PartitionResult, publish_without_spark
from .replica_guard import ReplicaGuard, require_writable
from .superseded import step_aside
from .task_errors import diagnosed
from .task_attempts import AttemptTracker, TaskAttempts
from .window import OffsetRange, Window
from .worker_warmup import PythonWorkerWarmup

if TYPE_CHECKING:
    from ..kafka.features import FinalizedFeatures

log = logging.getLogger(__name__)


# The schemas as objects, not DDL strings: a string goes through Spark's SQL parser (ANTLR) on
# the driver JVM, which on a fresh JVM costs more than the rest of building the query.
def _output_schema():
    """The transform's contract: ``partition INT, offset BIGINT, outputs ARRAY<STRUCT<topic: STRING,
    key: BINARY, value: BINARY, headers: ARRAY<STRUCT<key: STRING, value: BINARY>>>>``."""
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    output = StructType([StructField("topic", StringType()), StructField("key", BinaryType()),
                         StructField("value", BinaryType()), StructField("headers", ArrayType(header))])
    return StructType([StructField("partition", IntegerType()), StructField("offset", LongType()),
                       StructField("outputs", ArrayType(output))])


def _result_schema():
    """Each publishing task's one row: ``partition INT, result STRING`` (its PartitionResult as JSON)."""
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    return StructType([StructField("partition", IntegerType()), StructField("result", StringType())])


@dataclass
class RunSummary:
    run_id: str
    window: Window
    partitions: list[PartitionResult] = field(default_factory=list)
    seconds: float = 0.0
    # Every Spark attempt of the publishing tasks, the losing ones included (fenced, crashed, killed).
    task_attempts: TaskAttempts = field(default_factory=TaskAttempts)

    @property
    def records_read(self) -> int:
        return sum(r.records_read for r in self.partitions)

    @property
    def records_published(self) -> int:
        return sum(r.records_published for r in self.partitions)

    @property
    def records_skipped(self) -> int:
        return sum(r.records_skipped for r in self.partitions)

    @property
    def transactions(self) -> int:
        return sum(r.transactions for r in self.partitions)

    def outputs(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for r in self.partitions:
            for topic, n in r.outputs.items():
                total[topic] = total.get(topic, 0) + n
        return total

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "window": self.window.to_dict(),
            "records_read": self.records_read,
            "records_published": self.records_published,
            "records_skipped": self.records_skipped,
            "outputs": self.outputs(),
            "transactions": self.transactions,
            "aborts": sum(r.aborts for r in self.partitions),
            # Tasks run side by side: the slowest one's wait for records is the run's read time.
            "read_seconds": max((r.read_seconds for r in self.partitions), default=0.0),
            "fenced_attempts": self.task_attempts.fenced if self.task_attempts.visible else None,
            "task_attempts": self.task_attempts.to_dict(),
            "seconds": self.seconds,
            "partitions": [r.to_dict() for r in sorted(self.partitions, key=lambda r: r.partition)],
        }


def require_grants(config: PipelineConfig) -> None:
    """Fail, naming every missing permission, when the principal lacks an ACL the run needs:
    on its topics and group (the brokers' authorized operations), and on its transactional
    ids (an ``init_transactions`` under their stem, see :func:`prove_transactional_id_access`)."""
    from confluent_kafka import KafkaException

    from ..kafka.acls import missing_grants

    try:
        missing = missing_grants(config.connection, config.resources().needed_to_run())
    except (KafkaException, TimeoutError) as exc:
        # Only the check failed (a leader moving, a broker lost); the run's own requests,
        # retried within their bounds, still fail with one clear error if it lacks an ACL.
        log.warning("could not check the principal's ACLs up front: %s",
                    exc.args[0].str() if isinstance(exc, KafkaException) else "no answer in time")
        return
    if missing:
        user = config.connection.sasl_username or "ANONYMOUS"
        raise AuthorizationError(
            f"user {user!r} lacks {'; '.join(map(str, missing))}: nothing was read or published; grant the "
            f"pipeline's ACLs with `python -m eos_etl acl grant --principal {user} --role pipeline`")
    if config.connection.sasl_username:  # the PLAINTEXT principal is the super-user: nothing to prove
        from .recovery import prove_transactional_id_access

        prove_transactional_id_access(config)


def cluster_features(config: PipelineConfig):
    """The cluster's finalised ``transaction.version`` and ``metadata.version``, logged (None if unreadable)."""
    from ..kafka.errors import KafkaSetupError
    from ..kafka.features import finalized_features

    try:
        features = finalized_features(config.connection)
    except KafkaSetupError as exc:
        log.warning("could not read the cluster's finalised features: %s", exc)
        return None
    # librdkafka speaks the version-1 transaction protocol whatever the cluster finalised; the leaders'
    # partition verification (KIP-890 part 1) guards it against late writes on either.
    log.info("cluster: %s; this producer (librdkafka) uses the version-1 transaction protocol",
             features.describe())
    return features


@dataclass
class Preflight:
    """What a passed preflight learnt: the warnings it logged (a weak output topic, offsets that may
    expire before the next run) and the cluster's finalised features (None if unreadable)."""

    warnings: list[str]
    features: FinalizedFeatures | None


def preflight(config: PipelineConfig, admin: ClusterAdmin | None = None, *,
              schedule_interval_s: float | None = None) -> Preflight:
    """Fail fast, before anything is read or published, if the run cannot work; return the
    warnings it logged and the cluster's finalised features (:class:`Preflight`).

    Every question goes to whichever broker answers and is retried on retriable
    failures (a broker lost, leaders and coordinators moving) for at most
    ``ClusterAdmin.retry_deadline_s`` (30 s) each; an unreachable cluster fails in
    ``ClusterAdmin.timeout`` (10 s). Failures are one :class:`KafkaSetupError` line.
    ``schedule_interval_s``: how often the pipeline runs, when it runs on a schedule.
    """
    admin = admin or ClusterAdmin(config.connection)
    admin.check_reachable()
    require_grants(config)  # first: without Read or Write a topic looks missing, and the error should say why
    admin.require_topics(config.input_topic, *config.output_topics)
    checkpoint_log.require_topic(admin, config.checkpoint_topic, config.input_topic)
    # Two of three brokers gone would otherwise surface as a misleading timeout, minutes later.
    require_writable(config.connection, config.output_topics)
    from ..kafka.topics import durability_warnings

    warnings: list[str] = []
    try:
        warnings += durability_warnings(admin, list(config.output_topics))
    except BrokerUnreachableError as exc:
        # Only a warning was at stake: the run itself needs the partition leaders, not this answer.
        log.warning("could not check the output topics' durability: %s", exc)
    features = cluster_features(config)
    try:
        brokers = admin.broker_configs("transaction.max.timeout.ms", offsets_retention.SETTING)
    except (AuthenticationError, AuthorizationError):
        log.warning("not allowed to read broker configs; cannot check transaction.max.timeout.ms and "
                    "%s up front", offsets_retention.SETTING)
        brokers = {}
    if brokers:
        try:
            warnings += offsets_retention.check(admin, brokers[offsets_retention.SETTING], config.checkpoint_topic,
                                                topic=config.input_topic, group=config.group,
                                                schedule_interval_s=schedule_interval_s)
        except BrokerUnreachableError as exc:
            log.warning("could not read when the pipeline last committed: %s", exc)
    for warning in warnings:
        log.warning(warning)
    max_timeout = brokers.get("transaction.max.timeout.ms")
    if max_timeout is not None and int(max_timeout) < config.transaction_timeout_ms:
        from ..errors import ConfigurationError

        raise ConfigurationError(
            f"transaction_timeout_ms={config.transaction_timeout_ms} exceeds the broker's "
            f"transaction.max.timeout.ms={max_timeout}; lower the pipeline's transaction timeout "
            "(and chunk_seconds) or raise the broker setting"
        )
    return Preflight(warnings, features)


#: Consumer settings of every bounded batch read. A range usually ends just after a
#: transaction marker, which no consumer is given; Spark's consumer then fetches once more
#: at the end of each partition, and the broker holds a fetch that finds nothing for
#: ``fetch.max.wait.ms`` (500 ms by default). Within a range there is always data, so a
#: short wait changes nothing else. Measured: 3.1 s -> 0.75 s to read 9 partitions of
#: 4,000 records.
BATCH_READ_OPTIONS = {"kafka.fetch.max.wait.ms": "10"}


# The schema of Spark's Kafka source with includeHeaders=true (for rows made without a read).
KAFKA_SOURCE_DDL = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, "
    "timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)


def kafka_batch_reader(spark, connection):
    """``spark.read.format("kafka")`` with the connection's options and :data:`BATCH_READ_OPTIONS`."""
    reader = spark.read.format("kafka")
    for key, value in {**BATCH_READ_OPTIONS, **connection.spark_options()}.items():
        reader = reader.option(key, value)
    return reader


def read_window(spark, config: PipelineConfig, window: Window):
    """Spark's Kafka source over exactly the window, read_committed, failing on data loss."""
    partitions = list(window.nonempty())
    return (
        kafka_batch_reader(spark, config.connection).option("assign", json.dumps({window.topic: partitions}))
        .option("startingOffsets", window.spark_starting_offsets())
        .option("endingOffsets", window.spark_ending_offsets())
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "true")
        .load()
    )


def _check_contract(df) -> None:
    expected = _output_schema()
    got = df.schema
    names = [f.name for f in got.fields]
    if names[:3] != ["partition", "offset", "outputs"]:
        raise TransformContractError(f"transform must return columns partition, offset, outputs; got {names}")
    for want, have in zip(expected.fields, got.fields[:3]):
        if want.dataType.simpleString() != have.dataType.simpleString():
            raise TransformContractError(
                f"column {want.name} must be {want.dataType.simpleString()}, got {have.dataType.simpleString()}"
            )


# pyarrow imports pandas the first time a Python value is converted to Arrow (a fill value, pa.array):
# 0.6 CPU s in every Python worker, for nothing. The task's code converts no Python value to Arrow.


def _list_lengths(lists) -> list[int]:
    """Each list's length, 0 for a null list (whose segment ``flatten()`` skips)."""
    import pyarrow.compute as pc

    lengths = pc.list_value_length(lists).to_pylist()
    return [n or 0 for n in lengths] if lists.null_count else lengths


def _shared_pylist(array) -> list:
    """``array.to_pylist()`` with one Python object per distinct value instead of one per row.

    For columns that repeat (topics, header names and values): the records of an open transaction
    stay buffered for replay (``chunk_records`` per partition), and a fresh ``str`` per output for
    its topic and header made a buffered shop record 1,605 instead of 1,229 bytes in Python.
    """
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(array, null_encoding="encode")  # a null becomes one more value, None
    values = encoded.dictionary.to_pylist()
    return [values[i] for i in encoded.indices.to_pylist()]


def result_batch(partition: int, result_json: str):
    """The task's one-row ``partition INT, result STRING`` batch, built from raw buffers (see above)."""
    import struct

    import pyarrow as pa

    text = result_json.encode()
    partition_a = pa.Array.from_buffers(pa.int32(), 1, [None, pa.py_buffer(struct.pack("<i", partition))])
    result_a = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(struct.pack("<ii", 0, len(text))),
                                                      pa.py_buffer(text)])
    return pa.RecordBatch.from_arrays([partition_a, result_a], names=["partition", "result"])


def arrow_records(batch):
    """Yield ``(offset, [(topic, key, value, [(header, bytes), ...]), ...])`` per row of an Arrow batch.

    Converts column by column (the flattened child arrays of ``outputs`` and
    of its ``headers``, split by list lengths) instead of ``to_pylist()`` on the
    nested column, which builds a dict per output and per header. Rows and
    outputs keep their order; a null ``outputs`` or ``headers`` is empty.
    """
    offsets = batch.column("offset").to_pylist()
    outputs = batch.column("outputs")
    counts = _list_lengths(outputs)
    # flatten() honours the array's slice offset and skips null lists' segments.
    topic_a, key_a, value_a, headers_a = outputs.flatten().flatten()
    topics = _shared_pylist(topic_a)
    keys = key_a.to_pylist()
    values = value_a.to_pylist()
    header_counts = _list_lengths(headers_a)
    header_names, header_values = headers_a.flatten().flatten()
    pairs = list(zip(_shared_pylist(header_names), _shared_pylist(header_values)))
    i = h = 0
    for offset, n in zip(offsets, counts):
        outs = []
        for j in range(i, i + n):
            nh = header_counts[j]
            outs.append((topics[j], keys[j], values[j], pairs[h:h + nh]))
            h += nh
        i += n
        yield offset, outs


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


def _publish_task(config_json: str, window_json: str):
    """Build the function each Spark task runs over its Arrow batches."""

    def publish(batches):
        import itertools

        import pyarrow.compute as pc

        from ..logging_setup import configure_task_logging

        t_task = time.monotonic()
        configure_task_logging()
        config = PipelineConfig.from_json(config_json)
        window = Window.from_json(window_json)
        batches = ReadTimer(batches)
        first = next((b for b in batches if b.num_rows), None)
        if first is None:
            return  # no rows in this Spark partition; the driver commits its offsets
        partition = first.column("partition")[0].as_py()
        log.info("task for %s[%d]: first batch (%d rows) %.2fs after the task function started",
                 window.topic, partition, first.num_rows, time.monotonic() - t_task)

        def records():
            for batch in itertools.chain([first], batches):
                if not batch.num_rows:
                    continue
                col = batch.column("partition")
                if pc.min(col).as_py() != partition or pc.max(col).as_py() != partition:
                    raise TransformContractError("a Spark partition holds several Kafka partitions; no shuffle allowed")
                yield from arrow_records(batch)

        from .watchdog import StallWatchdog

        try:
            with StallWatchdog(config.effective_stall_timeout_s) as watchdog:
                result = PartitionPublisher(config, partition, window.ranges[partition],
                                            on_progress=watchdog.kick, call_bound=watchdog.bounded
                                            ).publish(records())
        except ProducerFencedError as exc:
            # Another attempt of this task (speculation, a retry) took over: let it finish, if there is one.
            step_aside(config, partition, window.ranges[partition].end, exc)
            raise
        from . import failpoints

        failpoints.hit("before_report", partition)
        result.read_seconds = round(batches.seconds, 3)
        yield result_batch(partition, json.dumps(result.to_dict()))

    return publish


def run_window(
    spark,
    config: PipelineConfig,
    window: Window,
    transform: Callable,
    *,
    check: bool = True,
) -> RunSummary:
    """Publish ``transform(window)`` exactly once; return what this run did."""
    t0 = time.monotonic()
    if check:
        preflight(config)
    t_preflight = time.monotonic() - t0
    summary = RunSummary(run_id=config.run_id, window=window)
    log.info("run %s: window %s, transactional ids %s-%s-*", config.run_id, window,
             config.transactional_id_prefix, config.input_topic)
    if window.is_empty:
        summary.partitions = publish_without_spark(config, window.ranges)
        summary.seconds = round(time.monotonic() - t0, 3)
        log.info("run %s: window is empty: nothing to publish, committed positions renewed", config.run_id)
        return summary
    if starts := {p: OffsetRange(window.ranges[p].start, window.ranges[p].start)
                  for p in window.uncommitted if p in window.nonempty()}:
        # The group had no offset for these: their starts first, so a run that fails later still
        # leaves every partition it planned with its position committed (and checkpointed).
        with failpoints.suspended():  # the publishing path's fault points are the tasks', not this
            publish_without_spark(config, starts)
    warmup = PythonWorkerWarmup(spark, tasks=len(window.nonempty())).start()
    t_build = time.monotonic()
    out = transform(read_window(spark, config, window))
    _check_contract(out)
    t_build = time.monotonic() - t_build
    warmup.wait()
    with ReplicaGuard(spark, config.connection, config.output_topics) as guard, \
            AttemptTracker(spark, config.run_id) as attempts:
        log.info("run %s: preflight %.2fs, query built in %.2fs%s; starting %d publishing tasks",
                 config.run_id, t_preflight, t_build,
                 "" if warmup.seconds is None else f" (Python workers started alongside in {warmup.seconds}s)",
                 len(window.nonempty()))
        try:
            rows = (
                out.select("partition", "offset", "outputs")
                .mapInArrow(_publish_task(config.to_json(), window.to_json()), _result_schema())
                .collect()
            )
        except Exception as exc:
            guard.raise_if_tripped(exc)  # the outputs lost min ISR: that, not the tasks' timeouts, is the error
            if (error := diagnosed(exc)) is not None:  # the tasks' own diagnosed error: one line, its exit code
                raise error from exc
            raise
    summary.task_attempts = attempts.attempts()
    done = {}
    for row in rows:
        res = json.loads(row["result"])
        done[row["partition"]] = PartitionResult(**res)
    # Partitions whose range held no visible record (only aborted records or markers) had no
    # rows in Spark; their offsets still advance to the window end. Empty ranges renew their commit.
    missed = publish_without_spark(config, {p: rng for p, rng in window.ranges.items() if p not in done})
    summary.partitions = [*done.values(), *missed]
    summary.seconds = round(time.monotonic() - t0, 3)
    a = summary.task_attempts
    log.info(
        "run %s finished in %.1fs: read=%d published=%d skipped=%d outputs=%s transactions=%d task attempts=%s",
        config.run_id, summary.seconds, summary.records_read, summary.records_published,
        summary.records_skipped, summary.outputs(), summary.transactions,
        f"{a.total} (failed {a.failed}, fenced {a.fenced}, killed {a.killed})" if a.visible
        else "not visible to a Spark Connect client",
    )
    return summary
