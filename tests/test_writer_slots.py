"""Writer slots against a real broker and a real SparkSession: a window published by fewer
transactional ids than partitions stays exact, a crash inside a slot's task resumes per partition,
and a change of the grouping is refused until `offsets reslot`, which fences the old ids."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from eos_etl.checker import check_shop
from eos_etl.engine.errors import ProducerFencedError, WriterSlotsChangedError
from eos_etl.engine.producer import TransactionalProducer
from eos_etl.engine.publisher import PartitionPublisher
from eos_etl.engine.window import Window
from eos_etl.shop.generator import generate
from eos_etl.shop.pipeline import run_shop_window

pytestmark = pytest.mark.spark


def assert_exactly_once(settings, window: Window):
    report = check_shop(settings, expected_ends={p: r.end for p, r in window.ranges.items()})
    assert report.ok, json.dumps(report.to_dict(), indent=1, default=str)[:4000]
    return report


def test_a_window_on_two_slots_is_exact_with_one_task_and_id_per_slot(spark, shop_factory):
    shop = dataclasses.replace(shop_factory(partitions=5), writer_slots=2)
    stats = generate(shop.connection, shop.topics.purchases, 1000, invalid_share=0.1, seed=21)
    window = shop.plan()
    summary = run_shop_window(spark, shop, window, chunk_records=70)

    assert summary.records_read == summary.records_published == 1000
    ids = {r.partition: r.transactional_id for r in summary.partitions}
    stem = shop.pipeline().transactional_id_stem
    assert ids == {0: f"{stem}s0of2", 1: f"{stem}s1of2", 2: f"{stem}s0of2", 3: f"{stem}s1of2", 4: f"{stem}s0of2"}
    # Two Spark tasks, one per slot, each naming the partitions it published.
    attempts = summary.task_attempts.to_dict()
    assert attempts["total"] == 2 and attempts["partitions"] == {"0,2,4": ["finished"], "1,3": ["finished"]}
    # Every partition's transactions are its own: ceil(records / 70) each, the last committing its end.
    for r in summary.partitions:
        assert r.transactions == -(-r.records_published // 70), r
    report = assert_exactly_once(shop, window)
    assert report.outputs[shop.topics.invoices] == stats.valid
    assert {p: r.committed_offset for p, r in report.partitions.items()} == {p: r.end for p, r in window.ranges.items()}


def test_a_crash_in_a_slots_second_partition_resumes_where_that_partition_stood(spark, shop_factory, tmp_path):
    shop = dataclasses.replace(shop_factory(partitions=4), writer_slots=2)
    generate(shop.connection, shop.topics.purchases, 1200, invalid_share=0.0, seed=22)
    window = shop.plan()
    marker = tmp_path / "crashed-once"
    # Slot 0 publishes partitions 0 and 2; its task dies mid-way through partition 2, after partition 0's
    # window end and some of partition 2's transactions were committed. Spark retries the task.
    summary = run_shop_window(spark, shop, window, chunk_records=50,
                              failpoints=f"mid_produce=crash,partition=2,after=120,once={marker}")
    assert marker.exists(), "the failpoint never fired"
    by_partition = {r.partition: r for r in summary.partitions}
    assert by_partition[0].committed_before == window.ranges[0].end  # done before the crash: skipped whole
    assert by_partition[0].records_published == 0
    assert by_partition[2].committed_before == window.ranges[2].start + 100  # two transactions of 50 landed
    assert by_partition[2].records_skipped == 100
    assert summary.task_attempts.failed == 1
    assert_exactly_once(shop, window)


def _offsets(shop, action: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eos_etl", "offsets", action, *shop.to_args(), *extra,
                           "--bootstrap-servers", shop.connection.bootstrap_servers],
                          capture_output=True, text=True, timeout=120)


def test_another_grouping_is_refused_until_reslot_which_fences_the_old_ids(spark, shop_factory):
    before = shop_factory(partitions=4)  # one transactional id per partition, as every pipeline before slots
    generate(before.connection, before.topics.purchases, 400, invalid_share=0.0, seed=23)
    first = before.plan()
    run_shop_window(spark, before, first)
    after = dataclasses.replace(before, writer_slots=2)

    # Planned or published with two slots, positions committed per partition are refused (exit code 2).
    with pytest.raises(WriterSlotsChangedError, match=r"offsets reslot --writer-slots 2"):
        after.plan()
    refused = _offsets(after, "reset", "--to", "earliest", "--partitions", "0")
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert refused.returncode == 2 and len(errors) == 1, refused.stderr  # the row of docs/operations.md
    assert errors[0].startswith(f"error: group {before.group}'s positions of {before.topics.purchases} partitions "
                                "[0, 1, 2, 3] were committed with one transactional id per partition, this run has "
                                "2 writer slots") and "offsets reslot --writer-slots 2" in errors[0], errors
    generate(before.connection, before.topics.purchases, 200, invalid_share=0.0, seed=24)
    second = before.plan()
    stale = PartitionPublisher(after.pipeline().bound_to(second), 1, second.ranges[1])
    with pytest.raises(WriterSlotsChangedError):
        stale.publish(iter([]))  # refused right after its committed read: nothing produced

    # A zombie of the old grouping, initialised and mid-transaction, is fenced by the reslot.
    zombie = TransactionalProducer(before.pipeline().producer_settings(3))
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.produce(before.topics.invoices, b"zombie", b"{}", [])
    shown = _offsets(after, "show")
    assert shown.returncode == 0 and {row["writer_slots"] for row in json.loads(shown.stdout)["partitions"].values()} \
        == {None}
    moved = _offsets(after, "reslot")
    assert moved.returncode == 0, moved.stderr
    rows = json.loads(moved.stdout)["partitions"]
    assert {p: (row["position"], row["writer_slots"]) for p, row in rows.items()} == \
        {str(p): (r.end, 2) for p, r in first.ranges.items()}  # positions unchanged, grouping moved
    with pytest.raises(ProducerFencedError):
        zombie.flush()
        zombie.commit_transaction()
    zombie.close()

    # Now the old grouping is the refused one, the new one runs and the whole is exact.
    with pytest.raises(WriterSlotsChangedError, match="--writer-slots none"):
        before.plan()
    summary = run_shop_window(spark, after, after.plan())
    assert summary.records_published == 200
    assert {r.transactional_id for r in summary.partitions} == {after.pipeline().transactional_id(p) for p in (0, 1)}
    assert_exactly_once(after, after.plan())
    # Run again, reslot changes nothing and refuses nothing.
    again = _offsets(after, "reslot")
    assert again.returncode == 0, again.stderr
