"""Writer slots against a real broker and a real SparkSession: a window published by fewer
transactional ids than partitions stays exact, a crash inside a slot's task resumes per partition,
and a change of the grouping is refused until `offsets reslot`, which fences the old ids."""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys

import pytest

from eos_etl.checker import check_shop, read_topic
from eos_etl.engine import checkpoint_log
from eos_etl.engine.errors import IdentityMismatchError, ProducerFencedError, WindowEndNotReachedError
from eos_etl.engine.publishing.producer import TransactionalProducer
from eos_etl.engine.publishing.publisher import PartitionPublisher, SlotPublisher, publish_without_spark
from eos_etl.engine.slots import AS_COMMITTED
from eos_etl.engine.window import Window
from eos_etl.errors import ConfigurationError
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.kafka.group_offsets import GroupOffsetsReader
from eos_etl.kafka.reader import read_ranges
from eos_etl.shop.generator import generate
from eos_etl.shop.pipeline import run_shop_window

pytestmark = pytest.mark.spark


def assert_exactly_once(settings, window: Window):
    settle_outputs(settings)
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
    # The slot's transactions hold 50 records of either partition: partition 0's window end commits with
    # the first of them that holds partition 2's records; the crash at partition 2's 120th record leaves
    # its records up to the last full transaction before it committed.
    visible = {p: [r.offset for r in read_ranges(shop.connection, shop.topics.purchases, {p: (rng.start, rng.end)})]
               for p, rng in window.ranges.items() if p in (0, 2)}
    landed = max(i for i in range(1, 120) if (len(visible[0]) + i) % 50 == 0)
    by_partition = {r.partition: r for r in summary.partitions}
    assert by_partition[0].committed_before == window.ranges[0].end  # done before the crash: skipped whole
    assert by_partition[0].records_published == 0
    assert by_partition[2].committed_before == visible[2][landed - 1] + 1
    assert by_partition[2].records_skipped == landed
    assert summary.task_attempts.failed == 1
    assert_exactly_once(shop, window)


def test_a_slots_partitions_without_records_commit_in_one_transaction(spark, shop_factory, caplog):
    """The driver's commits (a new pipeline's starts, ranges with no row in Spark): per slot one transaction
    holding every such partition's checkpoint record and group offset; a range that holds a visible record
    is never committed, and its slot's transaction with it (the run fails; its retry commits them)."""
    shop = dataclasses.replace(shop_factory(partitions=6), writer_slots=2)
    generate(shop.connection, shop.topics.purchases, 120, invalid_share=0.0, seed=24, transaction_size=20,
             abort_share=1.0)
    aborted_only = shop.plan()
    generate(shop.connection, shop.topics.purchases, 120, invalid_share=0.0, seed=25, transaction_size=20)
    window = shop.plan()
    assert all(window.ranges[p].end > aborted_only.ranges[p].end for p in window.ranges)
    # Partition 2's range holds purchases (its task's rows never came): its end must not be committed.
    ranges = {**aborted_only.ranges, 2: window.ranges[2]}
    caplog.set_level(logging.INFO, logger="eos_etl.engine.publishing.publisher")
    with pytest.raises(WindowEndNotReachedError, match=rf"{shop.topics.purchases}\[2\]"):
        publish_without_spark(shop.pipeline().bound_to(window), ranges)

    # Slot 0 (partitions 0, 2, 4) stopped at partition 2 with nothing committed; slot 1 (1, 3, 5) committed
    # its three window ends in one transaction.
    committed = group_offsets(shop)
    assert committed == {p: (aborted_only.ranges[p].end if p % 2 else None) for p in range(6)}
    together = [r.getMessage() for r in caplog.records if "in one transaction" in r.getMessage()]
    stem = shop.pipeline().transactional_id_stem
    assert len(together) == 1 and together[0].startswith(
        f"committed {stem}s1of2: 0 records of 3 partitions in one transaction"), together
    entries = checkpoint_log.read_entries(shop.connection, shop.pipeline().checkpoint_topic, shop.group,
                                          shop.topics.purchases, list(range(6)), timeout_s=30)
    assert {p: e.next_offset for p, e in entries.items()} == {p: aborted_only.ranges[p].end for p in (1, 3, 5)}
    assert not read_topic(shop.connection, shop.topics.invoices)
    # The whole window through Spark: partition 2's purchases published once, every end committed. A slot's
    # last commit touches every output partition; its markers land just after it returns (read once settled).
    summary = run_shop_window(spark, shop, window)
    settle_outputs(shop)
    assert summary.records_published == len(read_topic(shop.connection, shop.topics.invoices))
    assert_exactly_once(shop, window)


def test_a_slots_small_partitions_share_one_transaction(shop_factory, caplog):
    """Three partitions on one slot, fewer records than a chunk: one transaction publishes all of them and
    commits each one's window end (one checkpoint record and group offset each)."""
    shop = dataclasses.replace(shop_factory(partitions=3), writer_slots=1)
    generate(shop.connection, shop.topics.purchases, 90, invalid_share=0.0, seed=26, transaction_size=30)
    window = shop.plan()
    assert all(r.end > r.start for r in window.ranges.values())
    streams = {p: [(r.offset, [(shop.topics.invoices, r.key, r.value, []), (shop.topics.shipments, r.key, r.value, [])])
                   for r in read_ranges(shop.connection, shop.topics.purchases, {p: (rng.start, rng.end)})]
               for p, rng in window.ranges.items()}
    caplog.set_level(logging.INFO, logger="eos_etl.engine.publishing.transaction_loop")
    results = SlotPublisher(shop.pipeline(chunk_records=1000).bound_to(window), dict(window.ranges)).publish(
        sorted(streams.items()))

    ends = {p: r.end for p, r in window.ranges.items()}
    commits = [r.getMessage() for r in caplog.records if r.getMessage().startswith("committed ")]
    stem = shop.pipeline().transactional_id_stem
    assert commits == [f"committed {stem}s0of1: 90 records of 3 partitions in one transaction, offsets -> {ends}"]
    settle_outputs(shop)
    assert [(r.partition, r.transactions, r.records_published) for r in results] == [
        (p, 1, len(streams[p])) for p in range(3)]
    assert group_offsets(shop, 3) == ends
    for topic in (shop.topics.invoices, shop.topics.shipments):
        published = sorted((int(r.headers["source_partition"]), int(r.headers["source_offset"]))
                           for r in read_topic(shop.connection, topic))
        assert published == sorted((p, o) for p, recs in streams.items() for o, _ in recs)


def settle(shop, topics) -> None:
    """Wait until the topics' last stable offsets reach their ends (the last commit's markers landed)."""
    admin = ClusterAdmin(shop.connection)
    for topic in topics:
        assert all(o.settled for o in admin.settled_offsets(topic, timeout_s=15).values()), topic


def settle_outputs(shop) -> None:
    settle(shop, shop.topics.outputs)


def group_offsets(shop, partitions: int = 6) -> dict[int, int | None]:
    with GroupOffsetsReader(shop.connection.client_config(), shop.group) as reader:
        return reader.unstable(shop.topics.purchases, list(range(partitions)), 10)


def _offsets(shop, action: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eos_etl", "offsets", action, *shop.to_args(), *extra,
                           "--bootstrap-servers", shop.connection.bootstrap_servers],
                          capture_output=True, text=True, timeout=120)


def test_another_grouping_is_refused_until_reslot_which_fences_the_old_ids(spark, shop_factory):
    # One transactional id per partition, as every pipeline committed before slots were the default.
    before = shop_factory(partitions=4, writer_slots=None)
    generate(before.connection, before.topics.purchases, 400, invalid_share=0.0, seed=23)
    first = before.plan()
    assert first.writer_slots is None
    run_shop_window(spark, before, first)
    after = dataclasses.replace(before, writer_slots=2)
    as_committed = dataclasses.replace(before, writer_slots=AS_COMMITTED)  # the default keeps what it finds
    assert as_committed.plan().writer_slots is None

    # Planned or published with two slots, a pipeline recorded with one id per partition is refused (exit code 2),
    # before anything is read or fenced.
    with pytest.raises(IdentityMismatchError, match=r"offsets reslot --writer-slots 2"):
        after.plan()
    refused = _offsets(after, "reset", "--to", "earliest", "--partitions", "0")
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert refused.returncode == 2 and len(errors) == 1, refused.stderr  # the row of docs/operations.md
    assert errors[0].startswith(f"error: group {before.group}'s pipeline on {before.topics.purchases} is recorded "
                                "(identity version 1") and "2 writer slots (recorded: one transactional id per " \
        "partition)" in errors[0] and "offsets reslot --writer-slots 2" in errors[0], errors
    generate(before.connection, before.topics.purchases, 200, invalid_share=0.0, seed=24)
    second = before.plan()
    with pytest.raises(ConfigurationError, match="planned with one transactional id per partition"):
        after.pipeline().bound_to(second)  # a run of the plan's window under another setting
    # A publisher under the other grouping anyway (as a task of an older version would be):
    stale = PartitionPublisher(dataclasses.replace(before.pipeline().bound_to(second), writer_slots=2), 1,
                               second.ranges[1])
    with pytest.raises(IdentityMismatchError):
        stale.publish(iter([]))  # refused right after its init_transactions: nothing produced

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
    with pytest.raises(IdentityMismatchError, match="--writer-slots per-partition"):
        before.plan()
    assert as_committed.plan().writer_slots == 2
    summary = run_shop_window(spark, after, after.plan())
    assert summary.records_published == 200
    assert {r.transactional_id for r in summary.partitions} == {after.pipeline().transactional_id(p) for p in (0, 1)}
    assert_exactly_once(after, after.plan())
    # Run again, reslot changes nothing and refuses nothing.
    again = _offsets(after, "reslot")
    assert again.returncode == 0, again.stderr
