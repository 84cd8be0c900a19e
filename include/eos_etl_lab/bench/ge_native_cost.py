"""What Great Expectations on the window's own data costs (:func:`eos_etl.quality.window_checkpoint.validate_window`),
for the validation bench's size phase: seconds next to the run, and the jobs the Spark Connect server ran for it
(its event log: a Connect client sees no job list)."""

from __future__ import annotations

import time
from pathlib import Path

from eos_etl.embedded.connect_server_state import jobs_ended
from eos_etl.quality.window_checkpoint import validate_window


def server_jobs(server, before: int | None = None) -> int:
    """Jobs the server ended (its event log, written behind: read until it stops moving), minus ``before``."""
    seen, t = jobs_ended(server.event_log_dir), time.monotonic()
    while time.monotonic() - t < 5.0:
        time.sleep(0.5)
        now = jobs_ended(server.event_log_dir)
        if now == seen:
            break
        seen = now
    return seen - (before or 0)


def ge_native_cost(server, spark, settings, window, *, run_id: str, run_s: float, gx_root: Path, repeats: int,
                   margin_ms: int) -> dict:
    """Best of ``repeats`` validations of a clean window in this process: seconds, x the run, the server's jobs."""
    best = None
    for i in range(repeats):
        before = server_jobs(server)
        result = validate_window(spark, settings, window, run_id=f"{run_id}-ge-{i}", context_root=gx_root,
                                 clock_skew_margin_ms=margin_ms)
        jobs = server_jobs(server, before)
        if not result.success:
            raise RuntimeError(f"GE-native validation of a clean run failed: {result.failures}")
        if best is None or result.seconds < best[0].seconds:
            best = (result, jobs)
    result, jobs = best
    return {"ge_native_s": result.seconds, "ge_native_vs_run": round(result.seconds / run_s, 3),
            "ge_native_jobs": jobs, "ge_native_timings": result.timings}
