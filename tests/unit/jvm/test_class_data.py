"""The Spark JVMs' class-data archive (eos_etl.jvm.class_data): built once, used whole or not at all.

Without a JVM; the suite's Spark driver and a JVM that cannot map the archive:
tests/integration/jvm/test_class_data.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from eos_etl.jvm import class_data
from eos_etl.jvm.options import SPARK_JIT_OPTIONS
from eos_etl.spark.config import spark_conf, spark_submit_conf


def _fake_archive(cache: Path, size: int, recorded: int | None) -> Path:
    archive = class_data.archive_path()
    assert archive is not None and archive.is_relative_to(cache)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"\0" * size)
    if recorded is not None:
        archive.with_suffix(".json").write_text(json.dumps({"bytes": recorded}))
    return archive


def test_only_a_whole_archive_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EOS_ETL_CACHE", str(tmp_path))
    monkeypatch.delenv("EOS_ETL_JVM_OPTIONS", raising=False)
    assert class_data.usable_archive() is None and class_data.jvm_options() == []
    # Without its record (a build still writing, or killed), or shorter than recorded: never
    # given to a JVM, which would crash mapping a truncated archive.
    archive = _fake_archive(tmp_path, 4096, recorded=None)
    assert class_data.usable_archive() is None
    archive.with_suffix(".json").write_text(json.dumps({"bytes": 8192}))
    assert class_data.usable_archive() is None
    archive.with_suffix(".json").write_text(json.dumps({"bytes": 4096}))
    assert class_data.usable_archive() == archive
    option = f"-XX:SharedArchiveFile={archive}"
    options = class_data.jvm_options()
    assert options == [option, "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    # After the JIT thresholds, before the user's own options (which win).
    monkeypatch.setenv("EOS_ETL_JVM_OPTIONS", "-Xss4m")
    for conf in (spark_conf(), spark_submit_conf()):
        assert shlex.split(conf["spark.driver.extraJavaOptions"]) == [*SPARK_JIT_OPTIONS, *options, "-Xss4m"]
        assert conf["spark.executor.extraJavaOptions"] == conf["spark.driver.extraJavaOptions"]
    # Switched off: no JVM gets it.
    monkeypatch.setenv(class_data.SWITCH_ENV, "off")
    assert class_data.jvm_options() == []
    assert shlex.split(spark_submit_conf()["spark.driver.extraJavaOptions"]) == [*SPARK_JIT_OPTIONS, "-Xss4m"]


def test_the_archive_name_follows_java_and_pyspark(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import pyspark

    monkeypatch.setenv("EOS_ETL_CACHE", str(tmp_path))
    before = class_data.fingerprint()
    assert before and class_data.archive_path().name == f"spark-{before}.jsa"
    monkeypatch.setattr(pyspark, "__version__", "0.0.1")
    assert class_data.fingerprint() != before
    monkeypatch.undo()
    monkeypatch.setenv("EOS_ETL_CACHE", str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-such-jdk"))
    assert class_data.fingerprint() is None and class_data.usable_archive() is None
    with pytest.raises(class_data.ClassDataError, match="no java found"):
        class_data.build("eos_etl.shop.jvm_training:run")
