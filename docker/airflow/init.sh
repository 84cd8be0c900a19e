#!/usr/bin/env bash
# airflow-init (one-shot, docker-compose.yaml): migrate the metadata database,
# then make sure the two connections the DAGs use resolve.
#
# The connections are not rows in the database: they come from the
# AIRFLOW_CONN_SPARK_DEFAULT / AIRFLOW_CONN_KAFKA_PURCHASES environment
# variables of every Airflow container (environment variables win over the
# database anyway, so a copy there would only be a second, ignored source of
# truth). What this step adds is the failure: a malformed value stops the
# stack here, before the scheduler starts, with the reason in this container's
# log. Only non-secret fields are printed.
set -euo pipefail

airflow db migrate

python - <<'EOF'
from airflow.models.connection import Connection
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from eos_etl.orchestration.settings import KAFKA_CONN_ID, SPARK_CONN_ID, kafka_connection_from_airflow

spark = SparkSubmitHook(conn_id=SPARK_CONN_ID)._connection
print(f"connection {SPARK_CONN_ID}: master={spark['master']} deploy-mode={spark['deploy_mode']}")
kafka = kafka_connection_from_airflow(Connection.get_connection_from_secrets(KAFKA_CONN_ID))
print(f"connection {KAFKA_CONN_ID}: {kafka!r}")  # the repr never shows the password
EOF
