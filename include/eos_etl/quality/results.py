"""What a data-quality validation of one run found, as plain typed values.

Nothing here imports Great Expectations or Spark: a result can be built,
serialised (:meth:`QualityResult.to_dict`) and judged
(:func:`raise_for_failures`) anywhere, e.g. in a light-weight Airflow task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..engine.window import Window
from ..errors import EosEtlError

CRITICAL = "critical"


class QualityError(EosEtlError):
    """Critical data-quality expectations failed; ``result`` holds the details."""

    def __init__(self, message: str, result: "QualityResult | None" = None):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class FailedExpectation:
    """One expectation that did not hold, with a message a human can act on."""

    suite: str  # short suite name: invoices | shipments | pairing | reconciliation
    check: str  # stable check name, e.g. "invoice_id_unique"
    expectation_type: str  # e.g. "expect_column_values_to_be_unique"
    severity: str  # critical | warning | info
    message: str  # e.g. "pairing: 3 invoice(s) without shipment (e.g. inv_...)"
    unexpected_count: int | None = None
    observed_value: object = None
    examples: tuple = ()

    @property
    def critical(self) -> bool:
        return self.severity == CRITICAL

    def to_dict(self) -> dict:
        return {
            "suite": self.suite,
            "check": self.check,
            "expectation_type": self.expectation_type,
            "severity": self.severity,
            "message": self.message,
            "unexpected_count": self.unexpected_count,
            "observed_value": _jsonable(self.observed_value),
            "examples": [_jsonable(e) for e in self.examples],
        }

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class ExpectationOutcome:
    """One expectation's result, passed or failed; failed ones with example rows and their lineage."""

    suite: str
    check: str
    expectation_type: str
    severity: str
    success: bool
    observed_value: object = None
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    element_count: int | None = None
    examples: tuple = ()  # up to five failing rows (dicts with source_partition, source_offset, run_id, ...)

    def to_dict(self) -> dict:
        return {
            "suite": self.suite,
            "check": self.check,
            "expectation_type": self.expectation_type,
            "severity": self.severity,
            "success": self.success,
            "observed_value": _jsonable(self.observed_value),
            "unexpected_count": _jsonable(self.unexpected_count),
            "unexpected_percent": _jsonable(self.unexpected_percent),
            "element_count": _jsonable(self.element_count),
            "examples": [_jsonable(e) for e in self.examples],
        }


@dataclass(frozen=True)
class SuiteResult:
    """The outcome of one expectation suite (one Checkpoint run)."""

    name: str  # short name: invoices | shipments | pairing | reconciliation
    suite_name: str  # the Great Expectations suite name
    success: bool
    evaluated: int
    successful: int
    rows: int  # rows of the validated DataFrame
    validation_result_id: str | None = None
    docs_page: str | None = None  # Data Docs page of this validation result

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "suite_name": self.suite_name,
            "success": self.success,
            "evaluated": self.evaluated,
            "successful": self.successful,
            "failed": self.evaluated - self.successful,
            "rows": self.rows,
            "validation_result_id": self.validation_result_id,
            "docs_page": self.docs_page,
        }


@dataclass(frozen=True)
class QualityCounts:
    """What a reader sees for the window (records selected by lineage)."""

    committed_inputs: int  # input records in the window visible read_committed
    valid_inputs: int  # of those, valid by the shop's contract
    invalid_inputs: int
    invoices: int  # read_committed
    shipments: int
    dead_letters: int
    aborted_visible: int = 0  # read_committed outputs whose source is no committed input record
    inputs_without_output: int = 0
    unattributable_outputs: int = 0  # source_topic is the input, but partition/offset headers unreadable

    def to_dict(self) -> dict:
        return {
            "committed_inputs": self.committed_inputs,
            "valid_inputs": self.valid_inputs,
            "invalid_inputs": self.invalid_inputs,
            "invoices": self.invoices,
            "shipments": self.shipments,
            "dead_letters": self.dead_letters,
            "aborted_visible": self.aborted_visible,
            "inputs_without_output": self.inputs_without_output,
            "unattributable_outputs": self.unattributable_outputs,
        }


@dataclass(frozen=True)
class PartitionOffsets:
    partition: int
    window_start: int
    window_end: int
    committed: int | None

    def to_dict(self) -> dict:
        return {"partition": self.partition, "window": [self.window_start, self.window_end],
                "committed": self.committed}


@dataclass(frozen=True)
class PartitionCounts:
    """One input partition of the window: its range, committed offset, inputs and outputs
    (outputs counted by their lineage's source partition)."""

    partition: int
    window_start: int
    window_end: int
    committed_offset: int | None
    inputs: int
    invoices: int
    shipments: int
    dead_letters: int

    def to_dict(self) -> dict:
        return {"partition": self.partition, "window_start": self.window_start, "window_end": self.window_end,
                "committed_offset": self.committed_offset, "inputs": self.inputs, "invoices": self.invoices,
                "shipments": self.shipments, "dead_letters": self.dead_letters}


@dataclass
class QualityResult:
    run_id: str
    window: Window
    success: bool  # no critical expectation failed
    suites: dict[str, SuiteResult]
    failures: list[FailedExpectation]
    counts: QualityCounts
    offsets: list[PartitionOffsets] = field(default_factory=list)
    data_docs_path: Path | None = None  # Data Docs index.html
    context_root: Path | None = None
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    expectations: list[ExpectationOutcome] = field(default_factory=list)  # every expectation, passed too
    dead_letters_by_reason: dict[str, int] = field(default_factory=dict)
    per_partition: list[PartitionCounts] = field(default_factory=list)
    output_read: dict = field(default_factory=dict)  # where the output topics were read from (the time bound)
    spark: dict = field(default_factory=dict)  # where the Spark work ran: session kind, application id, master

    @property
    def critical_failures(self) -> list[FailedExpectation]:
        return [f for f in self.failures if f.critical]

    @property
    def messages(self) -> list[str]:
        return [f.message for f in self.failures]

    def failed_checks(self) -> set[str]:
        return {f.check for f in self.failures}

    def to_dict(self) -> dict:
        """JSON-able. ``failures`` are the human messages; ``failed_expectations`` the details."""
        return {
            "run_id": self.run_id,
            "window": self.window.to_dict(),
            "success": self.success,
            "failures": self.messages,
            "failed_expectations": [f.to_dict() for f in self.failures],
            "suites": {name: s.to_dict() for name, s in self.suites.items()},
            "counts": self.counts.to_dict(),
            "offsets": [o.to_dict() for o in self.offsets],
            "data_docs_path": str(self.data_docs_path) if self.data_docs_path else None,
            "context_root": str(self.context_root) if self.context_root else None,
            "seconds": self.seconds,
            "timings": dict(self.timings),
            "expectations": [e.to_dict() for e in self.expectations],
            "dead_letters_by_reason": dict(self.dead_letters_by_reason),
            "per_partition": [p.to_dict() for p in self.per_partition],
            "output_read": _jsonable(self.output_read),
            "spark": dict(self.spark),
        }


def raise_for_failures(result: QualityResult) -> None:
    """Raise :class:`QualityError` naming every critical failure; return quietly otherwise."""
    critical = result.critical_failures
    if not critical:
        return
    docs = f" (Data Docs: {result.data_docs_path})" if result.data_docs_path else ""
    raise QualityError(
        f"data quality of run {result.run_id} failed {len(critical)} critical check(s) for window "
        f"{result.window}: " + "; ".join(f.message for f in critical) + docs,
        result,
    )


def _jsonable(value):
    """Best-effort conversion of Great Expectations / Spark values to JSON types."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    item = getattr(value, "item", None)  # numpy scalars (pandas-engine results)
    if callable(item):
        try:
            return _jsonable(item())
        except (TypeError, ValueError):
            pass
    return str(value)
