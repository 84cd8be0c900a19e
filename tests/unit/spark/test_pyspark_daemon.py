"""The executors' Python worker daemon (eos_etl.spark.pyspark_daemon): workers import pyspark
from the installed package, not from the archives Spark puts first on their path.

Without Spark; Spark's own workers: tests/integration/spark/test_pyspark_daemon.py."""

from __future__ import annotations

import importlib
import os
import zipfile
from pathlib import Path

from eos_etl.spark.config import spark_conf
from eos_etl.spark.pyspark_daemon import redundant_archives


def _package(root: Path, name: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")


def _archive(path: Path, *packages: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        for name in packages:
            z.writestr(f"{name}/__init__.py", "")
    return str(path)


def test_archives_inside_the_installed_pyspark_are_dropped_only_when_it_stays_importable(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    _package(site, "pyspark")
    lib = site / "pyspark" / "python" / "lib"
    archives = [_archive(lib / "pyspark.zip", "pyspark"), _archive(lib / "py4j-src.zip", "py4j"),
                _archive(site / "pyspark" / "jars" / "spark-core.jar", "pyspark")]
    elsewhere = _archive(tmp_path / "files" / "user-code.zip", "mine")
    path = [*archives, elsewhere, str(site)]

    # py4j only in its archive: taking the archives off would break the workers' imports.
    assert redundant_archives(path) == []
    _package(site, "py4j")
    importlib.invalidate_caches()  # the finder of site-packages listed it before py4j was there
    assert redundant_archives(path) == archives  # a user's own archive stays

    # A Spark distribution without pyspark installed: its archives are all there is.
    assert redundant_archives([*archives, str(tmp_path / "empty")]) == []


def test_machine_local_sessions_use_the_daemon_and_a_users_choice_wins() -> None:
    assert spark_conf(master="local[2]")["spark.python.daemon.module"] == "eos_etl.spark.pyspark_daemon"
    assert spark_conf(master="spark://127.0.0.1:7077")["spark.python.daemon.module"] == "eos_etl.spark.pyspark_daemon"
    # Executors on other machines may not have this package installed before their first task.
    assert "spark.python.daemon.module" not in spark_conf(master="spark://spark-master:7077")
    assert spark_conf({"spark.python.daemon.module": "pyspark.daemon"}, master="local[2]")[
        "spark.python.daemon.module"] == "pyspark.daemon"


_WORKER_OF_A_CLOSED_CONNECTION = """
import socket, sys
import pyspark.daemon
from eos_etl.spark import pyspark_daemon
worker = pyspark_daemon.worker if sys.argv[1] == "project" else pyspark.daemon.worker  # else: "theirs"
jvm, mine = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
jvm.close()  # the JVM's side is gone: a session stopped while its worker waited for the next task
print("exit", worker(mine, True))
"""


def test_a_worker_whose_jvm_closed_the_connection_ends_without_a_traceback() -> None:
    """pyspark's worker reads EOF, writes its error for the JVM, and its last flush fails with EPIPE on the
    Unix socket: pyspark's daemon prints that with a traceback into the run's log; the project's ends quietly."""
    import subprocess
    import sys

    def run(which: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", _WORKER_OF_A_CLOSED_CONNECTION, which], capture_output=True,
                              text=True, timeout=60, env={**os.environ, "SPARK_REUSE_WORKER": "1"})

    theirs = run("theirs")
    assert "PySpark daemon failed to flush the output to the worker process" in theirs.stderr, theirs.stderr
    assert "BrokenPipeError" in theirs.stderr and theirs.stdout.strip() == "exit -1"
    ours = run("project")
    assert ours.stderr == "" and ours.stdout.strip() == "exit -1", (ours.stdout, ours.stderr)
