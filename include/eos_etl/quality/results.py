"""What a window's validation found, as Great Expectations reported it, in plain typed values.

Nothing here imports Great Expectations or Spark: a result can be built, serialised
(:meth:`WindowValidation.to_dict`, the run report's ``quality``) and judged (:func:`raise_for_failures`)
anywhere, e.g. in a light-weight Airflow task.

Every count the report shows is GE's: the inputs' counts are the observed values of ``inputs.counts``; an
output's count is the observed value of its row-count rule (a failing window is validated at SUMMARY,
where every rule has one) or, at BOOLEAN_ONLY, the value its passing rule proved it equal to. A count no
rule measured is ``None`` (shown as "–"), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..engine.window import Window
from ..errors import EosEtlError

CRITICAL = "critical"
#: A message names at most this many characters of an observed value.
OBSERVED_CHARS = 160


class QualityError(EosEtlError):
    """Critical data-quality expectations failed; ``result`` holds the details."""

    def __init__(self, message: str, result: "WindowValidation | None" = None):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class RuleResult:
    """One expectation's outcome as GE reported it."""

    suite: str  # the suite's name without the pipeline's prefix (invoices.records, ...)
    type: str
    kwargs: dict
    severity: str
    success: bool
    observed_value: object = None
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    element_count: int | None = None
    unexpected_rows: tuple = ()  # the rows GE lists at SUMMARY, with their index columns
    notes: str = ""
    added_by_settings: bool = False
    error: str | None = None  # the exception GE caught evaluating the rule (a missing column, ...)

    @property
    def critical(self) -> bool:
        return self.severity == CRITICAL

    @property
    def check(self) -> str:
        """The rule as a reader names it: ``values_to_not_be_null(customer_id)``."""
        on = [str(self.kwargs[k]) for k in ("column", "column_A", "column_B", "primary", "companion")
              if self.kwargs.get(k) is not None]
        if self.kwargs.get("column_list"):
            on.append("+".join(map(str, self.kwargs["column_list"])))
        name = self.type.removeprefix("expect_")
        return f"{name}({', '.join(on)})" if on else name

    @property
    def message(self) -> str:
        head = f"{self.suite}: {self.check}"
        if not self.critical:
            head += f" ({self.severity})"
        if self.error:
            return f"{head}: could not be evaluated: {self.error[:OBSERVED_CHARS]}"
        if self.unexpected_count:
            pct = f" ({self.unexpected_percent:.3g}%)" if isinstance(self.unexpected_percent, (int, float)) else ""
            rows = f", e.g. {_position(self.unexpected_rows[0])}" if self.unexpected_rows else ""
            return f"{head}: {self.unexpected_count} unexpected{pct}{rows}"
        if self.observed_value is not None:
            return f"{head}: observed {str(_jsonable(self.observed_value))[:OBSERVED_CHARS]}"
        return f"{head}: failed"

    def to_dict(self) -> dict:
        return {"suite": self.suite, "check": self.check, "expectation_type": self.type,
                "kwargs": _jsonable(self.kwargs), "severity": self.severity, "success": self.success,
                "observed_value": _jsonable(self.observed_value),
                "unexpected_count": _jsonable(self.unexpected_count),
                "unexpected_percent": _jsonable(self.unexpected_percent),
                "element_count": _jsonable(self.element_count),
                "examples": [_jsonable(r) for r in self.unexpected_rows], "notes": self.notes,
                "added_by_settings": self.added_by_settings, "error": self.error}


def _position(row: dict) -> str:
    if "source_partition" in row and "source_offset" in row:
        return f"partition {row['source_partition']} offset {row['source_offset']}"
    return str(_jsonable(row))[:OBSERVED_CHARS]


def passed(rules: list[RuleResult]) -> bool:
    """No critical rule failed (a warning is shown, it does not fail the run)."""
    return not any(not r.success and r.critical for r in rules)


@dataclass
class WindowValidation:
    run_id: str
    window: Window
    rules: list[RuleResult]
    parameters: dict[str, int]  # the suite parameters GE measured on the inputs (inputs.counts)
    data_docs: dict[str, str | None]  # suite -> its validation page of this run
    report: str | None  # the report action's file (checkpoint_actions.WindowReportAction)
    index: str | None  # the Data Docs site's index page
    summary_run: bool  # validated again at SUMMARY
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)
    #: Spark jobs per step (read, counts, checkpoint, summary); empty on Spark Connect, whose client
    #: sees no job list.
    spark_jobs: dict[str, int] = field(default_factory=dict)
    committed_offsets: dict[int, int | None] = field(default_factory=dict)  # the positions asset's
    dead_letters_by_reason: dict[str, int] = field(default_factory=dict)  # the dead letters asset, grouped
    output_read: dict = field(default_factory=dict)  # where the output topics were read from (the time bound)
    spark: dict = field(default_factory=dict)  # where the Spark work ran: session kind, application id, master
    context_root: str | None = None

    @property
    def success(self) -> bool:
        return passed(self.rules)

    @property
    def failures(self) -> list[RuleResult]:
        return [r for r in self.rules if not r.success]

    @property
    def critical_failures(self) -> list[RuleResult]:
        return [r for r in self.failures if r.critical]

    def row_count(self, suite: str) -> int | None:
        """The rows of a suite's asset as its row-count rule found them (the module docstring)."""
        for r in self.rules:
            if r.suite != suite or r.type != "expect_table_row_count_to_equal":
                continue
            if r.observed_value is not None:
                return int(r.observed_value)
            if r.success:
                value = r.kwargs.get("value")
                if isinstance(value, dict):  # a suite parameter GE did not substitute in the result
                    value = self.parameters.get(value.get("$PARAMETER"))
                return int(value) if value is not None else None
        return None

    def counts(self) -> dict[str, int | None]:
        valid, invalid = self.parameters.get("valid_inputs"), self.parameters.get("invalid_inputs")
        out = {"committed_inputs": None if valid is None or invalid is None else valid + invalid,
               "valid_inputs": valid, "invalid_inputs": invalid}
        for suite in sorted({r.suite for r in self.rules}):
            if suite.endswith((".records", ".rows")):
                out[suite.split(".")[0]] = self.row_count(suite)
        return out

    def suites(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for r in self.rules:
            s = out.setdefault(r.suite, {"name": r.suite, "success": True, "evaluated": 0, "successful": 0,
                                         "docs_page": self.data_docs.get(r.suite)})
            s["evaluated"] += 1
            s["successful"] += r.success
            s["success"] = s["success"] and (r.success or not r.critical)
        for s in out.values():
            s["failed"] = s["evaluated"] - s["successful"]
        return out

    def to_dict(self) -> dict:
        """The run report's ``quality``: JSON-able. ``failures`` are the human messages."""
        return {
            "run_id": self.run_id, "window": self.window.to_dict(), "success": self.success,
            "failures": [r.message for r in self.failures],
            "suites": self.suites(), "counts": self.counts(), "parameters": dict(self.parameters),
            "offsets": [{"partition": p, "window": [r.start, r.end], "committed": self.committed_offsets.get(p)}
                        for p, r in sorted(self.window.ranges.items())],
            "data_docs_path": self.index, "context_root": self.context_root, "report": self.report,
            "summary_run": self.summary_run, "seconds": self.seconds, "timings": dict(self.timings),
            "spark_jobs": dict(self.spark_jobs),
            # Failures first: they are what the page is opened for.
            "expectations": [r.to_dict() for r in sorted(self.rules, key=lambda r: r.success)],
            "dead_letters_by_reason": dict(self.dead_letters_by_reason),
            "output_read": _jsonable(self.output_read), "spark": dict(self.spark),
        }


def raise_for_failures(result: WindowValidation) -> None:
    """Raise :class:`QualityError` naming every critical failure; return quietly otherwise."""
    critical = result.critical_failures
    if not critical:
        return
    docs = f" (Data Docs: {result.index})" if result.index else ""
    raise QualityError(
        f"data quality of run {result.run_id} failed {len(critical)} critical expectation(s) for window "
        f"{result.window}: " + "; ".join(r.message for r in critical) + docs,
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
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return _jsonable(item())
        except (TypeError, ValueError):
            pass
    return str(value)
