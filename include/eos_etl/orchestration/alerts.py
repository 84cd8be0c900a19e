"""Alerts for the shop DAGs: a failed run, and a run that is still going past its deadline.

Each alert is one JSON object: what happened, the DAG and run, the window
(partition offset ranges, when planned), the error, and the link to the run's
report page. It goes to the task or triggerer log (ERROR/WARNING) and is appended
to ``var/alerts/alerts.jsonl`` (0600), which an operator's tooling can follow;
for mail or chat, list Airflow's own notifiers (SmtpNotifier, Slack, ...)
next to :class:`RunFailureNotifier` in ``on_failure_callback``. Never payloads,
never secrets: the error is the run's verdict, which names offsets, counts and
checks only.

* Failure: ``report`` runs after every run (trigger rule ``all_done``) and fails
  exactly when the run failed, with the verdict's reasons, so its failure callback
  is one alert per failed run, whichever task failed.
* Deadline: with ``EOS_ETL_RUN_DEADLINE_S`` set (read when the DAG is parsed), a
  ``DeadlineAlert`` on the DAG that many seconds after the run was queued; the
  triggerer calls :func:`late_run_alert` if the run has not finished by then. Off
  when unset: Airflow 3.3.2's ``dag.test()`` (``airflow dags test``) fails at the
  end of a successful run of a DAG that has a deadline (``DagRun.update_state``
  looks the SDK's alert definitions up as database ids), and that command must
  keep working for everyone who does not ask for deadlines.
"""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import timedelta

from airflow.configuration import conf
from airflow.sdk import AsyncCallback, BaseNotifier, DeadlineAlert, DeadlineReference

from .. import paths
from ..reports.pages import seg
from ..run_files import ERRORS, run_dir

log = logging.getLogger(__name__)

def alerts_file():
    return paths.var_dir() / "alerts" / "alerts.jsonl"


def report_link(dag_id: str, run_id: str) -> str:
    """The run's page in the reports plugin (``/eos-etl/runs/<dag>/<run>``), behind Airflow's login."""
    base = (conf.get("api", "base_url", fallback="") or "http://localhost:8080").rstrip("/")
    return f"{base}/eos-etl/runs/{seg(dag_id)}/{seg(run_id)}"


def record_error(context, task_id: str, exc: BaseException) -> None:
    """Keep a failing task's error with its run (``<run dir>/errors/<task>.txt``) for the run's alert.

    Written by the task itself before it raises, so it is there when ``report`` (which runs after
    every upstream task finished) fails and alerts. Our errors name offsets, topics and settings,
    never secrets (see docs/security.md); the first 2,000 characters are kept. Outside a DAG run
    (no run in ``context``) there is nothing to attach it to.
    """
    if "dag" not in context or "run_id" not in context:
        return
    folder = run_dir(context["dag"].dag_id, context["run_id"]) / ERRORS
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{task_id}.txt").write_text(f"{type(exc).__name__}: {exc}"[:2000])


def recorded_errors(dag_id: str, run_id: str) -> dict[str, str]:
    folder = run_dir(dag_id, run_id) / ERRORS
    return {p.stem: p.read_text() for p in sorted(folder.glob("*.txt"))} if folder.is_dir() else {}


def deliver(alert: dict) -> None:
    """Log the alert and append it to the alerts file (created 0600)."""
    path = alerts_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a") as f:
        f.write(json.dumps(alert, sort_keys=True, default=str) + "\n")
    log.error("ALERT %s", json.dumps(alert, sort_keys=True, default=str))


class RunFailureNotifier(BaseNotifier):
    """The failure alert of a shop DAG run; put on the ``report`` task's ``on_failure_callback``."""

    template_fields = ()

    def notify(self, context) -> None:
        ti, dag_id, run_id = context["ti"], context["dag"].dag_id, context["run_id"]
        plan = ti.xcom_pull(task_ids="plan_window")
        deliver({
            "alert": "run_failed",
            "dag_id": dag_id,
            "run_id": run_id,
            "window": plan.get("window") if isinstance(plan, dict) else None,
            "error": str(context.get("exception") or "the run failed")[:2000],
            "task_errors": recorded_errors(dag_id, run_id),
            "report": report_link(dag_id, run_id),
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        })


async def late_run_alert(context: dict | None = None, **kwargs) -> None:
    """The deadline callback (run by the triggerer): the run was queued too long ago and is not done."""
    run = (context or {}).get("dag_run") or {}
    deadline = (context or {}).get("deadline") or {}
    dag_id, run_id = run.get("dag_id", kwargs.get("dag_id")), run.get("dag_run_id") or run.get("run_id")
    deliver({
        "alert": "run_late",
        "dag_id": dag_id,
        "run_id": run_id,
        "state": run.get("state"),
        "queued_at": run.get("queued_at"),
        "deadline": deadline.get("deadline_time"),
        "allowed_s": kwargs.get("allowed_s"),
        "report": report_link(dag_id, run_id) if dag_id and run_id else None,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    })


def run_deadline(dag_id: str) -> DeadlineAlert | None:
    """The DAG's deadline: ``EOS_ETL_RUN_DEADLINE_S`` after the run was queued (None when unset)."""
    configured = os.environ.get("EOS_ETL_RUN_DEADLINE_S", "").strip()
    if not configured:
        return None
    allowed_s = float(configured)
    if not allowed_s > 0:
        raise ValueError(f"EOS_ETL_RUN_DEADLINE_S must be a positive number of seconds, not {configured!r}")
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=timedelta(seconds=allowed_s),
        callback=AsyncCallback(late_run_alert, kwargs={"dag_id": dag_id, "allowed_s": allowed_s}),
    )
