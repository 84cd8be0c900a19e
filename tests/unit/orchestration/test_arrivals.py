"""The event-driven DAG's batching rule, without a broker (the end-to-end run through the
scheduler and the triggerer is
tests/integration/orchestration/test_dag.py::test_a_burst_of_purchases_makes_one_event_driven_run)."""

from __future__ import annotations

import pytest

from eos_etl.orchestration import arrivals


class Message:
    """What the provider's trigger hands the apply function: a confluent-kafka message's accessors."""

    def __init__(self, topic: str, partition: int, offset: int, stamp_s: float):
        self._where, self._stamp_ms = (topic, partition, offset), int(stamp_s * 1000)

    def topic(self):
        return self._where[0]

    def partition(self):
        return self._where[1]

    def offset(self):
        return self._where[2]

    def timestamp(self):
        return 1, self._stamp_ms  # TIMESTAMP_CREATE_TIME

    def value(self):  # never read: a payload must not reach the event
        raise AssertionError("the apply function read the message's payload")


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch):
    monkeypatch.setattr(arrivals, "_seen", {})


def fires(topic: str, stamps: list[tuple[int, float]], **kw) -> list[int]:
    """The indexes of the messages (partition, timestamp) that fire an event."""
    out = []
    for i, (partition, stamp) in enumerate(stamps):
        if arrivals.first_of_burst(Message(topic, partition, i, stamp), **kw):
            out.append(i)
    return out


def test_a_burst_fires_once_and_the_next_burst_after_a_quiet_gap_fires_again():
    burst = [(i % 3, 1000 + i * 0.01) for i in range(500)]  # 500 messages in 5 s over three partitions
    later = [(i % 3, 1012 + i * 0.01) for i in range(100)]  # 7 s after the burst's last message
    assert fires("purchases", burst + later, quiet_s=5, max_batch_s=60) == [0, 500]


def test_slightly_out_of_order_timestamps_across_partitions_do_not_fire():
    stamps = [(0, 1000.0), (1, 999.5), (2, 1000.2), (0, 998.0), (1, 1001.0)]
    assert fires("purchases", stamps, quiet_s=5, max_batch_s=60) == [0]


def test_a_continuous_stream_fires_once_per_max_batch_interval():
    stream = [(0, 1000 + i * 0.5) for i in range(300)]  # a message every half second for 150 s
    assert fires("purchases", stream, quiet_s=5, max_batch_s=60) == [0, 121, 242]


def test_topics_are_paced_apart_and_the_payload_names_only_where_the_burst_starts():
    assert fires("a", [(0, 1000.0), (0, 1001.0)]) == [0]
    assert fires("b", [(0, 1000.5)]) == [0]
    event = arrivals.first_of_burst(Message("c", 2, 41, 1000.0))
    assert event == {"topic": "c", "partition": 2, "offset": 41, "timestamp_ms": 1_000_000}
