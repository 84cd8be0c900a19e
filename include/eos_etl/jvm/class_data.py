"""A class-data-sharing archive (HotSpot AppCDS) for the Spark JVMs this machine starts.

Every window is a fresh Spark application: its JVM loads, parses and verifies some twenty
thousand classes from Spark's jars before and while it plans the job, once per window. A dynamic
CDS archive holds those classes already parsed and verified; a JVM started with
``-XX:SharedArchiveFile`` maps it instead (what that saves a window: docs/performance-history.md,
"What every window pays before its first record").

The archive is built once per machine (``make setup``, ``eos-etl jvm-archive``, ``make bench``):
a small training application (:mod:`eos_etl.spark.class_data_training`: a workload taking the Spark SQL, Arrow and
Python-worker path a window takes, no broker needed; the shop's runs its own transform) runs with
``-XX:ArchiveClassesAtExit`` and HotSpot writes the classes it loaded when its JVM exits. It is
written to a temporary name and renamed into place only after that JVM exited cleanly: a truncated
archive crashes the JVM that maps it (SIGBUS, tried), so only whole archives ever carry the name
:func:`jvm_options` looks for, and their size is checked against the one recorded beside them. The
name hashes what HotSpot checks before using an archive (the java binary and its release, pyspark's
version and jars), so an upgraded JDK or Spark looks for, and without a rebuild runs without, a new
one. A JVM given an archive it cannot use (other flags, such as ``-XX:-UseCompressedOops``) runs
without it, as it does when the file is absent (an executor on another machine): sharing only ever
saves work.

``EOS_ETL_CLASS_DATA=off`` starts every Spark JVM without it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from .. import paths
from ..arguments import switch_on
from ..errors import StackError
from . import spark_patches
from .build_lock import build_lock
from .java_binary import java_binary

log = logging.getLogger(__name__)

#: The program that trains an archive (run in a process of its own: its JVM must exit to write it).
TRAINER = "eos_etl.spark.class_data_training"  # run by name: the JVMs' package stands below Spark's

SWITCH_ENV = "EOS_ETL_CLASS_DATA"

#: Training, the archive's dump at exit included (~10 s of the total on two cores), must end by then.
BUILD_TIMEOUT_S = 600.0


class ClassDataError(StackError):
    """The class-data archive could not be built."""


def enabled() -> bool:
    return switch_on(SWITCH_ENV)


def fingerprint() -> str | None:
    """What must not change for an archive to stay usable, hashed; None without a java."""
    import pyspark  # deferred: every JVM start (jvm.options) imports this module; only the fingerprint needs pyspark

    java = java_binary()
    if java is None:
        return None
    release = java.parent.parent / "release"
    spark_jars = Path(pyspark.__file__).parent / "jars"
    digest = hashlib.sha256()
    digest.update(f"{java}\0{java.stat().st_size}\0{java.stat().st_mtime_ns}\0".encode())
    digest.update(release.read_bytes() if release.is_file() else b"")
    # The archive records the class path: another checkout (another venv) cannot map this one.
    digest.update(f"\0{pyspark.__version__}\0{spark_jars}\0".encode())
    for jar in sorted(spark_jars.glob("*.jar")):
        digest.update(f"{jar.name}\0{jar.stat().st_size}\0".encode())
    # The patches' jar comes first on the class path (.spark_patches): each build of it, another archive.
    digest.update(f"\0{spark_patches.jar_path() or ''}".encode())
    return digest.hexdigest()[:16]


def archive_path(key: str | None = None) -> Path | None:
    key = key or fingerprint()
    return paths.cache_dir() / "class-data" / f"spark-{key}.jsa" if key else None


def _record_path(archive: Path) -> Path:
    return archive.with_suffix(".json")


def usable_archive() -> Path | None:
    """This machine's archive for its java and pyspark, when switched on, built and whole."""
    if not enabled():
        return None
    archive = archive_path()
    if archive is None or not archive.is_file():
        return None
    try:
        recorded = json.loads(_record_path(archive).read_text())["bytes"]
    except (OSError, ValueError, KeyError):
        return None
    return archive if archive.stat().st_size == recorded else None


def jvm_options() -> list[str]:
    """``-XX:SharedArchiveFile=...`` (quietly) when :func:`usable_archive` finds one, else nothing."""
    archive = usable_archive()
    # -Xlog:cds...=off: a JVM that cannot map the archive runs without it, and must not say so on
    # stdout, where a command's JSON goes.
    return [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"] if archive else []


def build(workload: str, *, force: bool = False) -> Path:
    """Build this machine's archive unless a whole one is there; return its path.

    ``workload``: ``module:function`` run with the training SparkSession; the closer it is to the
    real jobs, the more of their classes the archive holds (training workloads compared:
    docs/performance-history.md); the shop's trains on its own transform over generated purchases. One builder
    at a time (a lock file beside it); a second caller waits, then finds it built."""
    key = fingerprint()
    if key is None:
        raise ClassDataError("no java found (JAVA_HOME or PATH): cannot build the class-data archive")
    archive = archive_path(key)
    with build_lock(archive.parent, ClassDataError, "the class-data archive"):
        if not force and usable_archive() == archive:
            return archive
        for leftover in archive.parent.glob("*.partial"):  # of a builder killed mid-way (we hold the lock)
            leftover.unlink(missing_ok=True)
        partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
        t0 = time.monotonic()
        log.info("building the Spark JVM class-data archive %s (once per machine, about 30 s)", archive)
        env = {**os.environ, SWITCH_ENV: "off"}  # trained from the JDK's own archive, not a previous one
        try:
            proc = subprocess.run([sys.executable, "-m", TRAINER, str(partial), workload], env=env, capture_output=True,
                                  text=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            partial.unlink(missing_ok=True)
            raise ClassDataError(f"training the class-data archive took over {BUILD_TIMEOUT_S:.0f}s") from exc
        if proc.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
            raise ClassDataError(f"training the class-data archive failed (exit {proc.returncode}): {tail}")
        _record_path(archive).write_text(json.dumps({"bytes": partial.stat().st_size, "fingerprint": key}))
        partial.replace(archive)  # atomic: a JVM maps the old archive or the new one, never half of one
        for stale in archive.parent.glob("spark-*.jsa"):
            if stale != archive:
                stale.unlink(missing_ok=True)
                _record_path(stale).unlink(missing_ok=True)
        log.info("class-data archive %s built in %.0fs (%.0f MB)", archive, time.monotonic() - t0,
                 archive.stat().st_size / 2**20)
        return archive
