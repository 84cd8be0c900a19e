"""Broker-free: the metadata request before ``init_transactions``
(tests/integration/engine/publishing/test_producer_connect.py).

It is only an optimisation: it asks again while the bootstrap connection answers, stops at the
first learned broker, and leaves a cluster that does not answer to ``init_transactions`` itself.
"""

from __future__ import annotations

from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException

from eos_etl.engine.publishing.producer import TransactionalProducer


class Handle:
    """Answers ``list_topics`` as the brokers in ``answers`` (an int: that broker id; else raised)."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls: list[str] = []

    def list_topics(self, timeout):
        self.calls.append("list_topics")
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return SimpleNamespace(orig_broker_id=answer)

    def init_transactions(self, timeout):
        self.calls.append("init_transactions")


def producer(answers) -> tuple[TransactionalProducer, Handle]:
    p = TransactionalProducer({"transactional.id": "connect-test", "bootstrap.servers": "127.0.0.1:1"})
    p._producer = handle = Handle(answers)
    return p, handle


def test_the_bootstrap_answer_is_asked_again_until_a_learned_broker_answers():
    p, handle = producer([-1, -1, 3])
    p.init_transactions()
    assert handle.calls == ["list_topics"] * 3 + ["init_transactions"]


def test_a_learned_broker_answering_first_takes_one_request():
    p, handle = producer([1])
    p.init_transactions()
    assert handle.calls == ["list_topics", "init_transactions"]


def test_a_cluster_that_does_not_answer_is_left_to_init_transactions():
    p, handle = producer([KafkaException(KafkaError(KafkaError._TRANSPORT))])
    p.init_transactions()
    assert handle.calls == ["list_topics", "init_transactions"]
