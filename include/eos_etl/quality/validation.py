"""Validate one pipeline run with Great Expectations 1.x.

:func:`validate_run` profiles, in Spark, what a ``read_committed`` reader sees
for the run's window: the window's input offset ranges and the output topics
from the window's earliest input time (minus a clock-skew margin) on, each read
once into one aggregate (:mod:`eos_etl.quality.profile`). A window the profile
cannot pass is read again row by row for exact counts and failing rows
(:mod:`eos_etl.quality.collect`). Four suites (:mod:`eos_etl.quality.suites`)
check the profile's tables through Checkpoints, then the HTML Data Docs of what
changed are built under ``context_root`` (:mod:`eos_etl.quality.data_docs_site`).
The Great Expectations project there is a file-mode context: suites, validation
definitions, checkpoints and every validation result are kept, so Data Docs list
the history of runs.

``spark`` may be a classic session (a local or cluster application) or a Spark
Connect client session: Great Expectations 1.x takes Connect DataFrames in its
Spark data source, and nothing here reaches for the application itself. On the
default route the validate task is such a client of the server the window ran
on (docs/data-quality.md).

The project is opened once per process and per ``context_root``; a suite whose
definition is unchanged is not written again, its stored checkpoint is run
(:class:`_Project`).

Great Expectations (seconds to import) is imported on first use, not with this module, which
loads only pyspark's SQL functions and the Kafka client; a validation imports it in a thread while
its Spark jobs run.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..engine.connect_route import is_connect
from ..engine.window import Window
from ..kafka.admin import ClusterAdmin
from ..paths import safe_name
from ..errors import ConfigurationError
from . import collect as c
from . import data_docs_site, profile
from .results import (
    ExpectationOutcome,
    FailedExpectation,
    PartitionCounts,
    PartitionOffsets,
    QualityCounts,
    QualityError,
    QualityResult,
    SuiteResult,
    raise_for_failures,
)
from .suites import RECONCILIATION_COLUMNS, Facts, SuiteSpec, all_suites

__all__ = ["validate_run", "raise_for_failures", "QualityError", "QualityResult"]

log = logging.getLogger(__name__)

DATASOURCE_NAMES = {"pandas": "eos_etl_pandas"}  # every suite checks a small pandas table
BATCH_DEFINITION_NAME = "whole_dataframe"
# BASIC: unexpected count and percent, observed value and a few unexpected values, which is
# what the report shows. SUMMARY would add a value-count job per column-map expectation.
RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": 20}
#: Validation results kept per suite in the Great Expectations project, newest first; older
#: ones (and, through GE's own clean-up, their Data Docs pages) are deleted before each
#: validation. Every checkpoint's Data Docs update lists and parses every stored result key,
#: so without a bound each run slows down with the project's history: measured 1.9 s at
#: 3,000 stored results and 4.0 s at 6,000 (a few months of an hourly DAG). The run reports
#: (the trends page) keep the long history.
VALIDATION_RESULTS_KEPT = 100


def validate_run(
    spark,
    settings,
    window: Window,
    *,
    run_id: str,
    context_root: Path,
    committed_input_offsets: dict[int, int | None] | None = None,
    exact_offsets: bool = True,
    clock_skew_margin_ms: int = c.CLOCK_SKEW_MARGIN_MS,
) -> QualityResult:
    """Validate what a read_committed reader sees for ``window``; never raises on bad data.

    ``settings`` is a :class:`eos_etl.shop.pipeline.ShopSettings`. ``committed_input_offsets``
    (partition -> offset) replaces reading the group's committed offsets from the
    cluster. With ``exact_offsets=False`` committed offsets at or past the window ends
    pass (validating an old window after later ones ran); by default they must equal them.
    Output topics are read from the window's earliest input time minus
    ``clock_skew_margin_ms`` on (see :mod:`eos_etl.quality.collect`).
    Use :func:`raise_for_failures` to turn critical failures into a :class:`QualityError`.
    """
    t0 = time.monotonic()
    _check_window(settings, window)
    context_root = Path(context_root)
    timings: dict[str, float] = {}
    _quiet_great_expectations()
    opening = _open_project_meanwhile(context_root)

    evidence = _gather(spark, settings, window, committed_input_offsets, timings, clock_skew_margin_ms)
    offsets, mismatches = _offsets(window, evidence.committed_offsets, exact_offsets)
    counts = _counts(evidence)
    recon = _reconciliation(counts, mismatches)
    facts = _facts(recon, evidence, mismatches, exact_offsets)
    frames = {name: _profile_frame(evidence, name) for name in profile.ROW_CHECKS}
    frames["reconciliation"] = _reconciliation_frame(recon)
    rows = {"invoices": counts.invoices, "shipments": counts.shipments, "pairing": counts.invoices,
            "reconciliation": 1}

    t = time.monotonic()
    opening.join()
    timings["ge_open_waited"] = round(time.monotonic() - t, 3)
    specs = all_suites()
    run_results, data_docs = _run_checkpoints(context_root, settings, specs, frames, run_id, timings)
    timings["great_expectations"] = round(time.monotonic() - t, 3)

    t = time.monotonic()
    suites, failures, outcomes = _suite_results(specs, run_results, rows, facts, evidence, mismatches)
    timings["examples"] = round(time.monotonic() - t, 3)
    result = QualityResult(
        run_id=run_id,
        window=window,
        success=not any(f.critical for f in failures),
        suites=suites,
        failures=failures,
        counts=counts,
        offsets=offsets,
        data_docs_path=data_docs if data_docs is not None and data_docs.is_file() else None,
        context_root=context_root,
        seconds=round(time.monotonic() - t0, 3),
        timings=timings,
        expectations=outcomes,
        dead_letters_by_reason=evidence.dead_letters_by_reason,
        per_partition=_per_partition(evidence, offsets),
        output_read=evidence.output_read.to_dict(),
        spark=where_spark_ran(spark),
    )
    _log_result(result)
    return result


def _open_project_meanwhile(context_root: Path) -> threading.Thread:
    """Import Great Expectations and open the project in a thread while Spark works: the import alone
    takes seconds, and the Spark jobs leave this process waiting on the server or the executors. A
    failure here is left for the main thread to meet again and report."""

    def open_project() -> None:
        try:
            _project(context_root)
        except Exception:  # noqa: BLE001 - raised again, and reported, where the project is used
            log.debug("opening the Great Expectations project ahead failed", exc_info=True)

    thread = threading.Thread(target=open_project, name="eos-etl-gx-open", daemon=True)
    thread.start()
    return thread


def _check_window(settings, window: Window) -> None:
    """Refuse a window planned for another input topic or consumer group than ``settings``."""
    if window.topic != settings.topics.purchases:
        raise ConfigurationError(f"window is over topic {window.topic!r} but the pipeline reads "
                                 f"{settings.topics.purchases!r}")
    if window.group != settings.group:
        raise ConfigurationError(f"window was planned for group {window.group!r} but the pipeline's group is "
                                 f"{settings.group!r}")


def _counts(evidence: c.WindowEvidence) -> QualityCounts:
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


def _reconciliation(counts: QualityCounts, mismatches: list[PartitionOffsets]) -> dict:
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


def _facts(recon: dict, evidence: c.WindowEvidence, mismatches: list[PartitionOffsets],
           exact_offsets: bool) -> Facts:
    """What the suites' failure messages tell besides an expectation's own result."""
    return Facts(
        reconciliation=recon,
        invoice_surplus=evidence.invoices.surplus,
        shipment_surplus=evidence.shipments.surplus,
        offset_mismatches=[(o.partition, o.committed, o.window_end) for o in mismatches],
        exact_offsets=exact_offsets,
    )


def _suite_results(specs: list[SuiteSpec], run_results: dict, rows: dict, facts: Facts,
                   evidence: c.WindowEvidence, mismatches: list[PartitionOffsets]
                   ) -> tuple[dict[str, SuiteResult], list[FailedExpectation], list[ExpectationOutcome]]:
    """Each suite's result, every failure told to a human and every expectation's outcome (failed ones
    with failing rows queried in Spark); a wrong invoice total first gets its example rows."""
    suites: dict[str, SuiteResult] = {}
    failures: list[FailedExpectation] = []
    outcomes: list[ExpectationOutcome] = []
    for spec in specs:
        result, vr_id, docs_page = run_results[spec.name]
        failed = [r for r in result.results if not r.success]
        if (spec.name == "invoices" and evidence.records is not None
                and any(_check_name(r) == "total_matches" for r in failed)):
            facts.wrong_totals = c.examples_of_wrong_totals(evidence.records.invoices)
        for r in result.results:
            examples = [] if r.success or _exception_message(r.exception_info) else _failing_examples(
                spec, _check_name(r), evidence, mismatches)
            outcome = _outcome(spec, r, rows.get(spec.name), examples)
            outcomes.append(outcome)
            if not r.success:
                failures.append(_failure(spec, r, facts, outcome))
        stats = result.statistics or {}
        suites[spec.name] = SuiteResult(
            name=spec.name,
            suite_name=result.suite_name,
            success=not failed,
            evaluated=int(stats.get("evaluated_expectations", len(result.results))),
            successful=int(stats.get("successful_expectations", len(result.results) - len(failed))),
            rows=rows.get(spec.name, 0),
            validation_result_id=vr_id,
            docs_page=docs_page,
        )
    return suites, failures, outcomes


def _log_result(result: QualityResult) -> None:
    log.info("data quality of run %s (%s): %s in %.1fs (%s); counts %s%s", result.run_id, result.window,
             "passed" if result.success else f"FAILED {len(result.critical_failures)} critical check(s)",
             result.seconds, result.timings, result.counts.to_dict(),
             "".join(f"\n  - {m}" for m in result.messages))


def where_spark_ran(spark) -> dict:
    """The session's kind (``connect``: a client of a Spark Connect server; ``classic``: this
    process's own application), the application's id and master, as the report records them."""
    conf = spark.conf
    return {"session": "connect" if is_connect(spark) else "classic",
            "application_id": conf.get("spark.app.id", None), "master": conf.get("spark.master", None)}


def _gather(spark, settings, window: Window, committed_input_offsets, timings: dict[str, float],
            margin_ms: int) -> c.WindowEvidence:
    """The window's profile (:mod:`eos_etl.quality.profile`): two aggregates, one per source. Where it
    cannot pass the window, the window is read again row by row for the exact counts and failing rows."""
    t0 = time.monotonic()

    def timed(key: str, fn, *args, **kwargs):
        t1 = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            timings[key] = round(time.monotonic() - t1, 3)

    if committed_input_offsets is None:
        committed_input_offsets = timed("committed_offsets", c.committed_offsets, settings, window)
    committed_input_offsets = {int(p): o for p, o in committed_input_offsets.items()}
    topics = settings.topics
    names = {"invoices": topics.invoices, "shipments": topics.shipments, "dead_letters": topics.dead_letters}

    found = profile.WindowProfile(timed("profile_inputs", profile.profile_inputs, spark, settings, window))
    earliest = found.earliest_ms
    if earliest is None and not window.is_empty:
        earliest = timed("earliest_uncommitted", c.earliest_uncommitted_ms, spark, settings.connection, window)
    since = c.output_bound_ms(earliest, margin_ms)
    starts, ends = timed("output_offsets", c.output_start_offsets, ClusterAdmin(settings.connection),
                         tuple(names.values()), since)
    output_read = c.OutputRead(earliest, since, margin_ms, starts, ends)
    timed("profile_outputs", profile.profile_outputs, found, spark, settings.connection, starts, window, names)
    if found.clean:
        evidence = _evidence_from_profile(found, window, committed_input_offsets, output_read, names)
    else:
        log.info("quality of %s: the profile does not pass the window (%s); reading its records",
                 window, "; ".join(found.inconsistencies()[:3]) or "value checks failed")
        evidence = timed("records", _evidence_from_records, spark, settings, window, committed_input_offsets,
                         output_read, names)
    timings["kafka_and_spark"] = evidence.seconds = round(time.monotonic() - t0, 3)
    log.info("quality of %s: outputs read from %s (earliest input %s ms, margin %d ms), %d offsets",
             window, output_read.from_offsets, earliest, margin_ms, output_read.span)
    return evidence


def _evidence_from_profile(found: profile.WindowProfile, window: Window, committed: dict, output_read,
                           names: dict[str, str]) -> c.WindowEvidence:
    """A window whose profile passes: the lineage checks hold (their counts are zero) and the value
    checks' counts are the profile's own."""
    per_partition = {p: s.records for p, s in found.inputs.items()}
    valid = sum(s.valid for s in found.inputs.values())
    summary = c.InputSummary(per_partition, found.earliest_ms, valid, sum(per_partition.values()) - valid)

    def counts(name: str) -> c.OutputCounts:
        parts = found.outputs.get(name, {})
        return c.OutputCounts(topic=names[name], count=sum(s.records for s in parts.values()),
                              unattributable=found.unattributable.get(name, 0),
                              per_source_partition={p: s.records for p, s in parts.items()})

    failing = {suite: {check: {p: (found.output(suite, p).failing.get(check, 0) if suite != "pairing" else 0)
                               for p in window.ranges}
                       for check in checks}
               for suite, checks in profile.ROW_CHECKS.items()}
    return c.WindowEvidence(window, summary, counts("invoices"), counts("shipments"), counts("dead_letters"),
                            committed_offsets=committed, output_read=output_read, failing=failing,
                            dead_letters_by_reason=found.dead_letters_by_reason)


def _evidence_from_records(spark, settings, window: Window, committed: dict, output_read: c.OutputRead,
                           names: dict[str, str]) -> c.WindowEvidence:
    """A window the profile did not pass, read row by row and materialised: every count exact, and
    the frames the failing rows are sampled from."""
    topics = settings.topics
    inputs = c.read_inputs(spark, settings, window)
    summary = c.input_summary(inputs)
    outputs = c.window_outputs(spark, settings.connection, output_read.from_offsets, window,
                               invoices_topic=topics.invoices, shipments_topic=topics.shipments)
    invoices_df = c.invoices_frame(outputs, topics.invoices)
    shipments_df = c.shipments_frame(outputs, topics.shipments)
    # Independent Spark jobs run side by side (Spark schedules concurrent jobs from threads). A Connect
    # client's operation tags are per thread: the pool's threads take this one's, so that a terminated
    # client still interrupts them.
    tags = spark.getTags() if is_connect(spark) else set()
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="eos-etl-quality", initializer=_tag,
                            initargs=(spark, tags)) as pool:
        f_gaps = pool.submit(c.lineage_gaps, inputs, outputs)
        f_reasons = pool.submit(c.dead_letters_by_reason, c.topic_rows(outputs, topics.dead_letters))
        f_counts = pool.submit(c.output_counts, outputs, names)
        pairing_df = c.pairing_frame(invoices_df, shipments_df)
        frames = c.RecordFrames(inputs, outputs, invoices_df, shipments_df, pairing_df)
        f_failing = {suite: pool.submit(c.failing_per_partition, frames.suite(suite), checks)
                     for suite, checks in profile.ROW_CHECKS.items()}
        per_topic = f_counts.result()
        aborted_visible, inputs_without_output = f_gaps.result()
        return c.WindowEvidence(
            window, summary, per_topic["invoices"], per_topic["shipments"], per_topic["dead_letters"],
            committed_offsets=committed, output_read=output_read,
            failing={suite: f.result()[0] for suite, f in f_failing.items()},
            aborted_visible=aborted_visible, inputs_without_output=inputs_without_output,
            dead_letters_by_reason=f_reasons.result(), records=frames)


def _tag(spark, tags) -> None:
    for tag in tags:
        spark.addTag(tag)


def _per_partition(evidence: c.WindowEvidence, offsets: list[PartitionOffsets]) -> list[PartitionCounts]:
    """Inputs and outputs per input partition (outputs counted by their source partition)."""
    return [PartitionCounts(
        partition=o.partition, window_start=o.window_start, window_end=o.window_end,
        committed_offset=o.committed, inputs=evidence.inputs_per_partition.get(o.partition, 0),
        invoices=evidence.invoices.per_source_partition.get(o.partition, 0),
        shipments=evidence.shipments.per_source_partition.get(o.partition, 0),
        dead_letters=evidence.dead_letters.per_source_partition.get(o.partition, 0),
    ) for o in offsets]


def _profile_frame(evidence: c.WindowEvidence, suite: str):
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


def _quiet_great_expectations() -> None:
    """Great Expectations logs every store write at INFO; keep it at WARNING unless configured."""
    gx_log = logging.getLogger("great_expectations")
    if gx_log.level == logging.NOTSET:
        gx_log.setLevel(logging.WARNING)


def _reconciliation_frame(recon: dict):
    import pandas as pd  # deferred: only this one-row frame needs pandas (Great Expectations loads it anyway)

    return pd.DataFrame({k: pd.Series([recon[k]], dtype=dtype) for k, dtype in RECONCILIATION_COLUMNS.items()})


# -- offsets ----------------------------------------------------------------------------


def _offsets(window: Window, committed: dict[int, int | None], exact: bool):
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


# -- Great Expectations ------------------------------------------------------------------


def open_context(context_root: Path):
    """The file-mode Great Expectations project under ``context_root`` (created on first use),
    with progress bars off and its Data Docs index bounded."""
    # Deferred: Great Expectations loads on first use (see the module docstring).
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context_root.mkdir(parents=True, exist_ok=True)
    context = gx.get_context(mode="file", project_root_dir=str(context_root))
    bars = context.variables.progress_bars
    if not bars or _get(bars, "globally", True) or _get(bars, "metric_calculations", True):
        context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        context.variables.save()
    data_docs_site.bound_index(context)
    return context


def prune_validation_results(context, suite_names, keep: int = VALIDATION_RESULTS_KEPT) -> int:
    """Delete all but the newest ``keep`` validation results of each of ``suite_names``; the
    number deleted, with their Data Docs pages (run reports show such a page as pruned)."""
    store = context.validation_results_store
    by_suite: dict[str, list] = {}
    for key in store.list_keys():
        name = key.expectation_suite_identifier.name
        if name in suite_names:
            by_suite.setdefault(name, []).append(key)
    removed = []
    for keys in by_suite.values():
        keys.sort(key=lambda k: k.run_id.run_time, reverse=True)
        removed += keys[keep:]
    data_docs_site.forget_results(context, removed)
    return len(removed)


def _get(obj, key: str, default):
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _datasource(context, engine: str):
    name = DATASOURCE_NAMES[engine]
    try:
        return context.data_sources.get(name)
    except KeyError:
        return context.data_sources.add_pandas(name=name)


def _batch_definition(datasource, asset_name: str):
    try:
        asset = datasource.get_asset(asset_name)
    except LookupError:
        asset = datasource.add_dataframe_asset(name=asset_name)
    try:
        return asset.get_batch_definition(BATCH_DEFINITION_NAME)
    except KeyError:
        return asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION_NAME)


@dataclass
class _Project:
    """A Great Expectations project, opened once per process: its context, its data sources and, per
    suite, the checkpoint last run with the fingerprint of its definition (see :func:`_checkpoint`)."""

    root: Path
    context: object
    datasources: dict = field(default_factory=dict)
    checkpoints: dict = field(default_factory=dict)  # suite name -> (fingerprint, Checkpoint)

    def datasource(self, engine: str):
        if engine not in self.datasources:
            self.datasources[engine] = _datasource(self.context, engine)
        return self.datasources[engine]

    def release_batches(self) -> None:
        """Let go of the validated tables, so that a process validating many windows does not keep each
        window's in Great Expectations' batch cache."""
        for _, checkpoint in self.checkpoints.values():
            for definition in checkpoint.validation_definitions:
                engine = definition.data.data_asset.datasource.execution_engine
                if engine is not None:
                    engine.batch_manager.reset_batch_cache()


_PROJECTS: dict[Path, _Project] = {}


def _project(context_root: Path) -> _Project:
    key = context_root.resolve()
    project = _PROJECTS.get(key)
    if project is None or not (key / "gx" / "great_expectations.yml").is_file():
        project = _PROJECTS[key] = _Project(key, open_context(context_root))
    return project


def _actions() -> list:
    """No Data Docs action: one build of what changed per window (:func:`data_docs_site.build_pages`)
    after all suites ran, not one whole-index build per checkpoint."""
    return []


def _fingerprint(spec: SuiteSpec, meta: dict, actions: list) -> str:
    """What a stored suite, validation definition and checkpoint were made from: equal fingerprints,
    equal definitions."""
    expectations = [{k: v for k, v in ch.expectation.configuration.to_json_dict().items() if k != "id"}
                    for ch in spec.checks]
    body = {"expectations": expectations,
            "engine": spec.engine, "meta": meta, "result_format": RESULT_FORMAT,
            "actions": [(type(a).__name__, a.name) for a in actions]}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _checkpoint(project: _Project, name: str, spec: SuiteSpec, meta: dict):
    """The suite's checkpoint: the one this process ran last, or the stored one when it was made from
    the same definition (its suite's fingerprint, its own actions and result format), else written
    anew (suite, validation definition, checkpoint)."""
    import great_expectations as gx  # deferred, as in open_context

    actions = _actions()
    fingerprint = _fingerprint(spec, meta, actions)
    known = project.checkpoints.get(name)
    if known is not None and known[0] == fingerprint:
        return known[1]
    context = project.context
    checkpoint = _stored_checkpoint(context, name, fingerprint, actions)
    if checkpoint is None:
        suite = context.suites.add_or_update(
            gx.ExpectationSuite(name=name, expectations=[copy.copy(ch.expectation) for ch in spec.checks],
                                meta={**meta, "definition": fingerprint}))
        definition = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=name, data=_batch_definition(project.datasource(spec.engine), name),
                                    suite=suite))
        checkpoint = context.checkpoints.add_or_update(
            gx.Checkpoint(name=name, validation_definitions=[definition], actions=actions,
                          result_format=RESULT_FORMAT))
    project.checkpoints[name] = (fingerprint, checkpoint)
    return checkpoint


def _stored_checkpoint(context, name: str, fingerprint: str, actions: list):
    """The stored checkpoint ``name`` if it validates a suite made from ``fingerprint`` with these
    actions and the result format; None otherwise (missing, or a write was cut short)."""
    from great_expectations.exceptions import DataContextError  # deferred, as in open_context

    try:
        checkpoint = context.checkpoints.get(name)
    except DataContextError:
        return None
    definitions = checkpoint.validation_definitions
    same = (len(definitions) == 1 and (definitions[0].suite.meta or {}).get("definition") == fingerprint
            and [(type(a).__name__, a.name) for a in checkpoint.actions] == [(type(a).__name__, a.name)
                                                                              for a in actions]
            and checkpoint.result_format == RESULT_FORMAT)
    return checkpoint if same else None


def _run_checkpoints(context_root: Path, settings, specs: list[SuiteSpec], frames: dict, run_id: str,
                     timings: dict[str, float]) -> tuple[dict, Path | None]:
    """Run one Checkpoint per suite.

    Returns ({suite: (validation result, result id, Data Docs page)}, Data Docs index.html).
    """
    from great_expectations.core.run_identifier import RunIdentifier  # deferred, as in open_context

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*force_reuse_spark_context.*")
        t = time.monotonic()
        project = _project(context_root)
        context = project.context
        prefix = safe_name(settings.group)
        pruned = prune_validation_results(context, {f"{prefix}.{spec.name}" for spec in specs})
        if pruned:
            log.info("deleted %d Great Expectations validation result(s) beyond the newest %d per suite",
                     pruned, VALIDATION_RESULTS_KEPT)
        meta = {"pipeline_group": settings.group, "input_topic": settings.topics.purchases}
        checkpoints = {spec.name: _checkpoint(project, f"{prefix}.{spec.name}", spec, meta) for spec in specs}
        timings["ge_context"] = round(time.monotonic() - t, 3)
        run = RunIdentifier(run_name=safe_name(run_id), run_time=datetime.now(timezone.utc))
        out, ids = {}, {}
        try:
            for spec in specs:
                t = time.monotonic()
                result = checkpoints[spec.name].run(batch_parameters={"dataframe": frames[spec.name]}, run_id=run)
                [(vr_id, vr)] = result.run_results.items()
                out[spec.name], ids[spec.name] = (vr, str(vr_id)), vr_id
                timings[f"ge_{spec.name}"] = round(time.monotonic() - t, 3)
        finally:
            project.release_batches()
        t = time.monotonic()
        pages, index = data_docs_site.build_pages(context, list(ids.values()))
        timings["ge_data_docs"] = round(time.monotonic() - t, 3)
        return ({name: (*out[name], pages.get(vr_id)) for name, vr_id in ids.items()},
                data_docs_site.local_index(index))


# -- results -> failures -----------------------------------------------------------------


def _check_name(result) -> str:
    cfg = result.expectation_config
    return str((cfg.meta or {}).get("check") or cfg.type)


def _exception_message(info) -> str | None:
    if not info:
        return None
    if isinstance(info, dict):
        if info.get("raised_exception"):
            return str(info.get("exception_message") or "unknown error")
        for value in info.values():
            msg = _exception_message(value) if isinstance(value, dict) else None
            if msg:
                return msg
    return None


def _failing_records(spec: SuiteSpec, result) -> int | None:
    """How many records fail a record suite's check: the sum its expectation observed."""
    if spec.name not in profile.ROW_CHECKS:
        return None
    observed = (result.result or {}).get("observed_value")
    try:
        return int(observed)  # a numpy integer, as pandas sums
    except (TypeError, ValueError):
        return None


def _failure(spec: SuiteSpec, result, facts: Facts, outcome: ExpectationOutcome) -> FailedExpectation:
    cfg = result.expectation_config
    name = _check_name(result)
    details = dict(result.result or {})
    if spec.name in profile.ROW_CHECKS:
        # What the describers read: the failing records' count and their values of the checked column.
        column = profile.ROW_CHECKS[spec.name][name][0]
        details["unexpected_count"] = outcome.unexpected_count
        details["partial_unexpected_list"] = [e.get(column) for e in outcome.examples]
    error = _exception_message(result.exception_info)
    check = spec.by_name().get(name)
    if error:
        text = f"check {name} could not be evaluated: {error}"
    elif check is not None:
        text = check.describe(details, facts)
    else:
        text = f"{cfg.type} failed: {details}"
    severity = getattr(cfg.severity, "value", cfg.severity) or "critical"
    examples = tuple(v for v in (details.get("partial_unexpected_list") or [])[:5])
    return FailedExpectation(
        suite=spec.name,
        check=name,
        expectation_type=cfg.type,
        severity=str(severity),
        message=f"{spec.name}: {text}",
        unexpected_count=details.get("unexpected_count"),
        observed_value=details.get("observed_value"),
        examples=examples,
    )


def _outcome(spec: SuiteSpec, result, records: int | None, examples: list[dict]) -> ExpectationOutcome:
    """One expectation's result for the report; failed ones with up to five failing rows and their lineage.
    A record suite's check counts records: its failing records and the suite's records."""
    cfg = result.expectation_config
    details = dict(result.result or {})
    failing = _failing_records(spec, result)
    if failing is not None:
        unexpected, elements = failing, records
        percent = round(100.0 * failing / records, 4) if records else None
    else:
        unexpected, elements = details.get("unexpected_count"), details.get("element_count")
        percent = details.get("unexpected_percent")
    return ExpectationOutcome(
        suite=spec.name,
        check=_check_name(result),
        expectation_type=cfg.type,
        severity=str(getattr(cfg.severity, "value", cfg.severity) or "critical"),
        success=bool(result.success),
        observed_value=details.get("observed_value"),
        unexpected_count=unexpected,
        unexpected_percent=percent,
        element_count=elements,
        examples=tuple(examples),
    )


def _failing_examples(spec: SuiteSpec, name: str, evidence: c.WindowEvidence,
                      mismatches: list[PartitionOffsets]) -> list[dict]:
    """Up to five rows behind a failed check, with their lineage."""
    if name == "committed_offsets_match_window":
        return [m.to_dict() for m in mismatches[:c.EXAMPLE_LIMIT]]
    records = evidence.records
    if records is None:  # the profile passed the window's records: only offsets can fail
        return []
    if spec.name in profile.ROW_CHECKS:
        column, condition = profile.ROW_CHECKS[spec.name][name]
        return c.failing_rows(records.suite(spec.name), column, condition)
    if name == "no_aborted_visible":
        return records.examples_of_aborted_visible()
    if name == "no_inputs_without_output":
        return records.examples_of_inputs_without_output()
    return []
