"""Operators for the shop DAGs."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook, BaseOperator
from airflow.sdk.exceptions import AirflowException

from ..arguments import attempt_run_id
from ..engine.tasks.task_attempts import EVENT_LOG_ENV
from ..errors import ConfigurationError
from ..run_files import ANNOUNCED, SUMMARY, run_dir
from ..spark.config import REMOTE_ENV, connector_jars, spark_submit_conf
from ..spark.connect_client import HOME_ENV, TERM_GRACE_S, close_session, connect_session, where
from ..spark.connect_probe import STALL_BOUND_S, wait_answering
from ..spark.package_zip import package_dir, package_zip
from . import task_failures
from .assets import kafka_asset, output_alias, window_event_extras
from .lineage import window_lineage
from .settings import KAFKA_CONN_ID, SPARK_CONN_ID, SPARK_CONNECT_CONN_ID, get_kafka_connection

if TYPE_CHECKING:
    from ..embedded.spark_connect import SparkConnectServer


class _WindowRun:
    """What both routes share: the window's job arguments, its Kafka connection as a private
    file, the run summary, the window's asset events and its lineage. A route implements
    :meth:`_run_job` (run ``jobs/run_window.py`` with these arguments and wait for it)."""

    kafka_conn_id: str
    plan_task_id: str

    def execute(self, context):
        return task_failures.recording_errors(context, self.task_id, self._run_window, context)

    def _before_connection(self) -> None:
        """Checks that must pass before the Kafka password is read."""

    def _run_job(self, context, application_args: list[str]) -> None:
        raise NotImplementedError

    def _run_window(self, context):
        self._before_connection()
        connection = get_kafka_connection(self.kafka_conn_id)
        out = run_dir(context["dag"].dag_id, context["run_id"])
        out.mkdir(parents=True, exist_ok=True)
        summary_file = out / SUMMARY
        summary_file.unlink(missing_ok=True)
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id)
        # Unique per attempt: the outputs' run_id header then tells which attempt of which run wrote them.
        run_id = attempt_run_id(context["run_id"], context["ti"].try_number)
        with private_connection_file(connection.to_json()) as connection_file:
            self._run_job(context, [
                "run-window", *plan["cli_args"], "--window-json", plan["window_json"], "--run-id", run_id,
                "--connection-json-file", str(connection_file),
                "--summary-file", str(summary_file), "--compact",
            ])
        summary = json.loads(summary_file.read_text())
        self.log.info(
            "window run %s: read=%d invoices=%d shipments=%d dead_letters=%d transactions=%d in %.1fs",
            summary["run_id"], summary["records_read"], summary["invoices"], summary["shipments"],
            summary["dead_letters"], summary["transactions"], summary["seconds"],
        )
        extras = self._announce(context, connection, plan, summary, out / ANNOUNCED)
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
        published = getattr(self, "_published", None)
        return window_lineage(*published) if published else None

    def _emit_asset_events(self, context, connection, plan: dict, summary: dict) -> dict[str, dict]:
        """One event per output alias, resolved to its Kafka topic, with the window's exact offset ranges."""
        from ..kafka.admin import ClusterAdmin  # deferred: task-time only, as in dag_factory

        dag_id = context["dag"].dag_id
        extras = window_event_extras(ClusterAdmin(connection), plan, summary, connection.bootstrap_servers)
        for output, extra in extras.items():
            context["outlet_events"][output_alias(dag_id, output)].add(
                kafka_asset(connection.bootstrap_servers, extra["topic"]), extra=extra)
            self.log.info("asset event %s -> %s: ranges %s", output_alias(dag_id, output).name, extra["topic"],
                          extra["ranges"])
        return extras


class WindowSparkSubmitOperator(_WindowRun, SparkSubmitOperator):
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

    def _before_connection(self) -> None:
        check_deploy_mode(self.spark_conn_id, self.deploy_mode_override)

    def _run_job(self, context, application_args: list[str]) -> None:
        self.jars = ",".join(connector_jars())
        code_zip = str(package_zip())
        self.py_files = ",".join([code_zip, *(f for f in (self.py_files or "").split(",") if f and f != code_zip)])
        self.conf = {**spark_submit_conf(), **(self.conf or {})}
        self.application_args = application_args
        # The provider builds its hook from these attributes on first use, inside execute.
        try:
            SparkSubmitOperator.execute(self, context)
        except AirflowException as exc:
            # The provider says only "Error code is: N"; its process object has the code itself
            # (spark-submit exits with the Python driver's code in client mode).
            submitted = getattr(self._hook, "_submit_sp", None) if self._hook is not None else None
            code = getattr(submitted, "returncode", None)
            if code is not None and code != 0:
                raise task_failures.for_exit_code(code, f"{self.application} exited with {code} "
                                                        "(spark-submit, its log above)") from exc
            raise


class WindowSparkConnectOperator(_WindowRun, BaseOperator):
    """Run ``jobs/run_window.py`` as a client of a long-lived Spark Connect server.

    No spark-submit and no Spark application per window: the job is a plain
    Python process (the window's driver logic) whose session lives on the
    server named by the provider's ``spark_connect`` connection
    (``SparkConnectHook``; its password is the server's token). The server's
    JVM and its compiled code stay warm across windows
    (``eos_etl.embedded.spark_connect``; docs/benchmarks.md). The server's
    address with the token reaches the job in its environment
    (``SPARK_REMOTE``), the Kafka connection as a private file, as for
    spark-submit; neither is ever on a command line or in the log.

    Supervision: for the project's own server (``$EOS_ETL_SPARK_CONNECT_HOME``,
    set by ``make up``) the task first makes sure it runs and answers
    (``SparkConnectServer.ensure_running``: started if down, restarted if stuck)
    and holds the server's window lock while the job runs, so housekeeping
    restarts never hit a window. Any other server (compose's, a cluster's) is
    only probed: one that does not answer within the stall bound fails the try
    with one error, and Airflow's retry finds it restarted by its own supervisor
    (Docker's restart policy). The job bounds every wait itself
    (``eos_etl.spark.connect_client``); ``on_kill`` sends it SIGTERM, which
    interrupts its operations on the server and releases its session.
    """

    template_fields = ("application",)

    def __init__(self, *, application: str, conn_id: str = SPARK_CONNECT_CONN_ID,
                 kafka_conn_id: str = KAFKA_CONN_ID, plan_task_id: str = "plan_window", **kwargs):
        super().__init__(**kwargs)
        self.application = application
        self.conn_id = conn_id
        self.kafka_conn_id = kafka_conn_id
        self.plan_task_id = plan_task_id
        self._proc: subprocess.Popen | None = None

    def _run_job(self, context, application_args: list[str]) -> None:
        remote, server = ready_connect_server(self.conn_id)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        env.update({REMOTE_ENV: remote, "PYTHONPATH": os.pathsep.join(
            [str(package_dir().parent), *filter(None, [os.environ.get("PYTHONPATH")])])})
        if server is not None:  # its event log tells how the window's task attempts ended
            env[EVENT_LOG_ENV] = str(server.event_log_dir)
        self.log.info("running %s on the Spark Connect server of connection %r", self.application, self.conn_id)
        with server.window() if server is not None else contextlib.nullcontext():
            self._proc = subprocess.Popen([sys.executable, self.application, *application_args], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, text=True, errors="replace")
            for line in self._proc.stdout:
                self.log.info("%s", line.rstrip())
            rc = self._proc.wait()
        if rc != 0:
            raise task_failures.for_exit_code(rc, f"{self.application} exited with {rc} on the Spark Connect "
                                                  f"server of connection {self.conn_id!r} (its log above)")

    def on_kill(self) -> None:
        # SIGTERM: the job interrupts its operations on the server and releases its session (within
        # TERM_GRACE_S), so its tasks stop now instead of running on; then it is killed for sure.
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(TERM_GRACE_S + 5)
            except subprocess.TimeoutExpired:
                self._proc.kill()


def ready_connect_server(conn_id: str) -> tuple[str, SparkConnectServer | None]:
    """The Spark Connect server of the Airflow connection ``conn_id``, ready for a window's work: its
    URL (with the token: never log it) and, when it is the project's own server (``make up``:
    ``$EOS_ETL_SPARK_CONNECT_HOME``), the server, made sure to run and answer (started if down,
    restarted if stuck). Any other server (compose's, a cluster's) is only probed: one that answers
    nothing within the stall bound fails the try with one error, and Airflow's retry finds it
    restarted by its own supervisor (Docker's restart policy)."""
    remote = SparkConnectHook(conn_id).get_connection_url()  # carries the token: never logged
    home = os.environ.get(HOME_ENV)
    server = None
    if home:
        # the project's own server: supervised from here, the one place the runtime reaches a launcher
        from ..embedded.spark_connect import SparkConnectServer

        server = SparkConnectServer.at(Path(home))
    if server is not None:
        server.ensure_running()
    elif (reason := wait_answering(remote)) is not None:
        raise AirflowException(f"{where(remote)} (connection {conn_id!r}) answered nothing for "
                               f"{STALL_BOUND_S:.0f}s ({reason}); the retry runs once its supervisor restarted it")
    return remote, server


@contextlib.contextmanager
def connect_route_session(conn_id: str, app_name: str):
    """A client session on the Connect route's server (:func:`ready_connect_server`), for work that
    belongs to a window (its validation): no Spark application and no JVM in this process. The window
    lock of the project's own server is held meanwhile, so a housekeeping restart waits for it; the
    session is the pipeline's shared one (``eos_etl.spark.connect_client``), so it adds none."""
    remote, server = ready_connect_server(conn_id)
    with server.window() if server is not None else contextlib.nullcontext():
        spark = connect_session(remote, app_name)
        try:
            yield spark
        finally:
            close_session(spark)


def check_deploy_mode(spark_conn_id: str, override: str | None = None) -> None:
    """Refuse deploy mode ``cluster``: a driver started elsewhere could only get the Kafka password
    through spark-submit's command line, its conf or environment, which end up in the YARN
    container's launch context or the driver's pod spec. The mode is the operator's
    ``deploy_mode`` or the Spark connection's ``deploy-mode`` extra, as the provider resolves it."""
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
