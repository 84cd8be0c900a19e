"""The default route's fixed cost per window in the two regimes its windows run in.

A window on the long-lived Spark Connect server finds the server's Python workers up when the previous
window ended less than a minute before (a backlog, a backfill, a frequent schedule) and forks them again
otherwise: Spark stops a Python worker idle for a minute, looking every 10 s (``PythonWorkerFactory``;
not configurable). The scale curve's SC windows fall in either regime, depending on what ran before
them, so its affine fit mixes the two; :meth:`.run.Bench.run_regimes` measures them apart, and
:func:`summarise` turns its rows into a fit for the first and the extra cost of the second.
"""

from __future__ import annotations

#: Rows of SC windows run straight after another SC window, at every scale size.
BACK_TO_BACK = "SC back-to-back"
#: Rows of SC windows run after an idle pause past Spark's idle-worker minute, at the smallest size.
AFTER_PAUSE = "SC after a pause"


def summarise(agg: dict[tuple[str, int, int], dict], partitions: int, fit) -> dict | None:
    """From the aggregated rows (``page.aggregate``): the back-to-back windows per size and their affine
    ``fit`` (``page.linear_fit``), the after-a-pause windows per size, and what a pause adds at the
    smallest size both ran (its median job time minus the back-to-back one), or None without rows."""
    back = {size: v for (label, size, pc), v in agg.items() if label == BACK_TO_BACK and pc == partitions}
    if not back:
        return None
    paused = {size: v for (label, size, pc), v in agg.items() if label == AFTER_PAUSE and pc == partitions}
    both = sorted(set(back) & set(paused))
    size = both[0] if both else None
    extra = paused[size]["job_s"] - back[size]["job_s"] if size is not None else None
    return {"back_to_back": back, "after_pause": paused, "fit": fit([(s, v["job_s"]) for s, v in back.items()]),
            "pause_size": size, "pause_extra_s": extra}
