"""A thin typed wrapper over confluent-kafka's transactional Producer.

Error handling follows librdkafka's transactional API contract:
  * ``retriable()``         -> call the same API again (until a deadline);
  * ``txn_requires_abort()``-> raise :class:`TransactionAbortable`; the caller
                               aborts and replays from the committed offsets;
  * fatal / fenced          -> raise :class:`ProducerFencedError` /
                               :class:`PublishError`; the producer is unusable,
                               the attempt fails and a new one re-initialises.
A commit or abort still unanswered after its retries (the coordinator cut off,
or its answer lost) has an unknown outcome: :class:`TransactionOutcomeUnknown`.
Retrying further could wait forever and aborting could undo a commit that
landed, so the caller ends this producer and starts a new one with the same
transactional.id (:meth:`TransactionalProducer.reinitialise`): its
``init_transactions`` bumps the epoch, which completes or aborts whatever the
old one left open and fences anything of it that arrives late, before any new
transaction begins. The committed offset read afterwards tells which it was.
A produce the client refuses once the transaction failed carries a bare code without
those flags (``_FATAL`` fenced, ``_STATE`` abortable); it is classified as the transactional
API reports the state (:meth:`TransactionalProducer._refused`), and so is a fatal error the
client raises from ``flush``/``poll`` itself (a fenced produce, reported by an error callback).
Every failed delivery is reported and makes the transaction abortable, it is never dropped.
Every successful one records its offset: per (topic, partition), the last record of the open
transaction, folded into :attr:`TransactionalProducer.written` when the transaction commits and
dropped when it aborts. A run ends once a read_committed reader sees up to those records
(:mod:`.visibility`): ``commit_transaction`` returns once the coordinator decided, and the
markers that make the records visible are written after it. (A Python callback per record: about
0.3 µs of CPU each, 200,000 records with 5 headers in 6 alternating runs on a local broker, median
0.68 s against 0.62 s with ``delivery.report.only.error``, which had saved it before.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from confluent_kafka import KafkaError, KafkaException, Producer

from ...kafka.produce import produce_waiting
from ..errors import (
    ProducerFencedError,
    PublishError,
    TransactionAbortable,
    TransactionalIdNotAuthorizedError,
    TransactionOutcomeUnknown,
)

log = logging.getLogger(__name__)

#: A blocking call still running this long after its own timeout is one the library forgot (librdkafka#5456).
OVERDUE_MARGIN_S = 15.0
#: A flush that keeps seeing deliveries waits on, but ends this long before the transaction's own
#: timeout (counted from begin_transaction), which leaves the commit time to reach the coordinator.
FLUSH_TIMEOUT_MARGIN_S = 20.0
#: The longest :meth:`TransactionalProducer.init_transactions` waits for a metadata answer before it asks.
CONNECT_TIMEOUT_S = 2.0

_FENCED_CODES = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
}

# What librdkafka refuses a produce with, without flags, once the transaction failed (fatal, abortable).
_REFUSED_IN_STATE = {KafkaError._FATAL, KafkaError._STATE}

# The leader has fewer in-sync replicas than the topic's min.insync.replicas: an
# acks=all write cannot be acknowledged until brokers come back (retriable for
# librdkafka, so it mostly ends as a timeout; engine.tasks.replica_guard fails the run,
# engine.planning.replicas refuses to start it).
_NOT_ENOUGH_REPLICAS_CODES = {KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND}


def describe_kafka_error(err: KafkaError) -> str:
    """The error's text, saying what it means when it is a min ISR shortfall."""
    if err.code() in _NOT_ENOUGH_REPLICAS_CODES:
        return f"{err.str()} (the partition has fewer in-sync replicas than min.insync.replicas: brokers are down)"
    return err.str()


class TransactionalProducer:
    def __init__(self, settings: dict, *, retry_deadline_s: float = 60.0, op_timeout_s: float = 30.0,
                 call_bound: Callable[[float], AbstractContextManager] | None = None,
                 after_init: Callable[[], None] | None = None):
        """``call_bound(seconds)``: a context that ends the process if a blocking call inside it
        outlives ``seconds`` (the task's watchdog, :meth:`engine.tasks.watchdog.StallWatchdog.bounded`).
        ``after_init``: called after every ``init_transactions``, the one of a :meth:`reinitialise` included
        (a publisher's check that the pipeline's identity is still the one its window was planned with)."""
        self.transactional_id = settings["transactional.id"]
        self._after_init = after_init or (lambda: None)
        self._call_bound = call_bound or (lambda _seconds: nullcontext())
        self._retry_deadline_s = retry_deadline_s
        self._op_timeout_s = op_timeout_s
        self._delivery_errors: list[KafkaError] = []
        # (topic, partition) -> the offset of the last record delivered there in the open transaction.
        self._open_offsets: dict[tuple[str, int], int] = {}
        #: (topic, partition) -> the offset of the last record of this producer's committed transactions
        #: there (outputs and checkpoint records): what a read_committed reader must see before a run ends.
        self.written: dict[tuple[str, int], int] = {}
        conf = dict(settings)
        conf["on_delivery"] = self._on_delivery
        conf["error_cb"] = self._on_error
        self._fatal_error: KafkaError | None = None
        # Every delivery is reported: failures make the transaction abortable, successes give offsets.
        conf["delivery.report.only.error"] = False
        conf.setdefault("log_level", 3)
        self._conf = conf
        self._transaction_timeout_s = float(settings.get("transaction.timeout.ms", 60_000)) / 1000
        self._begun_at = time.monotonic()
        self._in_transaction = False  # begun, not yet committed or aborted
        self._producer: Producer | None = Producer(conf)
        #: Producers ended by :meth:`reinitialise` so far (each new one has a new epoch).
        self.reinitialisations = 0

    # -- delivery reports -----------------------------------------------------------
    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self._delivery_errors.append(err)
        else:
            # Reports of one partition come in offset order (an idempotent producer's are): the last is the largest.
            self._open_offsets[(msg.topic(), msg.partition())] = msg.offset()

    def _fold_open_offsets(self) -> None:
        """The open transaction's offsets into :attr:`written` (it committed, or may have), largest per partition."""
        written = self.written
        for tp, offset in self._open_offsets.items():
            if offset > written.get(tp, -1):
                written[tp] = offset
        self._open_offsets.clear()

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            raise PublishError(f"producer {self.transactional_id} was closed after a fatal error")
        return self._producer

    # -- error classification -------------------------------------------------------------
    def _call(self, what: str, *args, fn: Callable | None = None, outcome_unknown: bool = False,
              failed: KafkaException | None = None):
        """The producer's method ``what`` (or ``fn``) with ``args``, under librdkafka's error contract;
        ``outcome_unknown``: a commit or abort, whose failure to get an answer within the retries is
        :class:`TransactionOutcomeUnknown`; ``failed``: the call already failed once with this (it is
        classified first, and called again only if retriable)."""
        deadline = time.monotonic() + self._retry_deadline_s
        attempt = 0
        while True:
            try:
                if failed is not None:
                    failed, first = None, failed
                    raise first
                # Every blocking call passes self._op_timeout_s; one that overruns it by far never returns.
                with self._call_bound(self._op_timeout_s + OVERDUE_MARGIN_S):
                    # The method is looked up here, never held by this frame: a traceback that kept the
                    # handle alive would delay its destruction in reinitialise().
                    return fn(*args) if fn is not None else getattr(self.producer, what)(*args)
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                    self.close()
                    raise TransactionalIdNotAuthorizedError(
                        f"{what}: the principal may not use transactional.id {self.transactional_id} (no Write "
                        "ACL on it); grant the pipeline's ACLs with `python -m eos_etl acl grant`") from exc
                if err.code() in _FENCED_CODES:
                    self.close()
                    raise ProducerFencedError(
                        f"{what} failed for transactional.id {self.transactional_id}: {err.str()}",
                        transaction_age_s=self.transaction_age_s(),
                        transaction_timeout_s=self._transaction_timeout_s) from exc
                if err.fatal():
                    self.close()
                    raise PublishError(f"{what} failed for transactional.id {self.transactional_id}: {err.str()}"
                                       ) from exc
                if err.txn_requires_abort():
                    raise TransactionAbortable(f"{what}: {describe_kafka_error(err)}") from exc
                if err.retriable() and time.monotonic() < deadline:
                    attempt += 1
                    log.info("%s retriable error for %s (attempt %d): %s", what, self.transactional_id, attempt,
                             describe_kafka_error(err))
                    time.sleep(min(0.05 * 2**attempt, 2.0))
                    continue
                if outcome_unknown:
                    raise TransactionOutcomeUnknown(
                        f"{what} for transactional.id {self.transactional_id} got no answer within "
                        f"{self._retry_deadline_s:.0f}s of retries ({describe_kafka_error(err)}): "
                        "its outcome is unknown"
                    ) from exc
                raise PublishError(f"{what} failed for transactional.id {self.transactional_id}: "
                                   f"{describe_kafka_error(err)}") from exc

    # -- transactional API ------------------------------------------------------------------
    def init_transactions(self) -> None:
        """Fence earlier holders of the id and abort what they left open."""
        self._connect()
        self._call("init_transactions", self._op_timeout_s)
        self._after_init()

    def _connect(self) -> None:
        """Hold a connection to a broker the client learned from the cluster before ``init_transactions``.

        librdkafka drops its bootstrap connection as soon as the first metadata names the brokers, and
        it looks for the transaction coordinator only through a learned broker that is up. Called with
        none up yet, ``init_transactions`` waits for the library's 500 ms retry timer: it took 0.51 s
        in 3 of 4 calls against one local broker, and 6 ms after a metadata request answered by a
        learned broker (docs/performance-history.md, "A producer's first 500 ms"). Only an
        optimisation, bounded by :data:`CONNECT_TIMEOUT_S`: a cluster that does not answer is
        ``init_transactions``' to report, under its own timeout and error handling."""
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        with self._call_bound(CONNECT_TIMEOUT_S + OVERDUE_MARGIN_S):
            while (left := deadline - time.monotonic()) > 0:
                try:
                    answered_by = self.producer.list_topics(timeout=left).orig_broker_id
                except KafkaException:
                    return
                if answered_by >= 0:  # a learned broker (the bootstrap connection answers as -1)
                    return

    def begin_transaction(self) -> None:
        self._delivery_errors.clear()
        self._open_offsets.clear()
        self._call("begin_transaction")
        self._begun_at = time.monotonic()
        self._in_transaction = True

    def transaction_age_s(self) -> float | None:
        """How long the open transaction has been open (None: none is): one open past
        ``transaction.timeout.ms`` is one the coordinator aborts itself, bumping the epoch."""
        return time.monotonic() - self._begun_at if self._in_transaction else None

    def produce(self, topic: str, key: bytes | None, value: bytes | None, headers: list) -> None:
        # Runs once per output record: the client's call first, the full-queue helper only when needed.
        # Positional (topic, value, key, partition, on_delivery, callback, timestamp, headers; -1: the
        # partitioner's choice, 0: the producer's clock): confluent-kafka 2.16 parses keywords about
        # 0.25 us slower a call (2.26-2.34 vs 2.00-2.07 us with four lineage headers).
        producer = self._producer or self.producer  # the property only to raise (closed)
        try:
            try:
                producer.produce(topic, value, key, -1, None, None, 0, headers)
            except BufferError:
                produce_waiting(producer, topic, value, key, headers=headers)
        except KafkaException as exc:
            self._refused(exc, lambda: produce_waiting(self.producer, topic, value, key, headers=headers))

    def produce_to(self, topic: str, partition: int, key: bytes, value: bytes) -> None:
        """One record to a chosen partition (not the per-output hot path: no headers)."""
        try:
            produce_waiting(self.producer, topic, value, key, partition=partition)
        except KafkaException as exc:
            self._refused(exc, lambda: produce_waiting(self.producer, topic, value, key, partition=partition))

    def _refused(self, exc: KafkaException, again: Callable[[], None]) -> None:
        """A produce the client refused with ``exc``: raise what the producer's state means, as for any other call
        (``again``: the same produce, called again while the error is retriable).

        Once the transaction failed, librdkafka refuses new messages with a bare code, without the flags its
        transactional API sets: ``_FATAL`` (fenced, or another fatal error) or ``_STATE`` (the transaction is
        abortable). Its transactional API says which, with the flags and the cause:
        :meth:`_raise_transaction_error`."""
        err: KafkaError = exc.args[0]
        if err.code() in _REFUSED_IN_STATE and not (err.fatal() or err.txn_requires_abort()) and self._in_transaction:
            self._raise_transaction_error("produce", exc)
        self._call("produce", fn=again, failed=exc)

    def _raise_transaction_error(self, what: str, cause: BaseException) -> None:
        """Raise the error of the transaction's state, classified as :meth:`_call` does (fenced, fatal, abortable).

        ``begin_transaction`` is refused, with no effect, in every state but Ready; in the fatal and abortable
        states with the transaction's own error and its flags. Called after the client refused a produce in an
        open transaction or raised a fatal error, so never in Ready; were it, the transaction it began is
        aborted at once and ``cause`` is raised as a :class:`PublishError`."""
        def ask() -> None:
            self.producer.begin_transaction()
            self.producer.abort_transaction(self._op_timeout_s)  # not reached while a transaction is open
        self._call(what, fn=ask)
        raise PublishError(f"{what} failed for transactional.id {self.transactional_id} with no transaction "
                           f"open: {cause}") from cause

    def _on_error(self, err: KafkaError) -> None:
        """The client's error callback: fatal errors are remembered (the next :meth:`flush` raises them,
        classified), the others logged; librdkafka retries those itself."""
        if err.fatal():
            self._fatal_error = err
            log.error("producer %s: fatal error: %s", self.transactional_id, err.str())
        else:
            log.debug("producer %s: %s", self.transactional_id, err.str())

    def poll(self) -> None:
        self._serve(self.producer.poll, 0)

    def _serve(self, call: Callable, timeout: float):
        """The client's ``flush``/``poll``, which raise a fatal error (fenced) themselves, and then fail with a
        ``SystemError`` if the same call serves a delivery report: the fatal error, classified, instead."""
        try:
            return call(timeout)
        except (KafkaException, SystemError) as exc:
            self._raise_transaction_error(call.__name__, exc)

    def send_offsets_to_transaction(self, offsets: list, group_metadata) -> None:
        self._call("send_offsets_to_transaction", offsets, group_metadata, self._op_timeout_s)

    def flush(self) -> None:
        """Wait for every produced message's delivery report; any failure makes the transaction abortable.

        In short slices: once one delivery failed, the transaction is doomed and
        librdkafka will not send the rest, so waiting out the whole timeout for
        them would only delay the abort (by the full timeout, every replay).

        Undelivered messages make it abortable after the operation timeout without
        a delivery, not after a fixed time: while deliveries keep arriving (a slow
        or lossy link, not a dead leader) the wait goes on, up to the transaction's
        own timeout less :data:`FLUSH_TIMEOUT_MARGIN_S`. Aborting a transaction that
        is still moving throws its progress away, and its replay would crawl the
        same way (measured with 30 % packet loss: every transaction of 500 records
        was aborted at 30 s, with a few hundred messages to go).
        """
        started = time.monotonic()
        deadline = started + self._op_timeout_s
        limit = max(deadline, self._begun_at + self._transaction_timeout_s - FLUSH_TIMEOUT_MARGIN_S)
        last = len(self.producer)  # messages in the queue or in flight
        while True:
            remaining = self._serve(self.producer.flush, max(0.0, min(0.5, deadline - time.monotonic())))
            if self._fatal_error is not None:  # fenced, or another fatal error: the producer is done
                self._raise_transaction_error("flush", KafkaException(self._fatal_error))
            if self._delivery_errors:
                first = self._delivery_errors[0]
                raise TransactionAbortable(
                    f"{len(self._delivery_errors)} deliveries failed, first: {describe_kafka_error(first)}")
            if not remaining:
                return
            now = time.monotonic()
            if remaining < last:  # deliveries arrived: still moving
                deadline = min(max(deadline, now + self._op_timeout_s), limit)
            last = remaining
            if now >= deadline:
                raise TransactionAbortable(f"{remaining} messages still undelivered after {now - started:.1f}s "
                                           f"({self._op_timeout_s:.0f}s without a delivery, or the transaction "
                                           "near its timeout)")

    def commit_transaction(self) -> None:
        # Flush first so failed deliveries are seen before the commit, not after.
        self.flush()
        # A commit that times out is retried (resumable: librdkafka goes on in the background); one
        # still unanswered after the retries is TransactionOutcomeUnknown, never followed by an abort.
        self._call("commit_transaction", self._op_timeout_s, outcome_unknown=True)
        self._in_transaction = False
        self._fold_open_offsets()

    def abort_transaction(self, *, settle: bool = True) -> None:
        """Abort the open transaction (``settle``: once every message it produced is delivered or failed).

        Settled, for a transaction that is replayed next: aborting while partitions are still being added
        to it can make the broker answer INVALID_TXN_STATE, which librdkafka treats as fatal
        (librdkafka#4849), and a fatal producer would end the attempt. Not once a delivery failed: the
        transaction is doomed and librdkafka sends nothing more of it. Unsettled, for an attempt that
        stops (:meth:`TransactionLoop.abandon`): under ``linger.ms`` the queued messages are most of the
        transaction (nothing is readable before the commit, which sends every batch at once), and sending
        them only to abort them took as long as the transaction; librdkafka's abort purges them unsent and
        waits for the in-flight ones. If #4849 strikes there, the transaction is left to the next
        ``init_transactions`` or its timeout, and nothing of it becomes visible either way.

        (The client's own ``purge`` is no way to drop them first: the sequence numbers it skips fail the
        next transaction, "skipped sequence numbers (OUT_OF_ORDER_SEQUENCE_NUMBER, requires epoch bump)".)
        """
        deadline = time.monotonic() + self._op_timeout_s
        while settle and len(self.producer) and not self._delivery_errors and time.monotonic() < deadline:
            self._serve(self.producer.flush, 0.5)
        self._call("abort_transaction", self._op_timeout_s, outcome_unknown=True)
        self._in_transaction = False
        self._delivery_errors.clear()
        self._open_offsets.clear()  # aborted: a read_committed reader never sees them

    def reinitialise(self) -> None:
        """End this producer and start a new one with the same transactional.id (after an unknown outcome).

        The old handle's queued and in-flight messages are purged (their acknowledgements void) and the
        handle is destroyed now, so it stops retrying the request whose outcome is unknown. The new
        producer's ``init_transactions`` bumps the epoch: the coordinator completes or aborts what the old
        one left open, and whatever of the old one still reaches a broker late is rejected as fenced.
        """
        old, self._producer = self._producer, None
        with self._call_bound(self._op_timeout_s + OVERDUE_MARGIN_S):
            if old is not None:
                old.purge(in_queue=True, in_flight=True, blocking=False)
            # Dropping the last reference destroys the handle (rd_kafka_destroy) here and now. Not
            # close(): it first aborts the open transaction with no timeout but the transaction's own,
            # against the coordinator that did not answer, or over a commit that may have landed.
            del old
        self._delivery_errors.clear()
        self._fatal_error = None
        self._in_transaction = False  # the new epoch's init completes or aborts what the old one left open
        # The open transaction may have committed (an unknown outcome): its records count as written. Waiting
        # for them costs nothing if it was aborted instead: the new epoch's init returns once it is complete.
        self._fold_open_offsets()
        self._producer = Producer(self._conf)
        self.reinitialisations += 1
        log.warning("producer of %s ended and replaced; initialising the new one (a new epoch)", self.transactional_id)
        self.init_transactions()

    def close(self) -> None:
        """Destroy the producer (after a fatal error, or when done)."""
        self._producer = None
