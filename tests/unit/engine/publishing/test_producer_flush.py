"""How long the publisher waits for deliveries before it gives a transaction up (no broker needed).

A stand-in for librdkafka's handle reports how many messages are still undelivered after each
flush slice. A dead leader (nothing delivered) makes the transaction abortable after the operation
timeout; a slow or lossy link (deliveries keep arriving) is waited for, up to the transaction's own
timeout less a margin; a failed delivery ends the wait at once. The same against real network loss:
the partition soak's lossy_link scenario.
"""

from __future__ import annotations

import time

import pytest

from eos_etl.engine.errors import TransactionAbortable
from eos_etl.engine.publishing.producer import FLUSH_TIMEOUT_MARGIN_S, TransactionalProducer


class Handle:
    """Undelivered messages: ``counts[0]`` now; each flush(timeout) sleeps the slice and moves to the next."""

    def __init__(self, counts):
        self.counts = list(counts)
        self.calls = 0

    def __len__(self):
        return self.counts[0]

    def flush(self, timeout):
        time.sleep(timeout)
        self.calls += 1
        if len(self.counts) > 1:
            self.counts.pop(0)
        return self.counts[0]


def producer(counts, *, op_timeout_s=0.4, transaction_timeout_s=60.0) -> TransactionalProducer:
    p = TransactionalProducer({"transactional.id": "flush-test", "bootstrap.servers": "127.0.0.1:1",
                               "transaction.timeout.ms": int(transaction_timeout_s * 1000)},
                              op_timeout_s=op_timeout_s)
    p._producer = Handle(counts)
    return p


def test_a_slow_link_that_keeps_delivering_is_waited_for_past_the_operation_timeout():
    p = producer([100 - i for i in range(0, 100, 10)] + [0])  # a delivery every slice, ten slices
    t0 = time.monotonic()
    p.flush()
    assert time.monotonic() - t0 > 1.0  # longer than the 0.4 s operation timeout: it kept waiting


def test_no_delivery_for_the_operation_timeout_makes_the_transaction_abortable():
    p = producer([50, 50])
    t0 = time.monotonic()
    with pytest.raises(TransactionAbortable, match="50 messages still undelivered"):
        p.flush()
    assert time.monotonic() - t0 < 1.5


def test_a_crawling_transaction_is_given_up_before_the_transaction_timeout():
    p = producer(list(range(10_000, 0, -1)), op_timeout_s=0.4, transaction_timeout_s=FLUSH_TIMEOUT_MARGIN_S + 1.5)
    p._begun_at = time.monotonic()
    t0 = time.monotonic()
    with pytest.raises(TransactionAbortable, match="near its timeout"):
        p.flush()
    assert 1.0 < time.monotonic() - t0 < 3.0  # at begin + timeout - margin, not later


def test_a_failed_delivery_ends_the_wait_at_once():
    p = producer([5])
    p._delivery_errors.append(type("E", (), {"code": lambda self: -1, "str": lambda self: "boom"})())
    with pytest.raises(TransactionAbortable, match="1 deliveries failed"):
        p.flush()
    assert p._producer.calls == 1
