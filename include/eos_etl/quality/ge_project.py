"""The Great Expectations project a validation runs in: its file-mode context under ``context_root``
(suites, validation definitions, checkpoints and every validation result kept, so Data Docs list
the history of runs), its pandas data source and batch definitions, its checkpoints, run once per
suite per validation.

The project is opened once per process and per ``context_root``; a suite whose definition is
unchanged is not written again, its stored checkpoint is run (:class:`_Project`). Great
Expectations (seconds to import) is imported on first use, not with this module; a validation
opens the project in a thread while its Spark jobs run (:func:`open_project_meanwhile`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import threading
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..paths import safe_name
from . import data_docs_site
from .suites import SuiteSpec

log = logging.getLogger(__name__)


DATASOURCE_NAMES = {"pandas": "eos_etl_pandas"}  # every suite checks a small pandas table


BATCH_DEFINITION_NAME = "whole_dataframe"


# BASIC: unexpected count and percent, observed value and a few unexpected values, which is
# what the report shows. SUMMARY would add a value-count job per column-map expectation.
RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": 20}


#: Validation results kept per suite in the Great Expectations project, newest first; older
#: ones (and, through GE's own clean-up, their Data Docs pages) are deleted before each
#: validation. Every checkpoint's Data Docs update lists and parses every stored result key,
#: so without a bound each run slows down with the project's history: measured 1.9 s at
#: 3,000 stored results and 4.0 s at 6,000 (a few months of an hourly DAG). The run reports
#: (the trends page) keep the long history.
VALIDATION_RESULTS_KEPT = 100


def open_project_meanwhile(context_root: Path) -> threading.Thread:
    """Import Great Expectations and open the project in a thread while Spark works: the import alone
    takes seconds, and the Spark jobs leave this process waiting on the server or the executors. A
    failure here is left for the main thread to meet again and report."""

    def open_project() -> None:
        try:
            _project(context_root)
        except Exception:  # noqa: BLE001 - raised again, and reported, where the project is used
            log.debug("opening the Great Expectations project ahead failed", exc_info=True)

    thread = threading.Thread(target=open_project, name="eos-etl-gx-open", daemon=True)
    thread.start()
    return thread


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


def _datasource(context, engine: str):
    name = DATASOURCE_NAMES[engine]
    try:
        return context.data_sources.get(name)
    except KeyError:
        return context.data_sources.add_pandas(name=name)


def _batch_definition(datasource, asset_name: str):
    try:
        asset = datasource.get_asset(asset_name)
    except LookupError:
        asset = datasource.add_dataframe_asset(name=asset_name)
    try:
        return asset.get_batch_definition(BATCH_DEFINITION_NAME)
    except KeyError:
        return asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION_NAME)


@dataclass
class _Project:
    """A Great Expectations project, opened once per process: its context, its data sources and, per
    suite, the checkpoint last run with the fingerprint of its definition (see :func:`_checkpoint`)."""

    root: Path
    context: object
    datasources: dict = field(default_factory=dict)
    checkpoints: dict = field(default_factory=dict)  # suite name -> (fingerprint, Checkpoint)

    def datasource(self, engine: str):
        if engine not in self.datasources:
            self.datasources[engine] = _datasource(self.context, engine)
        return self.datasources[engine]

    def release_batches(self) -> None:
        """Let go of the validated tables, so that a process validating many windows does not keep each
        window's in Great Expectations' batch cache."""
        for _, checkpoint in self.checkpoints.values():
            for definition in checkpoint.validation_definitions:
                engine = definition.data.data_asset.datasource.execution_engine
                if engine is not None:
                    engine.batch_manager.reset_batch_cache()


_PROJECTS: dict[Path, _Project] = {}


def _project(context_root: Path) -> _Project:
    key = context_root.resolve()
    project = _PROJECTS.get(key)
    if project is None or not (key / "gx" / "great_expectations.yml").is_file():
        project = _PROJECTS[key] = _Project(key, open_context(context_root))
    return project


def _actions() -> list:
    """No Data Docs action: one build of what changed per window (:func:`data_docs_site.build_pages`)
    after all suites ran, not one whole-index build per checkpoint."""
    return []


def _fingerprint(spec: SuiteSpec, meta: dict, actions: list) -> str:
    """What a stored suite, validation definition and checkpoint were made from: equal fingerprints,
    equal definitions."""
    expectations = [{k: v for k, v in ch.expectation.configuration.to_json_dict().items() if k != "id"}
                    for ch in spec.checks]
    body = {"expectations": expectations,
            "engine": spec.engine, "meta": meta, "result_format": RESULT_FORMAT,
            "actions": [(type(a).__name__, a.name) for a in actions]}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _checkpoint(project: _Project, name: str, spec: SuiteSpec, meta: dict):
    """The suite's checkpoint: the one this process ran last, or the stored one when it was made from
    the same definition (its suite's fingerprint, its own actions and result format), else written
    anew (suite, validation definition, checkpoint)."""
    import great_expectations as gx  # deferred, as in open_context

    actions = _actions()
    fingerprint = _fingerprint(spec, meta, actions)
    known = project.checkpoints.get(name)
    if known is not None and known[0] == fingerprint:
        return known[1]
    context = project.context
    checkpoint = _stored_checkpoint(context, name, fingerprint, actions)
    if checkpoint is None:
        suite = context.suites.add_or_update(
            gx.ExpectationSuite(name=name, expectations=[copy.copy(ch.expectation) for ch in spec.checks],
                                meta={**meta, "definition": fingerprint}))
        definition = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=name, data=_batch_definition(project.datasource(spec.engine), name),
                                    suite=suite))
        checkpoint = context.checkpoints.add_or_update(
            gx.Checkpoint(name=name, validation_definitions=[definition], actions=actions,
                          result_format=RESULT_FORMAT))
    project.checkpoints[name] = (fingerprint, checkpoint)
    return checkpoint


def _stored_checkpoint(context, name: str, fingerprint: str, actions: list):
    """The stored checkpoint ``name`` if it validates a suite made from ``fingerprint`` with these
    actions and the result format; None otherwise (missing, or a write was cut short)."""
    from great_expectations.exceptions import DataContextError  # deferred, as in open_context

    try:
        checkpoint = context.checkpoints.get(name)
    except DataContextError:
        return None
    definitions = checkpoint.validation_definitions
    same = (len(definitions) == 1 and (definitions[0].suite.meta or {}).get("definition") == fingerprint
            and [(type(a).__name__, a.name) for a in checkpoint.actions] == [(type(a).__name__, a.name)
                                                                              for a in actions]
            and checkpoint.result_format == RESULT_FORMAT)
    return checkpoint if same else None


def run_checkpoints(context_root: Path, settings, specs: list[SuiteSpec], frames: dict, run_id: str,
                     timings: dict[str, float]) -> tuple[dict, Path | None]:
    """Run one Checkpoint per suite.

    Returns ({suite: (validation result, result id, Data Docs page)}, Data Docs index.html).
    """
    from great_expectations.core.run_identifier import RunIdentifier  # deferred, as in open_context

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*force_reuse_spark_context.*")
        t = time.monotonic()
        project = _project(context_root)
        context = project.context
        prefix = safe_name(settings.group)
        pruned = prune_validation_results(context, {f"{prefix}.{spec.name}" for spec in specs})
        if pruned:
            log.info("deleted %d Great Expectations validation result(s) beyond the newest %d per suite",
                     pruned, VALIDATION_RESULTS_KEPT)
        meta = {"pipeline_group": settings.group, "input_topic": settings.topics.purchases}
        checkpoints = {spec.name: _checkpoint(project, f"{prefix}.{spec.name}", spec, meta) for spec in specs}
        timings["ge_context"] = round(time.monotonic() - t, 3)
        run = RunIdentifier(run_name=safe_name(run_id), run_time=datetime.now(timezone.utc))
        out, ids = {}, {}
        try:
            for spec in specs:
                t = time.monotonic()
                result = checkpoints[spec.name].run(batch_parameters={"dataframe": frames[spec.name]}, run_id=run)
                [(vr_id, vr)] = result.run_results.items()
                out[spec.name], ids[spec.name] = (vr, str(vr_id)), vr_id
                timings[f"ge_{spec.name}"] = round(time.monotonic() - t, 3)
        finally:
            project.release_batches()
        t = time.monotonic()
        pages, index = data_docs_site.build_pages(context, list(ids.values()))
        timings["ge_data_docs"] = round(time.monotonic() - t, 3)
        return ({name: (*out[name], pages.get(vr_id)) for name, vr_id in ids.items()},
                data_docs_site.local_index(index))
