"""The checkpoint owns a partition's consumed position: the group's committed offset.

The position is only ever advanced inside a transaction (``offsets()`` feeds
``send_offsets_to_transaction``), and only read after ``init_transactions``
with stable semantics (a read_committed consumer's OffsetFetch sets
RequireStable), so a pending commit of an aborted or fenced attempt is never
mistaken for progress.
"""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaException, TopicPartition

from ..kafka.errors import KafkaSetupError
from ..kafka.retry import describe, retry_until


class PartitionCheckpoint:
    def __init__(self, consumer_settings: dict, topic: str, partition: int, timeout_s: float = 30.0):
        self.topic = topic
        self.partition = partition
        self._timeout_s = timeout_s
        conf = dict(consumer_settings)
        conf.setdefault("log_level", 3)
        # Never subscribes: the group has no active members, so offsets are
        # committed with the "simple consumer" group metadata and the
        # transactional.id's epoch alone fences zombies.
        self._consumer = Consumer(conf)

    def committed(self) -> int | None:
        """The group's committed offset for this partition, or None if it never committed.

        While a broker is lost the group's coordinator moves (NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS, timeouts): those answers are asked again
        within the checkpoint's timeout instead of failing the task.
        """
        def ask(timeout: float) -> int | None:
            [tp] = self._consumer.committed([TopicPartition(self.topic, self.partition)], timeout=timeout)
            if tp.error is not None:
                raise KafkaException(tp.error)
            return tp.offset if tp.offset >= 0 else None

        try:
            return retry_until(ask, what=f"committed offset of {self.topic}[{self.partition}]",
                               deadline_s=self._timeout_s, attempt_timeout_s=min(10.0, self._timeout_s))
        except KafkaException as exc:
            raise KafkaSetupError(
                f"cannot read committed offset of {self.topic}[{self.partition}]: {describe(exc)}"
            ) from exc

    def group_metadata(self):
        return self._consumer.consumer_group_metadata()

    def offsets(self, next_offset: int) -> list[TopicPartition]:
        return [TopicPartition(self.topic, self.partition, next_offset)]

    def close(self) -> None:
        self._consumer.close()
