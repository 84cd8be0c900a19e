"""A fenced attempt waits only for another attempt that really commits (engine.publishing.superseded).

Real broker: a transaction the coordinator aborts at its timeout (an epoch bump, a
fence with nobody else publishing) fails the attempt at once instead of waiting out the stall timeout.
The transitions on a fake clock: tests/unit/engine/publishing/test_superseded.py.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from eos_etl.engine import checkpoint_topic
from eos_etl.engine.errors import ProducerFencedError
from eos_etl.engine.pipeline import PipelineConfig
from eos_etl.engine.publishing.publisher import PartitionPublisher
from eos_etl.engine.publishing.superseded import step_aside
from eos_etl.engine.window import OffsetRange
from eos_etl.kafka.topics import ensure_topics
from tests.conftest import unique


# -- real broker -------------------------------------------------------------------------------------------
def test_an_attempt_fenced_by_its_transactions_timeout_fails_at_once(connection, admin):
    source, sink, group, prefix = unique("sa-in"), unique("sa-out"), unique("sa-group"), unique("sa-txn")
    admin.create_topics({source: 1, sink: 1})
    config = PipelineConfig(connection, input_topic=source, group=group, output_topics=(sink,),
                            transactional_id_prefix=prefix, chunk_records=4, chunk_seconds=2.0,
                            transaction_timeout_ms=5_000, retry_deadline_s=10.0, writer_slots=None)
    ensure_topics(admin, [checkpoint_topic.topic_spec(config.checkpoint_topic, 1)])
    config = replace(config, input_topic_id=admin.topic_id(source))

    def records():
        for offset in range(10):
            if offset == 6:  # the second transaction is open (records 4, 5): stall past its timeout
                time.sleep(9)
            yield offset, [(sink, b"k", f"out-{offset}".encode(), [])]

    with pytest.raises(ProducerFencedError) as fenced:
        PartitionPublisher(config, 0, OffsetRange(0, 10)).publish(records())
    error = fenced.value
    assert error.position == 4, error.position  # the first transaction (0-3) committed
    assert error.transaction_age_s is not None and error.transaction_age_s >= 5.0, error.transaction_age_s
    t0 = time.monotonic()
    step_aside(config, 0, 10, error)
    # One read of the committed offset, not the first-commit bound (65 s) or the stall timeout.
    assert time.monotonic() - t0 < 15
