"""Which clusters answered this process: "cannot reach" is a configuration error only the first time.

A bootstrap list that has never answered (a wrong address, port or security
protocol, a cluster that is not running) is something to fix before running
again: :class:`~.errors.BrokerUnreachableError`, exit code 2. The same list
failing after it answered earlier in this process means brokers or the network
failed under a run that was set up right (a lossy link, a partition, brokers
stopped): :class:`~.errors.BrokerLostError`, exit code 1, which schedulers retry.

Remembered per bootstrap list and security protocol, for the life of the
process (a run is one process; its first question is the preflight's).
"""

from __future__ import annotations

import threading

from .connection import KafkaConnection
from .errors import BrokerLostError, BrokerUnreachableError

_answered: set[tuple[frozenset[str], str]] = set()
_lock = threading.Lock()


def _key(connection: KafkaConnection) -> tuple[frozenset[str], str]:
    servers = frozenset(s.strip().lower() for s in connection.bootstrap_servers.split(",") if s.strip())
    return servers, connection.security_protocol


def mark_answered(connection: KafkaConnection) -> None:
    """A broker of ``connection``'s bootstrap list answered a question."""
    key = _key(connection)
    if key not in _answered:  # the common case without the lock: set membership is atomic
        with _lock:
            _answered.add(key)


def has_answered(connection: KafkaConnection) -> bool:
    return _key(connection) in _answered


def forget(connection: KafkaConnection | None = None) -> None:
    """Forget one bootstrap list (or all): for tests that reuse an address on purpose."""
    with _lock:
        if connection is None:
            _answered.clear()
        else:
            _answered.discard(_key(connection))


def unreachable(connection: KafkaConnection, detail: str) -> BrokerUnreachableError:
    """The error for "no broker answered": ``detail`` says what was asked and for how long.

    :class:`BrokerLostError` (exit code 1) if the list answered before in this process,
    else :class:`BrokerUnreachableError` (exit code 2)."""
    where = f"Kafka at {connection.bootstrap_servers} ({connection.security_protocol})"
    if has_answered(connection):
        return BrokerLostError(
            f"cannot reach {where} any more: {detail}; it answered earlier in this run, so brokers or the "
            "network to them failed (or the brokers' advertised listeners are not reachable from this host): "
            "run again once they answer")
    return BrokerUnreachableError(
        f"cannot reach {where}: {detail}; is the broker running and are bootstrap servers and security "
        "protocol right?")
