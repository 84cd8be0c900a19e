"""SparkSessions and spark-submit arguments wired with Spark's Kafka connector.

Every session the project creates goes through :func:`spark_session`, so the
Kafka connector jars, the settings exactly-once relies on (no speculation,
task retries allowed) and the Python interpreter are always the same.
"""

from __future__ import annotations

import os
import sys

from . import maven
from .versions import SPARK_KAFKA

# `local[N,F]`: N threads, each task may fail F times (plain `local[*]` never
# retries a task, and retries are part of the recovery story).
DEFAULT_MASTER = "local[*,4]"

# Settings exactly-once depends on. Speculation would run two copies of a
# publishing task at once; the second fences the first, which is safe but
# wasteful, so it is off.
REQUIRED_CONF: dict[str, str] = {
    "spark.speculation": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
}


def connector_jars() -> list[str]:
    """Local paths of the Kafka connector jars (fetched on first use)."""
    maven.fetch(SPARK_KAFKA)
    return [str(p) for p in SPARK_KAFKA.jars()]


def spark_conf(extra: dict[str, str] | None = None) -> dict[str, str]:
    conf = dict(REQUIRED_CONF)
    conf["spark.jars"] = ",".join(connector_jars())
    conf["spark.ui.enabled"] = os.environ.get("EOS_ETL_SPARK_UI", "false")
    conf["spark.driver.memory"] = os.environ.get("EOS_ETL_SPARK_DRIVER_MEMORY", "2g")
    if extra:
        conf.update(extra)
    return conf


def spark_session(app_name: str = "eos-etl", master: str | None = None, conf: dict[str, str] | None = None):
    """Get (or create) the SparkSession for this process."""
    from pyspark.sql import SparkSession

    # Python workers must run the same interpreter (the project's venv).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    master = master or os.environ.get("EOS_ETL_SPARK_MASTER")
    under_spark_submit = bool(os.environ.get("PYSPARK_GATEWAY_PORT")) and not master
    if under_spark_submit:
        # spark-submit already chose the master and shipped the jars (--jars).
        settings = {**REQUIRED_CONF, **(conf or {})}
    else:
        builder = builder.master(master or DEFAULT_MASTER)
        settings = spark_conf(conf)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("EOS_ETL_SPARK_LOG_LEVEL", "WARN"))
    return spark


def spark_submit_conf() -> dict[str, str]:
    """Conf for SparkSubmitOperator / spark-submit (jars passed separately via --jars)."""
    conf = dict(REQUIRED_CONF)
    conf["spark.pyspark.python"] = sys.executable
    return conf
