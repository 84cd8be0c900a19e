"""The Great Expectations project a validation runs in: its file-mode context under ``context_root``
(suites, validation definitions, checkpoints and every validation result kept, so Data Docs list
the history of runs) and the bound on that history. Great Expectations (seconds to import) is imported
on first use, not with this module.
"""

from __future__ import annotations

import logging
from pathlib import Path

from . import data_docs_site

#: Validation results kept per suite in the Great Expectations project, newest first; older
#: ones (and, through GE's own clean-up, their Data Docs pages) are deleted before each
#: validation. Every checkpoint's Data Docs update lists and parses every stored result key,
#: so without a bound each run slows down with the project's history: measured 1.9 s at
#: 3,000 stored results and 4.0 s at 6,000 (a few months of an hourly DAG). The run reports
#: (the trends page) keep the long history.
VALIDATION_RESULTS_KEPT = 100


def quiet_great_expectations() -> None:
    """Great Expectations logs every store write at INFO; keep it at WARNING unless configured."""
    gx_log = logging.getLogger("great_expectations")
    if gx_log.level == logging.NOTSET:
        gx_log.setLevel(logging.WARNING)


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
