"""A run as a client of a Spark Connect server: every wait bounded, nothing left behind on the server.

pyspark's own client retries an unreachable server for about ten minutes (and
``spark.stop()`` as long again), and waits on a server that is alive but stuck
(a long pause, SIGSTOP) without any bound: it sets no deadline. A window's run
here instead:

* retries an unavailable server for :data:`RETRY_BUDGET_S` at most
  (:func:`bounded_retries`), then fails with one error naming the server;
* is watched (:class:`ServerWatch`): a probe on a connection of its own every
  :data:`PROBE_INTERVAL_S`; a server that answered none for
  :data:`~.spark_connect.STALL_BOUND_S` ends the run with one ``error:`` line
  (exit code 1), whatever the run was waiting for;
* on SIGTERM (Airflow's ``on_kill``, a person) interrupts its operations on the
  server and releases its session before it exits, so its tasks stop within
  seconds instead of running on as orphans.

Exactly-once never depends on any of this: a window's tasks left running on the
server are fenced by the next attempt's ``init_transactions``. What it buys is
that a run ends, within a stated bound, with one clear error.

Sessions: every window of one pipeline (the session's application name) on one
day shares one session on the server (its id derived from the two), and a
client never releases it: it expires :data:`~.spark_connect.SESSION_TIMEOUT`
after its last use. Spark 4.1 keeps a Python worker factory, and a thread, per
session for the server's life (SPARK-54055): a session per window leaked one
per window, a session per pipeline and day leaks one a day, which the
supervisor's restarts between windows contain. The client and its watch's
probes share the session: watching a run adds none. Concurrent clients of one
pipeline share it too; each tags its own operations, so a terminated client
interrupts only those.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from urllib.parse import urlsplit

from .. import logging_setup
from ..errors import ConfigurationError
from ..host.ports import port_accepts
from .config import CONNECT_DEFAULT_PORT, REQUIRED_CONF, SOURCE_DIGEST_CONF, TOKEN_ENV
from .connect_probe import STALL_BOUND_S, USER_ID, probe
from .errors import SparkServerLostError
from .package_zip import source_digest

log = logging.getLogger(__name__)

#: How long a call retries an unavailable server (pyspark's default policy: about ten minutes).
RETRY_BUDGET_S = 15.0
PROBE_INTERVAL_S = 2.0
#: How long a terminated run may take to interrupt its operations and release its session.
TERM_GRACE_S = 10.0
#: Where a client of the project's own server finds its home (set for the project's Airflow): the
#: run task then makes sure the server is up and answering before each window.
HOME_ENV = "EOS_ETL_SPARK_CONNECT_HOME"
#: The Airflow connection to the server, and the variable that makes the DAGs run their windows on it.
AIRFLOW_CONN_ID = "spark_connect_default"
AIRFLOW_ROUTE_ENV = "EOS_ETL_SPARK_CONNECT_CONN_ID"


def bounded_retries():
    """pyspark's retry policy for UNAVAILABLE, with a budget of about :data:`RETRY_BUDGET_S`
    (0.1, 0.2, ... 3.2, 4, 4 s backoffs: 15.5 s) instead of ten minutes."""
    # Deferred: pyspark's Connect client and grpc load on first use (half a second); the DAGs' operators
    # import this module when Airflow parses them, for its constants only.
    from pyspark.sql.connect.client.retries import DefaultPolicy

    return DefaultPolicy(max_retries=8, initial_backoff=100, backoff_multiplier=2.0, max_backoff=4000,
                         jitter=100, min_jitter_threshold=2000, max_server_retry_delay=4000)


def where(remote: str) -> str:
    """How errors name the server: its address, never the URL's parameters (they carry the token)."""
    return f"the Spark Connect server at {urlsplit(remote).netloc}"


def with_session(remote: str, session_id: str) -> str:
    """``remote`` (``sc://host:port[/;param=value...]``) with this run's session and user ids."""
    base, sep, params = remote.partition("/;")
    ids = f"session_id={session_id};user_id={USER_ID}"
    return f"{base}/;{params};{ids}" if sep else f"{base.rstrip('/')}/;{ids}"


#: Namespace of the session ids: uuid5(namespace, "<application name>/<UTC date>").
_SESSIONS = uuid.UUID("6f0a1c9e-3b2d-5e4f-8a7b-9c0d1e2f3a4b")


def session_id(app_name: str, now: datetime | None = None) -> str:
    """The session every window of ``app_name`` shares on the server today (UTC)."""
    day = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d")
    return str(uuid.uuid5(_SESSIONS, f"{app_name}/{day}"))


def connect_session(remote: str, app_name: str = "eos-etl", conf: dict[str, str] | None = None):
    """A Spark Connect client session on ``remote`` (``sc://host:port``; the token from
    ``$SPARK_CONNECT_AUTHENTICATE_TOKEN``), watched from before its first request on (see the
    module). Only session settings apply here: the application's (master, jars, JVM options)
    are the server's. Never logs ``remote``: a URL may carry the token."""
    # Deferred, as in bounded_retries: grpc and pyspark's Connect client load on first use.
    from grpc import StatusCode
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException
    from pyspark.sql import SparkSession

    name = where(remote)
    address = urlsplit(remote)
    logging_setup.mask(os.environ.get(TOKEN_ENV), *(value for key, _, value in
                                                    (p.partition("=") for p in remote.split(";")) if key == "token"))
    if not port_accepts(address.port or CONNECT_DEFAULT_PORT, address.hostname or "localhost", timeout=5.0):
        raise ConfigurationError(f"{name} cannot be reached (python -m eos_etl spark-connect status)")
    url = with_session(remote, session_id(app_name))
    # One probe first: a wrong token, or TLS where the server speaks none (pyspark uses TLS with a token
    # for any host but "localhost"), is one error now instead of a loop of failed handshakes.
    if (reason := probe(url)) is not None:
        if reason.startswith("UNAUTHENTICATED"):
            raise ConfigurationError(f"{name} refused this client's token (${TOKEN_ENV}, or the password of the "
                                     "Airflow spark_connect connection, must be the server's)")
        tls = " (with a token pyspark speaks TLS to any host but localhost: sc://localhost for a local server)" \
            if address.hostname not in ("localhost", None) else ""
        raise ConfigurationError(f"{name} did not answer ({reason}){tls}")
    watch = ServerWatch(url, name).start()
    builder = SparkSession.builder.remote(url).appName(app_name)
    for key, value in {**(conf or {}), **REQUIRED_CONF}.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except SparkConnectGrpcException as exc:
        watch.stop()
        code = exc.getGrpcStatusCode()
        if code == StatusCode.UNAUTHENTICATED:
            raise ConfigurationError(f"{name} refused this client's token (${TOKEN_ENV}, or the password of the "
                                     "Airflow spark_connect connection, must be the server's)") from exc
        if code == StatusCode.UNAVAILABLE:
            raise ConfigurationError(f"{name} cannot be reached (python -m eos_etl spark-connect status)") from exc
        raise
    spark.client.set_retry_policies([bounded_retries()])
    spark.release_session_on_close = False  # shared by the pipeline's windows: it expires on the server
    spark._eos_etl_watch = watch  # ended with the client (close_session)
    tag = f"eos-etl-client-{uuid.uuid4().hex[:12]}"
    spark.addTag(tag)  # this process's operations, told apart from another client's in the shared session
    end_on_sigterm(spark, name, tag)
    _require_same_code(spark, name)
    return spark


def close_session(spark) -> None:
    """Stop watching, then close the client (its session stays for the pipeline's next window)."""
    watch = getattr(spark, "_eos_etl_watch", None)
    if watch is not None:
        watch.stop()
    try:
        spark.stop()
    except Exception as exc:  # noqa: BLE001 - closing a channel the server dropped
        log.warning("could not close the Spark Connect client: %s", str(exc).splitlines()[0][:200])


def _require_same_code(spark, name: str) -> None:
    """The server's Python workers run the publishing tasks with the code *they* imported when the
    server started; a client with other code would have its tasks run by that older code."""
    served = spark.conf.get(SOURCE_DIGEST_CONF, None)
    if served is None:
        log.warning("%s was not started by eos_etl (no %s): its Python workers must import this same eos_etl",
                    name, SOURCE_DIGEST_CONF)
    elif served != source_digest():
        close_session(spark)
        raise ConfigurationError(f"{name} runs other eos_etl code than this client (it started before the code "
                                 "changed): restart it (python -m eos_etl spark-connect restart)")


class ServerWatch:
    """Probes the server every :data:`PROBE_INTERVAL_S` on a connection of its own; when it answered
    none for ``bound_s``, ``on_lost(reason)`` (default: one error line, exit code 1)."""

    def __init__(self, url: str, name: str, bound_s: float = STALL_BOUND_S, on_lost=None):
        self._url = url
        self._name = name
        self.bound_s = bound_s
        self._on_lost = on_lost or self._fail
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-connect-watch", daemon=True)

    def start(self) -> "ServerWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        answered = time.monotonic()
        while not self._stopped.wait(PROBE_INTERVAL_S):
            reason = probe(self._url, min(5.0, self.bound_s / 3))
            if self._stopped.is_set():
                return
            if reason is None:
                answered = time.monotonic()
            elif time.monotonic() - answered >= self.bound_s:
                self._on_lost(reason)
                return

    def _fail(self, reason: str) -> None:
        print(f"error: {self._name} answered nothing for {self.bound_s:.0f}s ({reason}): this window failed; "
              "what its tasks left open is fenced by the next attempt", file=sys.stderr, flush=True)
        os._exit(1)


def end_on_sigterm(spark, name: str, tag: str) -> None:
    """On SIGTERM: interrupt this process's operations (tagged ``tag``) on the server and exit 143
    (within :data:`TERM_GRACE_S` whatever the server does)."""
    def terminate() -> None:
        threading.Timer(TERM_GRACE_S, os._exit, (143,)).start()
        print(f"error: terminated (SIGTERM): this window's operations on {name} are interrupted; what its "
              "tasks left open is fenced by the next attempt", file=sys.stderr, flush=True)
        try:
            spark.interruptTag(tag)
        except Exception:  # noqa: BLE001 - a server that is gone has nothing left to interrupt
            pass
        os._exit(143)

    # Signal handlers run on the main thread, which is waiting on the server: the work goes to a thread.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=terminate, daemon=True).start())


def server_lost(exc: BaseException, remote: str) -> SparkServerLostError | None:
    """The one error for a Connect call that failed because the server went away (unavailable after
    the bounded retries, or gone mid-stream); None for any other failure."""
    # Deferred, as in bounded_retries: grpc and pyspark's Connect client load on first use.
    from grpc import StatusCode
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    if isinstance(exc, SparkConnectGrpcException) and exc.getGrpcStatusCode() in (
            StatusCode.UNAVAILABLE, StatusCode.DEADLINE_EXCEEDED, StatusCode.CANCELLED):
        return SparkServerLostError(f"{where(remote)} became unavailable ({exc.getGrpcStatusCode().name}) and did "
                                    f"not come back within {RETRY_BUDGET_S:.0f}s: this window failed; what its "
                                    "tasks left open is fenced by the next attempt")
    return None
