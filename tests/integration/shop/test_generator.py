"""The purchase generator (shop/generator.py) on a real broker: what it returns is what a plan made right after
it sees."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.shop.generator import await_markers, generate
from tests.conftest import TXN_TIMEOUT_S, unique


def test_generated_transactions_are_visible_when_it_returns(connection, topic_factory):
    topic = topic_factory("gen", partitions=3)
    stats = generate(connection, topic, 90, invalid_share=0.0, seed=26, transaction_size=30, abort_share=0.3)
    offsets = ClusterAdmin(connection).offsets(topic, [0, 1, 2])
    assert all(o.settled for o in offsets.values()), offsets  # every commit's and abort's marker landed
    assert sum(o.high_watermark for o in offsets.values()) > stats.produced + stats.aborted  # markers take offsets


def test_another_producers_open_transaction_bounds_the_wait(connection, topic_factory):
    """Markers another producer's undecided transaction holds back are not the generator's to wait for: it
    gives up after its bound, and sees the partition settle once that transaction ends."""
    topic = topic_factory("gen-held", partitions=1)
    conf = {**connection.client_config(), "log_level": 0}
    other = Producer({**conf, "transactional.id": unique("held")})
    other.init_transactions(TXN_TIMEOUT_S)
    other.begin_transaction()
    other.produce(topic, value=b"held", partition=0)
    other.flush(10)
    mine = Producer({**conf, "transactional.id": unique("mine")})
    mine.init_transactions(TXN_TIMEOUT_S)
    mine.begin_transaction()
    written: dict[int, int] = {}
    mine.produce(topic, value=b"mine", partition=0,
                 on_delivery=lambda err, msg: written.__setitem__(msg.partition(), msg.offset()))
    mine.commit_transaction(TXN_TIMEOUT_S)
    started = time.monotonic()
    assert not await_markers(connection, topic, written, timeout_s=1.0)
    assert 1.0 <= time.monotonic() - started < 5.0
    other.commit_transaction(TXN_TIMEOUT_S)
    assert await_markers(connection, topic, written, timeout_s=10.0)
