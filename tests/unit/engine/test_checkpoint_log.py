"""Reading the checkpoint topic's bounds: a partition whose leader is not serving yet is asked again."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from eos_etl.engine import checkpoint_log
from eos_etl.kafka import reachability
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.errors import BrokerLostError, KafkaSetupError


class _Consumer:
    """Answers ``fail`` (a KafkaError code) the first ``times`` times per partition, then (0, 0)."""

    asked: dict[int, int] = {}

    def __init__(self, fail: int, times: float):
        self.fail, self.times = fail, times

    def __call__(self, _config):
        _Consumer.asked = {}
        return self

    def get_watermark_offsets(self, tp, timeout, cached):
        n = _Consumer.asked[tp.partition] = _Consumer.asked.get(tp.partition, 0) + 1
        if n <= self.times:
            raise KafkaException(KafkaError(self.fail, "Failed to get watermark offsets: Broker: Not leader"))
        return 0, 0

    def close(self):
        pass


@pytest.fixture
def consumer(monkeypatch):
    def install(fail: int, times: float) -> None:
        monkeypatch.setattr(checkpoint_log, "Consumer", _Consumer(fail, times))
        monkeypatch.setattr(checkpoint_log, "iter_ranges", lambda *a, **k: iter(()))
    return install


def _read(timeout_s: float = 10.0):
    return checkpoint_log.read_entries(KafkaConnection("127.0.0.1:1"), "g.checkpoints", "g", "purchases",
                                       partitions=[0, 1, 2], timeout_s=timeout_s)


def test_a_partition_without_a_serving_leader_is_asked_again_until_it_answers(consumer):
    consumer(KafkaError.NOT_LEADER_FOR_PARTITION, times=2)  # a just-created topic, before its leaders serve
    assert _read() == {}
    assert _Consumer.asked == {0: 3, 1: 3, 2: 3}


def test_a_refusal_that_asking_again_cannot_change_ends_the_read_at_once(consumer):
    consumer(KafkaError.TOPIC_AUTHORIZATION_FAILED, times=1)
    with pytest.raises(KafkaSetupError, match="cannot read the checkpoint topic"):
        _read()
    assert _Consumer.asked == {0: 1}


def test_leaders_that_never_serve_end_the_read_within_its_timeout_for_all_partitions(consumer):
    consumer(KafkaError.NOT_LEADER_FOR_PARTITION, times=float("inf"))
    t0 = time.monotonic()
    with pytest.raises(Exception, match="no broker answered for the checkpoint topic"):
        _read(timeout_s=2.0)
    assert time.monotonic() - t0 < 2.0 + 3.0  # the retries' last pause at most, not 2 s per partition
    assert _Consumer.asked[0] > 1


def test_a_broker_lost_while_the_records_are_read_is_one_error_not_a_traceback(consumer, monkeypatch):
    """The broker answered for the offsets, then died before the records were read (seen with the only
    broker killed in a run's first seconds): the reader's metadata request fails with a transport error."""
    consumer(KafkaError.NOT_LEADER_FOR_PARTITION, times=0)

    def lost(*_args, **_kwargs):
        raise KafkaException(KafkaError(KafkaError._TRANSPORT,
                                        "Failed to get metadata: Local: Broker transport failure"))
        yield  # a generator, as iter_ranges is

    monkeypatch.setattr(checkpoint_log, "iter_ranges", lost)
    monkeypatch.setattr(reachability, "_answered", set())  # this test's alone
    reachability.mark_answered(KafkaConnection("127.0.0.1:1"))  # as the run's preflight had been answered
    with pytest.raises(BrokerLostError, match="no broker answered for the checkpoint topic") as raised:
        _read()
    assert raised.value.exit_code == 1
