"""The window's profile: every count the checks need, from one aggregate per source, nothing materialised.

Two Spark jobs, both read_committed, both ending in a few rows per input partition:

* **Inputs**, per partition: records, valid records (the shop contract's own
  verdict), the earliest record time, and a fingerprint of the valid and of the
  invalid records' positions.
* **Outputs**, per output topic and source partition (and dead-letter reason):
  records, a fingerprint of their source positions, a fingerprint of what pairs a
  primary record with its companion (the shop: an invoice with its shipment), the
  records failing each value check (schema, required fields, and the pipeline's own:
  the shop's quantity, total, currency), and the ids that are not the ones their
  lineage gives.

What the record outputs hold, and which checks their values must pass, is the
pipeline's description (:mod:`eos_etl.quality.checked_outputs`); the checks
themselves have one definition (:mod:`eos_etl.quality.row_checks`).

A fingerprint of a set of records is the sum of a 64-bit hash of each one's
``(partition, offset)`` (:func:`fingerprint`). Two multisets of positions with
equal counts and equal sums are equal except with the chance of a 64-bit
collision, so the profile decides the lineage checks without a join:

* invoices of partition *p* = its valid inputs, and so are shipments, and dead
  letters = its invalid inputs: every committed input has exactly its outputs
  (no output of an aborted input, none missing, none twice);
* the invoices' and shipments' pair fingerprints are equal: every invoice has a
  shipment with the same lineage, invoice id, purchase and quantity, and the reverse;
* every id is the one its source position gives (the pipeline's deterministic ids,
  a record output's ``id_from_lineage``: the shop's :func:`eos_etl.shop.transform.output_ids`)
  and the sources are unique: no id twice.

When all of that holds and no value check failed (:meth:`WindowProfile.clean`), every
check's count is known to be zero. Otherwise the caller reads the window again row by
row (:mod:`eos_etl.quality.record_frames`) for the exact counts and the failing rows; only
a failing window pays for that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import functions as F

from ..engine.tasks.kafka_source import read_window
from ..engine.window import Window
from . import window_reads
from .checked_outputs import record_outputs
from .fingerprint import NULL_FIELD, fingerprint
from .row_checks import failing, value_checks
from .value_schema import checked_columns, parse_value


def _position(partition, offset):
    return fingerprint(partition.cast("int"), offset.cast("bigint"))


def _pair(j, outputs):
    """What a primary record and its companion share, hashed: lineage, the pair key, the shared fields
    (the shop: invoice id, purchase id, quantity)."""
    return fingerprint(F.col("source_partition"), F.col("source_offset"),
                       *(F.coalesce(j[name].cast("string"), F.lit(NULL_FIELD))
                         for name in (outputs.pair_key, *outputs.pair_shared)))


def _parsed(record) -> str:
    """The column holding a record output's parsed value."""
    return f"_{record.name}_value"


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


def _either(columns):
    """The first of ``(condition, value)`` pairs whose condition holds, as one ``CASE WHEN``."""
    (cond, value), *rest = columns
    return reduce(lambda column, pair: column.when(*pair), rest, F.when(cond, value))


def profile_outputs(profile: WindowProfile, spark, connection, starts: dict[str, dict[int, int]], window: Window,
                    topics: dict[str, str], outputs) -> None:
    """Fill ``profile`` with the window's outputs, read once from ``starts`` (see the module docstring).
    ``topics`` maps invoices, shipments and dead_letters to their topics; ``outputs``: what the checks
    judge of the record outputs (:mod:`eos_etl.quality.checked_outputs`)."""
    rows = window_reads.attributed_outputs(window_reads.read_outputs(spark, connection, starts), window).where(
        "in_window OR NOT attributable")
    records = record_outputs(outputs)
    is_record = {r.name: F.col("topic") == F.lit(topics[r.name]) for r in records}
    # Parsed in a projection of its own: the aggregate below refers to the parsed values many times.
    parsed = rows.select("topic", "attributable", "dlq_reason", "source_partition", "source_offset",
                         *(F.when(is_record[r.name], parse_value(F.col("value"), r.fields)).alias(_parsed(r))
                           for r in records))
    columns = {r.name: checked_columns(r, F.col(_parsed(r))) for r in records}
    checks = value_checks(outputs)
    flags = [F.count_if(is_record[r.name] & failing(cond(columns[r.name][column]))).alias(f"{r.name}__{name}")
             for r in records for name, (column, cond) in checks[r.name].items()]
    lineage = (F.lit(window.topic), F.col("source_partition"), F.col("source_offset"))
    off_lineage = reduce(lambda a, b: a | b, [
        is_record[r.name] & ~F.col(_parsed(r))[r.id_column].eqNullSafe(r.id_from_lineage(*lineage)) for r in records])
    pair = _either([(is_record[r.name], _pair(F.col(_parsed(r)), outputs)) for r in records])
    result = parsed.groupBy("topic", "attributable", "source_partition", "dlq_reason").agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(_position(F.col("source_partition"), F.col("source_offset"))).alias("fp_source"),
        F.sum(pair).alias("fp_pair"), F.count_if(off_lineage).alias("ids_off_lineage"), *flags,
    ).collect()
    by_topic = {topic: name for name, topic in topics.items()}
    for r in result:
        name = by_topic[r["topic"]]
        if not r["attributable"]:
            profile.unattributable[name] = profile.unattributable.get(name, 0) + int(r["n"])
            continue
        stats = profile.outputs.setdefault(name, {}).setdefault(int(r["source_partition"]), OutputStats())
        stats.add(r)
        for check in checks.get(name, {}):
            stats.failing[check] = stats.failing.get(check, 0) + int(r[f"{name}__{check}"])
        if name == "dead_letters":
            reason = r["dlq_reason"] if r["dlq_reason"] is not None else "(none)"
            profile.dead_letters_by_reason[reason] = profile.dead_letters_by_reason.get(reason, 0) + int(r["n"])
    profile.dead_letters_by_reason = dict(sorted(profile.dead_letters_by_reason.items(),
                                                 key=lambda kv: (-kv[1], kv[0])))
