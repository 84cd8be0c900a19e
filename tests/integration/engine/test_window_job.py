"""The exactly-once window job against a real broker and a real SparkSession."""

from __future__ import annotations

import json
import threading
import time
from decimal import Decimal

import pytest
from confluent_kafka import Producer

from eos_etl.checker import check_shop, read_topic
from eos_etl.engine.window import OffsetRange, Window
from eos_etl.shop.generator import generate
from eos_etl.shop.pipeline import run_shop_window

pytestmark = pytest.mark.spark


def window_ends(window: Window) -> dict[int, int]:
    return {p: r.end for p, r in window.ranges.items()}


def assert_exactly_once(settings, window: Window):
    report = check_shop(settings, expected_ends=window_ends(window))
    assert report.ok, json.dumps(report.to_dict(), indent=1, default=str)[:4000]
    return report


def test_happy_path_counts_across_partitions(spark, shop_factory):
    shop = shop_factory(partitions=3)
    stats = generate(shop.connection, shop.topics.purchases, 900, invalid_share=0.1, seed=7)
    window = shop.plan()
    assert sorted(window.ranges) == [0, 1, 2]
    assert window.span == 900  # idempotent (non-transactional) input: contiguous offsets

    summary = run_shop_window(spark, shop, window)

    invalid = sum(stats.invalid.values())
    assert invalid > 30 and stats.valid == 900 - invalid
    outputs = summary.outputs()
    assert summary.records_read == 900 and summary.records_published == 900
    assert outputs[shop.topics.invoices] == stats.valid
    assert outputs[shop.topics.shipments] == stats.valid
    assert outputs[shop.topics.dead_letters] == invalid
    assert {r.partition for r in summary.partitions} == {0, 1, 2}
    report = assert_exactly_once(shop, window)
    assert report.outputs == {shop.topics.invoices: stats.valid, shop.topics.shipments: stats.valid,
                              shop.topics.dead_letters: invalid}
    # The group's committed offsets are exactly the window ends.
    committed = {p: r.committed_offset for p, r in report.partitions.items()}
    assert committed == window_ends(window)
    # A new plan starts where this window ended and is empty.
    empty = shop.plan()
    assert empty.is_empty and set(empty.committed_at) == {0, 1, 2}
    # Run right after, it renews nothing: every position was committed seconds ago, against the brokers'
    # 30 days of offsets retention (a quarter of it is when a position gets renewed).
    idle = run_shop_window(spark, shop, empty)
    assert idle.partitions == [] and idle.transactions == 0
    assert {p: r.committed_offset for p, r in assert_exactly_once(shop, window).partitions.items()} == committed


def test_invoice_and_shipment_contents_and_lineage(spark, shop_factory):
    shop = shop_factory(partitions=1)
    purchase = {
        "purchase_id": "p-ünï-1", "user_id": "u-1", "user_full_name": "Zoë \"Q\" O'Brien, Jr.",
        "product_id": "sku-9", "quantity": 3, "unit_price": "19.99", "currency": "EUR",
        "shipping_address": {"street": "1 Rue \"Ω\"", "city": "Kraków", "postal_code": "30-001", "country": "PL"},
        "purchase_time": "2026-11-21T10:00:00Z",
    }
    # purchase_id with non-ASCII letters is not id-like: goes to the DLQ; this one is valid.
    valid = dict(purchase, purchase_id="p-1")
    p = Producer(shop.connection.client_config())
    p.produce(shop.topics.purchases, json.dumps(valid, ensure_ascii=False).encode(), b"u-1")
    p.produce(shop.topics.purchases, json.dumps(purchase, ensure_ascii=False).encode(), b"u-1")
    p.flush(10)
    window = shop.plan()
    summary = run_shop_window(spark, shop, window, run_id="run-lineage-1")
    assert summary.records_published == 2

    [invoice] = read_topic(shop.connection, shop.topics.invoices)
    [shipment] = read_topic(shop.connection, shop.topics.shipments)
    [dead] = read_topic(shop.connection, shop.topics.dead_letters)
    inv = json.loads(invoice.value)
    shp = json.loads(shipment.value)
    assert Decimal(inv["total"]) == Decimal("59.97") and inv["unit_price"] == "19.99"
    assert inv["quantity"] == 3 and inv["currency"] == "EUR" and inv["user_full_name"] == valid["user_full_name"]
    assert inv["invoice_id"].startswith("inv_") and shp["shipment_id"].startswith("shp_")
    assert shp["invoice_id"] == inv["invoice_id"] and shp["purchase_id"] == "p-1"
    assert shp["recipient_name"] == valid["user_full_name"] and shp["address"]["city"] == "Kraków"
    assert invoice.key == shipment.key == b"p-1"
    for rec, offset in ((invoice, 0), (shipment, 0), (dead, 1)):
        assert rec.headers["source_topic"] == shop.topics.purchases.encode()
        assert rec.headers["source_partition"] == b"0"
        assert rec.headers["source_offset"] == str(offset).encode()
        assert rec.headers["run_id"] == b"run-lineage-1"
    assert dead.headers["dlq_reason"] == b"invalid_type" and dead.headers["dlq_field"] == b"purchase_id"
    assert dead.value == json.dumps(purchase, ensure_ascii=False).encode()  # original bytes, untouched
    # Deterministic ids: a second pipeline over the same input derives the same ids.
    other = shop_factory(partitions=1)
    p.produce(other.topics.purchases, json.dumps(valid, ensure_ascii=False).encode(), b"u-1")
    p.flush(10)
    run_shop_window(spark, other, other.plan())
    [inv2] = read_topic(other.connection, other.topics.invoices)
    assert json.loads(inv2.value)["invoice_id"] != inv["invoice_id"]  # derived from the source topic too
    assert json.loads(inv2.value)["total"] == inv["total"]


def test_rerun_of_same_window_publishes_nothing(spark, shop_factory):
    shop = shop_factory(partitions=2)
    generate(shop.connection, shop.topics.purchases, 300, invalid_share=0.1, seed=3)
    window = shop.plan()
    first = run_shop_window(spark, shop, window)
    second = run_shop_window(spark, shop, window)
    assert first.records_published == 300
    # Nothing published again; each partition's position is committed once more (a refresh, no outputs).
    assert second.records_published == 0 and second.records_skipped == 300 and second.outputs() == {}
    assert second.transactions == 2
    report = assert_exactly_once(shop, window)
    assert sum(report.outputs.values()) == sum(first.outputs().values())


def test_window_spanning_several_transactions(spark, shop_factory):
    shop = shop_factory(partitions=2)
    generate(shop.connection, shop.topics.purchases, 1000, invalid_share=0.05, seed=11)
    window = shop.plan()
    summary = run_shop_window(spark, shop, window, chunk_records=120)
    per_partition = {r.partition: r for r in summary.partitions}
    for r in per_partition.values():
        # ceil(records / 120) transactions, the last one committing the window end
        assert r.transactions == -(-r.records_published // 120), r
    assert summary.transactions >= 8
    assert_exactly_once(shop, window)


def test_task_killed_before_commit_is_retried_exactly_once(spark, shop_factory, tmp_path):
    shop = shop_factory(partitions=2)
    generate(shop.connection, shop.topics.purchases, 600, invalid_share=0.1, seed=5)
    window = shop.plan()
    # Partition 1's first attempt produces its second transaction's outputs and
    # dies (os._exit, no cleanup) before committing; Spark retries the task.
    marker = tmp_path / "crashed-once"
    summary = run_shop_window(
        spark, shop, window, chunk_records=100,
        failpoints=f"before_commit=crash,partition=1,once={marker}",
    )
    assert marker.exists(), "the failpoint never fired"
    [p1] = [r for r in summary.partitions if r.partition == 1]
    # The successful attempt found nothing committed: the crash happened
    # before the first commit... or after some: either way, no duplicates.
    assert summary.records_published + summary.records_skipped == summary.records_read
    assert p1.committed_before in (None, window.ranges[1].start)
    report = assert_exactly_once(shop, window)
    # The crashed attempt's records are in the log but hidden (aborted by the retry's init).
    assert report.aborted_outputs_hidden[shop.topics.invoices] > 0


def test_crash_after_some_commits_resumes_from_committed_offset(spark, shop_factory, tmp_path):
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 500, invalid_share=0.0, seed=8)
    window = shop.plan()
    marker = tmp_path / "crashed-once"
    summary = run_shop_window(
        spark, shop, window, chunk_records=100,
        failpoints=f"mid_produce=crash,after=250,once={marker}",
    )
    [p0] = summary.partitions
    assert marker.exists()
    # Two transactions (200 records) were committed before the crash; the retry resumed there.
    assert p0.committed_before == 200 and p0.records_skipped == 200 and p0.records_published == 300
    assert_exactly_once(shop, window)


def test_two_concurrent_runs_of_the_same_window(spark, shop_factory):
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 800, invalid_share=0.05, seed=9)
    window = shop.plan()
    results: dict[str, object] = {}

    def run(name: str, **kw):
        try:
            results[name] = run_shop_window(spark, shop, window, chunk_records=100, **kw)
        except Exception as exc:  # noqa: BLE001 - a fenced run may fail; recorded and judged below
            results[name] = exc

    # Run A commits its first transaction, then stalls; run B starts meanwhile,
    # fences A (same transactional.id) and publishes the rest.
    a = threading.Thread(target=run, args=("a",), kwargs={"failpoints": "after_commit=sleep:6"})
    a.start()
    time.sleep(1.0)
    deadline = time.monotonic() + 30
    from eos_etl.kafka.admin import ClusterAdmin

    admin = ClusterAdmin(shop.connection)
    while time.monotonic() < deadline and not admin.committed_offsets(shop.group, shop.topics.purchases, [0])[0]:
        time.sleep(0.2)
    b = threading.Thread(target=run, args=("b",))
    b.start()
    a.join(180)
    b.join(180)
    run_b = results["b"]
    assert not isinstance(run_b, Exception), run_b
    [b0] = run_b.partitions
    # B started from A's first committed transaction and published the rest.
    assert b0.committed_before == 100 and b0.records_skipped == 100 and b0.records_published == 700
    assert run_b.task_attempts.to_dict() == {"total": 1, "succeeded": 1, "failed": 0, "fenced": 0, "killed": 0,
                                             "visible": True, "partitions": {"0": ["finished"]}}
    run_a = results["a"]
    if not isinstance(run_a, Exception):
        # A's attempt was fenced (its task failed and Spark retried it); the retry
        # found the whole window committed and published nothing.
        [a0] = run_a.partitions
        assert a0.committed_before == 800 and a0.records_published == 0
        # The summary counts the attempt that lost, which returned no result of its own.
        assert run_a.task_attempts.fenced == 1 and run_a.task_attempts.succeeded == 1, run_a.task_attempts
        assert run_a.to_dict()["fenced_attempts"] == 1
    report = assert_exactly_once(shop, window)
    assert report.outputs[shop.topics.invoices] + report.outputs[shop.topics.dead_letters] == 800


def test_aborted_input_transactions_are_never_processed(spark, shop_factory):
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 2000, invalid_share=0.05, seed=13,
                     transaction_size=50, abort_share=0.3)
    assert stats.aborted >= 300
    window = shop.plan()
    assert window.span > stats.produced  # aborted records and markers take offsets
    summary = run_shop_window(spark, shop, window)
    assert summary.records_read == stats.produced
    assert summary.outputs()[shop.topics.invoices] == stats.valid
    assert summary.outputs()[shop.topics.dead_letters] == sum(stats.invalid.values())
    assert_exactly_once(shop, window)  # includes: no output refers to an aborted input offset


def test_window_whose_visible_tail_is_only_aborted_records_commits_its_end(spark, shop_factory):
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 100, transaction_size=100, abort_share=1.0, seed=1)
    window = shop.plan()
    assert window.span == 101  # 100 aborted records + the abort marker
    summary = run_shop_window(spark, shop, window)
    assert summary.records_read == 0 and summary.transactions == 1
    report = assert_exactly_once(shop, window)
    assert report.partitions[0].committed_offset == 101


HOSTILE = [
    (None, "null_value", ""),
    (b"{not json", "malformed_json", ""),
    (b"[1,2,3]", "malformed_json", ""),
    (b"\xff\xfe\x00\x01", "malformed_json", ""),
    (b'{"purchase_id": "p-1"}', "missing_field", "user_id"),
    ("quantity", "three", "invalid_type"),
    ("quantity", 2.5, "invalid_type"),
    ("quantity", 0, "non_positive_quantity"),
    ("quantity", -4, "non_positive_quantity"),
    ("unit_price", "-1.00", "negative_price"),
    ("unit_price", "1.999", "invalid_type"),
    ("currency", "euro", "invalid_currency"),
    ("purchase_time", "yesterday", "invalid_type"),
    ("shipping_address", "nowhere", "invalid_type"),
    ("user_full_name", None, "missing_field"),
]
# A valid purchase's JSON (``b``) inside text that is not exactly one JSON object.
NOT_ONE_OBJECT = [
    lambda b: b + b" trailing",
    lambda b: b + b" " + b,  # two objects
    lambda b: b + b"," + b,
    lambda b: b"[" + b + b"]",  # an array of one purchase
    lambda b: b + b"]",  # closes an array around it early
    lambda b: b + b"]} {",
    lambda b: b + b"}",
    lambda b: b[:-1] + b",}",  # a trailing comma
    lambda b: b"null",
    lambda b: b'"' + b.replace(b'"', b'\\"') + b'"',  # the purchase as a JSON string
]


def test_hostile_inputs_go_to_dead_letters_with_reasons(spark, shop_factory):
    shop = shop_factory(partitions=1, max_payload_bytes=4096)
    base = {
        "purchase_id": "p-1", "user_id": "u-1", "user_full_name": "A B", "product_id": "sku-1",
        "quantity": 1, "unit_price": "1.00", "currency": "EUR",
        "shipping_address": {"street": "s", "city": "c", "postal_code": "1", "country": "DE"},
        "purchase_time": "2026-11-21T10:00:00Z",
    }
    payloads, expected = [], []
    for item in HOSTILE:
        if isinstance(item[0], str):
            field_name, bad, reason = item
            payloads.append(json.dumps({**base, field_name: bad}).encode())
            expected.append((reason, field_name))
        else:
            payload, reason, field_name = item
            payloads.append(payload)
            expected.append((reason, field_name))
    for wrap in NOT_ONE_OBJECT:
        payloads.append(wrap(json.dumps(base).encode()))
        expected.append(("malformed_json", ""))
    payloads.append(json.dumps({**base, "user_full_name": "x" * 5000}).encode())
    expected.append(("oversized", ""))
    # Valid: whitespace around the object, a "]" inside a string, a repeated key (the last counts).
    payloads.append(b" \n" + json.dumps({**base, "user_full_name": "A ] B"}).encode() + b" \r\n")
    expected.append((None, None))
    payloads.append(json.dumps(base).encode()[:-1] + b', "currency": "USD"}')
    expected.append((None, None))
    payloads.append(json.dumps({**base, "user_full_name": "Ünïcødé \"quoted\" \\ name 🛒"},
                               ensure_ascii=False).encode())
    expected.append((None, None))
    p = Producer(shop.connection.client_config())
    for i, payload in enumerate(payloads):
        p.produce(shop.topics.purchases, payload, f"k{i}".encode())
    p.flush(10)

    window = shop.plan()
    summary = run_shop_window(spark, shop, window)
    assert summary.records_published == len(payloads)
    dead = {int(r.headers["source_offset"]): r for r in read_topic(shop.connection, shop.topics.dead_letters)}
    for offset, (payload, (reason, field_name)) in enumerate(zip(payloads, expected, strict=True)):
        if reason is None:
            assert offset not in dead
            continue
        rec = dead[offset]
        assert (rec.headers["dlq_reason"].decode(), rec.headers["dlq_field"].decode()) == (reason, field_name), offset
        assert rec.value == payload and rec.key == f"k{offset}".encode()
    invoices = [json.loads(r.value) for r in read_topic(shop.connection, shop.topics.invoices)]
    assert [(i["user_full_name"], i["currency"]) for i in invoices] == [
        ("A ] B", "EUR"), ("A B", "USD"), ("Ünïcødé \"quoted\" \\ name 🛒", "EUR")]
    assert_exactly_once(shop, window)


def test_partition_with_only_invalid_records_commits_with_its_dead_letters(spark, shop_factory):
    shop = shop_factory(partitions=1)
    p = Producer(shop.connection.client_config())
    for i in range(20):
        p.produce(shop.topics.purchases, b"garbage", str(i).encode())
    p.flush(10)
    window = shop.plan()
    summary = run_shop_window(spark, shop, window)
    assert summary.outputs() == {shop.topics.dead_letters: 20}
    report = assert_exactly_once(shop, window)
    assert report.partitions[0].committed_offset == 20


def test_planner_caps_and_window_json(shop_factory):
    shop = shop_factory(partitions=2)
    generate(shop.connection, shop.topics.purchases, 400, seed=2)
    full = shop.plan()
    capped = shop.plan(max_records_per_partition=50)
    assert all(r.span == 50 for r in capped.ranges.values())
    assert all(capped.ranges[p].end <= full.ranges[p].end for p in full.ranges)
    past = shop.plan(until_timestamp_ms=0)
    assert past.is_empty
    future = shop.plan(until_timestamp_ms=int(time.time() * 1000) + 3_600_000)
    assert future == full
    assert Window.from_json(full.to_json()) == full
    assert str(full).startswith(f"{shop.topics.purchases} group={shop.group} {{0:[0,")
    with pytest.raises(ValueError):
        OffsetRange(5, 3)


def test_dead_letter_bigger_than_the_dead_letter_topic_allows_is_cut_not_crashing(spark, shop_factory):
    # The input topic accepts 2 MiB records, the dead-letter topic the default 1 MiB:
    # an incompressible 1.5 MB record must still become one dead letter, cut.
    import random

    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    from eos_etl.shop.schema import DEAD_LETTER_MAX_BYTES

    shop = shop_factory(partitions=1)
    limits = {shop.topics.purchases: "2097152", shop.topics.dead_letters: "1048588"}  # the latter: Kafka's default
    resources = [ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", limit, incremental_operation=AlterConfigOpType.SET)])
        for topic, limit in limits.items()]
    admin_client = AdminClient(shop.connection.client_config())
    for fut in admin_client.incremental_alter_configs(resources).values():
        fut.result(30)
    huge = random.Random(5).randbytes(1_500_000)
    p = Producer({**shop.connection.client_config(), "message.max.bytes": 3_000_000})
    # The topic's new limit reaches the partition's log a moment after the alter
    # call returns: retry until the broker really took the big record.
    for _ in range(40):
        errors = []
        p.produce(shop.topics.purchases, huge, b"k",
                  on_delivery=lambda err, _msg, errors=errors: err and errors.append(err))
        assert p.flush(30) == 0
        if not errors:
            break
        time.sleep(0.25)
    assert not errors, errors
    p.produce(shop.topics.purchases, b"not json", b"k2")
    assert p.flush(30) == 0
    window = shop.plan()
    summary = run_shop_window(spark, shop, window)
    assert summary.records_published == 2
    dead = read_topic(shop.connection, shop.topics.dead_letters)
    assert [r.headers["dlq_reason"] for r in dead] == [b"oversized", b"malformed_json"]
    cut, small = dead
    assert cut.key == b"k" and cut.value == huge[: DEAD_LETTER_MAX_BYTES - 1]
    assert cut.headers["dlq_original_bytes"] == b"1:1500000"
    assert small.value == b"not json" and "dlq_original_bytes" not in small.headers
    assert_exactly_once(shop, window)


def test_stalled_task_is_crashed_by_the_watchdog_and_retried(spark, shop_factory, tmp_path):
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 300, invalid_share=0.1, seed=8)
    window = shop.plan()
    # The first attempt hangs mid-transaction (as a client call that never
    # returns would); the watchdog must crash it long before the hang ends.
    marker = tmp_path / "stalled-once"
    t0 = time.monotonic()
    summary = run_shop_window(spark, shop, window, chunk_records=100, stall_timeout_s=10,
                              failpoints=f"mid_produce=sleep:600,after=150,once={marker}")
    assert marker.exists(), "the failpoint never fired"
    assert time.monotonic() - t0 < 300
    [p0] = summary.partitions
    assert p0.committed_before is not None and p0.committed_before > window.ranges[0].start  # resumed
    # The crashed attempt is counted as failed, not as fenced: nothing else held its transactional.id.
    assert summary.task_attempts.failed >= 1 and summary.task_attempts.fenced == 0, summary.task_attempts
    report = assert_exactly_once(shop, window)
    assert report.aborted_outputs_hidden[shop.topics.invoices] > 0  # the stalled attempt's open transaction
