#!/usr/bin/env bash
# airflow-init (one-shot, docker-compose.yaml): migrate the metadata database, then make sure the
# connections the DAGs use resolve.
#
# The connections are not rows in the database: they come from the AIRFLOW_CONN_* environment
# variables of every Airflow container (environment variables win over the database anyway, so a
# copy there would only be a second, ignored source of truth). What this step adds is the failure:
# a malformed value stops the stack here, before the scheduler starts, with the reason in this
# container's log. Only non-secret fields are printed.
set -euo pipefail

airflow db migrate

python - <<'PY'
import os
from urllib.parse import urlsplit

from airflow.models.connection import Connection
from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from eos_etl.orchestration.settings import (KAFKA_CONN_ID, SPARK_CONN_ID, SPARK_CONNECT_ROUTE_ENV,
                                            kafka_connection_from_airflow)

spark = SparkSubmitHook(conn_id=SPARK_CONN_ID)._connection
print(f"connection {SPARK_CONN_ID}: master={spark['master']} deploy-mode={spark['deploy_mode']}")
kafka = kafka_connection_from_airflow(Connection.get_connection_from_secrets(KAFKA_CONN_ID))
print(f"connection {KAFKA_CONN_ID}: {kafka!r}")  # the repr never shows the password
if connect_id := os.environ.get(SPARK_CONNECT_ROUTE_ENV):
    url = urlsplit(SparkConnectHook(connect_id).get_connection_url())  # its parameters carry the token
    params = dict(p.split("=", 1) for p in url.path.lstrip("/;").split(";") if "=" in p)
    if "token" not in params:
        raise SystemExit(f"connection {connect_id}: no token (password): the Spark Connect server requires one")
    print(f"connection {connect_id}: windows run on the Spark Connect server at {url.netloc}, "
          f"TLS {'on' if params.get('use_ssl', '').lower() == 'true' else 'off'}")
else:
    print(f"${SPARK_CONNECT_ROUTE_ENV} is empty: windows run by spark-submit through {SPARK_CONN_ID}")
PY
