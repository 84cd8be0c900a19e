"""One window validated by Great Expectations on its own data: the window's assets (:mod:`.window_assets`,
Spark DataFrames behind views of :mod:`.spark_views`), the suites of :mod:`.window_suites`, and one
Checkpoint per pipeline run for the run's window, whose action updates the Data Docs.

1. The inputs' counts are validated first (``inputs.counts`` at BASIC): their observed row counts are the
   suite parameters ``$valid_inputs`` and ``$invalid_inputs`` of the output suites. Measured by GE on the
   window's inputs, never given.
2. The Checkpoint validates every asset at BOOLEAN_ONLY: a clean window pays one bundled aggregate per
   asset and lists nothing.
3. A window with a failure is validated again under the same run id at SUMMARY, with the uniqueness rules
   added and ``unexpected_index_column_names`` the source position, so that its Data Docs list the
   unexpected values and the rows with the partition and offset of their input.

A critical failure fails the run; a warning is shown and does not (:attr:`WindowValidation.success`).
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from ..engine.tasks.connect_route import is_connect
from ..engine.window import Window
from ..paths import safe_name
from . import data_docs_site, window_reads
from .ge_import import await_great_expectations, start_importing_great_expectations
from .ge_project import VALIDATION_RESULTS_KEPT, open_context, prune_validation_results, quiet_great_expectations
from .results import WindowValidation
from .window_assets import DEAD_LETTERS, INDEX_COLUMNS, WindowAssets, lineage_shape, window_assets
from .window_suites import COUNTS_SUITE, suite_asset, window_rules

log = logging.getLogger(__name__)

DATASOURCE = "eos_etl_window"
SUMMARY = {"result_format": "SUMMARY", "unexpected_index_column_names": list(INDEX_COLUMNS),
           "partial_unexpected_count": 20, "return_unexpected_index_query": False}


def _expectation(rule: dict):
    """The GE expectation of one rule of :mod:`.window_suites`."""
    # Great Expectations (seconds to import) loads when a validation runs, not with this module.
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    from . import expectations  # noqa: F401 - registers the project's expectations by their type

    return ExpectationConfiguration(type=rule["type"], kwargs=rule["kwargs"], meta=rule.get("meta") or {},
                                    notes=rule.get("notes"), severity=rule.get("severity", "critical")).to_domain_obj()


def _checkpoint(context, prefix: str, assets: WindowAssets, rules: dict[str, list[dict]], result_format):
    """The pipeline's window Checkpoint with these suites (written on every run: they follow the settings)
    and its Data Docs action; and the counts' validation definition."""
    import great_expectations as gx  # deferred: see _expectation

    try:
        source = context.data_sources.get(DATASOURCE)
    except KeyError:
        # Not persisted by GE: the frames are materialised already (a second cache would cost a job).
        source = context.data_sources.add_spark_views(name=DATASOURCE, persist=False)
    definitions = {}
    for suite_name, suite_rules in rules.items():
        asset = suite_asset(suite_name)
        batch = source.view_asset(asset, assets.views[asset]).whole_view()
        name = f"{prefix}.{suite_name}"
        suite = context.suites.add_or_update(gx.ExpectationSuite(name=name, expectations=[
            _expectation(r) for r in suite_rules]))
        definitions[suite_name] = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=name, data=batch, suite=suite))
    from .checkpoint_actions import WindowDataDocsAction, WindowReportAction  # GE's (deferred with it)

    actions = [WindowDataDocsAction(name="update_data_docs"),
               WindowReportAction(name="window_report", reports_dir=str(_reports_dir(context, prefix)))]
    checkpoint = context.checkpoints.add_or_update(gx.Checkpoint(
        name=f"{prefix}.window", validation_definitions=list(definitions.values()), actions=actions,
        result_format=result_format))
    return checkpoint, definitions[COUNTS_SUITE]


def _reports_dir(context, prefix: str) -> Path:
    """Where the report action writes the pipeline's reports (:class:`.checkpoint_actions.WindowReportAction`)."""
    return Path(context.root_directory) / "reports" / prefix


_ADAPTIVE = "spark.sql.adaptive.enabled"


@contextmanager
def _aggregates_as_one_job(spark) -> Iterator[None]:
    """GE's metrics are global aggregates of materialised frames: adaptive execution runs each as two
    jobs (its shuffle's map stage first, to re-plan what follows), and on Spark Connect a job is a round
    trip; there is nothing to re-plan in a global aggregate. The session's own setting comes back after."""
    before = spark.conf.get(_ADAPTIVE, None)
    spark.conf.set(_ADAPTIVE, "false")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(_ADAPTIVE)
        else:
            spark.conf.set(_ADAPTIVE, before)


def _parameters(counts_result) -> dict[str, int]:
    out = {}
    for r in counts_result.results:
        parameter = (r.expectation_config.meta or {}).get("parameter")
        if parameter:
            out[parameter] = int(r.result["observed_value"])
    return out


def where_spark_ran(spark) -> dict:
    """The session's kind (``connect``: a client of a Spark Connect server; ``classic``: this
    process's own application), the application's id and master, as the report records them."""
    conf = spark.conf
    return {"session": "connect" if is_connect(spark) else "classic",
            "application_id": conf.get("spark.app.id", None), "master": conf.get("spark.master", None)}


def _reasons(frame) -> dict[str, int]:
    """The dead letters by reason, for the report's chart: the dead_letters asset grouped (one small job on
    a materialised frame); shown beside the rules, never an input of one."""
    return {str(row[0]): int(row[1]) for row in frame.groupBy("dlq_reason").count().collect()}


def _job_count(spark) -> int | None:
    try:
        return spark.sparkContext._jsc.sc().statusStore().jobsList(None).size()
    except Exception:  # noqa: BLE001 - a Connect client has no SparkContext: not counted
        return None


class _Steps:
    """Seconds and Spark jobs per step of one validation."""

    def __init__(self, spark):
        self.spark, self.timings, self.jobs = spark, {}, {}

    def __call__(self, name: str):
        return _Step(self, name)


class _Step:
    def __init__(self, steps: _Steps, name: str):
        self.steps, self.name = steps, name

    def __enter__(self):
        self.t, self.j = time.monotonic(), _job_count(self.steps.spark)

    def __exit__(self, *exc):
        self.steps.timings[self.name] = round(time.monotonic() - self.t, 3)
        j = _job_count(self.steps.spark)
        if j is not None and self.j is not None:
            self.steps.jobs[self.name] = j - self.j


def validate_window(spark, settings, window: Window, *, run_id: str, context_root: Path,
                    committed_input_offsets: dict[int, int | None] | None = None, exact_offsets: bool = True,
                    clock_skew_margin_ms: int = window_reads.CLOCK_SKEW_MARGIN_MS) -> WindowValidation:
    """Validate what a read_committed reader sees of ``window`` with GE (the module docstring's steps);
    never raises on bad data."""
    t0 = time.monotonic()
    quiet_great_expectations()
    start_importing_great_expectations()  # while the read below waits on the server
    steps = _Steps(spark)
    roles, pair_columns = lineage_shape(settings.checked_outputs())
    # The rules first: a user's rule that cannot be one is refused before anything is read.
    rules = window_rules(settings, roles, pair_columns, exact_offsets=exact_offsets)
    committed = (committed_input_offsets if committed_input_offsets is not None
                 else window_reads.committed_offsets(settings, window))
    with steps("read"):
        assets = window_assets(spark, settings, window, committed, clock_skew_margin_ms=clock_skew_margin_ms)
    with steps("ge_import"):  # what is left of it once the read is done
        await_great_expectations()
        from great_expectations.core.run_identifier import RunIdentifier  # deferred: see _expectation

        from . import spark_views  # deferred with GE (it is GE's); registers the data source type
        from .checkpoint_actions import rules_of  # GE's, deferred with it
    context = open_context(Path(context_root))
    prefix = safe_name(settings.group)
    run = RunIdentifier(run_name=safe_name(run_id), run_time=datetime.now(timezone.utc))
    try:
        with steps("reasons"):
            reasons = _reasons(assets.frames[DEAD_LETTERS])
        with warnings.catch_warnings(), spark_views.session_of(spark), _aggregates_as_one_job(spark):
            warnings.filterwarnings("ignore", message=".*force_reuse_spark_context.*")
            prune_validation_results(context, {f"{prefix}.{s}" for s in rules}, VALIDATION_RESULTS_KEPT)
            checkpoint, counts = _checkpoint(context, prefix, assets, rules, "BOOLEAN_ONLY")
            with steps("counts"):
                parameters = _parameters(counts.run(result_format="BASIC"))
            with steps("checkpoint"):
                result = checkpoint.run(expectation_parameters=parameters, run_id=run)
            summary = not result.success
            if summary:
                with steps("summary"):
                    failing = window_rules(settings, roles, pair_columns, exact_offsets=exact_offsets,
                                           failing=True)
                    checkpoint, _ = _checkpoint(context, prefix, assets, failing, SUMMARY)
                    result = checkpoint.run(expectation_parameters=parameters, run_id=run)
    finally:
        assets.release(spark)
    report_path = _reports_dir(context, prefix) / f"{run.run_name}.json"  # the report action's
    validation = WindowValidation(
        run_id=run_id, window=window, rules=rules_of(result), parameters=parameters,
        data_docs=json.loads(report_path.read_text())["pages"], report=str(report_path),
        index=data_docs_site.page_location(context, None), summary_run=summary,
        seconds=round(time.monotonic() - t0, 3), timings=steps.timings, spark_jobs=steps.jobs,
        committed_offsets={int(p): o for p, o in committed.items()}, dead_letters_by_reason=reasons,
        output_read=assets.output_read.to_dict(), spark=where_spark_ran(spark), context_root=str(context_root))
    log.info("data quality of run %s (%s): %s in %.1fs (%s); counts %s%s", run_id, window,
             "passed" if validation.success else f"FAILED {len(validation.critical_failures)} critical rule(s)",
             validation.seconds, validation.timings, validation.counts(),
             "".join(f"\n  - {r.message}" for r in validation.failures))
    return validation
