#!/usr/bin/env bash
# Entry point of the spark and airflow images: Spark's settings for every Spark JVM the container
# may start (a driver, the standalone master or a worker), then the command.
#
# $SPARK_CONF_DIR/spark-defaults.conf, 0600: docker/spark/spark-defaults.conf (RPC authentication
# and encryption) and, when $SPARK_AUTH_SECRET is set (.env), spark.authenticate.secret. Spark wants
# a standalone application's secret as a setting (SecurityManager.initializeAuth); from this file
# it is on no command line. The master and workers read the same file; a worker hands the secret
# to its executors in their environment (_SPARK_AUTH_SECRET), not on their command lines. The
# variable leaves the environment before the command starts: tasks and their logs never see it.
set -euo pipefail

umask 077
mkdir -p "${SPARK_CONF_DIR:?SPARK_CONF_DIR is not set}"
draft=$(mktemp "$SPARK_CONF_DIR/.spark-defaults.XXXXXX")
cat "$(dirname "$(readlink -f "$0")")/spark-defaults.conf" > "$draft"
if [[ -n ${SPARK_AUTH_SECRET:-} ]]; then
  printf 'spark.authenticate.secret          %s\n' "$SPARK_AUTH_SECRET" >> "$draft"
fi
mv "$draft" "$SPARK_CONF_DIR/spark-defaults.conf"
unset SPARK_AUTH_SECRET
umask 022
exec "$@"
