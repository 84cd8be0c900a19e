"""The window's profile: every count the checks need, from one aggregate per source, nothing materialised.

Two Spark jobs, both read_committed, both ending in a few rows per input partition:

* **Inputs**, per partition: records, valid records (the shop contract's own
  verdict), the earliest record time, and a fingerprint of the valid and of the
  invalid records' positions.
* **Outputs**, per output topic and source partition (and dead-letter reason):
  records, a fingerprint of their source positions, a fingerprint of what pairs an
  invoice with its shipment, the records failing each value check (schema,
  required fields, quantity, total, currency), and the ids that are not the ones
  their lineage gives.

A fingerprint of a set of records is the sum of a 64-bit hash of each one's
``(partition, offset)`` (:func:`fingerprint`). Two multisets of positions with
equal counts and equal sums are equal except with the chance of a 64-bit
collision, so the profile decides the lineage checks without a join:

* invoices of partition *p* = its valid inputs, and so are shipments, and dead
  letters = its invalid inputs: every committed input has exactly its outputs
  (no output of an aborted input, none missing, none twice);
* the invoices' and shipments' pair fingerprints are equal: every invoice has a
  shipment with the same lineage, invoice id, purchase and quantity, and the reverse;
* every id is the one its source position gives (the shop's deterministic ids,
  :func:`eos_etl.shop.transform.output_ids`) and the sources are unique: no id twice.

When all of that holds and no value check failed (:meth:`WindowProfile.clean`), every
check's count is known to be zero. Otherwise the caller reads the window again row by
row (:mod:`eos_etl.quality.collect`) for the exact counts and the failing rows; only
a failing window pays for that.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import functions as F

from ..engine.tasks.kafka_source import read_window
from ..engine.window import Window
from ..shop.schema import INVOICE_FIELDS, SHIPMENT_FIELDS
from ..shop.transform import output_ids
from . import collect

#: Mixed into every position hash, so that the fingerprints are their own hash family.
FINGERPRINT_SALT = "eos-etl-quality"
_SUM = "decimal(38,0)"  # 10^6 hashes below 2^63 each: far inside 38 digits
_NULL = "\u0000"  # stands for a missing field in the pair hash (no field holds it)
CURRENCY_REGEX = r"^[A-Z]{3}$"


def fingerprint(*columns):
    """One record's contribution to a fingerprint: a 64-bit hash of ``columns``, as a decimal to sum."""
    return F.xxhash64(F.lit(FINGERPRINT_SALT), *columns).cast(_SUM)


def _position(partition, offset):
    return fingerprint(partition.cast("int"), offset.cast("bigint"))


def _pair(j):
    """What an invoice and its shipment share, hashed: lineage, invoice id, purchase id, quantity."""
    return fingerprint(F.col("source_partition"), F.col("source_offset"),
                       *(F.coalesce(j[name].cast("string"), F.lit(_NULL))
                         for name in ("invoice_id", "purchase_id", "quantity")))


def _set(column):
    return column.isNotNull()


#: Every per-record check of the three record suites: suite -> check -> (the column of the suite's
#: record frame it looks at, the condition on that column that makes a record fail it). The one
#: definition: the profile counts failing records with it, and a failing window's materialised
#: frames are counted and sampled with it (:mod:`eos_etl.quality.collect`).
ROW_CHECKS = {
    "invoices": {
        "value_matches_schema": ("schema_mismatch", _set),
        "required_fields_present": ("missing_required", _set),
        "quantity_positive": ("quantity", lambda q: q <= 0),
        "total_matches": ("total_matches", lambda ok: ~ok),
        "invoice_id_unique": ("repeated_id", _set),
        "source_offset_unique": ("repeated_source", _set),
        "currency_iso": ("currency", lambda cur: ~cur.rlike(CURRENCY_REGEX)),
    },
    "shipments": {
        "value_matches_schema": ("schema_mismatch", _set),
        "required_fields_present": ("missing_required", _set),
        "shipment_id_unique": ("repeated_id", _set),
        "source_offset_unique": ("repeated_source", _set),
        "quantity_positive": ("quantity", lambda q: q <= 0),
    },
    "pairing": {
        "invoice_has_shipment": ("invoice_without_shipment", _set),
        "shipment_has_invoice": ("shipment_without_invoice", _set),
        "pair_consistent": ("pair_mismatch", _set),
    },
}
#: The checks a record's own value decides (the rest compare records with each other: uniqueness
#: and pairing, decided by the fingerprints).
VALUE_CHECKS = {suite: {name: check for name, check in checks.items() if check[0] not in
                        ("repeated_id", "repeated_source")}
                for suite, checks in ROW_CHECKS.items() if suite != "pairing"}


@dataclass
class InputStats:
    records: int = 0
    valid: int = 0
    earliest_ms: int | None = None
    fp_valid: int = 0
    fp_invalid: int = 0

    @property
    def invalid(self) -> int:
        return self.records - self.valid


@dataclass
class OutputStats:
    """One output topic's records of one source partition."""

    records: int = 0
    fp_source: int = 0
    fp_pair: int = 0
    ids_off_lineage: int = 0
    failing: dict[str, int] = field(default_factory=dict)  # value check -> records failing it

    def add(self, row) -> None:
        self.records += int(row["n"])
        self.fp_source += int(row["fp_source"] or 0)
        self.fp_pair += int(row["fp_pair"] or 0)
        self.ids_off_lineage += int(row["ids_off_lineage"] or 0)


@dataclass
class WindowProfile:
    """The two aggregates of a window (see the module docstring)."""

    inputs: dict[int, InputStats]  # input partition -> stats
    outputs: dict[str, dict[int, OutputStats]] = field(default_factory=dict)  # invoices|shipments|dead_letters
    unattributable: dict[str, int] = field(default_factory=dict)  # output -> records without readable lineage
    dead_letters_by_reason: dict[str, int] = field(default_factory=dict)

    @property
    def earliest_ms(self) -> int | None:
        times = [s.earliest_ms for s in self.inputs.values() if s.earliest_ms is not None]
        return min(times) if times else None

    def output(self, name: str, partition: int) -> OutputStats:
        return self.outputs.get(name, {}).get(partition) or OutputStats()

    def value_failures(self) -> int:
        return sum(n for parts in self.outputs.values() for s in parts.values() for n in s.failing.values())

    def inconsistencies(self) -> list[str]:
        """Why the lineage checks cannot be decided from the fingerprints (empty: they all hold)."""
        found = []
        partitions = set(self.inputs) | {p for parts in self.outputs.values() for p in parts}
        for p in sorted(partitions):
            i = self.inputs.get(p, InputStats())
            inv, shp, dlq = (self.output(n, p) for n in ("invoices", "shipments", "dead_letters"))
            for name, out, n, fp in (("invoices", inv, i.valid, i.fp_valid), ("shipments", shp, i.valid, i.fp_valid),
                                     ("dead_letters", dlq, i.invalid, i.fp_invalid)):
                if (out.records, out.fp_source) != (n, fp):
                    found.append(f"partition {p}: {name} are not exactly its {'in' if name == 'dead_letters' else ''}"
                                 f"valid inputs ({out.records} for {n})")
            if inv.fp_pair != shp.fp_pair:
                found.append(f"partition {p}: invoices and shipments do not pair")
            if inv.ids_off_lineage or shp.ids_off_lineage:
                found.append(f"partition {p}: ids not given by their lineage")
        found += [f"{n} {name} without readable lineage" for name, n in self.unattributable.items() if n]
        return found

    @property
    def clean(self) -> bool:
        return not self.value_failures() and not self.inconsistencies()


def profile_inputs(spark, settings, window: Window) -> dict[int, InputStats]:
    """Per input partition of ``window``: records, valid ones, earliest time, the two fingerprints."""
    out = {p: InputStats() for p in window.ranges}
    if window.is_empty:
        return out
    checked = settings.reject_reasons()(read_window(spark, settings.pipeline(), window))
    valid = F.col("_reason").isNull()
    position = _position(F.col("partition"), F.col("offset"))
    rows = checked.groupBy("partition").agg(
        F.count(F.lit(1)).alias("n"), F.count_if(valid).alias("valid"),
        F.min(F.unix_millis("timestamp")).alias("earliest"),
        F.sum(F.when(valid, position)).alias("fp_valid"), F.sum(F.when(~valid, position)).alias("fp_invalid"),
    ).collect()
    for r in rows:
        out[int(r["partition"])] = InputStats(int(r["n"]), int(r["valid"]), r["earliest"],
                                              int(r["fp_valid"] or 0), int(r["fp_invalid"] or 0))
    return out


def profile_outputs(profile: WindowProfile, spark, connection, starts: dict[str, dict[int, int]], window: Window,
                    topics: dict[str, str]) -> None:
    """Fill ``profile`` with the window's outputs, read once from ``starts`` (see the module docstring).
    ``topics`` maps invoices, shipments and dead_letters to their topics."""
    rows = collect.attributed_outputs(collect.read_outputs(spark, connection, starts), window).where(
        "in_window OR NOT attributable")
    is_invoice = F.col("topic") == F.lit(topics["invoices"])
    is_shipment = F.col("topic") == F.lit(topics["shipments"])
    # Parsed in a projection of its own: the aggregate below refers to the parsed values many times.
    parsed = rows.select("topic", "attributable", "dlq_reason", "source_partition", "source_offset",
                         F.when(is_invoice, collect.parse_value(F.col("value"), INVOICE_FIELDS)).alias("inv"),
                         F.when(is_shipment, collect.parse_value(F.col("value"), SHIPMENT_FIELDS)).alias("shp"))
    invoice, shipment = collect.invoice_columns(F.col("inv")), collect.shipment_columns(F.col("shp"))
    invoice_id, shipment_id = output_ids(F.lit(window.topic), F.col("source_partition"), F.col("source_offset"))
    flags = [F.count_if(is_invoice & collect.failing(cond(invoice[column]))).alias(f"invoices__{name}")
             for name, (column, cond) in VALUE_CHECKS["invoices"].items()]
    flags += [F.count_if(is_shipment & collect.failing(cond(shipment[column]))).alias(f"shipments__{name}")
              for name, (column, cond) in VALUE_CHECKS["shipments"].items()]
    off_lineage = ((is_invoice & ~F.col("inv")["invoice_id"].eqNullSafe(invoice_id))
                   | (is_shipment & ~F.col("shp")["shipment_id"].eqNullSafe(shipment_id)))
    result = parsed.groupBy("topic", "attributable", "source_partition", "dlq_reason").agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(_position(F.col("source_partition"), F.col("source_offset"))).alias("fp_source"),
        F.sum(F.when(is_invoice, _pair(F.col("inv"))).when(is_shipment, _pair(F.col("shp")))).alias("fp_pair"),
        F.count_if(off_lineage).alias("ids_off_lineage"), *flags,
    ).collect()
    by_topic = {topic: name for name, topic in topics.items()}
    for r in result:
        name = by_topic[r["topic"]]
        if not r["attributable"]:
            profile.unattributable[name] = profile.unattributable.get(name, 0) + int(r["n"])
            continue
        stats = profile.outputs.setdefault(name, {}).setdefault(int(r["source_partition"]), OutputStats())
        stats.add(r)
        for check in VALUE_CHECKS.get(name, {}):
            stats.failing[check] = stats.failing.get(check, 0) + int(r[f"{name}__{check}"])
        if name == "dead_letters":
            reason = r["dlq_reason"] if r["dlq_reason"] is not None else "(none)"
            profile.dead_letters_by_reason[reason] = profile.dead_letters_by_reason.get(reason, 0) + int(r["n"])
    profile.dead_letters_by_reason = dict(sorted(profile.dead_letters_by_reason.items(),
                                                 key=lambda kv: (-kv[1], kv[0])))
