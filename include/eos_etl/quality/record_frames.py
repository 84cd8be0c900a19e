"""A failing window read again row by row: its record frames, and the exact counts taken from them.

The window's profile (:mod:`eos_etl.quality.profile`) reads each source once into an
aggregate. A window the profile cannot pass is read again row by row
(:mod:`.window_reads`), and materialised:

* the inputs as positions with the contract's verdict;
* the outputs of every output topic attributed to the window, each record's value
  parsed once with its output's schema, and only the columns the checks use kept:
  lineage, the dead-letter reason, and for the record outputs their checked columns
  (:func:`eos_etl.quality.value_schema.checked_columns`) plus the uniqueness columns
  (:func:`window_outputs`);
* per suite the record frame its checks are counted and sampled on
  (:func:`record_frame`, :func:`pairing_frame`: :class:`RecordFrames`).

The counts the suites need come from aggregates here, computed in Spark; the caller
receives only those and a few failing rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Window as W
from pyspark.sql import functions as F

from ..engine.window import Window
from . import window_reads
from .checked_outputs import PAIRING, pairing_columns, record_outputs
from .row_checks import EXAMPLE_LIMIT, REPEAT_COLUMNS
from .value_schema import checked_columns, parse_value
from .window_reads import LINEAGE_COLUMNS, attributed_outputs, materialise


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


@dataclass
class RecordFrames:
    """A failing window read again row by row, materialised: what its exact counts and failing rows
    come from (see :mod:`eos_etl.quality.profile` for when)."""

    inputs: object  # DataFrame: the window's inputs as positions (window_reads.INPUT_DDL)
    outputs: object  # DataFrame: attributed output rows, typed (see window_outputs)
    suites: dict[str, object]  # suite -> its record frame (DataFrame)

    def suite(self, name: str):
        return self.suites[name]

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


def input_summary(inputs) -> InputSummary:
    """Records per partition, the earliest record time and the valid/invalid split, in one aggregate."""
    rows = inputs.groupBy("partition").agg(F.count(F.lit(1)).alias("n"), F.min("timestamp_ms").alias("earliest"),
                                           F.count_if("valid").alias("valid")).collect()
    earliest = [r["earliest"] for r in rows if r["earliest"] is not None]
    valid = sum(int(r["valid"] or 0) for r in rows)
    per_partition = {int(r["partition"]): int(r["n"]) for r in rows}
    return InputSummary(per_partition, min(earliest) if earliest else None, valid,
                        sum(per_partition.values()) - valid)


# -- the outputs, typed ---------------------------------------------------------------


def _parsed(record) -> str:
    """The column holding a record output's parsed value."""
    return f"_{record.name}_value"


def window_outputs(spark, connection, starts: dict[str, dict[int, int]], window: Window, outputs,
                   topics: dict[str, str]):
    """The read_committed output rows of the window in one read, materialised: lineage, ``dlq_reason``
    and, for the record outputs (``outputs``, :mod:`.checked_outputs`; ``topics``: output name -> topic),
    their checked columns parsed once (the union of each output's, null on other topics' rows).
    Unattributable rows are kept too (wherever their source is, so that they are counted); other
    windows' are not."""
    rows = attributed_outputs(window_reads.read_outputs(spark, connection, starts), window).where(
        "in_window OR NOT attributable")
    records = record_outputs(outputs)
    is_record = {r.name: F.col("topic") == F.lit(topics[r.name]) for r in records}
    kept = ["topic", "attributable", "dlq_reason", *LINEAGE_COLUMNS]
    # Parsed in a projection of its own: Spark keeps it apart from the one below (whose columns refer
    # to it many times) instead of parsing again per reference.
    parsed = rows.select(*kept, *(F.when(is_record[r.name], parse_value(F.col("value"), r.fields)).alias(_parsed(r))
                                  for r in records))
    columns = {r.name: checked_columns(r, F.col(_parsed(r))) for r in records}
    typed = []
    for name in dict.fromkeys(n for r in records for n in columns[r.name]):
        column = None
        for r in records:
            if name in columns[r.name]:
                column = (F.when(is_record[r.name], columns[r.name][name]) if column is None
                          else column.when(is_record[r.name], columns[r.name][name]))
        typed.append(column.alias(name))
    ids = {topics[r.name]: r.id_column for r in records}
    return materialise(with_repeats(parsed.select(*kept, *typed), ids))


def with_repeats(outputs, id_columns: dict[str, str]):
    """``outputs`` plus ``repeated_id`` (a record's id, ``id_columns``: topic -> its id column, where
    another record of its topic has the same one) and ``repeated_source`` (``partition:offset`` of the
    input record where another record of its topic claims the same one); null where the record is the
    only one. Computed here, in the one pass that materialises the outputs, so that the uniqueness
    checks scan the result instead of shuffling it again for each of their metrics."""
    record_id = None
    for topic, column in id_columns.items():
        is_topic = F.col("topic") == F.lit(topic)
        record_id = F.when(is_topic, F.col(column)) if record_id is None else record_id.when(is_topic, F.col(column))
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


def record_frame(outputs, topic: str, record):
    """A record output's records of the window: its checked columns, the uniqueness columns, lineage."""
    checked = checked_columns(record, F.col(_parsed(record)))  # only the names: no Spark job
    return topic_rows(outputs, topic).select(*checked, *REPEAT_COLUMNS, *LINEAGE_COLUMNS)


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


def pairing_frame(primary_df, companion_df, outputs):
    """Primary records full-outer-joined with their companions on the pair key (the shop: invoices
    with shipments on invoice_id), materialised.

    The pairing columns (:func:`~eos_etl.quality.checked_outputs.pairing_columns`: a primary without
    companion, a companion without primary, ``pair_mismatch``) hold the offending id (null when fine),
    so the failing rows show the unpaired ids themselves. The lineage columns are the primary's, or
    the companion's where there is no primary.
    """
    primary, companion = record_outputs(outputs)
    key, shared, own_id = outputs.pair_key, outputs.pair_shared, companion.id_column
    i = primary_df.select(
        F.col(key).alias(f"i_{key}"), *(F.col(c).alias(f"i_{c}") for c in shared),
        *(F.col(c).alias(f"i_{c}") for c in LINEAGE_COLUMNS), F.lit(True).alias("i_present"),
    )
    s = companion_df.select(
        F.col(own_id).alias(f"s_{own_id}"), F.col(key).alias(f"s_{key}"), *(F.col(c).alias(f"s_{c}") for c in shared),
        *(F.col(c).alias(f"s_{c}") for c in LINEAGE_COLUMNS), F.lit(True).alias("s_present"),
    )
    j = i.join(s, i[f"i_{key}"] == s[f"s_{key}"], "full_outer")

    def source(prefix: str):
        return F.concat_ws(":", F.col(f"{prefix}_source_partition").cast("string"),
                           F.col(f"{prefix}_source_offset").cast("string"))

    has_i = F.col("i_present").isNotNull()
    has_s = F.col("s_present").isNotNull()
    same = reduce(lambda a, b: a & b, [
        F.col("i_source_partition") == F.col("s_source_partition"),
        F.col("i_source_offset") == F.col("s_source_offset"),
        *(F.col(f"i_{c}").eqNullSafe(F.col(f"s_{c}")) for c in shared)])
    unpaired, orphan, mismatch = pairing_columns(outputs)
    df = j.select(
        F.coalesce(f"i_{key}", f"s_{key}").alias(key),
        F.col(f"s_{own_id}").alias(own_id),
        source("i").alias(f"{primary.noun}_source"),
        source("s").alias(f"{companion.noun}_source"),
        F.when(has_i & ~has_s, F.coalesce(f"i_{key}", F.concat(F.lit("source "), source("i")))).alias(unpaired),
        F.when(has_s & ~has_i, F.coalesce(f"s_{own_id}", F.concat(F.lit("source "), source("s")))).alias(orphan),
        F.when(has_i & has_s & ~same, F.col(f"i_{key}")).alias(mismatch),
        *(F.when(has_i, F.col(f"i_{c}")).otherwise(F.col(f"s_{c}")).alias(c) for c in LINEAGE_COLUMNS),
    )
    return materialise(df)


def record_frames(inputs, outputs_df, outputs, topics: dict[str, str]) -> RecordFrames:
    """The record frames of every suite, the pairing frame materialised (a Spark job)."""
    primary, companion = record_outputs(outputs)
    primary_df = record_frame(outputs_df, topics[primary.name], primary)
    companion_df = record_frame(outputs_df, topics[companion.name], companion)
    return RecordFrames(inputs, outputs_df, {primary.name: primary_df, companion.name: companion_df,
                                             PAIRING: pairing_frame(primary_df, companion_df, outputs)})
