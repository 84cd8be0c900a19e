"""Topics the project creates are as durable as the cluster allows: the defaults per broker count.

Against real brokers (created and existing topics, the CLI, preflight): tests/integration/kafka/test_topics.py.
"""

from __future__ import annotations

from eos_etl.kafka.topics import Durability


def test_durability_defaults_follow_the_broker_count():
    assert Durability.for_cluster(1) == Durability(1, 1)
    assert Durability.for_cluster(2) == Durability(2, 1)
    assert Durability.for_cluster(3) == Durability(3, 2)
    assert Durability.for_cluster(5) == Durability(3, 2)
    assert Durability.for_cluster(5, replication_factor=5) == Durability(5, 4)
