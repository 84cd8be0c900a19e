"""Bounded reads (kafka/reader.py) without a broker: what a lost broker's silence does to their set-up."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from eos_etl.kafka import reader
from eos_etl.kafka.connection import KafkaConnection


class FakeConsumer:
    """Assigned, never answered a metadata request; its position reaches the range's end at once."""

    made: list[FakeConsumer] = []
    fail_assign = False

    def __init__(self, conf):
        self.closed = False
        FakeConsumer.made.append(self)

    def assign(self, positions):
        if self.fail_assign:
            raise KafkaException(KafkaError(KafkaError._STATE))

    def list_topics(self, topic, timeout):
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    def consume(self, n, timeout):
        return []

    def position(self, tps):
        return [TopicPartition(tp.topic, tp.partition, 5) for tp in tps]

    def close(self):
        self.closed = True


@pytest.fixture
def fake(monkeypatch):
    FakeConsumer.made.clear()
    monkeypatch.setattr(reader, "Consumer", FakeConsumer)
    return FakeConsumer


def test_an_unanswered_metadata_request_after_the_assignment_does_not_fail_the_read(fake):
    assert list(reader.iter_ranges(KafkaConnection("localhost:1"), "t", {0: (0, 5)})) == []
    assert fake.made[0].closed


def test_a_read_whose_assignment_fails_closes_its_consumer(fake, monkeypatch):
    monkeypatch.setattr(FakeConsumer, "fail_assign", True)
    with pytest.raises(KafkaException):
        list(reader.iter_ranges(KafkaConnection("localhost:1"), "t", {0: (0, 5)}))
    assert fake.made[0].closed
