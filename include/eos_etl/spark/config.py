"""SparkSessions and spark-submit arguments wired with Spark's Kafka connector.

Every session the project creates goes through :func:`spark_session`, so the
Kafka connector jars, the settings the job relies on (UTC session time,
Arrow, task retries allowed) and the Python interpreter are always the same;
everything else (speculation included) is the user's to set.

The master is, in this order: the caller's (``run-window --master``), the one
spark-submit chose, ``$EOS_ETL_SPARK_MASTER``, the embedded ``local[*,4]``.
With ``$SPARK_REMOTE`` set (pyspark's own variable, e.g. ``sc://localhost:15002``)
the session is a Spark Connect client of a long-lived server instead
(:mod:`.spark_connect`): the server was started with these same settings, the
client only sets the per-session ones it depends on.
On a cluster master (anything not ``local``) the session ships what executors
on other machines need, as a real cluster requires: the connector jars
(``spark.jars``, served by the driver), this package as a zip
(``spark.submit.pyFiles``, see :mod:`.package_zip`) and the Python to run
(``spark.pyspark.python``: the same environment must exist at that path on
every worker).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from ..jars import maven
from ..jars.versions import SPARK_KAFKA
from ..jvm import spark_patches
from ..jvm.options import spark_jvm_options_string
from .package_zip import package_zip

log = logging.getLogger(__name__)

# `local[N,F]`: N threads, each task may fail F times (plain `local[*]` never
# retries a task, and retries are part of the recovery story).
DEFAULT_MASTER = "local[*,4]"
MASTER_ENV = "EOS_ETL_SPARK_MASTER"
REMOTE_ENV = "SPARK_REMOTE"  # pyspark's own: a Spark Connect server's sc:// address
CONNECT_DEFAULT_PORT = 15002  # Spark Connect's own default
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # Spark's own, on the server and the client
SOURCE_DIGEST_CONF = "spark.eos_etl.sourceDigest"  # the code a Spark Connect server's workers run
_LOOPBACK = ("127.0.0.1", "localhost", "::1")

# Settings the job's code depends on: always these, whatever else is set.
REQUIRED_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}
# Defaults the user may override (run-window --spark-conf, spark-submit --conf, the DAG's conf).
# Speculation is off by default only because a speculative copy of a publishing task fences the
# original and redoes its open transaction: wasted work. Exactly-once does not depend on it being
# off (engine.publishing.superseded; the cluster soak's spark_speculation scenario runs with it on).
DEFAULT_CONF: dict[str, str] = {
    "spark.speculation": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.showConsoleProgress": "false",
    # A whole-stage method above 8,000 bytes of bytecode is never JIT-compiled by HotSpot, so the
    # shop transform's stage (checks + two JSON renderings in one projection) ran interpreted;
    # at 8000 Spark falls back to per-expression code for such a stage, which HotSpot compiles
    # (Spark's documentation of this setting recommends 8000 on HotSpot). Measured on the
    # transform alone: 3.4 vs 7.4 CPU s per 100,000 purchases.
    "spark.sql.codegen.hugeMethodLimit": "8000",
    # PySpark otherwise records the Python call site of every Column function in the JVM (for error
    # messages), several py4j round trips each: building the shop transform took 4,649 round trips
    # instead of 1,389, 0.95 vs 0.37 s warm and ~0.5 s more on a fresh JVM, once per window.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Executors feed their Python workers over a Unix domain socket (a fixed buffer, about 200 KB) instead
    # of loopback TCP, whose buffer autotuning let megabytes of a task's batches queue up. When Spark kills
    # a task, its worker sees the end of its stream only after it has published what was queued ahead of
    # it: measured on a cancelled job whose tasks read 2 ms a row, 17,000 rows (33 s) over TCP, 800 rows
    # (2.8 s) over the socket (docs/testing.md, "The orphan's tasks").
    "spark.python.unix.domain.socket.enabled": "true",
}


# Where every executor runs on this machine in this venv: workers import pyspark from the installed
# package instead of its zip archives (see .pyspark_daemon: ~0.5 CPU s per worker start, 90 ms per task).
MACHINE_LOCAL_CONF: dict[str, str] = {"spark.python.daemon.module": "eos_etl.spark.pyspark_daemon"}



def spark_home() -> Path:
    """The installed pyspark package: its ``bin/spark-class`` and ``jars/`` are a Spark distribution."""
    return Path(importlib.util.find_spec("pyspark").origin).resolve().parent  # found, not imported

def connector_jars() -> list[str]:
    """Local paths of the Kafka connector jars (fetched on first use)."""
    maven.fetch(SPARK_KAFKA)
    return [str(p) for p in SPARK_KAFKA.jars()]


def is_cluster_master(master: str) -> bool:
    """True for masters whose executors may run on other machines (spark://, yarn, k8s://)."""
    return not master.startswith("local")


def is_machine_local(master: str) -> bool:
    """True when every executor runs on this machine: local mode, or a spark:// master on loopback."""
    if not is_cluster_master(master):
        return True
    hosts = [urlsplit(f"//{h}").hostname for h in master.removeprefix("spark://").split(",")]
    return master.startswith("spark://") and all(h in _LOOPBACK for h in hosts)


def cluster_conf() -> dict[str, str]:
    """What executors of a cluster master need beyond the jars: the code zip and the Python to run it."""
    return {
        "spark.submit.pyFiles": str(package_zip()),
        "spark.pyspark.python": sys.executable,
        "spark.executor.memory": os.environ.get("EOS_ETL_SPARK_EXECUTOR_MEMORY", "1g"),
    }


def jvm_conf() -> dict[str, str]:
    """The driver's and executors' extra JVM options (:func:`.jvm.spark_jvm_options_string`) and the class path
    of the fixes of Spark's bugs they load ahead of Spark's jars (:mod:`eos_etl.jvm.spark_patches`)."""
    options = spark_jvm_options_string()
    return {"spark.driver.extraJavaOptions": options, "spark.executor.extraJavaOptions": options,
            **spark_patches.class_path_conf()}


def spark_conf(extra: dict[str, str] | None = None, master: str = DEFAULT_MASTER) -> dict[str, str]:
    conf = dict(DEFAULT_CONF)
    conf.update(jvm_conf())
    conf["spark.jars"] = ",".join(connector_jars())
    conf["spark.ui.enabled"] = os.environ.get("EOS_ETL_SPARK_UI", "false")
    conf["spark.driver.memory"] = os.environ.get("EOS_ETL_SPARK_DRIVER_MEMORY", "2g")
    if is_cluster_master(master):
        conf.update(cluster_conf())
    if is_machine_local(master):
        # Nobody off this machine needs to reach the driver: it listens on loopback only.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf.update(MACHINE_LOCAL_CONF)
    if extra:
        conf.update(extra)
    conf.update(REQUIRED_CONF)
    return conf


def classic_session(app_name: str = "eos-etl", master: str | None = None, conf: dict[str, str] | None = None):
    """Get (or create) this process's own Spark application's session (local, a cluster master,
    or spark-submit's); :func:`.session.spark_session` chooses between this and a Connect client."""
    # Deferred: pyspark loads on first use; the CLI and the DAGs' operators import this module for its
    # constants and settings only.
    from pyspark.sql import SparkSession

    # Python workers must run the same interpreter (the project's venv).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit its --master wins over the environment; only an explicit master overrides it.
    under_spark_submit = bool(os.environ.get("PYSPARK_GATEWAY_PORT")) and not master
    if under_spark_submit:
        # spark-submit already chose the master and shipped the jars (--jars) and code (--py-files);
        # its --conf values stand, defaults fill only what it left unset.
        submitted = _submitted_conf()
        defaults = dict(DEFAULT_CONF)
        if is_machine_local(submitted.get("spark.master", "")):
            defaults.update(MACHINE_LOCAL_CONF)
        settings = {**{k: v for k, v in defaults.items() if k not in submitted}, **(conf or {}), **REQUIRED_CONF}
    else:
        master = master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER
        builder = builder.master(master)
        settings = spark_conf(conf, master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("EOS_ETL_SPARK_LOG_LEVEL", "WARN"))
    return spark


def _submitted_conf() -> dict[str, str]:
    """What spark-submit already set (its --master, --conf and spark-defaults.conf), read from the running JVM."""
    from pyspark import SparkConf, SparkContext  # deferred: pyspark loads on first use (see classic_session)

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM; no context is created
    return dict(SparkConf().getAll())


def parse_conf_pairs(pairs: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings (run-window --spark-conf) as a dict; ValueError naming a malformed one."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip().startswith("spark.") or not value.strip():
            raise ValueError(f"--spark-conf {pair!r}: expected spark.KEY=VALUE")
        if key.strip() in REQUIRED_CONF:
            raise ValueError(f"--spark-conf {key.strip()} is fixed at {REQUIRED_CONF[key.strip()]!r} "
                             "(the job depends on it)")
        conf[key.strip()] = value.strip()
    return conf


def spark_submit_conf() -> dict[str, str]:
    """Conf for SparkSubmitOperator / spark-submit (jars via --jars, the code zip via --py-files)."""
    conf = {**DEFAULT_CONF, **jvm_conf(), **REQUIRED_CONF}
    conf["spark.pyspark.python"] = sys.executable
    conf["spark.executor.memory"] = os.environ.get("EOS_ETL_SPARK_EXECUTOR_MEMORY", "1g")
    return conf
