"""The evidence a validation judges, gathered in Spark for one window: the profile
(:mod:`.profile`), or where it cannot pass the window the records themselves (:mod:`.record_frames`);
the counts, the reconciliation, the committed offsets against the window, and the small tables
the suites check (:mod:`.suites`)."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..engine.tasks.connect_route import is_connect
from ..engine.window import Window
from ..errors import ConfigurationError
from ..kafka.admin import ClusterAdmin
from . import profile, record_frames, window_reads
from .checked_outputs import PAIRING
from .messages import Facts
from .record_frames import InputSummary, OutputCounts, RecordFrames
from .results import (
    PartitionCounts,
    PartitionOffsets,
    QualityCounts,
)
from .row_checks import failing_per_partition, row_checks
from .suites import RECONCILIATION_COLUMNS
from .window_reads import OutputRead

log = logging.getLogger(__name__)


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
    #: suite -> check -> input partition -> records failing the check (see row_checks.row_checks)
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


def check_window(settings, window: Window) -> None:
    """Refuse a window planned for another input topic or consumer group than ``settings``."""
    if window.topic != settings.topics.purchases:
        raise ConfigurationError(f"window is over topic {window.topic!r} but the pipeline reads "
                                 f"{settings.topics.purchases!r}")
    if window.group != settings.group:
        raise ConfigurationError(f"window was planned for group {window.group!r} but the pipeline's group is "
                                 f"{settings.group!r}")


def window_counts(evidence: WindowEvidence) -> QualityCounts:
    """The window's counts, as gathered."""
    summary = evidence.inputs_summary
    return QualityCounts(
        committed_inputs=evidence.committed_inputs,
        valid_inputs=summary.valid,
        invalid_inputs=summary.invalid,
        invoices=evidence.invoices.count,
        shipments=evidence.shipments.count,
        dead_letters=evidence.dead_letters.count,
        aborted_visible=evidence.aborted_visible,
        inputs_without_output=evidence.inputs_without_output,
        unattributable_outputs=sum(s.unattributable for s in evidence.by_topic),
    )


def reconciliation_row(counts: QualityCounts, mismatches: list[PartitionOffsets]) -> dict:
    """The one row the reconciliation suite checks (its columns: :data:`RECONCILIATION_COLUMNS`)."""
    return {
        "committed_inputs": counts.committed_inputs,
        "valid_inputs": counts.valid_inputs,
        "invalid_inputs": counts.invalid_inputs,
        "invoices": counts.invoices,
        "shipments": counts.shipments,
        "dead_letters": counts.dead_letters,
        "invoices_plus_dead_letters": counts.invoices + counts.dead_letters,
        "aborted_visible": counts.aborted_visible,
        "inputs_without_output": counts.inputs_without_output,
        "offsets_match": not mismatches,
        "offset_mismatches": len(mismatches),
    }


def failure_facts(recon: dict, evidence: WindowEvidence, mismatches: list[PartitionOffsets],
           exact_offsets: bool) -> Facts:
    """What the suites' failure messages tell besides an expectation's own result."""
    return Facts(
        reconciliation=recon,
        surplus={"invoices": evidence.invoices.surplus, "shipments": evidence.shipments.surplus},
        offset_mismatches=[(o.partition, o.committed, o.window_end) for o in mismatches],
        exact_offsets=exact_offsets,
    )


def where_spark_ran(spark) -> dict:
    """The session's kind (``connect``: a client of a Spark Connect server; ``classic``: this
    process's own application), the application's id and master, as the report records them."""
    conf = spark.conf
    return {"session": "connect" if is_connect(spark) else "classic",
            "application_id": conf.get("spark.app.id", None), "master": conf.get("spark.master", None)}


def gather(spark, settings, window: Window, committed_input_offsets, timings: dict[str, float],
           margin_ms: int, outputs) -> WindowEvidence:
    """The window's profile (:mod:`eos_etl.quality.profile`): two aggregates, one per source. Where it
    cannot pass the window, the window is read again row by row for the exact counts and failing rows.
    ``outputs``: what the checks judge of the record outputs (:mod:`.checked_outputs`)."""
    t0 = time.monotonic()

    def timed(key: str, fn, *args, **kwargs):
        t1 = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            timings[key] = round(time.monotonic() - t1, 3)

    if committed_input_offsets is None:
        committed_input_offsets = timed("committed_offsets", window_reads.committed_offsets, settings, window)
    committed_input_offsets = {int(p): o for p, o in committed_input_offsets.items()}
    topics = settings.topics
    names = {"invoices": topics.invoices, "shipments": topics.shipments, "dead_letters": topics.dead_letters}

    found = profile.WindowProfile(timed("profile_inputs", profile.profile_inputs, spark, settings, window))
    earliest = found.earliest_ms
    if earliest is None and not window.is_empty:
        earliest = timed("earliest_uncommitted", window_reads.earliest_uncommitted_ms, spark, settings.connection,
                         window)
    since = window_reads.output_bound_ms(earliest, margin_ms)
    starts, ends = timed("output_offsets", window_reads.output_start_offsets, ClusterAdmin(settings.connection),
                         tuple(names.values()), since)
    output_read = OutputRead(earliest, since, margin_ms, starts, ends)
    timed("profile_outputs", profile.profile_outputs, found, spark, settings.connection, starts, window, names,
          outputs)
    if found.clean:
        evidence = _evidence_from_profile(found, window, committed_input_offsets, output_read, names, outputs)
    else:
        log.info("quality of %s: the profile does not pass the window (%s); reading its records",
                 window, "; ".join(found.inconsistencies()[:3]) or "value checks failed")
        evidence = timed("records", _evidence_from_records, spark, settings, window, committed_input_offsets,
                         output_read, names, outputs)
    timings["kafka_and_spark"] = evidence.seconds = round(time.monotonic() - t0, 3)
    log.info("quality of %s: outputs read from %s (earliest input %s ms, margin %d ms), %d offsets",
             window, output_read.from_offsets, earliest, margin_ms, output_read.span)
    return evidence


def _evidence_from_profile(found: profile.WindowProfile, window: Window, committed: dict, output_read,
                           names: dict[str, str], outputs) -> WindowEvidence:
    """A window whose profile passes: the lineage checks hold (their counts are zero) and the value
    checks' counts are the profile's own."""
    per_partition = {p: s.records for p, s in found.inputs.items()}
    valid = sum(s.valid for s in found.inputs.values())
    summary = InputSummary(per_partition, found.earliest_ms, valid, sum(per_partition.values()) - valid)

    def counts(name: str) -> OutputCounts:
        parts = found.outputs.get(name, {})
        return OutputCounts(topic=names[name], count=sum(s.records for s in parts.values()),
                            unattributable=found.unattributable.get(name, 0),
                            per_source_partition={p: s.records for p, s in parts.items()})

    failing = {suite: {check: {p: (found.output(suite, p).failing.get(check, 0) if suite != PAIRING else 0)
                               for p in window.ranges}
                       for check in checks}
               for suite, checks in row_checks(outputs).items()}
    return WindowEvidence(window, summary, counts("invoices"), counts("shipments"), counts("dead_letters"),
                          committed_offsets=committed, output_read=output_read, failing=failing,
                          dead_letters_by_reason=found.dead_letters_by_reason)


def _evidence_from_records(spark, settings, window: Window, committed: dict, output_read: OutputRead,
                           names: dict[str, str], outputs) -> WindowEvidence:
    """A window the profile did not pass, read row by row and materialised: every count exact, and
    the frames the failing rows are sampled from."""
    inputs = window_reads.read_inputs(spark, settings, window)
    summary = record_frames.input_summary(inputs)
    outputs_df = record_frames.window_outputs(spark, settings.connection, output_read.from_offsets, window,
                                              outputs, names)
    # Independent Spark jobs run side by side (Spark schedules concurrent jobs from threads). A Connect
    # client's operation tags are per thread: the pool's threads take this one's, so that a terminated
    # client still interrupts them.
    tags = spark.getTags() if is_connect(spark) else set()
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="eos-etl-quality", initializer=_tag,
                            initargs=(spark, tags)) as pool:
        f_gaps = pool.submit(record_frames.lineage_gaps, inputs, outputs_df)
        f_reasons = pool.submit(record_frames.dead_letters_by_reason,
                                record_frames.topic_rows(outputs_df, names["dead_letters"]))
        f_counts = pool.submit(record_frames.output_counts, outputs_df, names)
        # Meanwhile the pairing frame is materialised here.
        frames = record_frames.record_frames(inputs, outputs_df, outputs, names)
        f_failing = {suite: pool.submit(failing_per_partition, frames.suite(suite), checks)
                     for suite, checks in row_checks(outputs).items()}
        per_topic = f_counts.result()
        aborted_visible, inputs_without_output = f_gaps.result()
        return WindowEvidence(
            window, summary, per_topic["invoices"], per_topic["shipments"], per_topic["dead_letters"],
            committed_offsets=committed, output_read=output_read,
            failing={suite: f.result()[0] for suite, f in f_failing.items()},
            aborted_visible=aborted_visible, inputs_without_output=inputs_without_output,
            dead_letters_by_reason=f_reasons.result(), records=frames)


def _tag(spark, tags) -> None:
    for tag in tags:
        spark.addTag(tag)


def partition_counts(evidence: WindowEvidence, offsets: list[PartitionOffsets]) -> list[PartitionCounts]:
    """Inputs and outputs per input partition (outputs counted by their source partition)."""
    return [PartitionCounts(
        partition=o.partition, window_start=o.window_start, window_end=o.window_end,
        committed_offset=o.committed, inputs=evidence.inputs_per_partition.get(o.partition, 0),
        invoices=evidence.invoices.per_source_partition.get(o.partition, 0),
        shipments=evidence.shipments.per_source_partition.get(o.partition, 0),
        dead_letters=evidence.dead_letters.per_source_partition.get(o.partition, 0),
    ) for o in offsets]


def profile_frame(evidence: WindowEvidence, suite: str):
    """The suite's table for Great Expectations: one row per input partition of the window, its
    records and, per check, how many of them fail it."""
    import pandas as pd  # deferred: only these small tables need pandas (Great Expectations loads it anyway)

    records = {"invoices": evidence.invoices.per_source_partition, "shipments": evidence.shipments.per_source_partition,
               "pairing": evidence.invoices.per_source_partition}[suite]
    partitions = sorted(evidence.window.ranges)
    data = {"source_partition": pd.Series(partitions, dtype="int64"),
            "records": pd.Series([records.get(p, 0) for p in partitions], dtype="int64")}
    for check, per_partition in evidence.failing[suite].items():
        data[check] = pd.Series([per_partition.get(p, 0) for p in partitions], dtype="int64")
    return pd.DataFrame(data)


def reconciliation_frame(recon: dict):
    import pandas as pd  # deferred: only this one-row frame needs pandas (Great Expectations loads it anyway)

    return pd.DataFrame({k: pd.Series([recon[k]], dtype=dtype) for k, dtype in RECONCILIATION_COLUMNS.items()})


def offsets_against(window: Window, committed: dict[int, int | None], exact: bool):
    rows, mismatches = [], []
    for p, rng in sorted(window.ranges.items()):
        got = committed.get(p)
        row = PartitionOffsets(p, rng.start, rng.end, got)
        rows.append(row)
        if got is None:
            ok = rng.is_empty  # an empty range publishes nothing, so it may commit nothing
        else:
            ok = got == rng.end if exact else got >= rng.end
        if not ok:
            mismatches.append(row)
    return rows, mismatches
