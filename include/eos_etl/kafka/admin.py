"""Read-only questions to the cluster: topics, offsets, committed group offsets, configs.

All calls are bounded by a timeout and turn librdkafka's failures into one
clear :class:`KafkaSetupError` subclass (unreachable, missing topic, bad
credentials), so a misconfigured run stops before it touches anything.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec

from .connection import KafkaConnection
from .errors import AuthenticationError, BrokerUnreachableError, KafkaSetupError, MissingTopicError, UnstableOffsetsError

log = logging.getLogger(__name__)

_AUTH_CODES = {
    KafkaError._AUTHENTICATION,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


_COORDINATOR_LOADING = {
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
}


@dataclass(frozen=True)
class PartitionOffsets:
    earliest: int
    last_stable: int  # read_committed end: nothing at or past it is decided yet
    high_watermark: int


class ClusterAdmin:
    """A thin, typed wrapper over confluent-kafka's AdminClient."""

    def __init__(self, connection: KafkaConnection, timeout: float = 10.0):
        self.connection = connection
        self.timeout = timeout
        self._errors: list[KafkaError] = []
        self._lock = threading.Lock()
        self._admin = self._new_client()

    def _new_client(self) -> AdminClient:
        conf = self.connection.client_config()
        conf.update({"error_cb": self._on_error, "log_level": 0, "socket.connection.setup.timeout.ms": "5000"})
        return AdminClient(conf)

    def _on_error(self, err: KafkaError) -> None:
        with self._lock:
            self._errors.append(err)

    def _diagnose(self, exc: Exception | None = None) -> KafkaSetupError:
        self._admin.poll(0.5)  # serve queued error callbacks (authentication failures arrive there)
        with self._lock:
            errors = list(self._errors)
        codes = {e.code() for e in errors}
        if exc is not None and isinstance(exc, KafkaException):
            codes.add(exc.args[0].code())
        if codes & _AUTH_CODES:
            return AuthenticationError(
                f"Kafka at {self.connection.bootstrap_servers} rejected the credentials "
                f"({self.connection.security_protocol}, user {self.connection.sasl_username!r}); "
                "check the connection's login and password"
            )
        if exc is not None and isinstance(exc, KafkaException) and exc.args[0].code() not in (
            KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE
        ):
            return KafkaSetupError(f"Kafka at {self.connection.bootstrap_servers} answered: {exc.args[0].str()}")
        return BrokerUnreachableError(
            f"cannot reach Kafka at {self.connection.bootstrap_servers} "
            f"({self.connection.security_protocol}) within {self.timeout:.0f}s; is the broker running "
            "and are bootstrap servers and security protocol right?"
        )

    def check_reachable(self) -> None:
        """Metadata from the cluster within ``timeout``; rejected credentials fail at once.

        Short metadata requests in a loop, because librdkafka reports an
        authentication failure through the error callback while a long
        request would simply wait out its whole timeout.
        """
        deadline = time.monotonic() + self.timeout
        last: KafkaException | None = None
        while True:
            try:
                md = self._admin.list_topics(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
                if md.brokers:
                    return
            except KafkaException as exc:
                last = exc
                if exc.args[0].code() not in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
                                              KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE):
                    raise self._diagnose(exc) from exc
            self._admin.poll(0)
            with self._lock:
                rejected = any(e.code() in _AUTH_CODES for e in self._errors)
            if rejected or time.monotonic() >= deadline:
                raise self._diagnose(last) from last

    def partitions(self, topic: str) -> list[int]:
        try:
            md = self._admin.list_topics(topic=topic, timeout=self.timeout)
        except KafkaException as exc:
            raise self._diagnose(exc) from exc
        tmd = md.topics.get(topic)
        if tmd is None or (tmd.error is not None and tmd.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise MissingTopicError(f"topic {topic!r} does not exist on {self.connection.bootstrap_servers}")
        if tmd.error is not None:
            if tmd.error.code() in _AUTH_CODES:
                raise AuthenticationError(f"not authorised to read topic {topic!r}: {tmd.error.str()}")
            raise KafkaSetupError(f"topic {topic!r} is not usable: {tmd.error.str()}")
        return sorted(tmd.partitions)

    def require_topics(self, *topics: str) -> dict[str, list[int]]:
        return {t: self.partitions(t) for t in dict.fromkeys(topics)}

    def _list_offsets(self, topic: str, partitions: list[int], spec, isolation) -> dict[int, tuple[int, int]]:
        request = {TopicPartition(topic, p): spec for p in partitions}
        if not request:
            return {}
        try:
            futures = self._admin.list_offsets(request, isolation_level=isolation, request_timeout=self.timeout)
            out = {}
            for tp, fut in futures.items():
                info = fut.result(timeout=self.timeout + 5)
                out[tp.partition] = (info.offset, info.timestamp)
            return out
        except KafkaException as exc:
            raise self._diagnose(exc) from exc

    def offsets(self, topic: str, partitions: list[int]) -> dict[int, PartitionOffsets]:
        earliest = self._list_offsets(topic, partitions, OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
        stable = self._list_offsets(topic, partitions, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
        high = self._list_offsets(topic, partitions, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
        return {p: PartitionOffsets(earliest[p][0], stable[p][0], high[p][0]) for p in partitions}

    def offsets_for_time(self, topic: str, partitions: list[int], timestamp_ms: int) -> dict[int, int | None]:
        """First offset whose timestamp is >= timestamp_ms; None when there is none yet."""
        got = self._list_offsets(
            topic, partitions, OffsetSpec.for_timestamp(timestamp_ms), IsolationLevel.READ_COMMITTED
        )
        return {p: (off if off >= 0 else None) for p, (off, _ts) in got.items()}

    def committed_offsets(
        self, group: str, topic: str, partitions: list[int], *, unstable_timeout: float | None = None
    ) -> dict[int, int | None]:
        """The group's committed offsets, read with stable semantics (pending
        transactional commits are waited for, never reported half-done)."""
        if not partitions:
            return {}
        req = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])]
        deadline = time.monotonic() + self.timeout
        unstable_since = time.monotonic()
        rebuilt = False
        while True:
            try:
                fut = self._admin.list_consumer_group_offsets(req, require_stable=True, request_timeout=self.timeout)
                result = fut[group].result(timeout=self.timeout + 5)
            except KafkaException as exc:
                if exc.args[0].code() in _COORDINATOR_LOADING and time.monotonic() < deadline:
                    time.sleep(0.2)  # a fresh broker is still creating/loading __consumer_offsets
                    continue
                if exc.args[0].code() == KafkaError._TIMED_OUT and not rebuilt:
                    # A client that lived through a broker restart can stay stuck on
                    # its old coordinator connection (seen after SIGKILL); a fresh one is not.
                    self._admin, rebuilt = self._new_client(), True
                    deadline = time.monotonic() + self.timeout
                    continue
                raise self._diagnose(exc) from exc
            unstable = [tp for tp in result.topic_partitions
                        if tp.error is not None and tp.error.code() == KafkaError.UNSTABLE_OFFSET_COMMIT]
            # A transactional offset commit is still being completed (markers in
            # flight): wait for it rather than report a half-done state.
            if not unstable:
                break
            if unstable_timeout is not None and time.monotonic() > unstable_since + unstable_timeout:
                raise UnstableOffsetsError(
                    f"committed offsets of {group}/{topic} partitions {[tp.partition for tp in unstable]} "
                    "belong to a transaction that has not completed"
                )
            if time.monotonic() > deadline:
                raise UnstableOffsetsError(
                    f"committed offsets of {group}/{topic} stayed unstable for {self.timeout:.0f}s "
                    "(a transaction touching them does not complete; see `eos_etl transactions`)"
                )
            time.sleep(0.05)
        out: dict[int, int | None] = {}
        for tp in result.topic_partitions:
            if tp.error is not None:
                raise KafkaSetupError(f"cannot read committed offset of {group}/{topic}[{tp.partition}]: {tp.error}")
            out[tp.partition] = tp.offset if tp.offset >= 0 else None
        return out

    def broker_config(self, name: str) -> str | None:
        md = self._admin.list_topics(timeout=self.timeout)
        broker_id = str(next(iter(md.brokers)))
        try:
            futs = self._admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, broker_id)])
            configs = next(iter(futs.values())).result(timeout=self.timeout + 5)
        except KafkaException as exc:
            raise self._diagnose(exc) from exc
        entry = configs.get(name)
        return entry.value if entry is not None else None

    def create_topics(self, topics: dict[str, int], *, config: dict[str, str] | None = None) -> None:
        """Create topics (partition counts given); existing ones are left alone."""
        from confluent_kafka.admin import NewTopic

        # -1: the cluster's default.replication.factor (refined by create-topics' own choice, see cli).
        new = [NewTopic(t, num_partitions=n, replication_factor=-1, config=config or {}) for t, n in topics.items()]
        if not new:
            return
        for topic, fut in self._admin.create_topics(new, request_timeout=self.timeout).items():
            try:
                fut.result(timeout=self.timeout + 5)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise KafkaSetupError(f"cannot create topic {topic!r}: {exc.args[0].str()}") from exc
        # The controller has accepted the topics; wait until the broker serves their metadata.
        deadline = time.monotonic() + self.timeout
        pending = set(topics)
        while pending and time.monotonic() < deadline:
            md = self._admin.list_topics(timeout=self.timeout)
            pending = {t for t in pending if t not in md.topics or md.topics[t].error is not None
                       or not md.topics[t].partitions}
            if pending:
                time.sleep(0.1)

    def delete_topics(self, topics: list[str]) -> None:
        for _t, fut in self._admin.delete_topics(topics, request_timeout=self.timeout).items():
            try:
                fut.result(timeout=self.timeout + 5)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
