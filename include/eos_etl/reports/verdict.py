"""The verdict of one DAG run: the single place that decides passed / failed / no-op.

The report task runs whatever happened upstream (trigger rule ``all_done``),
so it judges from what the earlier tasks left behind: the plan (XCom of
``plan_window``), the Spark job's ``summary.json`` and the validation's
``quality.json``. A missing piece means the task that writes it failed.
Both the report (what the page shows) and the DAG (whether the run fails)
use :func:`judge_run`, so they can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PASSED = "passed"
FAILED = "failed"
NO_OP = "no-op"
DRY_RUN = "dry run"
NOT_VALIDATED = "not validated"
VERDICTS = (PASSED, FAILED, NO_OP, DRY_RUN, NOT_VALIDATED)

# Keeps one failure line (it also ends up in the task's exception) readable.
_MAX_REASON_CHARS = 2000


@dataclass(frozen=True)
class RunVerdict:
    status: str  # one of VERDICTS
    reasons: list[str] = field(default_factory=list)  # why, for a human; empty when it simply passed

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    def to_dict(self) -> dict:
        return {"status": self.status, "reasons": list(self.reasons)}


def judge_run(plan: dict | None, summary: dict | None, quality: dict | None, *,
              require_validation: bool = True) -> RunVerdict:
    """Decide a run's verdict.

    ``plan`` is ``plan_window``'s result (None: it failed), ``summary`` the
    Spark job's summary (None: it did not complete), ``quality`` the
    validation's report (None: it did not complete). ``require_validation``
    False turns a missing validation into "not validated" instead of a
    failure (a run published without the DAG's validate task, e.g. by hand).
    """
    if plan is None:
        return RunVerdict(FAILED, ["plan_window failed (see its log: broker, topics, credentials)"])
    if plan.get("dry_run"):
        return RunVerdict(DRY_RUN, ["dry run: the window was planned, nothing was published"])
    if plan.get("empty"):
        return RunVerdict(NO_OP, ["nothing new: every partition's window was empty"])
    if summary is None:
        return RunVerdict(FAILED, ["run_window did not complete"])
    if quality is None:
        if require_validation:
            return RunVerdict(FAILED, ["validate did not complete"])
        return RunVerdict(NOT_VALIDATED, ["published, but no validation ran"])
    if not quality.get("success"):
        failures = "; ".join(map(str, quality.get("failures") or [])) or "see the validation report"
        return RunVerdict(FAILED, [("data quality checks failed: " + failures)[:_MAX_REASON_CHARS]])
    return RunVerdict(PASSED)
