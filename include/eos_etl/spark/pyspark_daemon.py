"""The Python worker daemon of this machine's Spark executors (``spark.python.daemon.module``):
pyspark's own daemon, started after pyspark's archives are taken off ``sys.path``.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip``, py4j's zip and the spark-core jar first on
the Python workers' path. With pyspark installed as a package (this project's venv), SPARK_HOME
is that package, so the very same files are also importable, byte-compiled, from the package
itself. From the archives Python compiles pyspark from source in every worker, and pyspark's
``importlib.invalidate_caches()``, run once per task, re-reads every archive's directory (what
both cost: docs/performance-history.md, "What a fresh JVM and a fresh Python worker pay").

An archive is dropped only when it lies inside the installed pyspark package and what it holds
(``pyspark`` or ``py4j``) stays importable without it: the code the workers run is the same. On
any other layout (a Spark distribution without pyspark installed) the path is left as Spark set it.
Only sessions whose executors run on this machine use this module (:func:`.spark.spark_conf`):
they run this venv's Python, so this module is importable before pyspark is.

With ``EOS_ETL_PYTHON_DAEMON_IDLE_EXIT_S`` set (the Spark Connect server sets it), the daemon exits
once it has had no worker for that long: see :func:`exit_when_idle`.

Each forked worker runs :func:`worker`, pyspark's own but for one case: a worker whose JVM side
closed the connection (a session stopping while the worker waits for its next task, a task the JVM
abandoned) ends quietly. Over a Unix socket (``spark.python.unix.domain.socket.enabled``, the
project's default) the worker's last flush then fails at once with ``EPIPE``, and pyspark's daemon
prints "PySpark daemon failed to flush the output to the worker process" with a traceback into a run's
log after the run succeeded; over TCP the same write is accepted by the kernel and lost silently.
Nobody is listening for that output any more, which is how pyspark's own worker treats a closed socket
when it writes an error (``pyspark.util.handle_worker_exception``).
"""

from __future__ import annotations

import importlib.machinery
import os
import signal
import sys
import threading
import time
import traceback

from ..host.process import ProcStat, all_pids

_ARCHIVE_SUFFIXES = (".zip", ".jar")
# Seconds without a single worker after which the daemon exits (unset: never; embedded.spark_connect sets it).
IDLE_EXIT_ENV = "EOS_ETL_PYTHON_DAEMON_IDLE_EXIT_S"


def _package_dir(name: str, path: list[str]) -> str | None:
    """The directory of package ``name`` as found on ``path`` (not importing it), if it is a directory."""
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None  # absent, or itself inside an archive
    return os.path.dirname(spec.origin)


def redundant_archives(path: list[str]) -> list[str]:
    """The entries of ``path`` that are archives inside the installed pyspark package, when pyspark
    and py4j are importable without every one of them; else nothing."""
    plain = [p for p in path if not p.endswith(_ARCHIVE_SUFFIXES)]
    pyspark_dir = _package_dir("pyspark", plain)
    if pyspark_dir is None or _package_dir("py4j", plain) is None:
        return []
    inside = os.path.join(pyspark_dir, "")
    return [p for p in path if p.endswith(_ARCHIVE_SUFFIXES) and os.path.abspath(p).startswith(inside)]


def child_count(pid: int) -> int:
    """How many processes have ``pid`` as their parent."""
    return sum(1 for child in all_pids() if (stat := ProcStat.read(child)) is not None and stat.ppid == pid)


def exit_when_idle(idle_s: float, poll_s: float = 2.0) -> None:
    """SIGTERM this daemon (pyspark's clean shutdown) once it has had no worker for ``idle_s`` seconds.

    A long-lived Spark Connect server on Spark 4.1 starts a daemon per client session and never
    stops it (SPARK-54055). Spark stops workers idle for a minute; their daemon then idles here and
    exits. If its session asks for a worker again, Spark finds the daemon gone and starts another."""
    me, idle_since = os.getpid(), None
    while True:
        time.sleep(poll_s)
        if child_count(me):
            idle_since = None
        elif idle_since is None:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since >= idle_s:
            os.kill(me, signal.SIGTERM)
            return


#: What a write to a connection its peer closed raises.
_PEER_GONE = (BrokenPipeError, ConnectionResetError)


def worker(sock, authenticated: bool) -> int:
    """``pyspark.daemon.worker`` (pyspark 4.1), except that a last flush refused because the JVM closed the
    connection is not reported (see the module's docstring); any other flush failure is, as pyspark does."""
    # Deferred, both: only the daemon's forked workers run this; the driver imports this module's helpers.
    import pyspark.daemon as daemon
    from pyspark.serializers import UTF8Deserializer, write_with_length

    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a stack trace before exit, as pyspark's
    buffer_size = int(os.environ.get("SPARK_BUFFER_SIZE", 65536))
    infile = os.fdopen(os.dup(sock.fileno()), "rb", buffer_size)
    outfile = os.fdopen(os.dup(sock.fileno()), "wb", buffer_size)
    if not authenticated:
        accepted = UTF8Deserializer().loads(infile) == os.environ["PYTHON_WORKER_FACTORY_SECRET"]
        write_with_length(b"ok" if accepted else b"err", outfile)
        outfile.flush()
        if not accepted:
            sock.close()
            return 1
    exit_code = 0
    try:
        daemon.worker_main(infile, outfile)
    except SystemExit as exc:
        exit_code = daemon.compute_real_exit_code(exc.code)
    finally:
        try:
            outfile.flush()
        except _PEER_GONE:
            exit_code = exit_code or 1  # the connection is gone: never reused
        except Exception:  # noqa: BLE001 - as Spark's own daemon: reported, the worker's exit code kept
            print("PySpark daemon failed to flush the output to the worker process:\n" + traceback.format_exc(),
                  file=sys.stderr)
    return exit_code


def main() -> None:
    if idle_s := float(os.environ.get(IDLE_EXIT_ENV) or 0):
        threading.Thread(target=exit_when_idle, args=(idle_s,), name="idle-exit", daemon=True).start()
    drop = set(redundant_archives(sys.path))
    sys.path[:] = [p for p in sys.path if p not in drop]
    # Forget this package: the forked workers import it afresh from their own path, where the code a
    # spark-submit ships (--py-files) comes first, exactly as under pyspark's own daemon.
    for name in [n for n in sys.modules if n == "eos_etl" or n.startswith("eos_etl.")]:
        del sys.modules[name]
    # Deferred: only the daemon process runs pyspark's daemon; the driver imports this module's helpers.
    import pyspark.daemon as daemon  # reads the worker module from sys.argv, as when run by Spark

    daemon.worker = worker  # what daemon.manager() runs in each forked worker
    daemon.manager()


if __name__ == "__main__":
    main()
