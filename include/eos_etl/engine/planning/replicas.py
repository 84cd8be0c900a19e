"""Whether a run's outputs can reach ``min.insync.replicas``: the probe, and the preflight's check.

The producer writes with ``acks=all``: a write counts once
``min.insync.replicas`` copies have it. With too many brokers gone (two of
three on a 3-node cluster with min ISR 2, which in KRaft combined mode also
loses the controller quorum) nothing can be acknowledged and no transaction
can commit; every client call waits out its timeout, Spark retries the tasks
for minutes, and the run would end with a misleading "cannot reach Kafka" or
a timeout. So the driver probes every broker the cluster's metadata names,
each over its own connection, and counts per output partition the replicas
on brokers that answer:

* before the run (:func:`require_writable`) a shortfall that lasts
  ``grace_s`` is the error, before anything is read;
* during the run (:class:`~eos_etl.engine.tasks.replica_guard.ReplicaGuard`, a driver thread, with the
  same probe) a shortfall that
  lasts ``grace_s`` cancels the run's own Spark jobs (its job group, or on
  Spark Connect its operation tag: never another run's or a validation's
  beside it in the same application or session), and the run fails with
  :class:`NotEnoughReplicasError` instead of whatever the tasks ran into.

Stopping is safe: the open transactions are never committed (the broker, or
the next attempt's ``init_transactions``, aborts them), so nothing becomes
visible and the group's offsets stay where they were. One broker down (two
of three replicas live) is not a shortfall: runs ride that out. A one-broker
cluster is not guarded (its restart is ridden out as before).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from ...kafka.admin import ClusterAdmin
from ...kafka.connection import KafkaConnection
from ..errors import NotEnoughReplicasError

log = logging.getLogger(__name__)

#: How long a shortfall must last before it is an error: longer than a broker's
#: restart (a few seconds), far shorter than the clients' own timeouts.
GRACE_S = 15.0
PROBE_TIMEOUT_S = 3.0
PROBE_INTERVAL_S = 2.0


@dataclass(frozen=True)
class Shortfall:
    """An output partition with fewer replicas on answering brokers than its min ISR."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    live: tuple[int, ...]
    min_insync_replicas: int

    def describe(self) -> str:
        return (f"{self.topic}[{self.partition}] has {len(self.live)} of its {len(self.replicas)} replicas "
                f"on answering brokers, needs {self.min_insync_replicas}")


class ReplicaProbe:
    """Which output partitions cannot take an acks=all write now."""

    def __init__(self, connection: KafkaConnection, topics: tuple[str, ...] | list[str]):
        self.connection = connection
        self.topics = list(dict.fromkeys(topics))
        self._min_isr: dict[str, int] | None = None

    def _client(self, bootstrap: str) -> AdminClient:
        conf = self.connection.client_config()
        conf.update({"bootstrap.servers": bootstrap, "log_level": 0, "socket.connection.setup.timeout.ms": "2000"})
        return AdminClient(conf)

    def _answers(self, address: str) -> bool:
        # A metadata request: its client may be dropped as soon as it timed out. (Only admin
        # requests to a group coordinator must not time out in a living client, see kafka/acls.py.)
        try:
            self._client(address).list_topics(topic=self.topics[0], timeout=PROBE_TIMEOUT_S)
            return True
        except Exception:  # noqa: BLE001 - any failure means this broker cannot serve a write now
            return False

    def min_insync_replicas(self) -> dict[str, int]:
        """Per output topic (read once, while the cluster answers)."""
        if self._min_isr is None:
            states = ClusterAdmin(self.connection).topic_states(self.topics)
            self._min_isr = {t: s.min_insync_replicas for t, s in states.items()}
        return self._min_isr

    def shortfalls(self) -> tuple[list[Shortfall], list[int], list[int]]:
        """(short partitions, brokers answering, brokers not answering); ([], [], []) when not guarded."""
        try:
            md = self._client(self.connection.bootstrap_servers).list_topics(timeout=PROBE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - no broker answers at all: not this guard's diagnosis
            return [], [], []
        if len(md.brokers) < 2:
            return [], [], []
        min_isr = self.min_insync_replicas()
        ids = sorted(md.brokers)
        with ThreadPoolExecutor(len(ids)) as pool:
            answers = dict(zip(ids, pool.map(lambda b: self._answers(f"{md.brokers[b].host}:{md.brokers[b].port}"),
                                             ids), strict=True))
        live = {b for b, ok in answers.items() if ok}
        short = []
        for topic in self.topics:
            tmd = md.topics.get(topic)
            if tmd is None or topic not in min_isr:
                continue
            for p, pmd in sorted(tmd.partitions.items()):
                replicas = tuple(pmd.replicas)
                on_live = tuple(r for r in replicas if r in live)
                if len(on_live) < min_isr[topic]:
                    short.append(Shortfall(topic, p, replicas, on_live, min_isr[topic]))
        return short, sorted(live), sorted(set(ids) - live)


def shortfall_error(short: list[Shortfall], live: list[int], down: list[int], lasted_s: float, when: str
           ) -> NotEnoughReplicasError:
    shown = "; ".join(s.describe() for s in short[:3]) + (f"; and {len(short) - 3} more" if len(short) > 3 else "")
    return NotEnoughReplicasError(
        f"output partitions cannot reach min.insync.replicas: {shown} (brokers answering: "
        f"{', '.join(map(str, live)) or 'none'}; not answering for {lasted_s:.0f}s: {', '.join(map(str, down))}). "
        f"{when} Nothing uncommitted is visible and the group's offsets did not move; "
        "run again once the brokers are back."
    )


def require_writable(connection: KafkaConnection, topics, *, grace_s: float = GRACE_S) -> None:
    """Raise :class:`NotEnoughReplicasError` if the outputs cannot take acks=all writes for ``grace_s``."""
    probe = ReplicaProbe(connection, topics)
    t0 = time.monotonic()
    while True:
        short, live, down = probe.shortfalls()
        if not short:
            return
        if time.monotonic() - t0 >= grace_s:
            raise shortfall_error(short, live, down, time.monotonic() - t0, "The run did not start.")
        time.sleep(PROBE_INTERVAL_S)
