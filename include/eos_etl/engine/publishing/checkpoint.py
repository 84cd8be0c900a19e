"""The checkpoint owns a partition's consumed position and its commit.

The position is the group's committed offset, and, where Kafka deleted that
(``offsets.retention.minutes`` after the last commit of a group without
members), the partition's record in the pipeline's checkpoint topic
(:mod:`.checkpoint_log`). Both are only ever advanced inside a transaction:
:meth:`PartitionCheckpoint.stage` adds the checkpoint record and the group's
offset to the open transaction, so outputs, offsets and the record become
visible together or not at all. The position is only read after
``init_transactions`` with stable semantics (a read_committed consumer's
OffsetFetch sets RequireStable; the checkpoint topic is read read_committed),
so a pending commit of an aborted or fenced attempt is never mistaken for
progress.
"""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaException, TopicPartition

from ...errors import ConfigurationError
from ...kafka.errors import KafkaSetupError
from ...kafka.group_offsets import fetch_committed
from ...kafka.reachability import unreachable
from ...kafka.reader import first_visible_offset
from ...kafka.retry import describe_kafka_exception, is_retriable, retry_until
from .. import checkpoint_log
from ..checkpoint_log import CheckpointEntry
from ..position import resumed_position

log = logging.getLogger(__name__)


def checkpoint_consumer(config):
    """The consumer a checkpoint reads with (the group's offsets, the window-end proof)."""
    conf = config.consumer_settings()
    conf.setdefault("log_level", 3)
    # Its reads are bounded ones (the window-end proof): a fetch that found nothing new must not
    # hold the next assign for the broker's default long poll (500 ms), as a read that reached
    # the range's end leaves one in flight.
    conf.setdefault("fetch.wait.max.ms", 10)
    # A proof that starts below the log start (records deleted while the task ran) must fail, not
    # jump to the log end (librdkafka's default reset) and prove an end over records never published.
    conf["auto.offset.reset"] = "error"
    # Never subscribes: the group has no active members, so offsets are
    # committed with the "simple consumer" group metadata and the
    # transactional.id's epoch alone fences zombies.
    return Consumer(conf)


class SlotCheckpoints:
    """The checkpoints of one writer slot's partitions (:meth:`of`), sharing one consumer and one
    answer to how many partitions the input has; used one at a time (a consumer is not shared
    between threads here)."""

    def __init__(self, config, timeout_s: float = 30.0):
        self._config = config
        self._timeout_s = timeout_s
        self._consumer = None
        self.input_partitions: int | None = None  # the input's partition count, once one checkpoint asked
        # partition -> (group offset, checkpoint record): read for all at once, each taken once
        self._read_ahead: dict[int, tuple[int | None, CheckpointEntry | None]] = {}

    def of(self, partition: int) -> "PartitionCheckpoint":
        return PartitionCheckpoint(self._config, partition, self._timeout_s, shared=self)

    @property
    def consumer(self):
        if self._consumer is None:
            self._consumer = checkpoint_consumer(self._config)
        return self._consumer

    def read_ahead(self, partitions: list[int]) -> None:
        """Read the committed positions of ``partitions`` in one request (and the checkpoint records of
        those the group has no offset for in one read), for each one's first :meth:`PartitionCheckpoint.committed`:
        a slot's partitions cost two round trips, not two per partition. Only after ``init_transactions``
        (nothing of an older attempt can commit after it); a later read (a replay's) asks the broker again."""
        if len(partitions) < 2:
            return  # one partition reads as it always has
        probe = self.of(partitions[0])
        offsets = probe.group_offsets(partitions)
        missing = [p for p, offset in offsets.items() if offset is None]
        entries = probe.logged_entries(missing) if missing else {}
        self._read_ahead = {p: (offset, entries.get(p)) for p, offset in offsets.items()}

    def take(self, partition: int) -> tuple[int | None, CheckpointEntry | None] | None:
        return self._read_ahead.pop(partition, None)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class PartitionCheckpoint:
    def __init__(self, config, partition: int, timeout_s: float = 30.0, *, shared: SlotCheckpoints | None = None):
        """``config``: the :class:`~eos_etl.engine.pipeline.PipelineConfig` of the pipeline, bound to the
        input topic's id (:meth:`~eos_etl.engine.pipeline.PipelineConfig.bound_to`): every record this
        checkpoint writes names the topic its position was taken on, so none can pass for another's.
        ``shared``: its slot's checkpoints, whose consumer it reads with (closed by them, not by this one)."""
        if not config.input_topic_id:
            raise ConfigurationError(f"a checkpoint of {config.input_topic}[{partition}] needs the input topic's id "
                                     "(PipelineConfig.bound_to(window) binds it)")
        self.topic = config.input_topic
        self.partition = partition
        self.group = config.group
        self.log_topic = config.checkpoint_topic
        self._connection = config.connection
        self._run_id = config.run_id
        self._topic_id = config.input_topic_id
        self._planned_partitions = config.planned_partitions
        self._timeout_s = timeout_s
        self._shared = shared
        self._input_partitions: int | None = None
        self._consumer = shared.consumer if shared is not None else checkpoint_consumer(config)

    def committed(self) -> int | None:
        """The partition's committed position, or None if the pipeline never committed one, as
        :func:`~.position.resumed_position` decides it: the group's offset; where the group has none,
        the checkpoint topic's record of this topic (the group's offsets expired during a pause). While
        a broker is lost the group's coordinator moves (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
        timeouts): those answers are asked again within the checkpoint's timeout instead of failing
        the task.
        """
        ahead = self._shared.take(self.partition) if self._shared is not None else None
        if ahead is None:  # no answer read ahead (or taken already): ask the broker now
            offset, entry = self.group_offset(), None
        else:
            offset, entry = ahead
        if offset is not None:
            return offset
        if ahead is None:
            entry = self.logged()
        position = resumed_position(None, entry, self._topic_id)
        if position is not None:
            log.warning("%s[%d]: group %s has no committed offset (expired?); resuming from its checkpoint record: "
                        "%d (run %s)", self.topic, self.partition, self.group, position, entry.run_id)
        return position

    def group_offset(self) -> int | None:
        """The group's committed offset of this partition (stable: the checkpoint's consumer reads
        read_committed; :func:`~eos_etl.kafka.group_offsets.fetch_committed`), None if it has none."""
        return self.group_offsets([self.partition])[self.partition]

    def group_offsets(self, partitions: list[int]) -> dict[int, int | None]:
        """:meth:`group_offset` of ``partitions`` (this one's and its slot's) in one request; whatever wrote
        them (a run, an operator with Kafka's tools), they are the position. While a broker is lost the
        coordinator moves: asked again within the timeout."""
        what = (f"{self.topic}[{partitions[0]}]" if len(partitions) == 1
                else f"{len(partitions)} partitions of {self.topic} ({partitions[0]}, {partitions[1]}, ...)")

        def ask(timeout: float) -> dict[int, int | None]:
            return fetch_committed(self._consumer, self.topic, partitions, timeout)

        try:
            return retry_until(ask, what=f"committed offset of {what}", deadline_s=self._timeout_s,
                               attempt_timeout_s=min(10.0, self._timeout_s))
        except KafkaException as exc:
            if is_retriable(exc):  # no answer within the deadline: lost at runtime, or never reachable
                raise unreachable(self._connection, f"no broker answered the committed offset of "
                                                    f"{what} within {self._timeout_s:.0f}s "
                                                    f"(last: {describe_kafka_exception(exc)})") from exc
            raise KafkaSetupError(f"cannot read committed offset of {what}: {describe_kafka_exception(exc)}") from exc

    def logged(self) -> CheckpointEntry | None:
        """This partition's record in the checkpoint topic (its partition of the same number)."""
        return self.logged_entries([self.partition]).get(self.partition)

    def logged_entries(self, partitions: list[int]) -> dict[int, CheckpointEntry]:
        """The checkpoint records of ``partitions`` (one read of their checkpoint partitions)."""
        return checkpoint_log.read_entries(self._connection, self.log_topic, self.group, self.topic,
                                           partitions, timeout_s=self._timeout_s)

    def first_visible(self, start: int, end: int) -> int | None:
        """The first input record a read_committed reader sees in [start, end) of this partition, or
        None: the proof that a window's end may be committed without a record after ``start``
        (:func:`~eos_etl.kafka.reader.first_visible_offset`, with this checkpoint's own consumer)."""
        try:
            return first_visible_offset(self._consumer, self.topic, self.partition, start, end,
                                        timeout_s=self._timeout_s)
        except KafkaException as exc:
            raise unreachable(self._connection, f"cannot read {self.topic}[{self.partition}] from {start}: "
                                                f"{describe_kafka_exception(exc)}") from exc

    def group_metadata(self):
        return self._consumer.consumer_group_metadata()

    def offsets(self, next_offset: int) -> list[TopicPartition]:
        """The group's offset to commit. No metadata: who may commit is the pipeline's identity, not what the
        offsets say (an operator's reset writes none either)."""
        return [TopicPartition(self.topic, self.partition, next_offset)]

    def stage(self, producer, next_offset: int) -> None:
        """Add the position ``next_offset`` to ``producer``'s open transaction: the checkpoint
        record, then the group's offset. Both commit with the transaction or not at all."""
        self.record(producer, next_offset)
        producer.send_offsets_to_transaction(self.offsets(next_offset), self.group_metadata())

    def record(self, producer, next_offset: int) -> None:
        """Produce the checkpoint record of the position ``next_offset`` in ``producer``'s open transaction
        (the first half of :meth:`stage`: :func:`stage_together` sends the offsets of several at once)."""
        entry = CheckpointEntry(self.partition, next_offset, self._partitions_of_input(), self._run_id, 0,
                                self._topic_id)
        producer.produce_to(self.log_topic, self.partition,
                            checkpoint_log.key(self.group, self.topic, self.partition), entry.value())

    def _partitions_of_input(self) -> int:
        """What the record says the input has: the window's planned count (a partition added before the run is
        still one added after the pipeline's last commit); without a plan, the input's metadata now."""
        if self._planned_partitions:
            return max(self._planned_partitions, self.partition + 1)
        if self._input_partitions is None and self._shared is not None and self._shared.input_partitions:
            self._input_partitions = max(self._shared.input_partitions, self.partition + 1)
        if self._input_partitions is None:
            try:
                md = self._consumer.list_topics(self.topic, timeout=self._timeout_s)
            except KafkaException as exc:
                if is_retriable(exc):  # no answer in time: lost at runtime, or never reachable
                    raise unreachable(self._connection, f"no broker answered the partitions of {self.topic} "
                                                        f"within {self._timeout_s:.0f}s "
                                                        f"(last: {describe_kafka_exception(exc)})") from exc
                raise KafkaSetupError(
                    f"cannot read the partitions of {self.topic}: {describe_kafka_exception(exc)}") from exc
            # Never fewer than this partition's number + 1, even from a metadata answer that lags.
            self._input_partitions = max(len(md.topics[self.topic].partitions), self.partition + 1)
            if self._shared is not None:
                self._shared.input_partitions = self._input_partitions
        return self._input_partitions

    def close(self) -> None:
        if self._shared is None:
            self._consumer.close()


def stage_together(producer, positions: list[tuple[PartitionCheckpoint, int]]) -> None:
    """:meth:`PartitionCheckpoint.stage` for several partitions of one slot in one open transaction: each
    checkpoint record, then the group's offsets of all of them in one ``send_offsets_to_transaction``
    (one AddOffsetsToTxn and one TxnOffsetCommit, not one per partition)."""
    offsets = []
    for checkpoint, next_offset in positions:
        checkpoint.record(producer, next_offset)
        offsets += checkpoint.offsets(next_offset)
    producer.send_offsets_to_transaction(offsets, positions[0][0].group_metadata())
