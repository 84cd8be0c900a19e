"""Validate one pipeline run with Great Expectations 1.x.

:func:`validate_run` profiles, in Spark, what a ``read_committed`` reader sees
for the run's window: the window's input offset ranges and the output topics
from the window's earliest input time (minus a clock-skew margin) on, each read
once into one aggregate (:mod:`eos_etl.quality.profile`). A window the profile
cannot pass is read again row by row for exact counts and failing rows
(:mod:`eos_etl.quality.window_reads`, :mod:`eos_etl.quality.record_frames`); both give
the window's evidence (:mod:`eos_etl.quality.evidence`). What the record outputs hold
and which checks they must pass is the pipeline's description
(:mod:`eos_etl.quality.checked_outputs`), the one definition of the checks made from it
(:mod:`eos_etl.quality.row_checks`). Four suites (:mod:`eos_etl.quality.suites`)
check the evidence's tables through Checkpoints of the Great Expectations project
(:mod:`eos_etl.quality.ge_project`), then the HTML Data Docs of what changed are
built under ``context_root`` (:mod:`eos_etl.quality.data_docs_site`); the results
become the pipeline's (:mod:`eos_etl.quality.outcomes`, :mod:`eos_etl.quality.results`).

``spark`` may be a classic session (a local or cluster application) or a Spark
Connect client session: Great Expectations 1.x takes Connect DataFrames in its
Spark data source, and nothing here reaches for the application itself. On the
default route the validate task is such a client of the server the window ran
on (docs/data-quality.md).
"""

from __future__ import annotations

import time
from pathlib import Path

from ..engine.window import Window
from .evidence import (
    check_window,
    failure_facts,
    gather,
    offsets_against,
    partition_counts,
    profile_frame,
    reconciliation_frame,
    reconciliation_row,
    where_spark_ran,
    window_counts,
)
from .ge_project import open_project_meanwhile, quiet_great_expectations, run_checkpoints
from .outcomes import log_result, suite_results
from .results import QualityError, QualityResult, raise_for_failures
from .row_checks import record_checks
from .suites import all_suites
from .window_reads import CLOCK_SKEW_MARGIN_MS

__all__ = ["validate_run", "raise_for_failures", "QualityError", "QualityResult"]


def validate_run(
    spark,
    settings,
    window: Window,
    *,
    run_id: str,
    context_root: Path,
    committed_input_offsets: dict[int, int | None] | None = None,
    exact_offsets: bool = True,
    clock_skew_margin_ms: int = CLOCK_SKEW_MARGIN_MS,
) -> QualityResult:
    """Validate what a read_committed reader sees for ``window``; never raises on bad data.

    ``settings`` describes the pipeline (e.g. :class:`eos_etl.shop.settings.ShopSettings`): its
    ``group``, ``connection`` and ``topics``, its engine configuration (``pipeline()``), its input
    contract (``reject_reasons()``) and what the checks judge of its outputs
    (``checked_outputs()``: :mod:`eos_etl.quality.checked_outputs`). ``committed_input_offsets``
    (partition -> offset) replaces reading the group's committed offsets from the
    cluster. With ``exact_offsets=False`` committed offsets at or past the window ends
    pass (validating an old window after later ones ran); by default they must equal them.
    Output topics are read from the window's earliest input time minus
    ``clock_skew_margin_ms`` on (see :mod:`eos_etl.quality.window_reads`).
    Use :func:`raise_for_failures` to turn critical failures into a :class:`QualityError`.
    """
    t0 = time.monotonic()
    check_window(settings, window)
    context_root = Path(context_root)
    timings: dict[str, float] = {}
    quiet_great_expectations()
    opening = open_project_meanwhile(context_root)
    outputs = settings.checked_outputs()
    checks = record_checks(outputs)

    evidence = gather(spark, settings, window, committed_input_offsets, timings, clock_skew_margin_ms, outputs)
    offsets, mismatches = offsets_against(window, evidence.committed_offsets, exact_offsets)
    counts = window_counts(evidence)
    recon = reconciliation_row(counts, mismatches)
    facts = failure_facts(recon, evidence, mismatches, exact_offsets)
    frames = {name: profile_frame(evidence, name) for name in checks}
    frames["reconciliation"] = reconciliation_frame(recon)
    rows = {"invoices": counts.invoices, "shipments": counts.shipments, "pairing": counts.invoices,
            "reconciliation": 1}

    t = time.monotonic()
    opening.join()
    timings["ge_open_waited"] = round(time.monotonic() - t, 3)
    specs = all_suites(outputs)
    run_results, data_docs = run_checkpoints(context_root, settings, specs, frames, run_id, timings)
    timings["great_expectations"] = round(time.monotonic() - t, 3)

    t = time.monotonic()
    suites, failures, outcomes = suite_results(specs, run_results, rows, facts, evidence, mismatches, checks)
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
        per_partition=partition_counts(evidence, offsets),
        output_read=evidence.output_read.to_dict(),
        spark=where_spark_ran(spark),
    )
    log_result(result)
    return result
