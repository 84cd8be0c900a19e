"""Options for every JVM the project starts: ``$EOS_ETL_JVM_OPTIONS``, split as a shell would.

They reach the Kafka brokers, the Spark driver and executors (``spark.driver`` and
``spark.executor.extraJavaOptions``, also through spark-submit) and the standalone Spark
master and workers (``SPARK_DAEMON_JAVA_OPTS``), after the project's own options, so they win.
A user's own ``extraJavaOptions`` (``--spark-conf``, spark-submit ``--conf``) win over them.

What it is for: short-lived JVMs over little data spend most of their CPU compiling, not
running. A 100,000-purchase window on a fresh JVM spent 29 of its 62 CPU seconds in HotSpot's
JIT compilers (23 in C2); with ``-XX:TieredStopAtLevel=1`` (C1 only) the JVM took 40 CPU s
and the window ran 15 % faster, and a test DAG run took 43 % less CPU in all. Over a million
purchases it is the other way round: C2's code pays back (124 vs 222 JVM CPU s), so it is no
default. The test suite sets it (tests/conftest.py); ``make bench`` does not.
"""

from __future__ import annotations

import os
import shlex

JVM_OPTIONS_ENV = "EOS_ETL_JVM_OPTIONS"


def jvm_options() -> list[str]:
    """The extra JVM options, one list item per option; empty when unset."""
    return shlex.split(os.environ.get(JVM_OPTIONS_ENV, ""))


def jvm_options_string() -> str:
    """The extra JVM options as one string, quoted for a JVM options setting ('' when unset)."""
    return shlex.join(jvm_options())
