"""A window's data as Great Expectations validates it: one Spark DataFrame per asset, each a temporary
view of the session (:mod:`.spark_views`), computed from one read_committed read of the inputs and one
of each output topic (:mod:`.window_reads`; the output topics side by side) and materialised, so that GE's metric
levels scan the result instead of reading Kafka again.

====================  ==========================================================================
asset                 rows and columns
====================  ==========================================================================
``inputs``            each committed input record of the window: ``source_partition``,
                      ``source_offset``, ``timestamp_ms``, ``valid`` (the pipeline contract's verdict)
``<record output>``   each output record attributed to the window (the shop: ``invoices``,
                      ``shipments``): ``value`` (its JSON text), its schema's fields parsed (decimal
                      texts as decimals: a text that is none is null there, and named by the schema
                      rule), ``lineage_id`` (the id its source position gives), and the lineage
                      columns (source position, run id, where it is in Kafka)
``dead_letters``      each dead letter attributed to the window: ``dlq_reason`` and lineage
``positions``         each partition of the window (``source_partition``): ``window_start``,
                      ``window_end`` and the group's ``committed_offset`` as the cluster answers now
                      (null: none); ``source_offset`` is the window's end again, the row's index
``lineage``           the inputs and every output, each with its ``role`` and the source position its
                      lineage names, and the pair columns (the metric of :mod:`.expectations.lineage`)
====================  ==========================================================================

An output record whose lineage headers do not parse is kept with a null source position (wherever its
input was, it cannot be shown to be another window's), so that a not-null rule on the source position
finds it; other windows' outputs are not in any asset.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import functions as F

from ..engine.tasks.connect_route import concurrently
from ..engine.window import Window
from . import window_reads
from .checked_outputs import record_outputs
from .value_schema import parse_value
from .window_reads import LINEAGE_COLUMNS, attributed_outputs, materialise

INPUTS, DEAD_LETTERS, POSITIONS, LINEAGE = "inputs", "dead_letters", "positions", "lineage"
VALID_INPUT, INVALID_INPUT, DEAD_LETTER = "valid_input", "invalid_input", "dead_letter"
#: The columns every row of an output asset is indexed by in GE's unexpected rows.
INDEX_COLUMNS = ("source_partition", "source_offset")
_DECIMAL = "decimal(38,8)"


@dataclass(frozen=True)
class WindowAssets:
    """The window's frames by asset name, and the views GE reads them from."""

    frames: dict[str, object]  # asset -> DataFrame
    views: dict[str, str]  # asset -> temporary view
    output_read: window_reads.OutputRead

    def release(self, spark) -> None:
        for view in self.views.values():
            spark.catalog.dropTempView(view)


def output_roles(outputs) -> dict[str, str]:
    """record output name -> its lineage role (its noun), and the dead letters'."""
    return {**{r.name: r.noun for r in record_outputs(outputs)}, DEAD_LETTERS: DEAD_LETTER}


def lineage_shape(outputs) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the lineage asset's roles, its pair columns)."""
    return (VALID_INPUT, INVALID_INPUT, *output_roles(outputs).values()), (outputs.pair_key, *outputs.pair_shared)


def _record_asset(rows, record, input_topic: str):
    parsed = parse_value(F.col("value"), record.fields)
    fields = [(parsed[name].try_cast(_DECIMAL) if name in record.decimals else parsed[name]).alias(name)
              for name, _type in record.fields]
    lineage_id = record.id_from_lineage(F.lit(input_topic), F.col("source_partition"), F.col("source_offset"))
    return materialise(rows.select("value", *fields, lineage_id.alias("lineage_id"), *LINEAGE_COLUMNS))


def _lineage(frames: dict, outputs, roles: dict[str, str]):
    primary, companion = record_outputs(outputs)
    pair = (outputs.pair_key, *outputs.pair_shared)
    role = F.when(F.col("valid"), F.lit(VALID_INPUT)).otherwise(F.lit(INVALID_INPUT))
    none = [F.lit(None).cast("string").alias(c) for c in pair]
    inputs = frames[INPUTS].select(role.alias("role"), *INDEX_COLUMNS, *none)
    parts = [inputs]
    for record in (primary, companion):
        parts.append(frames[record.name].select(F.lit(roles[record.name]).alias("role"), *INDEX_COLUMNS,
                                                *(F.col(c).cast("string").alias(c) for c in pair)))
    parts.append(frames[DEAD_LETTERS].select(F.lit(DEAD_LETTER).alias("role"), *INDEX_COLUMNS, *none))
    df = parts[0]
    for part in parts[1:]:
        df = df.unionByName(part)
    return df


def _positions(spark, window: Window, committed: dict[int, int | None]):
    rows = [(p, r.end, r.start, r.end, committed.get(p)) for p, r in sorted(window.ranges.items())]
    return spark.createDataFrame(rows, "source_partition INT, source_offset BIGINT, window_start BIGINT, "
                                       "window_end BIGINT, committed_offset BIGINT")


def window_assets(spark, settings, window: Window, committed: dict[int, int | None], *,
                  view_prefix: str = "eos_etl_window",
                  clock_skew_margin_ms: int = window_reads.CLOCK_SKEW_MARGIN_MS) -> WindowAssets:
    """The window's assets (the module docstring's table), registered as ``<view_prefix>_<asset>``."""
    outputs = settings.checked_outputs()
    topics = settings.topics
    inputs = window_reads.read_inputs(spark, settings, window)
    frames = {INPUTS: inputs.select(F.col("partition").alias("source_partition"),
                                    F.col("offset").alias("source_offset"), "timestamp_ms", "valid")}
    earliest = inputs.agg(F.min("timestamp_ms")).first()[0]
    if earliest is None and not window.is_empty:  # nothing committed: an aborted input's output must be found
        earliest = window_reads.earliest_uncommitted_ms(spark, settings.connection, window)
    since = window_reads.output_bound_ms(earliest, clock_skew_margin_ms)
    from ..kafka.admin import ClusterAdmin  # a Kafka client: only once a validation runs

    records = {r.name: r for r in record_outputs(outputs)}
    names = {name: getattr(topics, name) for name in records}
    names[DEAD_LETTERS] = topics.dead_letters
    starts, ends = window_reads.output_start_offsets(ClusterAdmin(settings.connection), tuple(names.values()), since)

    def output_asset(name: str, topic: str):
        # Each output topic read once, straight into its asset: no frame of every output's value between.
        rows = (attributed_outputs(window_reads.read_outputs(spark, settings.connection, {topic: starts[topic]}),
                                   window)
                .where("in_window OR NOT attributable")
                .select(F.col("value").cast("string").alias("value"), "dlq_reason", *LINEAGE_COLUMNS))
        record = records.get(name)
        return (_record_asset(rows, record, window.topic) if record is not None
                else materialise(rows.select("dlq_reason", *LINEAGE_COLUMNS)))

    # Side by side: a small window's reads wait on the broker more than they compute.
    made = concurrently(spark, [lambda n=n, t=t: output_asset(n, t) for n, t in names.items()])
    frames.update(zip(names, made, strict=True))
    frames[LINEAGE] = _lineage(frames, outputs, output_roles(outputs))
    frames[POSITIONS] = _positions(spark, window, committed)
    views = {name: f"{view_prefix}_{name}" for name in frames}
    for name, df in frames.items():
        df.createOrReplaceTempView(views[name])
    read = window_reads.OutputRead(earliest, since, clock_skew_margin_ms, starts, ends)
    return WindowAssets(frames, views, read)
