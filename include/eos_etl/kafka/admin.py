"""The cluster's admin API: questions (topics, topic ids, offsets, committed group offsets,
configs) and the few changes the pipeline makes (topics created, grown, deleted).

Every question is asked of whichever broker answers and retried on retriable
failures (a broker lost, a leader or coordinator moving) until a stated
deadline (:mod:`.retry`): ``timeout`` for one attempt, ``retry_deadline_s`` for
the whole question. What still fails becomes one clear
:class:`KafkaSetupError` subclass (unreachable, missing topic, bad
credentials) naming what could not be read, so a misconfigured run stops
before it touches anything and a broker outage never surfaces as a traceback.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from dataclasses import dataclass

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic, OffsetSpec

from .connection import KafkaConnection
from .errors import (
    AuthenticationError,
    AuthorizationError,
    KafkaSetupError,
    MissingTopicError,
    UnstableOffsetsError,
)
from .group_offsets import GroupOffsetsReader
from .reachability import mark_answered, unreachable
from .retry import START_PHASE_DEADLINE_S, Deadline, describe_kafka_exception, is_retriable, retry_until

log = logging.getLogger(__name__)

#: Denials by the brokers' authorizer -> the kind of resource the missing ACL is on.
AUTHORIZATION_CODES = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "consumer group",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional id",
}
_AUTH_CODES = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, *AUTHORIZATION_CODES}

#: Topic configs a topic's durability is read from (and :mod:`.topics` sets).
MIN_ISR = "min.insync.replicas"
CLEANUP_POLICY = "cleanup.policy"

#: One stable offset fetch: short, because a read held back by an incomplete
#: transaction only ends at its timeout (see :mod:`.group_offsets`).
_STABLE_READ_S = 2.0


@dataclass(frozen=True)
class TopicState:
    """What a topic is on the cluster: the fewest replicas of any partition, its effective min ISR."""

    name: str
    partitions: int
    replication_factor: int
    min_insync_replicas: int
    cleanup_policy: str = "delete"
    created: bool = False

    def to_dict(self) -> dict:
        return {"partitions": self.partitions, "replication_factor": self.replication_factor,
                "min_insync_replicas": self.min_insync_replicas, "cleanup_policy": self.cleanup_policy,
                "created": self.created}


@dataclass(frozen=True)
class PartitionOffsets:
    earliest: int
    last_stable: int  # read_committed end: nothing at or past it is decided yet
    high_watermark: int

    @property
    def settled(self) -> bool:
        """No transaction on the partition is undecided: read_committed sees up to the log end."""
        return self.last_stable == self.high_watermark


class ClusterAdmin:
    """A thin, typed wrapper over confluent-kafka's AdminClient."""

    def __init__(self, connection: KafkaConnection, timeout: float = 10.0,
                 retry_deadline_s: float = START_PHASE_DEADLINE_S):
        self.connection = connection
        self.timeout = timeout
        self.retry_deadline_s = retry_deadline_s
        self._errors: list[KafkaError] = []
        self._lock = threading.Lock()
        self._admin = self._new_client()
        # Clients replaced after a timeout are kept, never destroyed: a request of
        # theirs may still be pending, and destroying a client under its own
        # callbacks is how native crashes happen. This is safe only because nothing
        # here asks a group coordinator through the AdminClient: such a request that
        # timed out in a client that lives on aborts the process (see :mod:`.acls`).
        self._retired: list[AdminClient] = []

    def _new_client(self) -> AdminClient:
        # The error callback closes over the list and the lock, never over ``self``: a
        # bound method would make ClusterAdmin <-> AdminClient a reference cycle, which
        # only the cycle collector frees, and it may run on a librdkafka thread, where
        # destroying the client aborts the process ("rd_kafka_destroy() called from
        # librdkafka owned thread"). Without the cycle the client is freed by reference
        # counting, on the thread that drops the last ClusterAdmin reference.
        errors, lock = self._errors, self._lock

        def on_error(err: KafkaError) -> None:
            with lock:
                errors.append(err)

        conf = self.connection.client_config()
        conf.update({"error_cb": on_error, "log_level": 0, "socket.connection.setup.timeout.ms": "5000"})
        return AdminClient(conf)

    def _credentials_rejected(self) -> bool:
        self._admin.poll(0)  # serve queued error callbacks (authentication failures arrive there)
        with self._lock:
            return any(e.code() in _AUTH_CODES for e in self._errors)

    def _diagnose(self, exc: BaseException | None, what: str, deadline_s: float | None = None) -> KafkaSetupError:
        """The one error an operator sees for a failed question: credentials, Kafka's answer, or unreachable."""
        self._admin.poll(0.5)  # serve queued error callbacks (authentication failures arrive there)
        with self._lock:
            codes = {e.code() for e in self._errors}
        kafka_error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        if isinstance(kafka_error, KafkaError):
            codes.add(kafka_error.code())
        denied = sorted(AUTHORIZATION_CODES[c] for c in codes if c in AUTHORIZATION_CODES)
        if denied:
            return AuthorizationError(
                f"Kafka at {self.connection.bootstrap_servers} denied user {self.connection.sasl_username!r} "
                f"{what}: no ACL on the {' and '.join(denied)}; grant the pipeline's with "
                "`python -m eos_etl acl grant`"
            )
        if codes & _AUTH_CODES:
            return AuthenticationError(
                f"Kafka at {self.connection.bootstrap_servers} rejected the credentials "
                f"({self.connection.security_protocol}, user {self.connection.sasl_username!r}); "
                "check the connection's login and password"
            )
        if exc is not None and not is_retriable(exc):
            return KafkaSetupError(
                f"Kafka at {self.connection.bootstrap_servers} answered {what}: {describe_kafka_exception(exc)}")
        waited = self.retry_deadline_s if deadline_s is None else deadline_s
        # Exit code 2 if this bootstrap list never answered (configuration), 1 if it did (lost at runtime).
        return unreachable(self.connection, f"no broker answered {what} within {waited:.0f}s"
                                            f"{f' (last: {describe_kafka_exception(exc)})' if exc is not None else ''}")

    def _renew_client(self, exc: BaseException) -> None:
        """After a timeout, ask through a fresh client: librdkafka keeps sending some
        requests (DescribeConfigs of topics: to the "controller" of its cached metadata)
        to the broker that just died until its metadata refresh, minutes later."""
        if isinstance(exc, TimeoutError) or (isinstance(exc, KafkaException)
                                             and exc.args[0].code() == KafkaError._TIMED_OUT):
            self._retired.append(self._admin)
            self._admin = self._new_client()

    def _ask(self, what: str, call, *, deadline_s: float | None = None, retriable=is_retriable):
        """``call(timeout)`` retried on retriable failures until the deadline; failures diagnosed."""
        deadline_s = self.retry_deadline_s if deadline_s is None else deadline_s
        try:
            # Rejected credentials arrive through the error callback while requests merely
            # time out: never retry past them (they do not heal), fail at once instead.
            answer = retry_until(call, what=what, deadline_s=deadline_s, attempt_timeout_s=self.timeout,
                                 retriable=lambda exc: retriable(exc) and not self._credentials_rejected(),
                                 before_retry=self._renew_client)
        except (KafkaException, TimeoutError) as exc:
            raise self._diagnose(exc, what, deadline_s) from exc
        mark_answered(self.connection)
        return answer

    def _metadata(self, what: str, topic: str | None = None):
        """Cluster metadata from whichever broker answers (librdkafka picks any connected one)."""
        def ask(timeout: float):
            md = self._admin.list_topics(topic=topic, timeout=timeout)
            if not md.brokers:
                raise KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN))
            return md

        return self._ask(what, ask)

    def check_reachable(self) -> None:
        """Metadata from the cluster within ``timeout``; rejected credentials fail at once.

        Short metadata requests, because librdkafka reports an authentication
        failure through the error callback while a long request would simply
        wait out its whole timeout. Any one broker of the bootstrap list answering is enough.
        """
        def metadata(timeout: float):
            md = self._admin.list_topics(timeout=min(timeout, 1.0))
            if not md.brokers:
                raise KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN))

        self._ask("a metadata request", metadata, deadline_s=self.timeout,
                  retriable=lambda exc: is_retriable(exc) and not self._credentials_rejected())

    def partitions(self, topic: str) -> list[int]:
        md = self._metadata(f"metadata of topic {topic!r}", topic)
        tmd = md.topics.get(topic)
        if tmd is None or (tmd.error is not None and tmd.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise MissingTopicError(f"topic {topic!r} does not exist on {self.connection.bootstrap_servers}")
        if tmd.error is not None:
            if tmd.error.code() in _AUTH_CODES:
                raise AuthorizationError(f"user {self.connection.sasl_username!r} may not use topic {topic!r} "
                                         f"(no ACL for it: {tmd.error.str()}); grant the pipeline's with "
                                         "`python -m eos_etl acl grant`")
            raise KafkaSetupError(f"topic {topic!r} is not usable: {tmd.error.str()}")
        return sorted(tmd.partitions)

    def topic_id(self, topic: str) -> str:
        """``topic``'s id: Kafka gives a topic a new one when it is deleted and created again, so
        the id tells the log a position was taken on from a log of the same name made since."""

        def ask(timeout: float) -> str | None:
            future = self._admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic]
            try:
                return str(future.result(timeout=timeout + 1).topic_id)
            except KafkaException as exc:
                if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    return None
                raise

        found = self._ask(f"the id of topic {topic!r}", ask)
        if found is None:
            raise MissingTopicError(f"topic {topic!r} does not exist on {self.connection.bootstrap_servers}")
        return found

    def require_topics(self, *topics: str) -> dict[str, list[int]]:
        return {t: self.partitions(t) for t in dict.fromkeys(topics)}

    def _list_offsets(self, topic: str, partitions: list[int], spec, isolation, *,
                      may_be_missing: bool = False) -> dict[int, tuple[int, int]]:
        """ListOffsets goes to each partition's leader; a lost leader is retried until a new one is elected.

        Without ``may_be_missing`` (earliest/latest always exist) a negative offset is a
        partition whose leader was lost under the request (librdkafka then answers
        -1001 without an error, seen on a three-node cluster): asked again, never returned.
        """
        if not partitions:
            return {}

        def ask(timeout: float) -> dict[int, tuple[int, int]]:
            request = {TopicPartition(topic, p): spec for p in partitions}
            futures = self._admin.list_offsets(request, isolation_level=isolation, request_timeout=timeout)
            out = {}
            for tp, fut in futures.items():
                info = fut.result(timeout=timeout + 1)
                if info.offset < 0 and not may_be_missing:
                    raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE,
                                                    f"no offset for {topic}[{tp.partition}] (leader lost)"))
                out[tp.partition] = (info.offset, info.timestamp)
            return out

        return self._ask(f"a list-offsets request for {topic!r} (partition leaders)", ask)

    def offsets(self, topic: str, partitions: list[int]) -> dict[int, PartitionOffsets]:
        earliest = self._list_offsets(topic, partitions, OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
        stable = self._list_offsets(topic, partitions, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
        high = self._list_offsets(topic, partitions, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
        return {p: PartitionOffsets(earliest[p][0], stable[p][0], high[p][0]) for p in partitions}

    def last_stable_offsets(self, partitions: dict[str, list[int]], *,
                            deadline_s: float | None = None) -> dict[str, dict[int, int]]:
        """Each partition's last stable offset (what a read_committed reader reads up to), of several topics in
        one ListOffsets request per partition leader; retried as :meth:`_list_offsets` until ``deadline_s``
        (default ``retry_deadline_s``)."""
        wanted = [TopicPartition(t, p) for t, ps in partitions.items() for p in ps]
        if not wanted:
            return {}

        def ask(timeout: float) -> dict[str, dict[int, int]]:
            futures = self._admin.list_offsets({tp: OffsetSpec.latest() for tp in wanted},
                                               isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout)
            out: dict[str, dict[int, int]] = {}
            for tp, fut in futures.items():
                info = fut.result(timeout=timeout + 1)
                if info.offset < 0:  # a leader lost under the request (see _list_offsets): asked again
                    raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE,
                                                    f"no offset for {tp.topic}[{tp.partition}] (leader lost)"))
                out.setdefault(tp.topic, {})[tp.partition] = info.offset
            return out

        return self._ask(f"a list-offsets request for {sorted(partitions)} (partition leaders)", ask,
                         deadline_s=deadline_s)

    def settled_offsets(self, topic: str, partitions: list[int] | None = None, *, timeout_s: float = 15.0,
                        poll_s: float = 0.05) -> dict[int, PartitionOffsets]:
        """The offsets once every partition is settled, or the last ones read when ``timeout_s`` ran out.

        commit/abort_transaction return once the coordinator has *decided*; it writes
        the markers right after (later with replicas to wait for), and until they land
        the LSO lags behind the log end. Whoever needs a window's true end right after
        writing asks here rather than take a stale one; callers check ``settled``.
        A broker that just restarted may not lead the partition yet: asked again.
        """
        deadline = time.monotonic() + timeout_s
        offsets: dict[int, PartitionOffsets] = {}
        while True:
            try:
                offsets = self.offsets(topic, partitions if partitions is not None else self.partitions(topic))
            except KafkaSetupError:
                if time.monotonic() >= deadline:
                    raise
            else:
                if all(o.settled for o in offsets.values()) or time.monotonic() >= deadline:
                    return offsets
            time.sleep(poll_s)

    def newest_timestamps(self, topic: str, partitions: list[int]) -> dict[int, int | None]:
        """The largest record timestamp per partition (None: the partition is empty)."""
        got = self._list_offsets(topic, partitions, OffsetSpec.max_timestamp(), IsolationLevel.READ_UNCOMMITTED,
                                 may_be_missing=True)
        return {p: (ts if off >= 0 and ts >= 0 else None) for p, (off, ts) in got.items()}

    def offsets_for_time(self, topic: str, partitions: list[int], timestamp_ms: int) -> dict[int, int | None]:
        """First offset whose timestamp is >= timestamp_ms; None when there is none yet."""
        got = self._list_offsets(
            topic, partitions, OffsetSpec.for_timestamp(timestamp_ms), IsolationLevel.READ_COMMITTED,
            may_be_missing=True,
        )
        return {p: (off if off >= 0 else None) for p, (off, _ts) in got.items()}

    def committed_offsets(
        self, group: str, topic: str, partitions: list[int], *, unstable_timeout: float | None = None
    ) -> dict[int, int | None]:
        """The group's committed offsets, read with stable semantics (pending
        transactional commits are waited for, never reported half-done).

        Offsets a transaction still holds are waited for up to ``unstable_timeout``
        (default ``timeout``), then :class:`UnstableOffsetsError`; an unreachable
        group coordinator is retried until ``retry_deadline_s``. Read through a
        consumer, not the AdminClient (librdkafka#5040, see :mod:`.group_offsets`).
        """
        if not partitions:
            return {}
        unstable_s = self.timeout if unstable_timeout is None else unstable_timeout
        unstable_deadline = Deadline(unstable_s)

        with GroupOffsetsReader(self.connection.client_config(), group) as reader:
            def read(timeout: float) -> dict[int, int | None]:
                try:
                    return reader.stable(topic, partitions, min(timeout, _STABLE_READ_S))
                except KafkaException as exc:
                    if exc.args[0].code() == KafkaError._TIMED_OUT and reader.coordinator_answers(
                            topic, partitions, min(timeout, _STABLE_READ_S)):
                        # The coordinator answers, but holds the stable read back: a
                        # transactional offset commit is not complete (markers in flight,
                        # or an attempt died between send_offsets_to_transaction and commit).
                        raise UnstableOffsetsError(
                            f"committed offsets of {group}/{topic} partitions {partitions} belong to a "
                            f"transaction that did not complete within {unstable_s:.0f}s "
                            "(see `eos_etl transactions`)"
                        ) from exc
                    raise

            def retriable(exc: BaseException) -> bool:
                if isinstance(exc, UnstableOffsetsError):
                    return not unstable_deadline.expired()
                return is_retriable(exc)

            return self._ask(f"an offset fetch for group {group!r} (its group coordinator)", read,
                             retriable=retriable)

    def broker_config(self, name: str) -> str | None:
        """A broker setting, from whichever live broker answers first (see :meth:`broker_configs`)."""
        return self.broker_configs(name)[name]

    def broker_configs(self, *names: str) -> dict[str, str | None]:
        """Broker settings (None: not set), all from whichever live broker answers first.

        Every broker in the metadata is asked at once: a broker that was just
        killed stays in the metadata until KRaft fences it, and waiting on it
        alone would fail the run although the others are up.
        """
        def ask(timeout: float) -> dict[str, str | None]:
            md = self._admin.list_topics(timeout=timeout)
            futures = []
            for broker_id in md.brokers:
                resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
                futures += self._admin.describe_configs([resource], request_timeout=timeout).values()
            if not futures:
                raise KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN))
            pending, failure = set(futures), None
            while pending:
                done, pending = concurrent.futures.wait(pending, timeout=timeout + 1,
                                                        return_when=concurrent.futures.FIRST_COMPLETED)
                if not done:
                    break
                for fut in done:
                    if fut.exception() is None:
                        entries = fut.result()
                        return {name: entries[name].value if name in entries else None for name in names}
                    failure = fut.exception()
                    if not is_retriable(failure):
                        raise failure
            raise failure or TimeoutError(f"no broker described its configuration within {timeout:.0f}s")

        return self._ask(f"a describe-configs request for {', '.join(names)}", ask)

    def broker_count(self) -> int:
        """Brokers the cluster serves now (registered and unfenced)."""
        return len(self._metadata("a metadata request").brokers)

    def topic_states(self, topics: list[str]) -> dict[str, TopicState]:
        """``{topic: TopicState}`` of those that exist: partitions, fewest replicas, effective min ISR
        and cleanup policy."""
        md = self._metadata("a metadata request")
        present = [t for t in dict.fromkeys(topics) if t in md.topics and md.topics[t].error is None]
        if not present:
            return {}

        def min_isr(timeout: float) -> dict[str, object]:
            resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in present]
            futures = self._admin.describe_configs(resources, request_timeout=timeout)
            return {r.name: fut.result(timeout=timeout + 1) for r, fut in futures.items()}

        def retriable(exc: BaseException) -> bool:
            # A topic created a moment ago: the broker asked may not know it yet.
            return is_retriable(exc) or (isinstance(exc, KafkaException)
                                         and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART)

        entries = self._ask(f"a describe-configs request for {', '.join(present)}", min_isr, retriable=retriable)
        states = {}
        for name, config in entries.items():
            parts = md.topics[name].partitions.values()
            min_isr, policy = config.get(MIN_ISR), config.get(CLEANUP_POLICY)
            states[name] = TopicState(
                name=name, partitions=len(parts),
                replication_factor=min(len(p.replicas) for p in parts),
                min_insync_replicas=int(min_isr.value) if min_isr is not None else 1,
                cleanup_policy=policy.value if policy is not None else "delete",
            )
        return states

    def create_topics(self, topics: dict[str, int], *, replication_factor: int | None = None,
                      config: dict[str, str] | None = None) -> None:
        """Create topics (partition counts given); existing ones are left alone.

        ``replication_factor`` None takes the cluster's ``default.replication.factor``.
        Choosing durability and checking existing topics is :mod:`.topics`' job.
        """
        rf = -1 if replication_factor is None else replication_factor
        new = [NewTopic(t, num_partitions=n, replication_factor=rf, config=config or {}) for t, n in topics.items()]
        if not new:
            return
        for topic, fut in self._admin.create_topics(new, request_timeout=self.timeout).items():
            try:
                fut.result(timeout=self.timeout + 5)
            except KafkaException as exc:
                code = exc.args[0].code()
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                if code == KafkaError.INVALID_REPLICATION_FACTOR:
                    raise KafkaSetupError(
                        f"cannot create topic {topic!r} with replication factor "
                        f"{'(cluster default)' if rf < 0 else rf}: the cluster has only {self.broker_count()} "
                        "live broker(s); start the missing brokers or ask for fewer replicas"
                    ) from exc
                raise KafkaSetupError(f"cannot create topic {topic!r}: {exc.args[0].str()}") from exc
        # The controller has accepted the topics; wait until the brokers serve their metadata.
        deadline = time.monotonic() + self.timeout
        pending = set(topics)
        while pending and time.monotonic() < deadline:
            md = self._admin.list_topics(timeout=self.timeout)
            pending = {t for t in pending if t not in md.topics or md.topics[t].error is not None
                       or not md.topics[t].partitions}
            if pending:
                time.sleep(0.1)

    def grow_topic(self, topic: str, partitions: int) -> None:
        """Give ``topic`` ``partitions`` partitions (it has fewer), and wait until the metadata shows them."""

        def ask(timeout: float) -> None:
            future = self._admin.create_partitions([NewPartitions(topic, partitions)], request_timeout=timeout)[topic]
            try:
                future.result(timeout=timeout + 1)
            except KafkaException as exc:  # a retry after an answer that got lost finds it grown already
                if exc.args[0].code() != KafkaError.INVALID_PARTITIONS or len(self.partitions(topic)) < partitions:
                    raise

        self._ask(f"{partitions} partitions for topic {topic!r}", ask)
        deadline = time.monotonic() + self.retry_deadline_s
        while len(self.partitions(topic)) < partitions and time.monotonic() < deadline:
            time.sleep(0.2)

    def delete_topics(self, topics: list[str]) -> None:
        for _t, fut in self._admin.delete_topics(topics, request_timeout=self.timeout).items():
            try:
                fut.result(timeout=self.timeout + 5)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
