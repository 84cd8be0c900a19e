"""Operators for the shop DAGs."""

from __future__ import annotations

import json
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from .. import paths
from ..arguments import attempt_run_id
from .settings import CONNECTION_ENV, KAFKA_CONN_ID


def run_dir(dag_id: str, run_id: str) -> Path:
    """Where a DAG run's summary, validation and report files live."""
    return paths.var_dir() / "reports" / paths.safe_name(dag_id) / paths.safe_name(run_id)


class WindowSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of ``jobs/run_window.py`` with the Kafka connection injected.

    The Kafka connection (with its password) is read from the Airflow
    connection at execute time and handed to spark-submit as an environment
    variable of the child process only: it never appears in the command line,
    the rendered templates or the task log. The connector jars (``--jars``)
    and the ``eos_etl`` code zip (``--py-files``, rebuilt when a source
    changed) are resolved here, not at DAG parse time, so executors on a
    cluster run exactly the code of this submission. Returns the run summary
    (pushed to XCom).
    """

    def __init__(self, *, kafka_conn_id: str = KAFKA_CONN_ID, plan_task_id: str = "plan_window", **kwargs):
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id
        self.plan_task_id = plan_task_id

    def execute(self, context):
        from ..stack.package_zip import package_zip
        from ..stack.spark import connector_jars, spark_submit_conf
        from .settings import get_kafka_connection

        connection = get_kafka_connection(self.kafka_conn_id)
        self.env_vars = {**(self.env_vars or {}), CONNECTION_ENV: connection.to_json()}
        self.jars = ",".join(connector_jars())
        code_zip = str(package_zip())
        self.py_files = ",".join([code_zip, *(f for f in (self.py_files or "").split(",") if f and f != code_zip)])
        self.conf = {**spark_submit_conf(), **(self.conf or {})}
        out = run_dir(context["dag"].dag_id, context["run_id"])
        out.mkdir(parents=True, exist_ok=True)
        summary_file = out / "summary.json"
        summary_file.unlink(missing_ok=True)
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id)
        # Unique per attempt: the outputs' run_id header then tells which attempt of which run wrote them.
        run_id = attempt_run_id(context["run_id"], context["ti"].try_number)
        self.application_args = [
            "run-window", *plan["cli_args"], "--window-json", plan["window_json"], "--run-id", run_id,
            "--chunk-records", str(plan["chunk_records"]), "--connection-json-env", CONNECTION_ENV,
            "--summary-file", str(summary_file), "--compact",
        ]
        self._hook = None  # rebuild the hook with the values set above
        super().execute(context)
        summary = json.loads(summary_file.read_text())
        self.log.info(
            "window run %s: read=%d invoices=%d shipments=%d dead_letters=%d transactions=%d in %.1fs",
            summary["run_id"], summary["records_read"], summary["invoices"], summary["shipments"],
            summary["dead_letters"], summary["transactions"], summary["seconds"],
        )
        return summary


