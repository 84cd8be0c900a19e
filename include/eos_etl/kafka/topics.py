"""Durable topics: replication factor and min.insync.replicas chosen for the cluster, checked when they exist.

Exactly-once means nothing if the committed data is not durable: a topic with
one replica loses committed invoices with one disk. The defaults follow the
cluster: replication factor ``min(3, brokers)`` and ``min.insync.replicas``
one less (at least 1), so a three-broker cluster gets 3/2 and one broker stays
1/1. An existing topic is never silently accepted with less durability or a
different partition count than asked (:class:`TopicMismatchError`), unless
the caller allows it deliberately.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

from ..errors import ConfigurationError
from .admin import CLEANUP_POLICY, MIN_ISR, ClusterAdmin, TopicState
from .errors import TopicMismatchError
from .topic_spec import TopicSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Durability:
    replication_factor: int
    min_insync_replicas: int

    @classmethod
    def for_cluster(cls, brokers: int, replication_factor: int | None = None,
                    min_insync_replicas: int | None = None) -> "Durability":
        """Defaults for ``brokers`` live brokers; explicit values win and are checked."""
        rf = replication_factor if replication_factor is not None else min(3, brokers)
        min_isr = min_insync_replicas if min_insync_replicas is not None else max(1, rf - 1)
        if rf < 1 or min_isr < 1:
            raise ConfigurationError("replication factor and min.insync.replicas must be at least 1")
        if rf > brokers:
            raise ConfigurationError(
                f"replication factor {rf} is more than the {brokers} live broker{'s' if brokers != 1 else ''} "
                "of the cluster; start the missing brokers or ask for fewer replicas"
            )
        if min_isr > rf:
            raise ConfigurationError(
                f"min.insync.replicas {min_isr} is more than the replication factor {rf}: "
                "no acks=all write could ever succeed"
            )
        return cls(rf, min_isr)

    def describe(self) -> str:
        return f"replication factor {self.replication_factor}, {MIN_ISR} {self.min_insync_replicas}"


def mismatches(spec: TopicSpec, durability: Durability, state: TopicState) -> list[str]:
    """How an existing topic falls short of what was asked (empty: it fits)."""
    out = []
    if state.partitions != spec.partitions:
        out.append(f"{state.partitions} partitions, not {spec.partitions}")
    if state.replication_factor < durability.replication_factor:
        out.append(f"replication factor {state.replication_factor} < {durability.replication_factor}")
    if state.min_insync_replicas < durability.min_insync_replicas:
        out.append(f"{MIN_ISR} {state.min_insync_replicas} < {durability.min_insync_replicas}")
    wanted_policy = spec.config.get(CLEANUP_POLICY)
    if wanted_policy is not None and set(state.cleanup_policy.split(",")) != set(wanted_policy.split(",")):
        out.append(f"{CLEANUP_POLICY} {state.cleanup_policy}, not {wanted_policy}")
    return out


def ensure_topics(admin: ClusterAdmin, specs: list[TopicSpec], durability: Durability | None = None, *,
                  allow_existing: bool = False) -> dict[str, TopicState]:
    """Create the missing topics with ``durability`` (default: the cluster's); check the existing ones against it.

    Raises :class:`TopicMismatchError` (one line naming every shortfall) when an
    existing topic has fewer partitions/replicas or a lower min ISR than asked,
    unless ``allow_existing``; then it only logs them.
    """
    durability = durability or Durability.for_cluster(admin.broker_count())
    existing = admin.topic_states([s.name for s in specs])
    missing = [s for s in specs if s.name not in existing]
    for s in missing:
        admin.create_topics({s.name: s.partitions}, replication_factor=durability.replication_factor,
                            config={**s.config, MIN_ISR: str(durability.min_insync_replicas)})
    problems = [f"{s.name}: {', '.join(m)}" for s in specs if s.name in existing
                if (m := mismatches(s, durability, existing[s.name]))]
    if problems and not allow_existing:
        raise TopicMismatchError(
            f"existing topics do not match what was asked ({durability.describe()}): {'; '.join(problems)}. "
            "Fix them (kafka-topics --alter / kafka-reassign-partitions), choose other names, "
            "or pass --allow-existing to keep them as they are"
        )
    for problem in problems:
        log.warning("keeping existing topic as it is (--allow-existing): %s", problem)
    # Created topics reach every broker's metadata a moment after the controller accepts them.
    names = [s.name for s in specs]
    deadline = time.monotonic() + admin.timeout
    while len(states := admin.topic_states(names)) < len(names) and time.monotonic() < deadline:
        time.sleep(0.2)
    return {name: dataclasses.replace(st, created=any(s.name == name for s in missing))
            for name, st in states.items()}


def durability_warnings(admin: ClusterAdmin, topics: list[str]) -> list[str]:
    """One line per output topic that a multi-broker cluster would lose with one broker (acks=all)."""
    brokers = admin.broker_count()
    if brokers < 2:
        return []
    warnings = []
    for name, st in admin.topic_states(topics).items():
        weak = []
        if st.replication_factor < 2:
            weak.append(f"replication factor {st.replication_factor}")
        if st.min_insync_replicas < 2:
            weak.append(f"{MIN_ISR} {st.min_insync_replicas}")
        if weak:
            target = Durability.for_cluster(brokers)
            warnings.append(
                f"output topic {name} has {' and '.join(weak)} on a {brokers}-broker cluster: with acks=all a "
                f"committed write can still be lost with one broker; recreate it with {target.describe()} "
                f"(kafka-reassign-partitions to add replicas, kafka-configs --alter to raise {MIN_ISR})"
            )
    return warnings
