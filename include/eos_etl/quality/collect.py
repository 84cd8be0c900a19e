"""What a reader sees for one window, row by row: the reads, the parsing and the record frames.

The window's profile (:mod:`eos_etl.quality.profile`) reads each source once into an
aggregate with the functions here (the output bound, the attribution by lineage, the
parsing of a value against its topic's schema). A window the profile cannot pass is
read again row by row, both reads read_committed (what the pipeline's own readers see):

* **Inputs**: Spark's Kafka batch source over exactly the window's offset ranges,
  materialised as each record's position, time and the shop contract's verdict
  (``partition, offset, timestamp_ms, valid``).
* **Outputs**: one Kafka source over every output topic, per partition from the
  first offset whose timestamp is at or after :func:`output_bound_ms` up to the
  current end. Each record is attributed to the window by its lineage headers,
  its value parsed once with its topic's schema, and only the columns the checks
  use are materialised: lineage, the dead-letter reason, and for invoices and
  shipments the checked fields plus ``missing_required``, ``schema_mismatch`` and
  the uniqueness columns. The suites' record frames, their exact counts per check
  and their failing rows come from it.

There is no read_uncommitted read: what it could show (aborted attempts in the
log) no check needs, see docs/data-quality.md.

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
application, a cluster's executors, or a Spark Connect server); the caller
receives only aggregates and a few failing rows. Nothing here needs
``eos_etl`` code on the executors, and nothing needs the application itself
(``sparkContext``), so a Spark Connect client session does as well as a classic one.

Materialised frames are ``localCheckpoint`` results: computed once, lineage cut.
They are released when their DataFrames are garbage collected (Spark's
ContextCleaner; a Connect client asks its server to drop them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Window as W
from pyspark.sql import functions as F

from ..engine.lineage import H_RUN_ID, H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC
from ..engine.tasks.kafka_source import kafka_batch_reader, read_window
from ..engine.window import Window
from ..kafka.admin import ClusterAdmin
from ..shop.schema import INVOICE_DECIMALS, INVOICE_FIELDS, INVOICE_REQUIRED, SHIPMENT_FIELDS, SHIPMENT_REQUIRED

#: How far the clock that stamps input records may run ahead of the publisher's
#: clock (the time it stamps outputs with). Outputs stamped earlier than
#: ``earliest input time - margin`` are not read; five minutes is far beyond
#: NTP-synchronised skew and costs only five minutes of extra output to scan.
CLOCK_SKEW_MARGIN_MS = 5 * 60 * 1000

#: Failing rows sent to the driver per check, for the report.
EXAMPLE_LIMIT = 5

# Where from_json puts the whole value when a field does not parse as its type (the other
# fields are still parsed: Spark's partial results).
CORRUPT = "_corrupt_record"
# Exact arithmetic: wide enough that quantity x unit_price never rounds.
_EXACT_PRICE = "decimal(26,8)"
_EXACT_TOTAL = "decimal(38,8)"
# Lineage of an output row: where its input was, which run wrote it, where it is.
LINEAGE_COLUMNS = ("source_partition", "source_offset", "run_id", "kafka_partition", "kafka_offset")
# The materialised inputs: positions, time and the contract's verdict, no values.
INPUT_DDL = "partition INT, offset BIGINT, timestamp_ms BIGINT, valid BOOLEAN"


def ddl(fields) -> str:
    """``(name, type)`` pairs as a Spark DDL string."""
    return ", ".join(f"{name} {type_}" for name, type_ in fields)


@dataclass
class OutputCounts:
    """One output topic's records attributed to the window (read_committed)."""

    topic: str
    count: int = 0
    unattributable: int = 0  # source_topic matches, partition/offset headers unreadable
    surplus: int = 0  # records beyond the first for the same source record
    per_source_partition: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class InputSummary:
    """The window's committed inputs: per partition, their earliest time, and the contract's verdicts."""

    per_partition: dict[int, int]
    earliest_ms: int | None
    valid: int
    invalid: int


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


@dataclass
class RecordFrames:
    """A failing window read again row by row, materialised: what its exact counts and failing rows
    come from (see :mod:`eos_etl.quality.profile` for when)."""

    inputs: object  # DataFrame: the window's inputs as positions (INPUT_DDL)
    outputs: object  # DataFrame: attributed output rows, typed (see window_outputs)
    invoices: object
    shipments: object
    pairing: object

    def suite(self, name: str):
        return {"invoices": self.invoices, "shipments": self.shipments, "pairing": self.pairing}[name]

    def examples_of_aborted_visible(self, limit: int = EXAMPLE_LIMIT) -> list[dict]:
        """Visible outputs whose source record is no read_committed input of the window."""
        keys = _input_keys(self.inputs)
        rows = (self.outputs.where("attributable").join(keys, ["source_partition", "source_offset"], "left_anti")
                .select("topic", *LINEAGE_COLUMNS).limit(limit).collect())
        return [r.asDict() for r in rows]

    def examples_of_inputs_without_output(self, limit: int = EXAMPLE_LIMIT) -> list[dict]:
        keys = self.outputs.where("attributable").select("source_partition", "source_offset")
        rows = (_input_keys(self.inputs).join(keys, ["source_partition", "source_offset"], "left_anti")
                .limit(limit).collect())
        return [r.asDict() for r in rows]


@dataclass
class WindowEvidence:
    """Everything the suites check, per input partition, however it was found."""

    window: Window
    inputs_summary: InputSummary
    invoices: OutputCounts
    shipments: OutputCounts
    dead_letters: OutputCounts
    committed_offsets: dict[int, int | None]
    output_read: OutputRead
    #: suite -> check -> input partition -> records failing the check (see profile.ROW_CHECKS)
    failing: dict[str, dict[str, dict[int, int]]] = field(default_factory=dict)
    aborted_visible: int = 0  # read_committed outputs whose source offset is no read_committed input
    inputs_without_output: int = 0
    dead_letters_by_reason: dict[str, int] = field(default_factory=dict)
    records: RecordFrames | None = None  # only for a window the profile could not pass
    seconds: float = 0.0

    @property
    def inputs_per_partition(self) -> dict[int, int]:
        return self.inputs_summary.per_partition

    @property
    def committed_inputs(self) -> int:
        return sum(self.inputs_per_partition.values())

    @property
    def by_topic(self) -> tuple[OutputCounts, OutputCounts, OutputCounts]:
        return (self.invoices, self.shipments, self.dead_letters)


def committed_offsets(settings, window: Window) -> dict[int, int | None]:
    """The group's committed offsets for the window's partitions (stable semantics)."""
    return ClusterAdmin(settings.connection).committed_offsets(settings.group, window.topic, window.partitions)


# -- reading -------------------------------------------------------------------------


def _materialise(df):
    """Compute once and cut the lineage, so that every later query scans the result
    instead of reading Kafka and parsing the JSON again."""
    return df.localCheckpoint(eager=True)


def read_inputs(spark, settings, window: Window):
    """The window's input records as a read_committed reader sees them (exactly its offset ranges), as
    positions with their time and the shop contract's verdict (:data:`INPUT_DDL`), materialised."""
    if window.is_empty:
        return spark.createDataFrame([], INPUT_DDL)
    checked = settings.reject_reasons()(read_window(spark, settings.pipeline(), window))
    return _materialise(checked.select("partition", "offset", F.unix_millis("timestamp").alias("timestamp_ms"),
                                       F.col("_reason").isNull().alias("valid")))


def input_summary(inputs) -> InputSummary:
    """Records per partition, the earliest record time and the valid/invalid split, in one aggregate."""
    rows = inputs.groupBy("partition").agg(F.count(F.lit(1)).alias("n"), F.min("timestamp_ms").alias("earliest"),
                                           F.count_if("valid").alias("valid")).collect()
    earliest = [r["earliest"] for r in rows if r["earliest"] is not None]
    valid = sum(int(r["valid"] or 0) for r in rows)
    per_partition = {int(r["partition"]): int(r["n"]) for r in rows}
    return InputSummary(per_partition, min(earliest) if earliest else None, valid,
                        sum(per_partition.values()) - valid)


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
    """The output topics from ``starts`` to the current end, with headers, read_committed (lazy)."""
    return (
        kafka_batch_reader(spark, connection)
        .option("assign", json.dumps({t: sorted(parts) for t, parts in starts.items()}))
        .option("startingOffsets", json.dumps({t: {str(p): o for p, o in parts.items()}
                                               for t, parts in starts.items()}))
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", "read_committed")
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


# -- one record's value against its topic's schema ------------------------------------


def parse_value(value, fields):
    """``value`` (JSON bytes) parsed with ``fields`` plus :data:`CORRUPT`, which holds the whole text
    when the value is no JSON object or a field does not parse as its type."""
    return F.from_json(value.cast("string"), f"{ddl(fields)}, {CORRUPT} STRING",
                       {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})


def _present(j, name: str):
    """The field is in the JSON text with a non-null value although it did not parse (evaluated only
    for a value that did not match its schema)."""
    return F.coalesce(F.get_json_object(j[CORRUPT], f"$.{name}").isNotNull(), F.lit(False))


def _names(flags):
    """``(condition, name)`` pairs -> the names whose condition holds, comma-separated; null for none."""
    return F.nullif(F.concat_ws(",", *[F.when(cond, F.lit(name)) for cond, name in flags]), F.lit(""))


def missing_required(j, required):
    """The ``required`` fields absent or null in the JSON (one column checks them all: null when all are
    set). A field present with a value of the wrong type is not missing: :func:`schema_mismatch` names it."""
    return _names([(j[f].isNull() & ~_present(j, f), f) for f in required])


def schema_mismatch(j, fields, decimals=()):
    """Fields of a parsed value (:func:`parse_value`) present in the JSON but not of their type, and
    ``decimals`` whose text is no decimal, comma-separated; ``value`` when the value is no JSON object
    of the schema at all; null when it matches."""
    wrong_type = _names([(j[name].isNull() & _present(j, name), name) for name, _ in fields])
    corrupt = F.when(j[CORRUPT].isNotNull(), F.coalesce(wrong_type, F.lit("value")))
    not_decimal = [F.when(j[d].isNotNull() & j[d].try_cast(_EXACT_TOTAL).isNull(), F.lit(d)) for d in decimals]
    return F.nullif(F.concat_ws(",", corrupt, *not_decimal), F.lit(""))


def invoice_columns(j) -> dict:
    quantity = j["quantity"]
    price = j["unit_price"].try_cast(_EXACT_PRICE)
    total = j["total"].try_cast(_EXACT_TOTAL)
    expected = price * quantity.cast("decimal(10,0)")
    # Judged only where all three parse: a missing or malformed amount is its own check's finding.
    matches = F.when(quantity.isNotNull() & price.isNotNull() & total.isNotNull(), total == expected)
    wrong = F.coalesce(~matches, F.lit(False))
    return {
        "invoice_id": j["invoice_id"], "purchase_id": j["purchase_id"], "quantity": quantity,
        "unit_price": j["unit_price"].try_cast("decimal(14,2)"), "currency": j["currency"],
        "total_matches": matches,
        # The texts only where the total is wrong: the examples show them, no other row carries them.
        "total_text": F.when(wrong, j["total"]), "expected_total_text": F.when(wrong, expected.cast("string")),
        "missing_required": missing_required(j, INVOICE_REQUIRED),
        "schema_mismatch": schema_mismatch(j, INVOICE_FIELDS, INVOICE_DECIMALS),
    }


def shipment_columns(j) -> dict:
    return {
        "shipment_id": j["shipment_id"], "invoice_id": j["invoice_id"], "purchase_id": j["purchase_id"],
        "quantity": j["quantity"],
        "missing_required": missing_required(j, SHIPMENT_REQUIRED),
        "schema_mismatch": schema_mismatch(j, SHIPMENT_FIELDS),
    }


def window_outputs(spark, connection, starts: dict[str, dict[int, int]], window: Window, *,
                   invoices_topic: str, shipments_topic: str):
    """The read_committed output rows of the window in one read, materialised: lineage, ``dlq_reason``
    and, for invoices and shipments, their checked fields parsed once (the union of
    :func:`invoice_columns` and :func:`shipment_columns`, null on other topics' rows). Unattributable
    rows are kept too (wherever their source is, so that they are counted); other windows' are not."""
    rows = attributed_outputs(read_outputs(spark, connection, starts), window).where("in_window OR NOT attributable")
    is_invoice = F.col("topic") == F.lit(invoices_topic)
    is_shipment = F.col("topic") == F.lit(shipments_topic)
    kept = ["topic", "attributable", "dlq_reason", *LINEAGE_COLUMNS]
    # Parsed in a projection of its own: Spark keeps it apart from the one below (whose columns refer
    # to it many times) instead of parsing again per reference.
    parsed = rows.select(*kept, F.when(is_invoice, parse_value(F.col("value"), INVOICE_FIELDS)).alias("inv"),
                         F.when(is_shipment, parse_value(F.col("value"), SHIPMENT_FIELDS)).alias("shp"))
    invoice, shipment = invoice_columns(F.col("inv")), shipment_columns(F.col("shp"))
    typed = []
    for name in dict.fromkeys([*invoice, *shipment]):
        column = F.when(is_invoice, invoice[name]) if name in invoice else None
        if name in shipment:
            column = (column.when(is_shipment, shipment[name]) if column is not None
                      else F.when(is_shipment, shipment[name]))
        typed.append(column.alias(name))
    return _materialise(with_repeats(parsed.select(*kept, *typed), invoices_topic, shipments_topic))


def with_repeats(outputs, invoices_topic: str, shipments_topic: str):
    """``outputs`` plus ``repeated_id`` (an invoice's or shipment's id where another record of its topic
    has the same one) and ``repeated_source`` (``partition:offset`` of the input record where another
    record of its topic claims the same one); null where the record is the only one. Computed here,
    in the one pass that materialises the outputs, so that the uniqueness checks scan the result
    instead of shuffling it again for each of their metrics."""
    record_id = (F.when(F.col("topic") == F.lit(invoices_topic), F.col("invoice_id"))
                 .when(F.col("topic") == F.lit(shipments_topic), F.col("shipment_id")))
    with_id = outputs.withColumn("_record_id", record_id)
    same_id = F.count(F.lit(1)).over(W.partitionBy("topic", "_record_id"))
    same_source = F.count(F.lit(1)).over(W.partitionBy("topic", "source_partition", "source_offset"))
    source = F.concat_ws(":", F.col("source_partition").cast("string"), F.col("source_offset").cast("string"))
    return with_id.select(
        *outputs.columns,
        F.when(F.col("_record_id").isNotNull() & (same_id > 1), F.col("_record_id")).alias("repeated_id"),
        F.when(F.col("attributable") & (same_source > 1), source).alias("repeated_source"))


def topic_rows(outputs, topic: str):
    """The attributed rows of one output topic in :func:`window_outputs`."""
    return outputs.where((F.col("topic") == topic) & F.col("attributable"))


def invoices_frame(outputs, topic: str):
    """Invoices of the window: the checked fields, ``total_matches``, the two check columns, lineage."""
    return topic_rows(outputs, topic).select(
        "invoice_id", "purchase_id", "quantity", "unit_price", "currency", "total_matches", "total_text",
        "expected_total_text", "missing_required", "schema_mismatch", "repeated_id", "repeated_source",
        *LINEAGE_COLUMNS)


def shipments_frame(outputs, topic: str):
    return topic_rows(outputs, topic).select(
        "shipment_id", "invoice_id", "purchase_id", "quantity", "missing_required", "schema_mismatch",
        "repeated_id", "repeated_source", *LINEAGE_COLUMNS)


def _input_keys(inputs):
    return inputs.select(F.col("partition").alias("source_partition"), F.col("offset").alias("source_offset"))


# -- aggregates (all computed in Spark; the caller gets a few rows) -------------------


def output_counts(outputs, topics: dict[str, str]) -> dict[str, OutputCounts]:
    """Per output topic: count, unattributable, surplus, per source partition (from
    :func:`window_outputs`). ``topics`` maps a short name (invoices, ...) to the topic."""
    per_source = (outputs.groupBy("topic", "attributable", "source_partition", "source_offset")
                  .agg(F.count(F.lit(1)).alias("n")))
    rows = (per_source.groupBy("topic", "attributable", "source_partition")
            .agg(F.sum("n").alias("records"), F.sum(F.col("n") - 1).alias("surplus")).collect())
    out = {name: OutputCounts(topic) for name, topic in topics.items()}
    by_topic = {c.topic: c for c in out.values()}
    for r in rows:
        c = by_topic[r["topic"]]
        if not r["attributable"]:
            c.unattributable += int(r["records"])
            continue
        c.count += int(r["records"])
        c.surplus += int(r["surplus"])
        c.per_source_partition[int(r["source_partition"])] = int(r["records"])
    return out


def lineage_gaps(inputs, outputs) -> tuple[int, int]:
    """(visible outputs whose source is no committed input, committed inputs without any output)."""
    per_source = (outputs.where("attributable").groupBy("source_partition", "source_offset")
                  .agg(F.count(F.lit(1)).alias("outputs")))
    keys = _input_keys(inputs).withColumn("is_input", F.lit(True))
    row = (keys.join(per_source, ["source_partition", "source_offset"], "full_outer")
           .agg(F.sum(F.when(F.col("is_input").isNull(), F.col("outputs"))).alias("aborted_visible"),
                F.count_if(F.col("outputs").isNull()).alias("inputs_without_output"))
           .first())
    return int(row["aborted_visible"] or 0), int(row["inputs_without_output"] or 0)


def dead_letters_by_reason(dead_letters) -> dict[str, int]:
    """Dead letters of the window per ``dlq_reason`` header (``"(none)"`` when it is missing)."""
    rows = dead_letters.groupBy("dlq_reason").count().collect()
    return {(r["dlq_reason"] if r["dlq_reason"] is not None else "(none)"): int(r["count"])
            for r in sorted(rows, key=lambda r: (-r["count"], str(r["dlq_reason"])))}


# -- the pairing frame ------------------------------------------------------------------


def pairing_frame(invoices_df, shipments_df):
    """Invoices full-outer-joined with shipments on invoice_id.

    Columns ``invoice_without_shipment`` / ``shipment_without_invoice`` /
    ``pair_mismatch`` hold the offending id (null when fine), so the
    expectations "to be null" report the unpaired ids themselves. The lineage
    columns are the invoice's, or the shipment's where there is no invoice.
    """
    i = invoices_df.select(
        F.col("invoice_id").alias("i_invoice_id"), F.col("purchase_id").alias("i_purchase_id"),
        F.col("quantity").alias("i_quantity"), *(F.col(c).alias(f"i_{c}") for c in LINEAGE_COLUMNS),
        F.lit(True).alias("i_present"),
    )
    s = shipments_df.select(
        F.col("shipment_id").alias("s_shipment_id"), F.col("invoice_id").alias("s_invoice_id"),
        F.col("purchase_id").alias("s_purchase_id"), F.col("quantity").alias("s_quantity"),
        *(F.col(c).alias(f"s_{c}") for c in LINEAGE_COLUMNS), F.lit(True).alias("s_present"),
    )
    j = i.join(s, i["i_invoice_id"] == s["s_invoice_id"], "full_outer")

    def source(prefix: str):
        return F.concat_ws(":", F.col(f"{prefix}_source_partition").cast("string"),
                           F.col(f"{prefix}_source_offset").cast("string"))

    has_i = F.col("i_present").isNotNull()
    has_s = F.col("s_present").isNotNull()
    same = (
        (F.col("i_source_partition") == F.col("s_source_partition"))
        & (F.col("i_source_offset") == F.col("s_source_offset"))
        & F.col("i_purchase_id").eqNullSafe(F.col("s_purchase_id"))
        & F.col("i_quantity").eqNullSafe(F.col("s_quantity"))
    )
    df = j.select(
        F.coalesce("i_invoice_id", "s_invoice_id").alias("invoice_id"),
        F.col("s_shipment_id").alias("shipment_id"),
        source("i").alias("invoice_source"),
        source("s").alias("shipment_source"),
        F.when(has_i & ~has_s, F.coalesce("i_invoice_id", F.concat(F.lit("source "), source("i"))))
        .alias("invoice_without_shipment"),
        F.when(has_s & ~has_i, F.coalesce("s_shipment_id", F.concat(F.lit("source "), source("s"))))
        .alias("shipment_without_invoice"),
        F.when(has_i & has_s & ~same, F.col("i_invoice_id")).alias("pair_mismatch"),
        *(F.when(has_i, F.col(f"i_{c}")).otherwise(F.col(f"s_{c}")).alias(c) for c in LINEAGE_COLUMNS),
    )
    return _materialise(df)


def examples_of_wrong_totals(invoices_df, limit: int = 3) -> list[dict]:
    rows = (invoices_df.where(~F.col("total_matches"))
            .select("invoice_id", "quantity", "unit_price", "total_text", "expected_total_text",
                    "source_partition", "source_offset")
            .limit(limit).collect())
    return [r.asDict() for r in rows]


def failing(condition):
    """A check's condition as a count: a null comparison (a missing field) is not a failure of this check
    (the required-fields check counts it)."""
    return F.coalesce(condition, F.lit(False))


def failing_per_partition(frame, checks: dict) -> tuple[dict[str, dict[int, int]], dict[int, int]]:
    """(check -> source partition -> failing records, source partition -> records) of a suite's record
    frame, in one aggregate; ``checks``: check -> (column, condition), as in profile.ROW_CHECKS."""
    rows = frame.groupBy("source_partition").agg(
        F.count(F.lit(1)).alias("records"),
        *(F.count_if(failing(cond(F.col(column)))).alias(name)
          for name, (column, cond) in checks.items())).collect()
    per_check = {name: {int(r["source_partition"]): int(r[name]) for r in rows if r["source_partition"] is not None}
                 for name in checks}
    return per_check, {int(r["source_partition"]): int(r["records"]) for r in rows if r["source_partition"] is not None}


def failing_rows(frame, column: str, condition, limit: int = EXAMPLE_LIMIT) -> list[dict]:
    """Up to ``limit`` rows of a record frame that fail a check: its column plus lineage."""
    shown = list(dict.fromkeys([column, *(c for c in LINEAGE_COLUMNS if c in frame.columns)]))
    rows = frame.where(failing(condition(F.col(column)))).select(*shown).limit(limit).collect()
    return [r.asDict(recursive=True) for r in rows]
