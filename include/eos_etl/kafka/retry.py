"""One way to retry a Kafka call: retriable failures again until a deadline, anything else at once.

A cluster that loses a minority of its brokers answers for a while with
timeouts, NOT_COORDINATOR, NOT_LEADER_FOR_PARTITION or COORDINATOR_LOAD_IN_PROGRESS
until KRaft fences the dead broker (``broker.session.timeout.ms``, 9 s by
default) and its leaderships and coordinators move. Those answers are worth
asking again; an authentication failure or a missing topic is not. Every
question the start phase asks goes through :func:`retry_until`, so every one is
bounded by a stated deadline and none waits on one broker alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long the start phase keeps asking one question while the cluster recovers
#: from a lost broker: KRaft fences it after 9 s, leaders and coordinators then move.
START_PHASE_DEADLINE_S = 30.0

#: Codes that mean "another broker, or the same one a little later, will answer":
#: librdkafka does not flag all of them ``retriable()`` in admin results.
RETRIABLE_CODES = frozenset({
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._WAIT_COORD,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.BROKER_NOT_AVAILABLE,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,  # NOT_LEADER_OR_FOLLOWER in newer protocol names
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.KAFKA_STORAGE_ERROR,
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    # A new leader that has not yet caught up its high watermark (a broker just lost): list-offsets
    # answers this until it has, which Kafka's protocol marks retriable and librdkafka does not.
    KafkaError.OFFSET_NOT_AVAILABLE,
})


def is_retriable(exc: BaseException) -> bool:
    """A broker being lost, moving or still loading: the same question may succeed later.

    ``TimeoutError`` is a future that did not complete in time (the broker asked
    never answered), the way a dead broker looks from an AdminClient result.
    """
    if isinstance(exc, TimeoutError):
        return True
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err: KafkaError = exc.args[0]
        return not err.fatal() and (err.retriable() or err.code() in RETRIABLE_CODES)
    return False


class Deadline:
    """A point in time that several calls share; each takes at most what is left."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._at = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self._at - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self._at

    def slice(self, at_most: float, at_least: float = 0.1) -> float:
        """A timeout for one call: ``at_most``, never past the deadline (but at least ``at_least``)."""
        return max(at_least, min(at_most, self.remaining()))


def retry_until(call: Callable[[float], T], *, what: str, deadline_s: float = START_PHASE_DEADLINE_S,
                attempt_timeout_s: float = 10.0, retriable: Callable[[BaseException], bool] = is_retriable,
                backoff_s: float = 0.2, max_backoff_s: float = 2.0,
                before_retry: Callable[[BaseException], None] | None = None) -> T:
    """``call(timeout)``; retriable failures are retried with backoff until ``deadline_s`` passed.

    Each attempt gets ``attempt_timeout_s`` but never more than what is left of
    the deadline, so the whole question takes at most ``deadline_s`` (plus
    librdkafka's rounding). The last failure is re-raised unchanged when the
    deadline passes, or at once when it is not retriable: turning it into a
    diagnosis is the caller's job. ``before_retry(exc)`` runs before each new attempt
    (e.g. to ask through a fresh client).
    """
    deadline = Deadline(deadline_s)
    attempt = 0
    while True:
        try:
            return call(deadline.slice(attempt_timeout_s))
        except Exception as exc:
            if not retriable(exc):
                raise
            attempt += 1
            pause = min(backoff_s * 2 ** (attempt - 1), max_backoff_s)
            if deadline.remaining() < pause + 0.1:
                raise
            log.info("%s: %s; asking again (attempt %d, %.0fs left)", what, describe_kafka_exception(exc), attempt,
                     deadline.remaining())
            time.sleep(pause)
            if before_retry is not None:
                before_retry(exc)


def describe_kafka_exception(exc: BaseException) -> str:
    """One line for a Kafka failure (librdkafka's own text), for logs and error messages."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].str()
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return f"{type(exc).__name__}: {exc}"
