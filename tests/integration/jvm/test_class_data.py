"""The Spark JVMs' class-data archive (eos_etl.jvm.class_data) in real JVMs: the suite's Spark driver
maps it, a JVM that cannot map it says nothing on stdout. Its rules without a JVM:
tests/unit/jvm/test_class_data.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from eos_etl.jvm import class_data


def test_the_suites_spark_driver_maps_this_machines_archive(spark) -> None:
    # The spark fixture builds the archive before it starts the session (make setup already did).
    archive = class_data.usable_archive()
    assert archive is not None and archive.stat().st_size > 10 * 2**20
    jvm_pid = spark.sparkContext._gateway.proc.pid
    driver_args = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
                       .getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in driver_args
    # HotSpot maps the archive it accepted; one it refused (wrong JDK, flags) would not be in the maps.
    assert str(archive) in Path(f"/proc/{jvm_pid}/maps").read_text()
    assert json.loads(archive.with_suffix(".json").read_text())["fingerprint"] == class_data.fingerprint()


def test_a_jvm_that_cannot_map_the_archive_says_nothing_on_stdout(spark, tmp_path) -> None:
    # Another class path (another checkout sharing the cache) makes HotSpot refuse the archive, and
    # it says so on stdout by default, where run-window prints its JSON summary.
    archive = class_data.usable_archive()
    assert archive is not None
    java = ["java", f"-XX:SharedArchiveFile={archive}", "-cp", str(tmp_path), "-version"]
    loud = subprocess.run(java, capture_output=True, text=True, timeout=60)
    assert "Unable to use shared archive" in loud.stdout
    quiet = subprocess.run([java[0], *class_data.jvm_options(), *java[2:]], capture_output=True, text=True,
                           timeout=60)
    assert quiet.returncode == 0 and quiet.stdout == ""
