"""The pipeline's checkpoint topic: its position per input partition, kept as long as the topic exists.

Kafka deletes a consumer group's committed offsets ``offsets.retention.minutes``
after the last commit once the group has no members, and a batch pipeline's
group never has members between runs: after a long enough pause the group
offsets are simply gone. So every transaction also writes the partition's next
offset as one record to a compacted topic of the pipeline's own
(``<group>.checkpoints``, ``cleanup.policy=compact``, no time retention):
outputs, group offsets and this record commit atomically, and the record
outlives the group's offsets. Compaction keeps the last record per key, so the
topic stays about one record per input partition (plus at most one open
segment, rolled hourly).

A record: key ``["<group>", "<input topic>", <partition>]`` (JSON), value
``{"next_offset": N, "input_partitions": P, "run_id": "..."}`` (JSON),
timestamp the time of the commit; ``"topic_id"`` (the input topic's id, see
:meth:`~eos_etl.kafka.admin.ClusterAdmin.topic_id`) when the run knew it;
``"writer_slots": S`` when the pipeline publishes with ``S`` writer slots
(:mod:`.slots`; written by older versions, read only to adopt a pipeline without an
identity record). ``input_partitions`` is how many partitions the input topic had
when the record's window was planned, so a reader can tell "this partition is newer than
the pipeline's last run" from "this partition was never checkpointed". The pipeline's
identity record (:mod:`.identity`, key ``["<group>", "<input topic>", "identity"]``)
sits in partition 0 beside them; :func:`read_log` reads both in one pass. The
record for input partition ``p`` goes to partition ``p`` of the checkpoint
topic, which has at least as many partitions as the input (the run checks): only
``p``'s own transactions ever hold that partition's last stable offset back, so
what a read_committed reader sees there is exactly ``p``'s last committed
position.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from ..errors import ConfigurationError
from ..kafka.connection import KafkaConnection
from ..kafka.errors import KafkaSetupError, MissingTopicError
from ..kafka.reachability import unreachable
from ..kafka.reader import iter_partition, iter_ranges
from ..kafka.retry import Deadline, describe_kafka_exception, is_retriable, retry_until
from . import identity
from .checkpoint_topic import REQUIRED_POLICY
from .identity import Identity


def require_topic(admin, topic: str, input_topic: str) -> None:
    """Fail (one :class:`ConfigurationError` line) unless ``topic`` can hold the pipeline's checkpoint:
    it exists, Kafka never deletes its records by time or size (``cleanup.policy=compact``), and it
    has a partition for every partition of ``input_topic``."""
    try:
        partitions = len(admin.partitions(topic))
    except MissingTopicError:
        raise ConfigurationError(f"the pipeline's checkpoint topic {topic!r} does not exist: create it with "
                                 "`python -m eos_etl create-topics` (it makes only what is missing and checks "
                                 "the rest)") from None
    state = admin.topic_states([topic]).get(topic)
    policy = state.cleanup_policy if state is not None else "unknown"
    if set(policy.split(",")) != {REQUIRED_POLICY}:
        raise ConfigurationError(f"checkpoint topic {topic!r} has cleanup.policy={policy}: Kafka may delete the "
                                 f"pipeline's position; set cleanup.policy={REQUIRED_POLICY} "
                                 f"(kafka-configs --alter --entity-type topics --entity-name {topic} "
                                 f"--add-config cleanup.policy={REQUIRED_POLICY})")
    inputs = len(admin.partitions(input_topic))
    if partitions < inputs:
        raise ConfigurationError(f"checkpoint topic {topic!r} has {partitions} partitions, {input_topic!r} "
                                 f"{inputs} (partitions were added to it): give it one per input partition with "
                                 f"`python -m eos_etl create-topics --allow-existing (and this run's connection and "
                                 f"topic options)`, which grows it (or kafka-topics --alter --topic {topic} "
                                 f"--partitions {inputs}), then run again")


def grow_topic(admin, topic: str, input_topic: str) -> int | None:
    """Give the checkpoint topic one partition per input partition where partitions were added to the
    input: the record of input partition ``p`` goes to partition ``p``, so new partitions only add
    room. The new count, or None when there was nothing to do (or either topic does not exist)."""
    try:
        have, inputs = len(admin.partitions(topic)), len(admin.partitions(input_topic))
    except MissingTopicError:
        return None
    if have >= inputs:
        return None
    admin.grow_topic(topic, inputs)
    return inputs


def key(group: str, input_topic: str, partition: int) -> bytes:
    return json.dumps([group, input_topic, partition], separators=(",", ":")).encode()


@dataclass(frozen=True)
class CheckpointEntry:
    """The last committed position of one input partition, as its checkpoint record says."""

    partition: int
    next_offset: int
    input_partitions: int
    run_id: str
    timestamp_ms: int
    topic_id: str = ""  # the input topic's id the position was taken on; empty: not recorded
    writer_slots: int | None = None  # the writer slots that committed it (PipelineConfig.writer_slots)

    def value(self) -> bytes:
        data = {"next_offset": self.next_offset, "input_partitions": self.input_partitions, "run_id": self.run_id}
        if self.topic_id:
            data["topic_id"] = self.topic_id
        if self.writer_slots is not None:
            data["writer_slots"] = self.writer_slots
        return json.dumps(data, separators=(",", ":")).encode()

    def on_other_topic(self, topic_id: str) -> bool:
        """The position was taken on another topic of the same name (deleted and created again since)."""
        return bool(self.topic_id and topic_id and self.topic_id != topic_id)

    def to_dict(self) -> dict:
        data = {"next_offset": self.next_offset, "input_partitions": self.input_partitions, "run_id": self.run_id,
                "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.timestamp_ms / 1000))}
        if self.topic_id:
            data["topic_id"] = self.topic_id
        if self.writer_slots is not None:
            data["writer_slots"] = self.writer_slots
        return data


def decode(group: str, input_topic: str, raw_key: bytes | None, raw_value: bytes | None,
           timestamp_ms: int) -> CheckpointEntry | None:
    """The entry a record holds for ``group`` and ``input_topic``; None for anything else
    (another pipeline's key, a tombstone, a record this format does not know)."""
    try:
        g, t, p = json.loads(raw_key or b"null")
        if g != group or t != input_topic or raw_value is None:
            return None
        data = json.loads(raw_value)
        slots = data.get("writer_slots")
        return CheckpointEntry(int(p), int(data["next_offset"]), int(data["input_partitions"]),
                               str(data.get("run_id", "")), timestamp_ms, str(data.get("topic_id", "")),
                               int(slots) if slots is not None else None)
    except (ValueError, TypeError, KeyError):
        return None


def _watermarks(consumer: Consumer, tp: TopicPartition):
    """One attempt at ``tp``'s watermarks, as :func:`~eos_etl.kafka.retry.retry_until` calls it."""
    return lambda timeout: consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)


@dataclass(frozen=True)
class CheckpointLog:
    """What one read of the checkpoint topic found for a pipeline: its entries and its identity record."""

    entries: dict[int, CheckpointEntry]
    identity: Identity | None


def read_entries(connection: KafkaConnection, topic: str, group: str, input_topic: str,
                 partitions: list[int] | None = None, *, timeout_s: float = 30.0) -> dict[int, CheckpointEntry]:
    """The last committed entry per input partition (read_committed, to the last stable offset).

    ``partitions``: the checkpoint topic's partitions to read (default: all). Small and
    bounded: compaction keeps one record per key beyond the open segment.
    """
    return read_log(connection, topic, group, input_topic, partitions, timeout_s=timeout_s).entries


def read_identity(connection: KafkaConnection, topic: str, group: str, input_topic: str, *,
                  consumer: Consumer | None = None, timeout_s: float = 30.0) -> Identity | None:
    """The pipeline's identity record (:mod:`.identity`), read_committed to the last stable offset of its one
    partition. ``consumer``: a read_committed consumer of the caller's to read with (a publisher's checkpoint
    consumer: one fetch, no client made); else one made for the read."""
    own = consumer is None
    if own:
        consumer = Consumer({**connection.client_config(), "group.id": f"eos-etl-identity-{time.monotonic_ns()}",
                             "isolation.level": "read_committed", "enable.auto.commit": False, "log_level": 0})
    tp = TopicPartition(topic, identity.PARTITION)
    found = None
    try:
        start, end = retry_until(_watermarks(consumer, tp), what=f"the offsets of {topic}[{identity.PARTITION}]",
                                 deadline_s=timeout_s, attempt_timeout_s=timeout_s)
        for rec in iter_partition(consumer, topic, identity.PARTITION, start, end, timeout_s=timeout_s):
            if (named := identity.decode(group, input_topic, rec.key, rec.value)) is not None:
                found = named  # in offset order: the last one wins
    except TimeoutError as exc:
        raise unreachable(connection, f"cannot read the checkpoint topic {topic!r}: {exc}") from exc
    except KafkaException as exc:
        raise _read_failed(connection, topic, timeout_s, exc) from exc
    finally:
        if own:
            consumer.close()
    return found


def read_log(connection: KafkaConnection, topic: str, group: str, input_topic: str,
             partitions: list[int] | None = None, *, timeout_s: float = 30.0) -> CheckpointLog:
    """:func:`read_entries`, and the identity record where ``partitions`` include its partition."""
    consumer = Consumer({**connection.client_config(), "group.id": f"eos-etl-checkpoints-{time.monotonic_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False, "log_level": 0})
    try:
        if partitions is None:
            md = consumer.list_topics(topic, timeout=timeout_s)
            tmd = md.topics.get(topic)
            if tmd is None or tmd.error is not None:
                raise KafkaSetupError(f"cannot read the checkpoint topic {topic!r}: "
                                      f"{tmd.error.str() if tmd is not None and tmd.error else 'missing'}; "
                                      "create it with `python -m eos_etl create-topics`")
            partitions = sorted(tmd.partitions)
        ranges = {}
        deadline = Deadline(timeout_s)
        for p in partitions:
            # A partition whose leader is not serving yet (a topic just created, a leader moving) answers
            # NOT_LEADER_FOR_PARTITION at once: asked again until the deadline, all partitions sharing it.
            ranges[p] = retry_until(  # a read_committed consumer's high watermark is the last stable offset
                _watermarks(consumer, TopicPartition(topic, p)),
                what=f"the offsets of {topic}[{p}]", deadline_s=deadline.slice(timeout_s, at_least=1.0),
                attempt_timeout_s=timeout_s)
    except KafkaException as exc:
        raise _read_failed(connection, topic, timeout_s, exc) from exc
    finally:
        consumer.close()
    entries: dict[int, CheckpointEntry] = {}
    found: Identity | None = None
    try:
        for rec in iter_ranges(connection, topic, ranges, timeout_s=timeout_s):
            entry = decode(group, input_topic, rec.key, rec.value, rec.timestamp_ms)
            if entry is not None:
                entries[entry.partition] = entry  # offset order within a partition: the last one wins
            elif (named := identity.decode(group, input_topic, rec.key, rec.value)) is not None:
                found = named  # one partition holds it, in offset order: the last one wins
    except TimeoutError as exc:
        raise unreachable(connection, f"cannot read the checkpoint topic {topic!r}: {exc}") from exc
    except KafkaException as exc:  # the broker lost between the offsets and the records
        raise _read_failed(connection, topic, timeout_s, exc) from exc
    return CheckpointLog(entries, found)


def _read_failed(connection: KafkaConnection, topic: str, timeout_s: float, exc: KafkaException) -> Exception:
    """The one error for a failed read of the checkpoint topic: a broker that did not answer in time (lost
    at runtime, or never reachable), or what it refused."""
    if is_retriable(exc):
        return unreachable(connection, f"no broker answered for the checkpoint topic {topic!r} within "
                                       f"{timeout_s:.0f}s (last: {describe_kafka_exception(exc)})")
    return KafkaSetupError(f"cannot read the checkpoint topic {topic!r}: {describe_kafka_exception(exc)}")
