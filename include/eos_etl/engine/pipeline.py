"""What one exactly-once pipeline is: where it reads, where it may write, who it is.

The ``transactional_id_prefix`` is an ownership claim. Each input partition is
published by its writer slot's transactional.id, ``<prefix>-<topic>-s<slot>of<S>``
(or ``<prefix>-<topic>-<partition>``, one per partition: :mod:`.slots`); whoever
initialises that id fences every earlier holder. Two pipelines must never share a prefix (they
would fence each other and interleave commits), and one pipeline must never
run under two prefixes (the fencing that stops zombies would not apply).
The consumer ``group`` is owned the same way: only this pipeline commits to it.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass, field, replace

from ..errors import ConfigurationError
from ..kafka.connection import KafkaConnection
from ..kafka.grants import PipelineResources
from . import checkpoint_topic, identity, slots

# Producer settings tuned for batch throughput; anything can be overridden.
DEFAULT_PRODUCER_CONFIG: dict[str, str | int] = {
    "acks": "all",
    # Nothing of a transaction is readable before its commit, which sends every batch at once: a long
    # linger batches a transaction's records per partition (keyed outputs spread over every partition, a
    # few records a second each at 1,024). Kept under half the transaction timeout: producer_settings_as.
    "linger.ms": 5_000,
    "batch.size": 1_000_000,
    "compression.type": "lz4",
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "message.max.bytes": 10_485_760,
    # Same key -> same partition as Java clients (murmur2), not librdkafka's CRC32 default.
    "partitioner": "murmur2_random",
    # Tiny back-to-back transactions otherwise stall ~100 ms on CONCURRENT_TRANSACTIONS.
    "retry.backoff.ms": 20,
}


@dataclass(frozen=True)
class PipelineConfig:
    connection: KafkaConnection
    input_topic: str
    group: str
    output_topics: tuple[str, ...]
    transactional_id_prefix: str
    # A transaction is committed when it holds this many input records ...
    chunk_records: int = 50_000
    # ... or has been open this long, whichever comes first.
    chunk_seconds: float = 20.0
    transaction_timeout_ms: int = 120_000
    # Abortable errors (abort + replay from committed offsets) tolerated per partition.
    max_abort_retries: int = 5
    # How long retriable errors of one transactional call are retried.
    retry_deadline_s: float = 60.0
    producer_config: dict = field(default_factory=dict)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    # Fault injection for tests (see engine.failpoints); empty in production. Taken from the
    # driver's environment and carried in the config, because executors on a cluster do not
    # inherit the driver's environment.
    failpoints: str = field(default_factory=lambda: os.environ.get("EOS_ETL_FAILPOINTS", ""))
    # A publishing task with no progress for this long is crashed so Spark
    # retries it (engine.tasks.watchdog); None: transaction timeout + 30 s; 0: off.
    stall_timeout_s: float | None = None
    # The input topic's id (ClusterAdmin.topic_id) when the window was planned: every checkpoint
    # record carries it, so a later plan tells a topic deleted and created again from the one the
    # position was taken on. Empty: not known (a config not yet bound to a plan).
    input_topic_id: str = ""
    # Writer slots (engine.slots): AS_COMMITTED (the default), whatever the committed positions name, S for a
    # new pipeline; None, one transactional id per input partition; S, S ids, input partition p written by
    # slot p % S with one producer per slot. A plan decides it, the window carries it (bound_to); a
    # committed grouping is changed only by `offsets reslot`.
    writer_slots: int | None | str = slots.AS_COMMITTED
    # The version of the pipeline's identity (engine.identity) the window was planned with (bound_to): every
    # publisher holds the record to it after its init_transactions. 0: not bound to a plan.
    identity_version: int = 0
    # The input's partition count when the window was planned (bound_to): what its checkpoint records say.
    planned_partitions: int = 0
    # On the Spark Connect route, the consumer group of the run's client lease (engine.publishing.client_lease):
    # a publishing task commits only while it has a member. Empty: no lease (the tasks die with the driver).
    client_lease: str = ""

    def __post_init__(self) -> None:
        if self.writer_slots not in (None, slots.AS_COMMITTED) and (type(self.writer_slots) is not int
                                                                    or self.writer_slots < 1):
            raise ConfigurationError(f"writer_slots must be a positive integer, None (one id per partition) or "
                                     f"{slots.AS_COMMITTED!r}, not {self.writer_slots!r}")
        if not self.transactional_id_prefix or any(c.isspace() for c in self.transactional_id_prefix):
            raise ConfigurationError("transactional_id_prefix must be a non-empty string without spaces")
        if len(self.checkpoint_topic) > 249:
            raise ConfigurationError(f"group {self.group[:40]!r}... is too long: its checkpoint topic "
                                     f"<group>{checkpoint_topic.SUFFIX} would exceed Kafka's 249 characters")
        if self.chunk_records < 1:
            raise ConfigurationError("chunk_records must be >= 1")
        if self.chunk_seconds * 1000 * 2 > self.transaction_timeout_ms:
            raise ConfigurationError(
                f"chunk_seconds={self.chunk_seconds} must be at most half of transaction_timeout_ms="
                f"{self.transaction_timeout_ms} so a transaction always commits well before the broker aborts it"
            )

    def bound_to(self, window) -> "PipelineConfig":
        """This config for publishing ``window`` (a :class:`~.window.Window`): bound to the topic id
        it was planned on, which every checkpoint record and output then names, and to the writer slots
        its plan decided (:func:`.slots.resolve`)."""
        if not window.topic_id:
            raise ConfigurationError(f"the window of {window.topic} names no topic id: plan it again")
        return replace(self, input_topic_id=window.topic_id, writer_slots=self.grouping_for(window),
                       identity_version=window.identity_version, planned_partitions=window.input_partitions)

    def grouping_for(self, window) -> int | None:
        """The writer slots publishing ``window`` uses: the ones its plan decided; a window planned before
        windows carried them, this config's own, which must then be set."""
        planned = window.writer_slots
        if planned == slots.AS_COMMITTED:
            if self.writer_slots == slots.AS_COMMITTED:
                raise ConfigurationError(f"the window of {window.topic} names no writer slots (planned by an older "
                                         "version?): plan it again")
            return self.writer_slots
        if self.writer_slots not in (slots.AS_COMMITTED, planned):
            raise ConfigurationError(f"the window of {window.topic} was planned with {slots.describe(planned)}, "
                                     f"this run has {slots.describe(self.writer_slots)}: plan it again")
        return planned

    @property
    def grouping(self) -> int | None:
        """The decided writer slots (None: one id per partition); :class:`ConfigurationError` while the
        setting is still :data:`.slots.AS_COMMITTED` (no plan has decided it)."""
        if self.writer_slots == slots.AS_COMMITTED:
            raise ConfigurationError(f"the writer slots of group {self.group} on {self.input_topic} are not decided "
                                     "yet: a plan decides them (bound_to(window)), or set writer_slots")
        return self.writer_slots

    @property
    def effective_stall_timeout_s(self) -> float:
        if self.stall_timeout_s is None:
            return self.transaction_timeout_ms / 1000 + 30
        return self.stall_timeout_s

    @property
    def checkpoint_topic(self) -> str:
        """The pipeline's compacted checkpoint topic (:mod:`.checkpoint_log`): its position per
        input partition, written in every transaction, kept after the group's offsets expire."""
        return checkpoint_topic.topic_for(self.group)

    @property
    def transactional_id_stem(self) -> str:
        """What every transactional id of this pipeline starts with (its prefixed ACL's name)."""
        return f"{self.transactional_id_prefix}-{self.input_topic}-"

    def slot_of(self, partition: int) -> int:
        """The writer slot that publishes input ``partition`` (:mod:`.slots`): itself without slots."""
        return partition if self.grouping is None else partition % self.grouping

    def slot_transactional_id(self, slot: int) -> str:
        """Slot ``slot``'s transactional id: ``<stem><p>`` without slots, ``<stem>s<slot>of<S>`` with
        ``S`` slots (the count in the id: a new count never reuses an old id)."""
        if self.grouping is None:
            return f"{self.transactional_id_stem}{slot}"
        return f"{self.transactional_id_stem}s{slot}of{self.grouping}"

    def transactional_id(self, partition: int) -> str:
        """The transactional id that publishes input ``partition`` (its slot's)."""
        return self.slot_transactional_id(self.slot_of(partition))

    def resources(self):
        """The Kafka resources this pipeline uses, for its ACLs (:mod:`eos_etl.kafka.grants`)."""
        return PipelineResources(self.input_topic, tuple(self.output_topics), self.group,
                                 self.transactional_id_stem, self.checkpoint_topic,
                                 identity.lock_id(self.group, self.input_topic))

    def producer_settings(self, partition: int) -> dict:
        """The settings of the producer that publishes input ``partition`` (its writer slot's id)."""
        return self.producer_settings_as(self.transactional_id(partition))

    def producer_settings_as(self, transactional_id: str) -> dict:
        conf = dict(DEFAULT_PRODUCER_CONFIG)
        conf.update(self.producer_config)
        conf.update(self.connection.client_config())
        conf["transactional.id"] = transactional_id
        conf["transaction.timeout.ms"] = self.transaction_timeout_ms
        if "linger.ms" not in self.producer_config:
            # librdkafka refuses a producer whose linger is not under message.timeout.ms, which a transactional
            # producer takes from its transaction timeout.
            conf["linger.ms"] = min(int(conf["linger.ms"]), self.transaction_timeout_ms // 2)
        return conf

    def consumer_settings(self) -> dict:
        conf = self.connection.client_config()
        conf.update(
            {
                "group.id": self.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
            }
        )
        return conf

    # JSON for process boundaries (spark-submit args). Contains the secret.
    def to_json(self) -> str:
        data = asdict(self)
        data["connection"] = json.loads(self.connection.to_json())
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> "PipelineConfig":
        data = json.loads(text)
        data["connection"] = KafkaConnection(**data["connection"])
        data["output_topics"] = tuple(data["output_topics"])
        return cls(**data)
