"""The fixes of Spark's bugs (eos_etl.jvm.spark_patches) in real JVMs: built from the pinned Spark's sources,
loaded ahead of Spark's jars by the suite's Spark driver, and each bug gone where Spark's own class has it.
Their rules without a JVM: tests/unit/jvm/test_spark_patches.py. The Spark Connect server under client kills:
tests/lab/faults/test_connect_kills.py."""

from __future__ import annotations

import signal
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from eos_etl.jvm import spark_patches
from eos_etl.jvm.java_binary import java_binary

PROGRAM = Path(__file__).parent / "programs" / "InterruptRace.scala"
ROUNDS = 300


def _wheel_jars() -> Path:
    return spark_patches._wheel()[1]


def test_the_jar_is_built_from_the_pinned_sources_and_only_replaces_sparks_classes():
    # This machine's (a fresh clone builds it with the suite's first Spark JVM: sources fetched, diffs applied,
    # compiled by the wheel's scalac).
    jar = spark_patches.jar()
    assert jar is not None and jar == spark_patches.jar_path() and jar.is_file()
    names = set(zipfile.ZipFile(jar).namelist())
    assert {p.main_class for p in spark_patches.PATCHES} <= names
    spark_classes = set()
    for artifact in ("spark-core_2.13", "spark-sql_2.13"):
        spark_classes |= set(zipfile.ZipFile(spark_patches._wheel_jar(artifact)).namelist())
    assert names <= spark_classes
    assert spark_patches.class_path_conf() == {"spark.driver.extraClassPath": str(jar),
                                               "spark.executor.extraClassPath": str(jar)}


@pytest.fixture(scope="module")
def interrupt_race(tmp_path_factory) -> Path:
    """The race's program, compiled with the wheel's own Scala compiler."""
    out = tmp_path_factory.mktemp("interrupt-race")
    subprocess.run([str(java_binary()), "-Xss4m", "-cp", str(_wheel_jars() / "*"), "scala.tools.nsc.Main",
                    "-usejavacp", "-nowarn", "-d", str(out), str(PROGRAM)], check=True, timeout=300)
    return out


def _race(program: Path, class_path: list[str], seed: int, cwd: Path) -> subprocess.CompletedProcess:
    cp = ":".join([*class_path, str(_wheel_jars() / "*"), str(program)])
    return subprocess.run([str(java_binary()), "-Xmx256m", "-cp", cp, "org.apache.spark.eosetl.InterruptRace",
                           str(ROUNDS), str(seed)], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_an_interrupt_mid_write_crashes_sparks_own_stream_and_not_the_patched_one(interrupt_race, tmp_path):
    # Spark's own class: the JVM dies of the SIGSEGV of the crash report, in the copy into the freed buffer.
    # Measured: 15 seeds of 16 died within 8 interrupts, one lived through 300: up to five seeds are run.
    crashes = []
    for seed in range(1, 6):
        proc = _race(interrupt_race, [], seed, tmp_path)
        if proc.returncode != 0:
            crashes.append((seed, proc))
            break
    assert crashes, "Spark's own DirectByteBufferOutputStream lived through 5 x 300 interrupts: is the bug fixed?"
    seed, proc = crashes[0]
    # HotSpot writes its crash report and aborts (SIGABRT).
    crashed = proc.returncode == -signal.SIGABRT and "SIGSEGV" in proc.stdout and "arraycopy" in proc.stdout
    assert crashed, proc.stdout[-2000:]
    # The patched class, first on the class path as on every Spark JVM here: every interrupt survived.
    jar = str(spark_patches.jar())
    for seed in (1, 2):
        proc = _race(interrupt_race, [jar], seed, tmp_path)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert proc.stdout.count("round ") == ROUNDS


def test_the_suites_spark_driver_loads_the_patched_classes(spark):
    jvm = spark.sparkContext._jvm
    for patch in spark_patches.PATCHES:
        name = patch.main_class.removesuffix(".class").replace("/", ".")
        where = jvm.java.lang.Class.forName(name).getProtectionDomain().getCodeSource().getLocation().getPath()
        assert where == str(spark_patches.jar()), (name, where)


def test_a_failed_python_arrow_task_frees_its_inputs_memory(spark):
    """Spark's own PythonArrowInput freed a task's input batch only at the end of its input: each failed
    attempt left its buffers allocated for the JVM's life (measured with Spark's class, this test's jobs:
    921,600 bytes more after each, never freed)."""

    def fail_after_first_batch(batches):
        next(iter(batches))
        raise RuntimeError("a task that fails mid-input")

    allocator = spark.sparkContext._jvm.org.apache.spark.sql.util.ArrowUtils.rootAllocator()
    rows = spark.range(0, 200_000, numPartitions=2).selectExpr("id", "repeat('x', 20) AS payload")
    before = allocator.getAllocatedMemory()
    for _ in range(3):
        with pytest.raises(Exception, match="a task that fails mid-input"):
            rows.mapInArrow(fail_after_first_batch, "id long").collect()
    # A failed job's collect returns while Spark still kills its other task: that one frees at its end.
    deadline = time.monotonic() + 30
    while allocator.getAllocatedMemory() != before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert allocator.getAllocatedMemory() == before
