"""A consumer group's committed offsets, read through a consumer (never the AdminClient).

The one place committed offsets are asked for: :func:`fetch_committed` on a consumer of the
group, used by :class:`GroupOffsetsReader` (the cluster admin's reads, the fault tests) and by a
publishing task's checkpoint (:mod:`eos_etl.engine.publishing.checkpoint`), which owns its consumer.

Why not ``AdminClient.list_consumer_group_offsets``: when the group coordinator
answers NOT_COORDINATOR (it moved because its broker died), librdkafka
2.16.0's admin path dereferences the consumer-group handle an AdminClient does
not have and the process dies with SIGSEGV in librdkafka's own thread
(``rd_kafka_cgrp_op`` <- ``rd_kafka_handle_OffsetFetch`` <-
``rd_kafka_ListConsumerGroupOffsetsResponse_parse``; upstream
confluentinc/librdkafka#5040). A consumer's ``committed()`` goes through the
group handle it owns and handles coordinator moves.

A ``read_committed`` consumer asks with RequireStable: the coordinator holds
back a partition whose offsets a transaction has not completed yet, and
librdkafka keeps asking until its timeout, so a stable read that times out is
either an unreachable coordinator or an incomplete transaction. A
``read_uncommitted`` consumer of the same group (RequireStable off) tells the
two apart: if it answers, the coordinator is there and the offsets are unstable.
"""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

_DENIALS = (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)


def fetch_committed(consumer: Consumer, topic: str, partitions: list[int], timeout_s: float) -> dict[int, int | None]:
    """The committed offsets of ``consumer``'s group on ``topic``'s ``partitions`` (None: never committed).

    Stable if the consumer is ``read_committed`` (see above). Raises the consumer's
    ``KafkaException``, or one with a partition's own error.

    The metadata committed with an offset is never read: an offset is a position whoever wrote it, and
    what confluent-kafka 2.16 gives as metadata is not always what was committed. librdkafka copies a
    result's metadata as exactly its size, without the NUL its own parse added
    (``rd_kafka_topic_partition_update``, ``rdkafka_partition.c``), and confluent-kafka's
    ``TopicPartition_setup`` then ``strdup``s it (``confluent_kafka.c``): the text runs on into whatever
    the heap holds after it. A Java client's commit carries no NUL (a Python one's does, it commits
    ``strlen + 1`` bytes), so Kafka Streams' offsets read back with bytes that are no UTF-8, and
    ``tp.metadata`` raised ``UnicodeDecodeError`` (seen in the bench's Kafka Streams peer at 1,000,000).
    """
    tps = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=timeout_s)
    out: dict[int, int | None] = {}
    for tp in tps:
        if tp.error is not None:
            raise KafkaException(tp.error)
        out[tp.partition] = tp.offset if tp.offset >= 0 else None
    return out


class GroupOffsetsReader:
    """Reads ``group``'s committed offsets; never joins the group, never commits."""

    def __init__(self, client_config: dict, group: str):
        self.group = group
        self._config = {
            **client_config,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "log_level": 0,
        }
        self._stable: Consumer | None = None
        self._plain: Consumer | None = None
        # A denied coordinator lookup (no ACL on the group) only reaches the error callback;
        # committed() itself just times out. Kept here to name the cause (a list, never ``self``:
        # see ClusterAdmin._new_client on reference cycles through client callbacks).
        self._denials: list[KafkaError] = []

    def _consumer(self, isolation: str) -> Consumer:
        denials = self._denials

        def on_error(err: KafkaError) -> None:
            if err.code() in _DENIALS:
                denials.append(err)

        if isolation == "read_committed":
            if self._stable is None:
                self._stable = Consumer({**self._config, "isolation.level": isolation, "error_cb": on_error})
            return self._stable
        if self._plain is None:
            self._plain = Consumer({**self._config, "isolation.level": isolation, "error_cb": on_error})
        return self._plain

    def stable(self, topic: str, partitions: list[int], timeout_s: float) -> dict[int, int | None]:
        """Committed offsets once no transaction holds them (None: never committed).

        Raises the consumer's ``KafkaException`` (``_TIMED_OUT`` when the coordinator
        did not answer, or held the offsets back, for ``timeout_s``).
        """
        return self._read("read_committed", topic, partitions, timeout_s)

    def unstable(self, topic: str, partitions: list[int], timeout_s: float) -> dict[int, int | None]:
        """Committed offsets without RequireStable: a pending transactional commit is not waited for
        (the coordinator answers with the last completed one)."""
        return self._read("read_uncommitted", topic, partitions, timeout_s)

    def coordinator_answers(self, topic: str, partitions: list[int], timeout_s: float) -> bool:
        """Whether the group coordinator answers an offset fetch without RequireStable within ``timeout_s``."""
        try:
            self.unstable(topic, partitions, timeout_s)
            return True
        except KafkaException:
            return False

    def _read(self, isolation: str, topic: str, partitions: list[int], timeout_s: float) -> dict[int, int | None]:
        consumer = self._consumer(isolation)
        try:
            return fetch_committed(consumer, topic, partitions, timeout_s)
        except KafkaException:
            msg = consumer.poll(0)  # serves the error callback; consumer errors may come as an event instead
            if msg is not None and msg.error() is not None and msg.error().code() in _DENIALS:
                self._denials.append(msg.error())
            if self._denials:
                raise KafkaException(self._denials[-1]) from None
            raise

    def close(self) -> None:
        for consumer in (self._stable, self._plain):
            if consumer is not None:
                consumer.close()
        self._stable = self._plain = None

    def __enter__(self) -> "GroupOffsetsReader":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()
