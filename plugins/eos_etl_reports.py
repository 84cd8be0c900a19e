"""Airflow plugin: the pipeline's run reports inside the Airflow UI, behind Airflow's login.

Mounts the reports app (``eos_etl.reports.app``) under
``/eos-etl`` of the API server and adds two UI entries: "Exactly-once
reports" in the navigation and a "Run report" tab on every DAG run.

Airflow does not authenticate plugin apps by itself, so every route carries
Airflow 3's own FastAPI security dependencies: ``get_user`` (the JWT from the
``Authorization: Bearer`` header, or the ``_token`` cookie the UI's login
sets; none -> 401) and ``requires_access_dag("GET", DagAccessEntity.RUN)``
(the configured auth manager's decision for the ``dag_id`` in the path;
no -> 403). The index lists only DAGs the auth manager lets the user read.
"""

from __future__ import annotations

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import get_user, requires_access_dag
from airflow.plugins_manager import AirflowPlugin

from eos_etl.reports.app import create_app


def readable_dag_ids(user, dag_ids: set[str]) -> set[str]:
    # At request time: the API server's app (and its auth manager) exists only once it serves.
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager().filter_authorized_dag_ids(dag_ids=dag_ids, user=user, method="GET")


def list_backfills(dag_id: str, limit: int) -> list[dict]:
    """The DAG's ``limit`` newest backfills, each with its intervals: the run it created or cleared,
    or why it made none."""
    # At request time: Airflow's ORM models and session load the metadata database's machinery,
    # which a plugin's import (every API server start, every DAG processor) does not need.
    from airflow.models.backfill import Backfill, BackfillDagRun
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        backfills = session.scalars(select(Backfill).where(Backfill.dag_id == dag_id)
                                    .order_by(Backfill.id.desc()).limit(limit)).all()
        out = []
        for b in backfills:
            rows = session.execute(
                select(BackfillDagRun, DagRun).outerjoin(DagRun, DagRun.id == BackfillDagRun.dag_run_id)
                .where(BackfillDagRun.backfill_id == b.id).order_by(BackfillDagRun.sort_ordinal)).all()
            intervals = []
            for row, run in rows:
                # An interval has a run or the reason it has none; with neither, the run it had is
                # gone from Airflow's tables (its link is set null on delete). Seen on SQLite: a later
                # backfill that reprocessed (cleared) it hit "database is locked", and Airflow's
                # clean-up deletes every run carrying that backfill's id, runs it had only cleared
                # included; its retry made a new run, under the same id, for the same date. The
                # run's reports are kept by run id, so the run now at that date tells what it did.
                replaced = run is None and not row.exception_reason
                if replaced:
                    run = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id,
                                                               DagRun.logical_date == row.logical_date)
                                          .limit(1)).first()
                intervals.append({
                    "logical_date": row.logical_date, "exception_reason": row.exception_reason,
                    "run_id": run.run_id if run else None, "state": str(run.state) if run else None,
                    "run_replaced": replaced,
                })
            out.append({
                "id": b.id, "from_date": b.from_date, "to_date": b.to_date, "created_at": b.created_at,
                "completed_at": b.completed_at,
                "reprocess_behavior": getattr(b.reprocess_behavior, "value", b.reprocess_behavior),
                "intervals": intervals,
            })
        return out


app = create_app(current_user=get_user, require_dag_read=requires_access_dag("GET", DagAccessEntity.RUN),
                 readable_dag_ids=readable_dag_ids, list_backfills=list_backfills)


class EosEtlReportsPlugin(AirflowPlugin):
    name = "eos_etl_reports"
    fastapi_apps = [{"app": app, "url_prefix": "/eos-etl", "name": "eos-etl reports"}]
    external_views = [
        {"name": "Exactly-once reports", "href": "/eos-etl/reports/", "destination": "nav",
         "category": "browse", "url_route": "eos-etl-reports"},
        {"name": "Run report", "href": "/eos-etl/runs/{DAG_ID}/{RUN_ID}", "destination": "dag_run",
         "url_route": "eos-etl-run-report"},
        {"name": "Backfills report", "href": "/eos-etl/backfills/{DAG_ID}/", "destination": "dag",
         "url_route": "eos-etl-backfills"},
    ]
