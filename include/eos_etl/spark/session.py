"""The one way the project gets a SparkSession: a Spark Connect client when ``$SPARK_REMOTE`` names a
server (:mod:`.connect_client`), else this process's own Spark application (:mod:`.spark`)."""

from __future__ import annotations

import os

from .config import REMOTE_ENV, classic_session
from .connect_client import close_session, connect_session


def spark_session(app_name: str = "eos-etl", master: str | None = None, conf: dict[str, str] | None = None):
    """Get (or create) the SparkSession for this process."""
    if remote := os.environ.get(REMOTE_ENV):
        if master:
            raise ValueError(f"--master {master} and ${REMOTE_ENV} both given: a Spark Connect client runs on "
                             "its server's master")
        return connect_session(remote, app_name, conf)
    return classic_session(app_name, master, conf)


#: The routes a window's Spark work takes, as summaries and reports name them.
ROUTE_CONNECT, ROUTE_STANDALONE, ROUTE_SPARK_SUBMIT = "connect", "standalone", "spark-submit"


def _is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def spark_route(spark) -> str:
    """Where ``spark`` runs its work: a Spark Connect server, a Spark standalone cluster's master
    (``spark://``), or this process's own application as spark-submit started it (any other master)."""
    if _is_connect(spark):
        return ROUTE_CONNECT
    return ROUTE_STANDALONE if spark.sparkContext.master.startswith("spark://") else ROUTE_SPARK_SUBMIT


def stop_session(spark) -> None:
    """End a session from :func:`spark_session`: a Connect client's is released (bounded)."""
    if _is_connect(spark):
        close_session(spark)
    else:
        spark.stop()
