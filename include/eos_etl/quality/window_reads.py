"""What a read_committed reader sees of one window: the reads of its inputs and of its outputs.

Both reads are read_committed (what the pipeline's own readers see):

* **Inputs**: Spark's Kafka batch source over exactly the window's offset ranges,
  materialised as each record's position, time and the pipeline contract's verdict
  (``partition, offset, timestamp_ms, valid``: :func:`read_inputs`).
* **Outputs**: one Kafka source over every output topic, per partition from the
  first offset whose timestamp is at or after :func:`output_bound_ms` up to the
  current end (:func:`read_outputs`). Each record is attributed to the window by
  its lineage headers (:func:`attributed_outputs`).

There is no read_uncommitted read of the outputs: what it could show (aborted
attempts in the log) no check needs, see docs/data-quality.md.

The output bound is the earliest input record time of the window minus
:data:`CLOCK_SKEW_MARGIN_MS`. Why that is safe: the publisher produces an output
only after Spark has read its input record, and it sets no timestamp
(:mod:`eos_etl.engine.publishing.producer`, ``produce_waiting`` without ``timestamp``), so
each output carries the producer's CreateTime at send (or the broker's
LogAppendTime), i.e. a time after the input record was appended. An output can
only appear earlier than its input if the clock that stamped the input runs
ahead of the publisher's; the margin covers that skew. Kafka answers a time
lookup with the first offset whose timestamp is at or after the time, so every
record at or past the bound lies at or after that offset. What is read is thus
bounded by the window's recency, not by the topic's history.

If the assumption is broken (inputs stamped further in the future than the
margin; the broker accepts up to ``log.message.timestamp.after.max.ms``), this
window's outputs are missed and validation fails loudly (outputs missing for
committed inputs), it does not pass wrongly. What the bound does hide is a
record stamped before it, e.g. a stray producer writing with an old explicit
timestamp: no pipeline output is written that way.

Records are tied to the window by their lineage headers (``source_topic``,
``source_partition``, ``source_offset``), never by ``run_id``: a re-run or a
backfill over the same window validates whatever is visible for that window.
Everything is a Spark column expression evaluated where Spark runs (a local
application, a cluster's executors, or a Spark Connect server). Nothing here
needs ``eos_etl`` code on the executors, and nothing needs the application itself
(``sparkContext``), so a Spark Connect client session does as well as a classic one.

Materialised frames are ``localCheckpoint`` results: computed once, lineage cut.
They are released when their DataFrames are garbage collected (Spark's
ContextCleaner; a Connect client asks its server to drop them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import functions as F

from ..engine.lineage import H_RUN_ID, H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC
from ..engine.tasks.kafka_source import committed_batch_reader, kafka_batch_reader, read_window
from ..engine.window import Window
from ..kafka.admin import ClusterAdmin

#: How far the clock that stamps input records may run ahead of the publisher's
#: clock (the time it stamps outputs with). Outputs stamped earlier than
#: ``earliest input time - margin`` are not read; five minutes is far beyond
#: NTP-synchronised skew and costs only five minutes of extra output to scan.
CLOCK_SKEW_MARGIN_MS = 5 * 60 * 1000

# Lineage of an output row: where its input was, which run wrote it, where it is.
LINEAGE_COLUMNS = ("source_partition", "source_offset", "run_id", "kafka_partition", "kafka_offset")
# The materialised inputs: positions, time and the contract's verdict, no values.
INPUT_DDL = "partition INT, offset BIGINT, timestamp_ms BIGINT, valid BOOLEAN"


@dataclass(frozen=True)
class OutputRead:
    """Where the output topics were read from: the time bound and the offsets it gave."""

    earliest_input_ms: int | None  # earliest input record time of the window (None: nothing to read)
    since_ms: int | None  # earliest_input_ms - margin
    margin_ms: int
    from_offsets: dict[str, dict[int, int]]  # topic -> partition -> first offset read
    end_offsets: dict[str, dict[int, int]]  # topic -> partition -> last stable offset when looked up

    @property
    def span(self) -> int:
        """Offsets between the start and the end seen at lookup (an upper bound on records read)."""
        return sum(self.end_offsets[t][p] - o for t, parts in self.from_offsets.items() for p, o in parts.items())

    def to_dict(self) -> dict:
        return {"earliest_input_ms": self.earliest_input_ms, "since_ms": self.since_ms,
                "clock_skew_margin_ms": self.margin_ms, "span": self.span,
                "from_offsets": {t: {str(p): o for p, o in sorted(parts.items())}
                                 for t, parts in self.from_offsets.items()}}


def committed_offsets(settings, window: Window) -> dict[int, int | None]:
    """The group's committed offsets for the window's partitions (stable semantics)."""
    return ClusterAdmin(settings.connection).committed_offsets(settings.group, window.topic, window.partitions)


def materialise(df):
    """Compute once and cut the lineage, so that every later query scans the result
    instead of reading Kafka and parsing the JSON again."""
    return df.localCheckpoint(eager=True)


def read_inputs(spark, settings, window: Window):
    """The window's input records as a read_committed reader sees them (exactly its offset ranges), as
    positions with their time and the pipeline contract's verdict (:data:`INPUT_DDL`), materialised."""
    if window.is_empty:
        return spark.createDataFrame([], INPUT_DDL)
    checked = settings.reject_reasons()(read_window(spark, settings.pipeline(), window))
    return materialise(checked.select("partition", "offset", F.unix_millis("timestamp").alias("timestamp_ms"),
                                      F.col("_reason").isNull().alias("valid")))


def output_bound_ms(earliest_input_ms: int | None, margin_ms: int = CLOCK_SKEW_MARGIN_MS) -> int | None:
    """The earliest output timestamp this window's outputs can carry (see the module docstring)."""
    return None if earliest_input_ms is None else max(0, earliest_input_ms - margin_ms)


def output_start_offsets(admin: ClusterAdmin, topics: tuple[str, ...], since_ms: int | None
                         ) -> tuple[dict[str, dict[int, int]], dict[str, dict[int, int]]]:
    """(first offset to read, last stable offset) per topic and partition.

    The first offset is the first one whose timestamp is at or after ``since_ms``;
    where there is none below the last stable offset (or nothing to read at all,
    ``since_ms`` None), the last stable offset itself: no committed record can be
    there before the read, and anything committed meanwhile is still read.
    """
    starts: dict[str, dict[int, int]] = {}
    ends: dict[str, dict[int, int]] = {}
    for topic in topics:
        parts = admin.partitions(topic)
        ends[topic] = {p: o.last_stable for p, o in admin.offsets(topic, parts).items()}
        found = admin.offsets_for_time(topic, parts, since_ms) if since_ms is not None else {}
        starts[topic] = {p: min(ends[topic][p], found[p]) if found.get(p) is not None else ends[topic][p]
                         for p in parts}
    return starts, ends


def read_outputs(spark, connection, starts: dict[str, dict[int, int]]):
    """The output topics from ``starts`` to the current end, with headers, read_committed (lazy), by
    consumers the window's own read could have used (pooled on a Spark Connect server)."""
    return (
        committed_batch_reader(spark, connection)
        .option("assign", json.dumps({t: sorted(parts) for t, parts in starts.items()}))
        .option("startingOffsets", json.dumps({t: {str(p): o for p, o in parts.items()}
                                               for t, parts in starts.items()}))
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "true")
        .load()
    )


def earliest_uncommitted_ms(spark, connection, window: Window) -> int | None:
    """Earliest record time in the window read_uncommitted: the bound when no input is committed
    (an output of an aborted input must still be found)."""
    if window.is_empty:
        return None
    df = (kafka_batch_reader(spark, connection)
          .option("assign", json.dumps({window.topic: list(window.nonempty())}))
          .option("startingOffsets", window.spark_starting_offsets())
          .option("endingOffsets", window.spark_ending_offsets())
          .option("kafka.isolation.level", "read_uncommitted")
          .load())
    return df.select(F.unix_millis(F.min("timestamp"))).first()[0]


def _header(name: str):
    """A header's value as text: the last one of that name, as a client's dict of headers sees it."""
    matching = F.filter("headers", lambda h: h["key"] == F.lit(name))
    return F.try_element_at(matching, F.lit(-1))["value"].cast("string")


def _in_window(window: Window, partition, offset):
    ranges = [(partition == p) & (offset >= r.start) & (offset < r.end) for p, r in window.nonempty().items()]
    return F.coalesce(reduce(lambda a, b: a | b, ranges), F.lit(False)) if ranges else F.lit(False)


def attributed_outputs(raw, window: Window):
    """Output rows whose ``source_topic`` is the window's input topic, with typed lineage columns.

    ``attributable``: the partition/offset headers parse; ``in_window``: they
    point into the window. Computed where Spark runs.
    """
    source_partition = _header(H_SOURCE_PARTITION).try_cast("int")
    source_offset = _header(H_SOURCE_OFFSET).try_cast("bigint")
    df = raw.where(_header(H_SOURCE_TOPIC) == F.lit(window.topic)).select(
        "topic", "value",
        F.col("partition").alias("kafka_partition"), F.col("offset").alias("kafka_offset"),
        source_partition.alias("source_partition"), source_offset.alias("source_offset"),
        _header(H_RUN_ID).alias("run_id"), _header("dlq_reason").alias("dlq_reason"),
    )
    attributable = F.col("source_partition").isNotNull() & F.col("source_offset").isNotNull()
    return (df.withColumn("attributable", attributable)
            .withColumn("in_window", attributable & _in_window(window, F.col("source_partition"),
                                                               F.col("source_offset"))))
