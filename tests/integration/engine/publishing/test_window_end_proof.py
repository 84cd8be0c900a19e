"""A publishing task commits its window end only when it proved its input reached it.

Spark ends a task's stream of records the same way when the input ended and when it
interrupted or killed the task (its client died or stopped, a job cancelled, a speculative
copy). These tests hand :class:`~eos_etl.engine.publishing.publisher.PartitionPublisher` the records a
read_committed reader sees, whole or cut short, against the real broker: a stream that reached
the end commits it (also over a tail of aborted records and markers, proved by one read of the
tail); a stream cut short commits nothing more, aborts its open transaction and fails with
exit code 1; a retry resumes from the last proven position and the result is exact. The same
through Spark and a Connect server whose tasks are killed: tests/lab/faults/test_connect_kills.py.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer

from eos_etl.checker import read_topic
from eos_etl.engine.errors import WindowEndNotReachedError
from eos_etl.engine.publishing.publisher import PartitionPublisher, publish_without_spark
from eos_etl.kafka.group_offsets import GroupOffsetsReader
from eos_etl.kafka.reader import first_visible_offset, read_ranges
from eos_etl.shop.generator import generate


def _records(shop, window, partition=0):
    """The window's visible input records of ``partition`` as the publisher takes them: one
    output (the purchase's value, to the invoices topic) per record."""
    rng = window.ranges[partition]
    return [(r.offset, [(shop.topics.invoices, r.key, r.value, [])])
            for r in read_ranges(shop.connection, shop.topics.purchases, {partition: (rng.start, rng.end)})]


def _committed(shop, partition=0):
    with GroupOffsetsReader(shop.connection.client_config(), shop.group) as reader:
        return reader.unstable(shop.topics.purchases, [partition], 10)[partition]


def _published_offsets(shop):
    return sorted(int(r.headers["source_offset"]) for r in read_topic(shop.connection, shop.topics.invoices))


@pytest.fixture
def shop_with_aborted_tail(shop_factory):
    """One input partition: 300 purchases in transactions of 50, the last one aborted, so the
    window ends with aborted records and markers after the last visible record."""
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 250, invalid_share=0.0, seed=3, transaction_size=50)
    generate(shop.connection, shop.topics.purchases, 50, invalid_share=0.0, seed=4, transaction_size=50,
             abort_share=1.0)
    return shop


def test_a_whole_stream_commits_the_window_end_over_its_aborted_tail(shop_with_aborted_tail):
    shop = shop_with_aborted_tail
    window = shop.plan()
    records = _records(shop, window)
    assert records[-1][0] < window.ranges[0].end - 50, "the tail must hold aborted records"
    config = shop.pipeline(chunk_records=100).bound_to(window)
    result = PartitionPublisher(config, 0, window.ranges[0]).publish(iter(records))
    assert result.records_published == len(records) == 250
    assert _committed(shop) == window.ranges[0].end
    assert _published_offsets(shop) == [r[0] for r in records]


def test_a_stream_cut_short_commits_nothing_more_and_its_retry_is_exact(shop_with_aborted_tail):
    shop = shop_with_aborted_tail
    window = shop.plan()
    records = _records(shop, window)
    config = shop.pipeline(chunk_records=100).bound_to(window)
    # Spark stops the task after 230 records: two chunks committed, 30 records in the open transaction.
    with pytest.raises(WindowEndNotReachedError) as raised:
        PartitionPublisher(config, 0, window.ranges[0]).publish(iter(records[:230]))
    assert raised.value.exit_code == 1
    assert f"offset {records[230][0]}" in str(raised.value), str(raised.value)
    proven = records[199][0] + 1
    assert _committed(shop) == proven, "only what the chunks proved is committed"
    # Nothing of the abandoned transaction is visible, and nothing is left hanging.
    assert _published_offsets(shop) == [r[0] for r in records[:200]]
    # The retry (a new attempt with the same transactional id) resumes from the proven position.
    retry = PartitionPublisher(shop.pipeline(chunk_records=100).bound_to(window), 0,
                               window.ranges[0]).publish(iter(records))
    assert retry.records_skipped == 200 and retry.records_published == 50
    assert _committed(shop) == window.ranges[0].end
    assert _published_offsets(shop) == [r[0] for r in records]


def test_a_range_without_its_task_is_committed_only_when_it_holds_nothing_to_publish(shop_factory):
    aborted, visible = shop_factory(partitions=1), shop_factory(partitions=1)
    generate(aborted.connection, aborted.topics.purchases, 40, invalid_share=0.0, seed=5, transaction_size=20,
             abort_share=1.0)
    generate(visible.connection, visible.topics.purchases, 40, invalid_share=0.0, seed=6, transaction_size=20)
    # Only aborted records: no row in Spark; the driver commits the window end without a task.
    window = aborted.plan()
    [result] = publish_without_spark(aborted.pipeline().bound_to(window), dict(window.ranges))
    assert result.records_published == 0 and _committed(aborted) == window.ranges[0].end
    # Purchases whose task Spark stopped before its first batch: no row either, but nothing is committed.
    window = visible.plan()
    with pytest.raises(WindowEndNotReachedError):
        publish_without_spark(visible.pipeline().bound_to(window), dict(window.ranges))
    assert _committed(visible) is None
    assert not read_topic(visible.connection, visible.topics.invoices)


def test_the_proof_reads_one_tail_and_finds_the_first_visible_record(shop_with_aborted_tail):
    shop = shop_with_aborted_tail
    window = shop.plan()
    records = _records(shop, window)
    end = window.ranges[0].end
    conf = {**shop.pipeline().consumer_settings(), "log_level": 3}
    consumer = Consumer(conf)
    try:
        assert first_visible_offset(consumer, shop.topics.purchases, 0, records[-1][0] + 1, end) is None
        assert first_visible_offset(consumer, shop.topics.purchases, 0, records[10][0] + 1, end) == records[11][0]
        assert first_visible_offset(consumer, shop.topics.purchases, 0, end, end) is None
        with pytest.raises(TimeoutError):  # beyond what the partition holds: never proven
            first_visible_offset(consumer, shop.topics.purchases, 0, end, end + 10, timeout_s=1.0)
    finally:
        consumer.close()
