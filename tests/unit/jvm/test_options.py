"""$EOS_ETL_JVM_OPTIONS reaches every JVM the project starts (eos_etl.jvm.options): how the options
are split and merged, without a JVM. In the running broker and Spark driver:
tests/integration/jvm/test_options.py.

The suite runs with it set (tests/conftest.py: C1 only, for short-lived JVMs); the
standalone cluster's executors and daemons are checked in tests/integration/embedded/test_spark_cluster.py.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from eos_etl.embedded.kafka_cluster import KafkaCluster
from eos_etl.jvm.options import JVM_OPTIONS_ENV, SPARK_JIT_OPTIONS, jvm_options
from eos_etl.spark.config import spark_conf, spark_submit_conf


def test_options_are_split_like_a_shell_and_a_users_spark_conf_wins(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("EOS_ETL_CLASS_DATA", "off")  # its archive option sits in between: test_class_data
    monkeypatch.setenv(JVM_OPTIONS_ENV, "-XX:TieredStopAtLevel=1 '-Dnote=two words'")
    assert jvm_options() == ["-XX:TieredStopAtLevel=1", "-Dnote=two words"]
    # The project's JIT thresholds first, so the user's options win; Spark splits them as a shell would.
    joined = f"{shlex.join(SPARK_JIT_OPTIONS)} -XX:TieredStopAtLevel=1 '-Dnote=two words'"
    for conf in (spark_conf(), spark_submit_conf()):
        assert conf["spark.driver.extraJavaOptions"] == conf["spark.executor.extraJavaOptions"] == joined
    assert spark_conf({"spark.driver.extraJavaOptions": "-Xss4m"})["spark.driver.extraJavaOptions"] == "-Xss4m"
    args = KafkaCluster(home=tmp_path, port=1).jvm_args(tmp_path / "log4j2.properties")
    assert args[args.index("-cp") - 2:args.index("-cp")] == ["-XX:TieredStopAtLevel=1", "-Dnote=two words"]

    monkeypatch.delenv(JVM_OPTIONS_ENV)
    args = KafkaCluster(home=tmp_path, port=1).jvm_args(tmp_path / "log4j2.properties")
    assert jvm_options() == [] and args[args.index("-cp") - 1].startswith("-Dlog4j2.configurationFile=")
    assert spark_submit_conf()["spark.executor.extraJavaOptions"] == shlex.join(SPARK_JIT_OPTIONS)
