"""The in-run face of the replica check: a driver thread that cancels the run's own Spark jobs once its
outputs stayed below ``min.insync.replicas`` for ``grace_s``, so the run fails with
:class:`~eos_etl.engine.errors.NotEnoughReplicasError` instead of whatever the tasks ran into. The probe
and the reasons are :mod:`eos_etl.engine.planning.replicas`'s, whose check the preflight runs before a
run reads anything.
"""

from __future__ import annotations

import logging
import threading
import time

from ...kafka.connection import KafkaConnection
from ..errors import NotEnoughReplicasError
from ..planning.replicas import GRACE_S, PROBE_INTERVAL_S, ReplicaProbe, shortfall_error
from .connect_route import cancel_jobs

log = logging.getLogger(__name__)


class ReplicaGuard:
    """While a Spark job publishes: cancel it once the outputs stayed unwritable for ``grace_s``.

    Usage::

        with AttemptTracker(spark, run_id) as attempts, \
                ReplicaGuard(spark, connection, output_topics, group=attempts.group) as guard:
            try:
                rows = df.collect()
            except Exception as exc:
                guard.raise_if_tripped(exc)
                raise
    """

    def __init__(self, spark, connection: KafkaConnection, topics, *, group: str, grace_s: float = GRACE_S,
                 interval_s: float = PROBE_INTERVAL_S):
        """``group``: the job group (classic) or operation tag (Spark Connect) of the jobs to cancel, the
        run's own (:attr:`~.task_attempts.AttemptTracker.group`)."""
        self._spark = spark
        self.group = group
        self._probe = ReplicaProbe(connection, topics)
        self.grace_s = grace_s
        self.interval_s = interval_s
        self.tripped: NotEnoughReplicasError | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="replica-guard", daemon=True)

    def __enter__(self) -> "ReplicaGuard":
        try:
            self._probe.min_insync_replicas()  # while the cluster is healthy (checked by the preflight)
        except Exception as exc:  # noqa: BLE001 - an unguarded run still works; say so
            log.warning("replica guard off: cannot read the outputs' min.insync.replicas: %s", exc)
            return self
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    def _watch(self) -> None:
        short_since: float | None = None
        while not self._stop.wait(self.interval_s):
            try:
                short, live, down = self._probe.shortfalls()
            except Exception:  # noqa: BLE001 - a failed probe proves nothing either way
                log.debug("replica probe failed", exc_info=True)
                continue
            if not short:
                if short_since is not None:
                    log.info("output partitions writable again")
                short_since = None
                continue
            now = time.monotonic()
            if short_since is None:
                short_since = now
                log.warning("output partitions below min.insync.replicas (brokers not answering: %s); "
                            "cancelling the run if it lasts %.0fs", down, self.grace_s)
            if now - short_since >= self.grace_s and not self._stop.is_set():
                self.tripped = shortfall_error(short, live, down, now - short_since, "The run was cancelled.")
                log.error("%s", self.tripped)
                cancel_jobs(self._spark, self.group)
                return

    def raise_if_tripped(self, cause: BaseException) -> None:
        if self.tripped is not None:
            raise self.tripped from cause
