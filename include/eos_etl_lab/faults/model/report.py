"""The model soak's report: each history as printed while the soak runs, as the soaks' result rows, and
the model section of docs/reliability.md (``templates/model_soak.md.j2``)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from markupsafe import Markup

from eos_etl import paths
from eos_etl.jars.versions import KAFKA_VERSION, SPARK_VERSION

from .. import reliability_page as page
from ..lab import TrialResult
from .executor import RETRIES
from .history import describe
from .operations import CONNECT_OPS
from .options import ModelSoakOptions
from .outcome import Outcome, Violation
from .registry import Op

MODEL_SECTION = "model soak"


def report_history(outcome: Outcome, shortest: Outcome | None) -> str:
    head = "ok" if outcome.ok else ("NOT CARRIED OUT: " + outcome.error if outcome.error else "VIOLATIONS")
    lines = [f"{describe(outcome.seed, outcome.partitions, outcome.ops)}\n  -> {head} "
             f"({outcome.seconds:.0f} s, recovery {outcome.recovery_s} s)"]
    lines += [f"     {v}" for v in outcome.violations]
    lines += [f"     note: {n}" for n in outcome.notes]
    if shortest is not None:
        lines.append(f"  shortest history still showing {outcome.first_kind}:")
        lines.append("  " + describe(shortest.seed, shortest.partitions, shortest.ops).replace("\n", "\n  "))
        lines += [f"       {v}" for v in shortest.violations]
    return "\n".join(lines)


def classify(v: Violation) -> str:
    """Which known defect a violation is (or NEW)."""
    if v.kind == "unexpected_exit_2" and "published before" in v.detail:
        return "known: no committed offset but published before (stall after a killed first run)"
    if v.kind in ("replaced_input_not_detected", "exit_2_names_no_partition"):
        return "known: re-created input topic not detected"
    if v.kind == "plan_fenced_run":
        return "known: plan-window fences live transactions"
    return "NEW"


def _kinds(outcome: Outcome) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for v in outcome.violations:
        kinds[v.kind] = kinds.get(v.kind, 0) + 1
    return kinds


def as_trials(done: list[tuple[Outcome, Outcome | None]]) -> list[TrialResult]:
    """The histories as the soaks' :class:`TrialResult` rows (results.json, the page)."""
    rows = []
    for outcome, shortest in done:
        detail = "; ".join(str(v) for v in outcome.violations[:3])
        if shortest is not None:
            detail += " | shortest: " + ", ".join(f"{i}. {o.describe()}" for i, o in enumerate(shortest.ops, 1))
        rows.append(TrialResult(scenario="model", trial=f"seed={outcome.seed}", records=outcome.records,
                                kills=outcome.faults, violations=_kinds(outcome), seconds=outcome.seconds,
                                error=outcome.error, recovery_s=outcome.recovery_s, detail=detail or "ok",
                                counters={"operations": len(outcome.ops),
                                          "shortest": len(shortest.ops) if shortest else None}))
    return rows


def ops_json(ops: list[Op]) -> str:
    return json.dumps([[o.kind, dict(o.args)] for o in ops])


def _history_text(failing: Outcome) -> Markup:
    """A failing history with its violations, shown in a fenced code block as it is: no entity, and no
    fence of its own to end the block."""
    text = describe(failing.seed, failing.partitions, failing.ops) + "\n" + "\n".join(
        f"  ! {str(v)[:240]}" for v in failing.violations) + (f"\n  ! NOT CARRIED OUT: {failing.error}"
                                                             if failing.error else "")
    return Markup(text.replace("```", "'''"))


def _row(outcome: Outcome, shortest: Outcome | None) -> dict:
    """One history's row of the section's table (and, failing, its history below it)."""
    kinds = _kinds(outcome)
    failing = shortest or (outcome if not outcome.ok else None)
    return {"seed": outcome.seed, "partitions": outcome.partitions, "operations": len(outcome.ops),
            "faults": outcome.faults, "records": outcome.records,
            "violations": (", ".join(f"{k}={n}" for k, n in kinds.items()) or "0")
            + (f" (not carried out: {outcome.error})" if outcome.error else ""),
            "recovery_s": outcome.recovery_s, "seconds": outcome.seconds,
            "shortest": (f"{len(shortest.ops)} operations" if shortest else
                         ("not shrunk" if not outcome.ok else "-")),
            "failing": not outcome.ok, "history": _history_text(failing) if failing is not None else "",
            "classes": ", ".join(sorted({classify(v) for v in (failing or outcome).violations}))
            or "not carried out"}


def _counts(done: list[tuple[Outcome, Outcome | None]]) -> tuple[dict[str, int], dict[str, int]]:
    """The operations drawn over all histories, by kind, and those that ran a window, by route."""
    counts: dict[str, int] = {}
    routes: dict[str, int] = {}
    for outcome, _shortest in done:
        for op in outcome.ops:
            counts[op.kind] = counts.get(op.kind, 0) + 1
            if route := op.a.get("route", "connect" if op.kind in CONNECT_OPS else None):
                routes[route] = routes.get(route, 0) + 1
    return counts, routes


def write_markdown(done: list[tuple[Outcome, Outcome | None]], wall: float, opts: ModelSoakOptions, command: str,
                   out=None):
    """The model soak's section of docs/reliability.md (``templates/model_soak.md.j2``)."""
    out = out or paths.project_root() / "docs" / "reliability.md"
    rows = [_row(outcome, shortest) for outcome, shortest in done]
    counts, routes = _counts(done)
    recoveries = [r["recovery_s"] for r in rows if r["recovery_s"] is not None]
    totals = {"histories": len(rows), "operations": sum(r["operations"] for r in rows),
              "faults": sum(r["faults"] for r in rows), "records": sum(r["records"] for r in rows),
              "violations": sum(len(o.violations) for o, _ in done), "failing": sum(r["failing"] for r in rows),
              "errors": sum(bool(o.error) for o, _ in done),
              "longest_recovery_s": max(recoveries) if recoveries else None}
    text = page.render("model_soak.md.j2", command=command, generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M}",
                       machine=page.machine(), kafka_version=KAFKA_VERSION, spark_version=SPARK_VERSION, rows=rows,
                       totals=totals, ok=totals["failing"] == 0, wall_min=wall / 60, length=opts.length,
                       retries=RETRIES, shrink_budget=opts.shrink_budget, shrink_repeats=opts.shrink_repeats,
                       connect=opts.connect,
                       op_counts=", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1])),
                       route_counts=", ".join(f"{k} {n}" for k, n in sorted(routes.items())))
    page.write_section(out, MODEL_SECTION, text)
    return out
