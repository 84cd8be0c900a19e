"""A DAG run's directory under ``var/reports`` and the names of the files in it.

Every writer and reader of a run's files takes the names from here::

    var/reports/                     reports_root()
        run-<run_id>.json            a run made without Airflow (``demo --no-airflow``): its summary
        <dag_id>/                    (directory names through :func:`eos_etl.paths.safe_name`)
            index.html               DAG_INDEX: recent runs, rendered for reading without Airflow
            <run_id>/                run_dir(dag_id, run_id)
                summary.json         SUMMARY: the Spark job's run summary (written by run_window)
                announced.json       ANNOUNCED: the asset events the window's run_window emitted (once)
                quality.json         QUALITY: the Great Expectations validation (written by validate)
                report.json          REPORT: the run's report: window, counts, timings, verdict
                report.html          REPORT_PAGE: the same rendered for reading without Airflow
                history.jsonl        HISTORY: one line per execution of the run (a cleared or
                                     backfill-reprocessed run runs again under the same id)
                errors/<task>.txt    ERRORS: a failed task's error, for the failure alert
"""

from __future__ import annotations

from pathlib import Path

from . import paths

SUMMARY = "summary.json"
ANNOUNCED = "announced.json"
QUALITY = "quality.json"
REPORT = "report.json"
REPORT_PAGE = "report.html"
HISTORY = "history.jsonl"
ERRORS = "errors"
DAG_INDEX = "index.html"


def reports_root() -> Path:
    return paths.var_dir() / "reports"


def run_dir(dag_id: str, run_id: str) -> Path:
    """Where a DAG run's summary, validation and report files live."""
    return reports_root() / paths.safe_name(dag_id) / paths.safe_name(run_id)


def direct_run_summary(run_id: str) -> Path:
    """The summary of a run made without Airflow."""
    return reports_root() / f"run-{run_id}.json"
