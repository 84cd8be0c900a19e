"""Build the shop pipeline DAGs (main and replay) from one definition.

Tasks: ``plan_window`` -> ``has_new_records`` -> ``run_window`` (spark-submit
through the Spark connection, or a client of a Spark Connect server) -> ``validate`` (Great Expectations) ->
``report``. Heavy imports (Spark, Great Expectations, confluent-kafka) happen
inside the tasks, so parsing the DAG file stays fast.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import time
from datetime import datetime, timedelta, timezone

from airflow.sdk import Param, dag, task
from airflow.sdk.exceptions import AirflowFailException
from airflow.utils.types import DagRunType
from croniter import CroniterBadCronError, croniter

from .. import paths
from ..arguments import attempt_run_id, positive_int, timestamp_ms
from ..engine.window import Window
from ..errors import ConfigurationError
from ..reports.store import build_report, write_run_report
from ..reports.verdict import judge_run
from ..run_files import ANNOUNCED, QUALITY, SUMMARY, run_dir
from . import task_failures
from .alerts import RunFailureNotifier, run_deadline
from .arrivals import wait_for_quiet
from .assets import output_aliases, output_starts
from .operators import WindowSparkConnectOperator, WindowSparkSubmitOperator, connect_route_session
from .settings import (
    KAFKA_CONN_ID,
    SPARK_CONN_ID,
    SPARK_CONNECT_ROUTE_ENV,
    ShopDagConfig,
    get_kafka_connection,
    validation_spark_master,
)

log = logging.getLogger(__name__)

RUN_WINDOW_JOB = paths.project_root() / "jobs" / "run_window.py"
#: Runs whose upper time bound defaults to the end of their data interval.
SCHEDULED_RUN_TYPES = frozenset({DagRunType.SCHEDULED, DagRunType.BACKFILL_JOB})
#: What the ``until`` Param accepts (the form checks it before a run is created); the task parses
#: it with the CLI's own checker, which also rejects dates that do not exist.
ISO_TIME_WITH_ZONE = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}"
                      r"(:[0-9]{2}(\.[0-9]{1,6})?)?(Z|[+-][0-9]{2}:[0-9]{2})$")


def _common_params() -> dict:
    return {
        "max_records_per_partition": Param(
            None, type=["null", "integer"], minimum=1, title="Record cap per partition",
            description="Process at most this many offsets per input partition in this run (empty: no cap).",
        ),
        "chunk_records": Param(
            None, type=["null", "integer"], minimum=1, title="Records per transaction",
            description="Input records per Kafka transaction (empty: the Variable's chunk_records, else the pipeline "
                        "default).",
        ),
        "until": Param(
            None, type=["null", "string"], title="Upper time bound", pattern=ISO_TIME_WITH_ZONE,
            description="ISO-8601 time with a timezone (e.g. 2026-11-23T10:00:00Z): only purchases before it. "
                        "Scheduled runs and backfills use the end of their data interval; manual runs default "
                        "to no bound.",
        ),
        "dry_run": Param(False, type="boolean", title="Plan only",
                         description="Plan and show the window, publish nothing."),
    }


def _count_param(params, name: str) -> int | None:
    """A count Param as an int: JSON schema's "integer" also admits 5.0 (the form checked >= 1)."""
    value = params.get(name)
    if value is None:
        return None
    try:
        return positive_int(str(int(value)) if float(value).is_integer() else str(value), f"the {name} Param")
    except (ValueError, OverflowError) as exc:
        raise ConfigurationError(str(exc)) from None


def _wait_for_arrivals(ctx, admin, topic: str) -> dict | None:
    """An arrival-triggered run first lets the burst finish (see ``arrivals``); others plan at once."""
    if ctx["dag_run"].run_type != DagRunType.ASSET_TRIGGERED:
        return None
    events = sum(len(v) for v in (ctx.get("triggering_asset_events") or {}).values())
    return {"events": events, "waited_s": round(wait_for_quiet(admin, topic), 1)}


def schedule_interval_s(schedule) -> float | None:
    """The longest gap between two of the next runs of a cron schedule (presets like ``@hourly``
    included); None for a schedule that is not a cron expression (manual, asset-triggered)."""
    if not isinstance(schedule, str):
        return None
    try:
        fires = croniter(schedule, datetime(2026, 1, 1, tzinfo=timezone.utc))
        times = [fires.get_next(float) for _ in range(25)]
    except (CroniterBadCronError, ValueError, KeyError):
        return None
    return max(b - a for a, b in itertools.pairwise(times))


def _plan(ctx, version: str | None, interval_s: float | None) -> dict:
    # Deferred: task-time only; the DAG file's parse stays light (see the module docstring).
    from ..engine.planning.preflight import preflight
    from ..engine.publishing.publisher import renew_positions
    from ..kafka.admin import ClusterAdmin
    from ..kafka.topics import ensure_topics

    started = time.monotonic()
    # A new execution of the run (cleared, or reprocessed by a backfill) starts here: what an earlier
    # execution published must not be reported as this one's.
    out = run_dir(ctx["dag"].dag_id, ctx["run_id"])
    for stale in (SUMMARY, QUALITY, ANNOUNCED):
        (out / stale).unlink(missing_ok=True)
    params = ctx["params"]
    cfg = ShopDagConfig.load()
    connection = get_kafka_connection()
    settings = cfg.settings(connection, version=version)
    if chunk := _count_param(params, "chunk_records"):
        settings = dataclasses.replace(settings, chunk_records=chunk)
    pipeline = settings.pipeline()
    admin = ClusterAdmin(connection)
    if version:
        # A replay writes to its own versioned topics, created like the originals.
        ensure_topics(admin, settings.specs(len(admin.partitions(cfg.topics.invoices)), outputs_only=True),
                      allow_existing=True)
    # Broker, topics, credentials, timeouts: fail fast and clearly. Warns when offsets may expire.
    # The run task's run-window checks again: it is another process, maybe on another worker and
    # minutes later (retries, a queue), and the command must be safe run alone; this one gives the
    # plan task its one clear error before a window is planned and its warnings for the report.
    checked = preflight(pipeline, admin, schedule_interval_s=interval_s)
    warnings = checked.warnings
    arrivals = _wait_for_arrivals(ctx, admin, settings.topics.purchases)
    dry_run = bool(params.get("dry_run"))

    until_ms = None
    if params.get("until"):
        try:
            until_ms = timestamp_ms(params["until"], "the until Param")
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
    elif ctx["dag_run"].run_type in SCHEDULED_RUN_TYPES and ctx.get("data_interval_end"):
        until_ms = int(ctx["data_interval_end"].timestamp() * 1000)
    cap = _count_param(params, "max_records_per_partition")
    # record: the window names the identity it was planned with, recorded here for a pipeline that has none (a
    # dry run writes nothing).
    window = settings.plan(pipeline=pipeline, admin=admin, max_records_per_partition=cap, until_timestamp_ms=until_ms,
                           record=not dry_run)
    if window.is_empty and not dry_run:
        # No run_window for a window with nothing new: its positions that are getting old are renewed
        # here, so the group's offsets never expire while the pipeline keeps running.
        run_id = attempt_run_id(ctx["run_id"], ctx["ti"].try_number)
        renew_positions(dataclasses.replace(pipeline, run_id=run_id), window, checked.offsets_retention_minutes)
    partitions = [{"partition": p, "start": r.start, "end": r.end, "offsets": r.span}
                  for p, r in sorted(window.ranges.items())]
    for row in partitions:
        log.info("partition %(partition)d: offsets [%(start)d, %(end)d) = %(offsets)d offsets", row)
    log.info("window %s (until=%s, cap=%s)", window, until_ms, cap)
    return {
        "window": window.to_dict(),
        "window_json": window.to_json(),
        "partitions": partitions,
        "span": window.span,
        "empty": window.is_empty,
        "dry_run": dry_run,
        "warnings": warnings,
        "until_ms": until_ms,
        "version": version,
        "cli_args": settings.to_args(),
        # Where this window's outputs will start: the asset events name the exact ranges.
        "outputs": output_starts(admin, settings.topics),
        "arrivals": arrivals,
        "seconds": round(time.monotonic() - started, 3),  # the plan phase, for the report's timings
    }


@contextlib.contextmanager
def _validation_spark(settings):
    """Validation runs where the window ran. On the Connect route: a client session of the same
    server, the pipeline's own session there (no Spark application and no JVM in this task). On the
    spark-submit route: a Spark application of this task's own, on the Spark connection's cluster
    when there is one, else on two local cores."""
    if conn_id := os.environ.get(SPARK_CONNECT_ROUTE_ENV):
        log.info("validating on the Spark Connect server of connection %r, where the window ran", conn_id)
        # The run's application name: its session on the server is the one the window used.
        with connect_route_session(conn_id, f"eos-etl-{settings.topics.purchases}") as spark:
            yield spark
        return
    from ..spark.session import spark_session  # deferred: task-time only, as in _plan

    master = validation_spark_master()
    log.info("validating on a Spark application of this task's own (master %s)", master)
    spark = spark_session("eos-etl-validate", master=master)
    try:
        yield spark
    finally:
        spark.stop()


def _validate(ctx, plan: dict) -> dict:
    # Deferred: Great Expectations and Spark at task time only (see the module docstring).
    from ..quality.results import raise_for_failures
    from ..quality.window_checkpoint import validate_window

    out = run_dir(ctx["dag"].dag_id, ctx["run_id"])
    (out / QUALITY).unlink(missing_ok=True)  # never let a previous attempt's verdict stand
    settings = ShopDagConfig.load().settings(get_kafka_connection(), version=plan["version"])
    with _validation_spark(settings) as spark:
        result = validate_window(spark, settings, Window.from_dict(plan["window"]), run_id=ctx["run_id"],
                                 context_root=paths.var_dir() / "gx")
    data = result.to_dict()
    out.mkdir(parents=True, exist_ok=True)
    (out / QUALITY).write_text(json.dumps(data, indent=2, default=str) + "\n")
    if not result.success:
        raise_for_failures(result)
    log.info("data quality: all critical expectations met; Data Docs at %s", data.get("data_docs_path"))
    return {"success": True, "data_docs_path": data.get("data_docs_path")}


def _report(ctx, plan: dict | None) -> str:
    out = run_dir(ctx["dag"].dag_id, ctx["run_id"])
    summary = json.loads((out / SUMMARY).read_text()) if (out / SUMMARY).is_file() else None
    quality = json.loads((out / QUALITY).read_text()) if (out / QUALITY).is_file() else None
    # The report runs whatever happened upstream (trigger rule all_done), so it
    # is also where an incomplete run is turned into a failed one (judge_run).
    verdict = judge_run(plan, summary, quality)
    run = ctx["dag_run"]
    report = build_report(dag_id=ctx["dag"].dag_id, run_id=ctx["run_id"], plan=plan, summary=summary,
                          quality=quality, verdict=verdict, logical_date=ctx.get("logical_date"),
                          run_type=getattr(run.run_type, "value", run.run_type), clear_number=run.clear_number or 0)
    page = write_run_report(out, report)
    log.info("report: %s (verdict %s)", page, verdict.status)
    if verdict.failed:
        raise AirflowFailException(f"{'; '.join(verdict.reasons)}; report: {page}")
    return str(page)


def _recording_errors(ctx, work, *args):
    """Run a task's work (``work(ctx, *args)``) as :func:`.task_failures.recording_errors` does."""
    return task_failures.recording_errors(ctx, ctx["ti"].task_id, work, ctx, *args)


def _replay_params() -> dict:
    return {"version": Param("v2", type="string", pattern=r"^v[0-9]{1,4}$", title="Output version",
                             description="Replay output version: outputs go to <topic>.<version> under "
                                         "group/prefix <name>-replay-<version>.")}


#: The outer bound of one run_window try (``$EOS_ETL_RUN_TIMEOUT_S``): Airflow kills a try that
#: outlives it (``on_kill``) and retries. Every wait inside a window has a bound of its own (the
#: publishing tasks' stall watchdog, the Connect client's server watch); this one catches the rest.
RUN_TIMEOUT_ENV = "EOS_ETL_RUN_TIMEOUT_S"
DEFAULT_RUN_TIMEOUT_S = 3600


def _run_window_operator(dag_id: str):
    """spark-submit per window, or, with ``$EOS_ETL_SPARK_CONNECT_CONN_ID`` set, a client of that
    connection's long-lived Spark Connect server (settings.py)."""
    timeout = timedelta(seconds=float(os.environ.get(RUN_TIMEOUT_ENV, DEFAULT_RUN_TIMEOUT_S)))
    if connect_conn_id := os.environ.get(SPARK_CONNECT_ROUTE_ENV):
        return WindowSparkConnectOperator(task_id="run_window", conn_id=connect_conn_id,
                                          kafka_conn_id=KAFKA_CONN_ID, application=str(RUN_WINDOW_JOB),
                                          outlets=output_aliases(dag_id), execution_timeout=timeout)
    return WindowSparkSubmitOperator(task_id="run_window", conn_id=SPARK_CONN_ID, kafka_conn_id=KAFKA_CONN_ID,
                                     application=str(RUN_WINDOW_JOB), name=f"eos-etl-{dag_id}",
                                     outlets=output_aliases(dag_id), execution_timeout=timeout)


def build_shop_dag(*, dag_id: str, schedule, version_param: bool, doc_md: str, tags: list[str],
                   is_paused_upon_creation: bool | None = None):
    params = {**_common_params(), **(_replay_params() if version_param else {})}
    interval_s = schedule_interval_s(schedule)

    @dag(
        dag_id=dag_id,
        schedule=schedule,
        is_paused_upon_creation=is_paused_upon_creation,
        start_date=datetime(2026, 11, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        default_args={"retries": 2, "retry_delay": timedelta(seconds=20)},
        params=params,
        tags=tags,
        doc_md=doc_md,
        deadline=run_deadline(dag_id),
    )
    def shop_dag():
        @task(retries=1)
        def plan_window(**context) -> dict:
            return _recording_errors(context, _plan, context["params"].get("version") if version_param else None,
                                     interval_s)

        @task.short_circuit(ignore_downstream_trigger_rules=False)
        def has_new_records(plan: dict) -> bool:
            if plan["dry_run"]:
                log.info("dry run: window %s planned, nothing published", plan["window"])
                return False
            if plan["empty"]:
                log.info("nothing new: every partition's window is empty; this run is a no-op")
                return False
            return True

        run_window = _run_window_operator(dag_id)

        @task
        def validate(plan: dict, **context) -> dict:
            return _recording_errors(context, _validate, plan)

        # Fails exactly when the run failed: its failure callback is the run's one failure alert.
        @task(trigger_rule="all_done", retries=0, on_failure_callback=RunFailureNotifier())
        def report(plan: dict | None = None, **context) -> str:
            return _report(context, plan)

        plan = plan_window()
        gate = has_new_records(plan)
        checked = validate(plan)
        gate >> run_window >> checked >> report(plan)

    return shop_dag()


