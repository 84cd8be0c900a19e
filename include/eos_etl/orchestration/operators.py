"""Operators for the shop DAGs."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from .. import paths
from ..arguments import attempt_run_id
from ..errors import ConfigurationError
from .settings import KAFKA_CONN_ID, SPARK_CONN_ID


def run_dir(dag_id: str, run_id: str) -> Path:
    """Where a DAG run's summary, validation and report files live."""
    return paths.var_dir() / "reports" / paths.safe_name(dag_id) / paths.safe_name(run_id)


class WindowSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of ``jobs/run_window.py`` with the Kafka connection handed over as a private file.

    The Kafka connection (with its password) is read from the Airflow
    connection at execute time and written to a file only this user can read,
    in a fresh private directory, removed when the submission ends. The driver
    gets the file's *path* (``--connection-json-file``): the password is never
    on a command line, in the environment, the rendered templates or the task
    log. Not the provider's ``env_vars``: on YARN and Kubernetes it turns them
    into ``--conf spark.yarn.appMasterEnv.*`` / ``spark.kubernetes.driverEnv.*``
    on spark-submit's command line (readable by every local user) and in the
    driver's container or pod spec.

    The driver must therefore run here (deploy mode ``client``, the default),
    on any master: executors on YARN or Kubernetes then receive the connection
    inside their tasks, never in a spec. Deploy mode ``cluster`` is refused
    before anything is submitted (:func:`check_deploy_mode`).

    The connector jars (``--jars``) and the ``eos_etl`` code zip
    (``--py-files``, rebuilt when a source changed) are resolved here, not at
    DAG parse time, so executors on a cluster run exactly the code of this
    submission. Returns the run summary (pushed to XCom).
    """

    def __init__(self, *, kafka_conn_id: str = KAFKA_CONN_ID, plan_task_id: str = "plan_window", **kwargs):
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id
        self.plan_task_id = plan_task_id
        # Kept from the public constructor arguments: the deploy mode is checked before submitting.
        self.spark_conn_id = kwargs.get("conn_id", SPARK_CONN_ID)
        self.deploy_mode_override = kwargs.get("deploy_mode")

    def execute(self, context):
        try:
            return self._submit_window(context)
        except Exception as exc:
            from .alerts import record_error

            record_error(context, self.task_id, exc)
            raise

    def _submit_window(self, context):
        from ..stack.package_zip import package_zip
        from ..stack.spark import connector_jars, spark_submit_conf
        from .settings import get_kafka_connection

        check_deploy_mode(self.spark_conn_id, self.deploy_mode_override)  # before the password is read
        connection = get_kafka_connection(self.kafka_conn_id)
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
        with private_connection_file(connection.to_json()) as connection_file:
            self.application_args = [
                "run-window", *plan["cli_args"], "--window-json", plan["window_json"], "--run-id", run_id,
                "--chunk-records", str(plan["chunk_records"]), "--connection-json-file", str(connection_file),
                "--summary-file", str(summary_file), "--compact",
            ]
            # The provider builds its hook from these attributes on first use, inside execute.
            super().execute(context)
        summary = json.loads(summary_file.read_text())
        self.log.info(
            "window run %s: read=%d invoices=%d shipments=%d dead_letters=%d transactions=%d in %.1fs",
            summary["run_id"], summary["records_read"], summary["invoices"], summary["shipments"],
            summary["dead_letters"], summary["transactions"], summary["seconds"],
        )
        extras = self._announce(context, connection, plan, summary, out / "announced.json")
        # What the OpenLineage listener asks for once the task succeeded (same process, same operator).
        self._published = (plan, summary, extras, connection.bootstrap_servers)
        return summary

    def _announce(self, context, connection, plan: dict, summary: dict, marker: Path) -> dict[str, dict]:
        """The window's asset events, once: a cleared ``run_window`` that re-runs a window an earlier
        try already published and announced (nothing new committed now) emits none, so downstream
        DAGs do not count the window twice. The marker is written last, just before success."""
        announced = json.loads(marker.read_text()) if marker.is_file() else None
        if announced and announced.get("window") == plan["window"] and not summary["records_published"]:
            self.log.info("window already published and announced by %s: no new asset events",
                          announced["run_id"])
            return announced["extras"]
        extras = self._emit_asset_events(context, connection, plan, summary)
        marker.write_text(json.dumps({"window": plan["window"], "run_id": summary["run_id"], "extras": extras}))
        return extras

    def get_openlineage_facets_on_complete(self, task_instance):
        """The window's lineage: purchases in, the three output topics out, window and counts as facets
        (the writes bypass Spark's writers, so Spark's own listener cannot report them)."""
        from .lineage import window_lineage

        published = getattr(self, "_published", None)
        return window_lineage(*published) if published else None

    def _emit_asset_events(self, context, connection, plan: dict, summary: dict) -> dict[str, dict]:
        """One event per output alias, resolved to its Kafka topic, with the window's exact offset ranges."""
        from ..kafka.admin import ClusterAdmin
        from .assets import kafka_asset, output_alias, window_event_extras

        dag_id = context["dag"].dag_id
        extras = window_event_extras(ClusterAdmin(connection), plan, summary, connection.bootstrap_servers)
        for output, extra in extras.items():
            context["outlet_events"][output_alias(dag_id, output)].add(
                kafka_asset(connection.bootstrap_servers, extra["topic"]), extra=extra)
            self.log.info("asset event %s -> %s: ranges %s", output_alias(dag_id, output).name, extra["topic"],
                          extra["ranges"])
        return extras


def check_deploy_mode(spark_conn_id: str, override: str | None = None) -> None:
    """Refuse deploy mode ``cluster``: a driver started elsewhere could only get the Kafka password
    through spark-submit's command line, its conf or environment, which end up in the YARN
    container's launch context or the driver's pod spec. The mode is the operator's
    ``deploy_mode`` or the Spark connection's ``deploy-mode`` extra, as the provider resolves it."""
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(spark_conn_id)
    mode = override or (conn.extra_dejson or {}).get("deploy-mode")
    if mode == "cluster":
        raise ConfigurationError(
            f"Spark connection {spark_conn_id!r}: deploy mode 'cluster' would hand the Kafka password to a "
            "remote driver through its command line or pod/container spec; use deploy mode 'client' "
            "(executors on YARN or Kubernetes get the connection inside their tasks), or submit "
            "jobs/run_window.py yourself with --connection-json-file naming a mounted secret (docs/security.md)")


@contextlib.contextmanager
def private_connection_file(text: str):
    """A file readable by this user only, in a fresh 0700 directory, removed on the way out."""
    with tempfile.TemporaryDirectory(prefix="eos-etl-connection-") as folder:
        path = Path(folder) / "kafka-connection.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
