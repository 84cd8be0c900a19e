"""$EOS_ETL_JVM_OPTIONS reaches every JVM the project starts (eos_etl.jvm.options): the running
broker and Spark driver have them. How they are split and merged: tests/unit/jvm/test_options.py.

The suite runs with it set (tests/conftest.py: C1 only, for short-lived JVMs); the
standalone cluster's executors and daemons are checked in tests/integration/embedded/test_spark_cluster.py.
"""

from __future__ import annotations

from pathlib import Path

from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.jvm.options import JVM_OPTIONS_ENV, SPARK_JIT_OPTIONS, jvm_options


def test_the_running_broker_and_spark_driver_have_the_options(kafka_broker: KafkaCluster, spark) -> None:
    wanted = jvm_options()
    assert wanted, f"the suite sets ${JVM_OPTIONS_ENV} (conftest.py)"
    broker_args = Path(f"/proc/{kafka_broker.pid()}/cmdline").read_bytes().decode().split("\0")
    assert all(o in broker_args for o in wanted), broker_args
    jvm = spark.sparkContext._jvm
    driver_args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert all(o in driver_args for o in wanted), driver_args
    # The project's JIT thresholds reach the driver, before the user's options (the later option wins).
    positions = [driver_args.index(o) for o in [*SPARK_JIT_OPTIONS, *wanted]]
    assert positions == sorted(positions), driver_args
