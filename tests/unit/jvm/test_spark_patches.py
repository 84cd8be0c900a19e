"""The Spark patches' rules without a JVM (eos_etl.jvm.spark_patches): diffs applied exactly or not at all, a
wheel other than the one they were written for refused, the switch. In real JVMs:
tests/integration/jvm/test_spark_patches.py."""

from __future__ import annotations

import zipfile

import pytest

from eos_etl.jvm import spark_patches
from eos_etl.jvm.spark_patches import SparkPatchError, apply_diff

SOURCE = "".join(f"line {i}\n" for i in range(1, 21))
DIFF = """--- a/f.scala
+++ b/f.scala
@@ -2,3 +2,4 @@
 line 2
-line 3
+line three
+line 3.5
 line 4
@@ -10,2 +11,2 @@
 line 10
-line 11
+line eleven
"""


def test_a_diff_replaces_exactly_its_hunks_lines():
    out = apply_diff(SOURCE, DIFF).splitlines()
    assert out[:5] == ["line 1", "line 2", "line three", "line 3.5", "line 4"]
    assert out[10:13] == ["line 10", "line eleven", "line 12"]
    assert len(out) == 21 and out[-1] == "line 20"


@pytest.mark.parametrize("changed", ["line 3\n", "line 4\n", "line 11\n"])
def test_a_source_that_differs_from_the_diffs_context_is_refused(changed):
    with pytest.raises(SparkPatchError, match="not the one the diff was written against"):
        apply_diff(SOURCE.replace(changed, "something else\n"), DIFF)


def test_a_diff_past_the_end_of_the_source_is_refused():
    with pytest.raises(SparkPatchError):
        apply_diff("line 1\nline 2\n", DIFF)


def test_the_installed_wheel_is_the_one_the_patches_were_written_for():
    spark_patches.check_wheel()


def test_a_wheel_with_another_class_is_refused(tmp_path, monkeypatch):
    version, jars = spark_patches._wheel()
    for patch in spark_patches.PATCHES:
        with zipfile.ZipFile(tmp_path / f"{patch.artifact}-{version}.jar", "w") as z:
            z.writestr(patch.main_class, b"another Spark's class")
    monkeypatch.setattr(spark_patches, "_wheel", lambda: (version, tmp_path))
    with pytest.raises(SparkPatchError, match="written for Spark"):
        spark_patches.check_wheel()
    monkeypatch.setattr(spark_patches, "_wheel", lambda: ("9.9.9", jars))
    with pytest.raises(SparkPatchError, match="pyspark 9.9.9"):
        spark_patches.check_wheel()


def test_switched_off_no_jar_and_no_class_path(monkeypatch):
    monkeypatch.setenv(spark_patches.SWITCH_ENV, "off")
    assert spark_patches.jar() is None and spark_patches.class_path_conf() == {}


def test_the_jars_name_changes_with_a_diff(monkeypatch, tmp_path):
    before = spark_patches._key()
    for patch in spark_patches.PATCHES:
        (tmp_path / patch.diff).write_bytes((spark_patches.DIFFS / patch.diff).read_bytes() + b" \n")
    monkeypatch.setattr(spark_patches, "DIFFS", tmp_path)
    assert spark_patches._key() != before

