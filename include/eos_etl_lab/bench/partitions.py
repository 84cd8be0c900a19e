"""A window's cost against the input's partition count, on the default route (``--only partitions``).

For each partition count, the same purchases (seed 42) spread over that many partitions, and the windows
:mod:`.partition_sweep` runs: a pipeline's ``first`` window (its outputs' first records), its next,
``full``, window of as many purchases, its ``empty`` one, and a ``small`` window of about ``small``
purchases (the second of a fresh pipeline), each in a process of its own whose wall time is the figure.

Each of the ``--sweep-slots`` settings (one transactional id per partition, or ``S`` writer slots:
``engine.slots``) runs every window above side by side, so both are measured on the same machine state;
the rows carry their ``writer_slots`` and each setting has a table of its own.

The targets compare a count with the smallest one in the same run (:data:`TARGETS`): at 128 partitions a
window costs at most 1.5x the smallest count's for the same records, an empty or small one at most 2x; at
1,024 a full window at most 2x, a small one at most 3x.
"""

from __future__ import annotations

import statistics

SWEEPS = ("full", "small", "empty", "first")
#: Per partition count, the most each sweep's window may cost as a ratio to the smallest count's.
TARGETS = {128: {"full": 1.5, "small": 2.0, "empty": 2.0}, 1024: {"full": 2.0, "small": 3.0}}


def settings(rows: list[dict]) -> list[int | None]:
    """The writer-slot settings the sweep's rows were measured with (None: one id per partition), in order."""
    return sorted({r.get("writer_slots") for r in rows if r.get("sweep")}, key=lambda s: -1 if s is None else s)


def table(rows: list[dict], writer_slots: int | None = None) -> list[dict]:
    """Per partition count: median wall and job seconds per sweep, the purchases, and the ratio of the
    wall time to the smallest count's (of the rows measured with ``writer_slots``)."""
    ok = [r for r in rows if r.get("sweep") and r["ok"] and r.get("writer_slots") == writer_slots]
    counts = sorted({r["pc"] for r in ok})
    out = []
    for pc in counts:
        line: dict = {"partitions": pc}
        for sweep in SWEEPS:
            mine = [r for r in ok if r["pc"] == pc and r["sweep"] == sweep]
            if mine:
                line[sweep] = {"runs": len(mine), "wall_s": round(statistics.median(r["wall_s"] for r in mine), 2),
                               "job_s": round(statistics.median(r["job_s"] or 0 for r in mine), 2),
                               "purchases": mine[0]["window_purchases"]}
        out.append(line)
    if out:
        base = out[0]
        for line in out:
            for sweep in SWEEPS:
                if sweep in line and sweep in base and base[sweep]["wall_s"]:
                    line[sweep]["ratio"] = round(line[sweep]["wall_s"] / base[sweep]["wall_s"], 2)
    return out


def verdicts(rows: list[dict], writer_slots: int | None = None) -> dict[int, dict[str, bool]]:
    """Per partition count of :data:`TARGETS` that was measured, per sweep, whether its ratio is within the
    target (a sweep not measured there is absent)."""
    lines = {line["partitions"]: line for line in table(rows, writer_slots)}
    return {pc: {sweep: lines[pc][sweep]["ratio"] <= limit for sweep, limit in limits.items() if sweep in lines[pc]}
            for pc, limits in TARGETS.items() if pc in lines}


def describe(writer_slots: int | None) -> str:
    return "one transactional id per partition" if writer_slots is None else f"{writer_slots} writer slots"


def markdown(rows: list[dict]) -> str:
    """A section per writer-slot setting (just the tables when only one was measured)."""
    measured = settings(rows) or [None]
    if len(measured) == 1:
        return _markdown(rows, measured[0])
    return "\n\n".join(f"**With {describe(s)}**\n\n{_markdown(rows, s)}" for s in measured)


def _markdown(rows: list[dict], writer_slots: int | None) -> str:
    lines = ["Wall time of each `run_shop_window` process on one Spark Connect server (median over runs); "
             "in brackets, the ratio to the smallest partition count.", "",
             "| input partitions | full window | purchases | small window | purchases | empty window "
             "| a pipeline's first window |", "|--:|--:|--:|--:|--:|--:|--:|"]

    def cell(line: dict, sweep: str) -> str:
        c = line.get(sweep)
        return f"{c['wall_s']:.1f} s ({c.get('ratio', 1):.2f}x)" if c else "-"

    for line in table(rows, writer_slots):
        lines.append(f"| {line['partitions']:,} | {cell(line, 'full')} | {line.get('full', {}).get('purchases', '-')} "
                     f"| {cell(line, 'small')} | {line.get('small', {}).get('purchases', '-')} "
                     f"| {cell(line, 'empty')} | {cell(line, 'first')} |")
    counted = requests(rows, writer_slots)
    if counted:
        lines += ["", "Transactional requests the broker served per window (its `RequestMetrics` counters; median "
                  "over runs): InitProducerId / AddPartitionsToTxn / EndTxn.", "",
                  "| input partitions | full window | small window | empty window | first window |",
                  "|--:|--:|--:|--:|--:|"]
        for pc in sorted({pc for pc, _ in counted}):
            cells = ["/".join(str(counted[pc, sweep][k]) for k in REQUESTS) if (pc, sweep) in counted else "-"
                     for sweep in SWEEPS]
            lines.append(f"| {pc:,} | {' | '.join(cells)} |")
    return "\n".join(lines)


REQUESTS = ("InitProducerId", "AddPartitionsToTxn", "EndTxn")


def requests(rows: list[dict], writer_slots: int | None = None) -> dict[tuple[int, str], dict[str, int]]:
    """(partitions, sweep) -> the median count of each of :data:`REQUESTS` over the runs that carry them."""
    rows = [r for r in rows if r.get("writer_slots") == writer_slots]
    out = {}
    for key in {(r["pc"], r["sweep"]) for r in rows if r.get("sweep") and r["ok"] and r.get("broker_requests")}:
        mine = [r["broker_requests"] for r in rows if (r.get("pc"), r.get("sweep")) == key and r["ok"]
                and r.get("broker_requests")]
        out[key] = {k: int(statistics.median(m.get(k, 0) for m in mine)) for k in REQUESTS}
    return out
