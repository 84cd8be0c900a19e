"""Options for every JVM the project starts: ``$EOS_ETL_JVM_OPTIONS``, split as a shell would.

They reach the Kafka brokers, the Spark driver and executors (``spark.driver`` and
``spark.executor.extraJavaOptions``, also through spark-submit) and the standalone Spark
master and workers (``SPARK_DAEMON_JAVA_OPTS``), after the project's own options, so they win.
A user's own ``extraJavaOptions`` (``--spark-conf``, spark-submit ``--conf``) win over them.

What it is for: short-lived JVMs over little data spend most of their CPU compiling, not
running, so ``-XX:TieredStopAtLevel=1`` (C1 only) suits them; over large windows C2's code pays
back, so it is no default (the figures: docs/performance-history.md, "Where a fresh JVM's CPU
goes, by thread"). The test suite sets it (tests/conftest.py); ``make bench`` does not.

What every Spark driver and executor gets by default is milder (:data:`SPARK_JIT_OPTIONS`):
C2 compiles a method after 10x HotSpot's default invocations and loop iterations. The per-record
code (the transform's generated projections, Arrow conversion, the Kafka reader) still gets C2
within the first tens of thousands of records; the code that runs only while a job is planned
(the analyser, the optimiser, code generation) stays in C1 instead of being compiled twice.
"""

from __future__ import annotations

import os
import shlex

from . import class_data

JVM_OPTIONS_ENV = "EOS_ETL_JVM_OPTIONS"

#: HotSpot's C2 thresholds, each 10x its default (5000, 600, 15000, 40000). Measured on cold S runs
#: (fresh JVM, 4 partitions, the options given through $EOS_ETL_JVM_OPTIONS, runs interleaved with the
#: defaults): process-tree CPU 27.9-28.2 vs 32.5-33.9 s at 100,000 purchases, 66.6 vs 74.9 s at
#: 1,000,000 (job 35.7 vs 39.4 s). $EOS_ETL_JVM_OPTIONS comes after them, so it can set them again.
SPARK_JIT_OPTIONS = [
    "-XX:Tier4InvocationThreshold=50000",
    "-XX:Tier4MinInvocationThreshold=6000",
    "-XX:Tier4CompileThreshold=150000",
    "-XX:Tier4BackEdgeThreshold=400000",
]


def jvm_options() -> list[str]:
    """The extra JVM options, one list item per option; empty when unset."""
    return shlex.split(os.environ.get(JVM_OPTIONS_ENV, ""))


def jvm_options_string() -> str:
    """The extra JVM options as one string, quoted for a JVM options setting ('' when unset)."""
    return shlex.join(jvm_options())


def spark_jvm_options_string() -> str:
    """The Spark driver's and executors' extra JVM options: :data:`SPARK_JIT_OPTIONS`, this machine's
    class-data archive when it has one (:mod:`.class_data`), then ``$EOS_ETL_JVM_OPTIONS``."""
    return shlex.join([*SPARK_JIT_OPTIONS, *class_data.jvm_options(), *jvm_options()])
