"""Gather what a reader sees for one window, and turn it into Spark DataFrames.

Records are tied to the window by their lineage headers (``source_topic``,
``source_partition``, ``source_offset``), never by ``run_id``: a re-run or a
backfill over the same window validates whatever is visible for that window.
Every topic is read once per isolation level with :func:`eos_etl.checker.read_topic`.

The DataFrames are materialised with ``localCheckpoint``: parsed once, lineage
cut, so that each expectation scans the result instead of re-shipping the
driver-side rows. The checkpoint blocks are released when the DataFrames are
garbage collected (Spark's ContextCleaner).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..checker import ConsumedRecord, read_topic
from ..engine.window import Window
from ..kafka.admin import ClusterAdmin

# Explicit schemas of the JSON values (see eos_etl.shop.schema). Money is read
# as text and cast to decimals in Spark, never through a float.
INVOICE_JSON_DDL = (
    "invoice_id STRING, purchase_id STRING, user_id STRING, user_full_name STRING, product_id STRING, "
    "quantity INT, unit_price STRING, total STRING, currency STRING, purchase_time STRING, issued_at STRING"
)
SHIPMENT_JSON_DDL = (
    "shipment_id STRING, invoice_id STRING, purchase_id STRING, product_id STRING, recipient_name STRING, "
    "address STRUCT<street: STRING, city: STRING, postal_code: STRING, country: STRING>, quantity INT"
)
# Exact arithmetic: wide enough that quantity x unit_price never rounds.
_EXACT_PRICE = "decimal(26,8)"
_EXACT_TOTAL = "decimal(38,8)"


@dataclass
class OutputSlice:
    """One output topic's records attributed to the window."""

    topic: str
    records: list[ConsumedRecord] = field(default_factory=list)  # read_committed, in the window
    sources: list[tuple[int, int]] = field(default_factory=list)  # (source partition, offset), parallel
    read_uncommitted: int = 0  # records in the window visible read_uncommitted
    unattributable: int = 0  # source_topic matches, partition/offset headers unreadable

    @property
    def count(self) -> int:
        return len(self.records)

    def surplus_per_source(self) -> int:
        """Records beyond the first for the same source record (0 when each input has at most one)."""
        return sum(n - 1 for n in Counter(self.sources).values() if n > 1)


@dataclass
class WindowEvidence:
    window: Window
    inputs: list[ConsumedRecord]  # input records in the window, read_committed
    invoices: OutputSlice
    shipments: OutputSlice
    dead_letters: OutputSlice
    committed_offsets: dict[int, int | None]
    seconds: float = 0.0

    @property
    def outputs(self) -> tuple[OutputSlice, OutputSlice, OutputSlice]:
        return (self.invoices, self.shipments, self.dead_letters)

    def input_keys(self) -> set[tuple[int, int]]:
        return {(r.partition, r.offset) for r in self.inputs}

    def aborted_visible(self) -> int:
        """read_committed outputs whose source offset is no read_committed input record."""
        keys = self.input_keys()
        return sum(1 for s in self.outputs for src in s.sources if src not in keys)

    def inputs_without_output(self) -> int:
        covered = {src for s in self.outputs for src in s.sources}
        return sum(1 for key in self.input_keys() if key not in covered)


def _in_window(window: Window, partition: int, offset: int) -> bool:
    rng = window.ranges.get(partition)
    return rng is not None and rng.start <= offset < rng.end


def _lineage(record: ConsumedRecord, input_topic: bytes) -> tuple[int, int] | None | bool:
    """(partition, offset) of the source record; None if from another topic; False if unreadable."""
    h = record.headers
    if h.get("source_topic") != input_topic:
        return None
    try:
        return int(h["source_partition"]), int(h["source_offset"])
    except (KeyError, TypeError, ValueError):
        return False


def read_output(connection, topic: str, window: Window, timeout_s: float = 120.0) -> OutputSlice:
    """An output topic's records attributed to the window (read_committed, then read_uncommitted)."""
    input_topic = window.topic.encode()
    out = OutputSlice(topic)
    for rec in read_topic(connection, topic, isolation="read_committed", timeout_s=timeout_s):
        src = _lineage(rec, input_topic)
        if src is False:
            out.unattributable += 1
        elif src is not None and _in_window(window, *src):
            out.records.append(rec)
            out.sources.append(src)
    # Read second: anything committed in between only makes this count larger, never smaller.
    for rec in read_topic(connection, topic, isolation="read_uncommitted", timeout_s=timeout_s):
        src = _lineage(rec, input_topic)
        if src and _in_window(window, *src):
            out.read_uncommitted += 1
    return out


def committed_offsets(settings, window: Window) -> dict[int, int | None]:
    """The group's committed offsets for the window's partitions (stable semantics)."""
    return ClusterAdmin(settings.connection).committed_offsets(settings.group, window.topic, window.partitions)


def read_inputs(connection, window: Window, timeout_s: float = 120.0) -> list[ConsumedRecord]:
    """Input records inside the window, as a read_committed reader sees them."""
    return [r for r in read_topic(connection, window.topic, isolation="read_committed", timeout_s=timeout_s)
            if _in_window(window, r.partition, r.offset)]


# -- Spark -------------------------------------------------------------------------


def _records_table(records: list[ConsumedRecord], sources: list[tuple[int, int]]):
    import pyarrow as pa

    return pa.table({
        "value": pa.array([r.value for r in records], pa.binary()),
        "kafka_partition": pa.array([r.partition for r in records], pa.int32()),
        "kafka_offset": pa.array([r.offset for r in records], pa.int64()),
        "source_partition": pa.array([s[0] for s in sources], pa.int32()),
        "source_offset": pa.array([s[1] for s in sources], pa.int64()),
        "run_id": pa.array([_text(r.headers.get("run_id")) for r in records], pa.string()),
    })


def _text(value: bytes | None) -> str | None:
    return value.decode("utf-8", "replace") if value is not None else None


def _materialise(df):
    """Compute once and cut the lineage, so that every expectation scans the result
    instead of re-shipping the driver-side rows and re-parsing the JSON."""
    return df.localCheckpoint(eager=True)


def invoices_frame(spark, invoices: OutputSlice):
    """Invoices of the window: the JSON fields typed, lineage columns, and ``total_matches``."""
    from pyspark.sql import functions as F

    raw = spark.createDataFrame(_records_table(invoices.records, invoices.sources))
    j = F.from_json(F.col("value").cast("string"), INVOICE_JSON_DDL)
    df = raw.select(j.alias("j"), "source_partition", "source_offset", "kafka_partition", "kafka_offset", "run_id")
    quantity = F.col("j.quantity")
    exact_price = F.col("j.unit_price").try_cast(_EXACT_PRICE)
    exact_total = F.col("j.total").try_cast(_EXACT_TOTAL)
    expected = exact_price * quantity.cast("decimal(10,0)")
    df = df.select(
        F.col("j.invoice_id").alias("invoice_id"),
        F.col("j.purchase_id").alias("purchase_id"),
        F.col("j.user_id").alias("user_id"),
        F.col("j.user_full_name").alias("user_full_name"),
        F.col("j.product_id").alias("product_id"),
        quantity.alias("quantity"),
        F.col("j.unit_price").try_cast("decimal(14,2)").alias("unit_price"),
        F.col("j.total").try_cast("decimal(26,2)").alias("total"),
        F.col("j.currency").alias("currency"),
        F.col("j.purchase_time").alias("purchase_time"),
        F.col("j.issued_at").alias("issued_at"),
        "source_partition", "source_offset", "kafka_partition", "kafka_offset", "run_id",
        F.col("j.total").alias("total_text"),
        expected.cast("string").alias("expected_total_text"),
        F.coalesce(exact_total == expected, F.lit(False)).alias("total_matches"),
    )
    return _materialise(df)


def shipments_frame(spark, shipments: OutputSlice):
    from pyspark.sql import functions as F

    raw = spark.createDataFrame(_records_table(shipments.records, shipments.sources))
    j = F.from_json(F.col("value").cast("string"), SHIPMENT_JSON_DDL)
    df = raw.select(j.alias("j"), "source_partition", "source_offset", "kafka_partition", "kafka_offset", "run_id")
    df = df.select(
        F.col("j.shipment_id").alias("shipment_id"),
        F.col("j.invoice_id").alias("invoice_id"),
        F.col("j.purchase_id").alias("purchase_id"),
        F.col("j.product_id").alias("product_id"),
        F.col("j.recipient_name").alias("recipient_name"),
        F.col("j.address").alias("address"),
        F.col("j.quantity").alias("quantity"),
        "source_partition", "source_offset", "kafka_partition", "kafka_offset", "run_id",
    )
    return _materialise(df)


def pairing_frame(invoices_df, shipments_df):
    """Invoices full-outer-joined with shipments on invoice_id.

    Columns ``invoice_without_shipment`` / ``shipment_without_invoice`` /
    ``pair_mismatch`` hold the offending id (null when fine), so the
    expectations "to be null" report the unpaired ids themselves.
    """
    from pyspark.sql import functions as F

    i = invoices_df.select(
        F.col("invoice_id").alias("i_invoice_id"), F.col("purchase_id").alias("i_purchase_id"),
        F.col("quantity").alias("i_quantity"), F.col("source_partition").alias("i_source_partition"),
        F.col("source_offset").alias("i_source_offset"), F.lit(True).alias("i_present"),
    )
    s = shipments_df.select(
        F.col("shipment_id").alias("s_shipment_id"), F.col("invoice_id").alias("s_invoice_id"),
        F.col("purchase_id").alias("s_purchase_id"), F.col("quantity").alias("s_quantity"),
        F.col("source_partition").alias("s_source_partition"), F.col("source_offset").alias("s_source_offset"),
        F.lit(True).alias("s_present"),
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
    )
    return _materialise(df)


def classify_inputs(spark, settings, inputs: list[ConsumedRecord]) -> tuple[int, int]:
    """(valid, invalid) input records by the shop's own contract (its transform's validation)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    if not inputs:
        return 0, 0
    table = pa.table({
        "key": pa.array([r.key for r in inputs], pa.binary()),
        "value": pa.array([r.value for r in inputs], pa.binary()),
        "topic": pa.array([r.topic for r in inputs], pa.string()),
        "partition": pa.array([r.partition for r in inputs], pa.int32()),
        "offset": pa.array([r.offset for r in inputs], pa.int64()),
        "timestamp": pa.nulls(len(inputs), pa.timestamp("us", tz="UTC")),
    })
    out = settings.transform()(spark.createDataFrame(table))
    invoices_topic = settings.topics.invoices
    is_valid = F.exists("outputs", lambda o: o["topic"] == F.lit(invoices_topic))
    row = out.select(F.count_if(is_valid).alias("valid"), F.count_if(~is_valid).alias("invalid")).first()
    return int(row["valid"]), int(row["invalid"])


def examples_of_wrong_totals(invoices_df, limit: int = 3) -> list[dict]:
    from pyspark.sql import functions as F

    rows = (invoices_df.where(~F.col("total_matches"))
            .select("invoice_id", "quantity", "unit_price", "total_text", "expected_total_text",
                    "source_partition", "source_offset")
            .limit(limit).collect())
    return [r.asDict() for r in rows]
