"""The range reader's bound is on a stalled read, not on a long one: real broker."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.reader import read_ranges
from tests.conftest import unique


def test_a_read_that_stops_progressing_fails_naming_where_it_stood(connection):
    topic = unique("reader")
    ClusterAdmin(connection).create_topics({topic: 1})
    p = Producer(connection.client_config())
    for i in range(20_000):
        p.produce(topic, b"x" * 64, partition=0)
        if i % 5_000 == 0:
            p.poll(0)
    assert p.flush(10) == 0

    records = read_ranges(connection, topic, {0: (0, 20_000)}, timeout_s=5.0)
    assert len(records) == 20_000 and [r.offset for r in records[:3]] == [0, 1, 2]

    # Past the end: the position stops at 20,000 and the read fails one bound later, naming where it stood.
    t = time.monotonic()
    with pytest.raises(TimeoutError, match=r"no progress for 1.0s \(at \{0: 20000\}\)"):
        read_ranges(connection, topic, {0: (0, 20_001)}, timeout_s=1.0)
    assert time.monotonic() - t >= 1.0
