"""Great Expectations' results turned into the pipeline's (:mod:`.results`): each suite's result,
every expectation's outcome, and every failure told to a human with its failing records and
examples (queried in Spark where the window was read row by row)."""

from __future__ import annotations

import logging

from .evidence import WindowEvidence
from .messages import Facts
from .results import (
    ExpectationOutcome,
    FailedExpectation,
    PartitionOffsets,
    QualityResult,
    SuiteResult,
)
from .row_checks import EXAMPLE_LIMIT, RowCheck, example_rows, failing_rows
from .suites import SuiteSpec

log = logging.getLogger(__name__)


def suite_results(specs: list[SuiteSpec], run_results: dict, rows: dict, facts: Facts, evidence: WindowEvidence,
                  mismatches: list[PartitionOffsets], checks: dict[str, dict[str, RowCheck]]
                  ) -> tuple[dict[str, SuiteResult], list[FailedExpectation], list[ExpectationOutcome]]:
    """Each suite's result, every failure told to a human and every expectation's outcome (failed ones
    with failing rows queried in Spark); ``checks``: the record suites' row checks
    (:func:`~eos_etl.quality.row_checks.record_checks`). A failed check whose message tells example rows
    (the shop: a wrong invoice total) first gets them."""
    suites: dict[str, SuiteResult] = {}
    failures: list[FailedExpectation] = []
    outcomes: list[ExpectationOutcome] = []
    for spec in specs:
        result, vr_id, docs_page = run_results[spec.name]
        failed = [r for r in result.results if not r.success]
        _told_examples(spec, failed, facts, evidence, checks)
        for r in result.results:
            examples = [] if r.success or _exception_message(r.exception_info) else _failing_examples(
                spec, _check_name(r), evidence, mismatches, checks)
            outcome = _outcome(spec, r, rows.get(spec.name), examples, checks)
            outcomes.append(outcome)
            if not r.success:
                failures.append(_failure(spec, r, facts, outcome, checks))
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


def _told_examples(spec: SuiteSpec, failed: list, facts: Facts, evidence: WindowEvidence,
                   checks: dict[str, dict[str, RowCheck]]) -> None:
    """The example rows the messages of ``spec``'s failed checks tell, into ``facts`` (only where the
    window's records were read)."""
    if evidence.records is None:
        return
    for r in failed:
        check = checks.get(spec.name, {}).get(_check_name(r))
        if check is not None and check.example_columns:
            facts.examples[(spec.name, check.name)] = example_rows(evidence.records.suite(spec.name), check)


def log_result(result: QualityResult) -> None:
    log.info("data quality of run %s (%s): %s in %.1fs (%s); counts %s%s", result.run_id, result.window,
             "passed" if result.success else f"FAILED {len(result.critical_failures)} critical check(s)",
             result.seconds, result.timings, result.counts.to_dict(),
             "".join(f"\n  - {m}" for m in result.messages))


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


def _failing_records(spec: SuiteSpec, result, checks: dict) -> int | None:
    """How many records fail a record suite's check: the sum its expectation observed."""
    if spec.name not in checks:
        return None
    observed = (result.result or {}).get("observed_value")
    try:
        return int(observed)  # a numpy integer, as pandas sums
    except (TypeError, ValueError):
        return None


def _failure(spec: SuiteSpec, result, facts: Facts, outcome: ExpectationOutcome, checks: dict) -> FailedExpectation:
    cfg = result.expectation_config
    name = _check_name(result)
    details = dict(result.result or {})
    if spec.name in checks:
        # What the describers read: the failing records' count and their values of the checked column.
        column = checks[spec.name][name].column
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


def _outcome(spec: SuiteSpec, result, records: int | None, examples: list[dict], checks: dict) -> ExpectationOutcome:
    """One expectation's result for the report; failed ones with up to five failing rows and their lineage.
    A record suite's check counts records: its failing records and the suite's records."""
    cfg = result.expectation_config
    details = dict(result.result or {})
    failing = _failing_records(spec, result, checks)
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


def _failing_examples(spec: SuiteSpec, name: str, evidence: WindowEvidence, mismatches: list[PartitionOffsets],
                      checks: dict) -> list[dict]:
    """Up to five rows behind a failed check, with their lineage."""
    if name == "committed_offsets_match_window":
        return [m.to_dict() for m in mismatches[:EXAMPLE_LIMIT]]
    records = evidence.records
    if records is None:  # the profile passed the window's records: only offsets can fail
        return []
    if spec.name in checks:
        check = checks[spec.name][name]
        return failing_rows(records.suite(spec.name), check.column, check.fails)
    if name == "no_aborted_visible":
        return records.examples_of_aborted_visible()
    if name == "no_inputs_without_output":
        return records.examples_of_inputs_without_output()
    return []
