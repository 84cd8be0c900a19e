"""The one produce helper: a full local queue means wait for room, never lose or reorder a record."""

from __future__ import annotations

import pytest

from eos_etl.kafka.produce import FULL_QUEUE_POLL_S, produce_waiting


class QueueFullTwice:
    """A producer whose local queue is full for the first two attempts."""

    def __init__(self):
        self.attempts = 0
        self.polls: list[float] = []
        self.produced: list[tuple] = []

    def produce(self, topic, value, key, **kwargs):
        self.attempts += 1
        if self.attempts <= 2:
            raise BufferError("Local: Queue full")
        self.produced.append((topic, value, key, kwargs))

    def poll(self, timeout):
        self.polls.append(timeout)


def test_a_full_queue_is_polled_until_the_record_fits():
    producer = QueueFullTwice()
    produce_waiting(producer, "t", b"v", b"k", headers=[("h", b"1")])
    assert producer.polls == [FULL_QUEUE_POLL_S, FULL_QUEUE_POLL_S]
    assert producer.produced == [("t", b"v", b"k", {"headers": [("h", b"1")]})]


def test_other_errors_propagate_at_once():
    class Broken(QueueFullTwice):
        def produce(self, *args, **kwargs):
            raise ValueError("bad topic")

    producer = Broken()
    with pytest.raises(ValueError, match="bad topic"):
        produce_waiting(producer, "t", b"v")
    assert producer.polls == []
