"""Data-quality validation (Great Expectations 1.x) of pipeline runs, against a real broker and Spark."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from eos_etl.checker import read_topic
from eos_etl.engine.window import OffsetRange
from eos_etl.quality import QualityError, raise_for_failures, validate_run
from eos_etl.shop.generator import generate
from eos_etl.shop.job import run_shop_window

pytestmark = pytest.mark.spark

SUITES = {"invoices", "shipments", "pairing", "reconciliation"}


def test_clean_run_validates_and_writes_data_docs(spark, shop_factory, tmp_path, capfd):
    shop = shop_factory(partitions=3)
    stats = generate(shop.connection, shop.topics.purchases, 500, invalid_share=0.1)
    window = shop.plan()
    summary = run_shop_window(spark, shop, window)

    report = validate_run(spark, shop, window, run_id=summary.run_id, context_root=tmp_path / "gx")

    assert report.success, report.messages
    assert report.failures == []
    raise_for_failures(report)  # does not raise
    outputs = summary.outputs()
    invalid = sum(stats.invalid.values())
    c = report.counts
    assert c.committed_inputs == summary.records_read == 500
    assert c.valid_inputs == stats.valid and c.invalid_inputs == invalid
    assert c.invoices == outputs[shop.topics.invoices] == stats.valid
    assert c.shipments == outputs[shop.topics.shipments] == stats.valid
    assert c.dead_letters == outputs[shop.topics.dead_letters] == invalid
    # Nothing was aborted: read_uncommitted sees exactly what read_committed sees.
    assert (c.invoices_read_uncommitted, c.shipments_read_uncommitted, c.dead_letters_read_uncommitted) == (
        c.invoices, c.shipments, c.dead_letters)
    assert c.aborted_visible == 0 and c.inputs_without_output == 0
    assert {o.partition: o.committed for o in report.offsets} == {p: r.end for p, r in window.ranges.items()}

    assert set(report.suites) == SUITES and all(s.success for s in report.suites.values())
    assert report.suites["invoices"].rows == stats.valid and report.suites["reconciliation"].rows == 1
    assert report.data_docs_path is not None and report.data_docs_path.name == "index.html"
    assert report.data_docs_path.is_file() and report.data_docs_path.is_relative_to(tmp_path / "gx")
    for suite in report.suites.values():
        assert suite.docs_page and suite.docs_page.endswith(".html"), suite
    assert f"{shop.group}.reconciliation" in report.data_docs_path.read_text()
    data = json.loads(json.dumps(report.to_dict()))
    assert data["success"] is True and data["failures"] == []
    assert data["counts"]["read_uncommitted"]["invoices"] == stats.valid
    assert "Calculating Metrics" not in capfd.readouterr().err  # GE's tqdm progress bars are off


def test_orphan_invoice_fails_uniqueness_pairing_and_reconciliation(spark, shop_factory, tmp_path):
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 500, invalid_share=0.1)
    window = shop.plan()
    run_shop_window(spark, shop, window)
    # A re-run of the same window publishes nothing, and the window still validates:
    # records are selected by lineage, not by the run id that wrote them.
    rerun = run_shop_window(spark, shop, window)
    assert rerun.records_published == 0 and rerun.records_skipped == 500
    clean = validate_run(spark, shop, window, run_id=rerun.run_id, context_root=tmp_path / "gx")
    assert clean.success, clean.messages
    assert (clean.counts.committed_inputs, clean.counts.invoices) == (500, stats.valid)

    # Seed a defect: a second invoice for an input record inside the window (same
    # lineage headers), with a new invoice_id and no shipment, written outside any transaction.
    victim = read_topic(shop.connection, shop.topics.invoices)[0]
    forged = dict(json.loads(victim.value), invoice_id="inv_orphan_0001")
    p = Producer(shop.connection.client_config())
    p.produce(shop.topics.invoices, json.dumps(forged).encode(), victim.key, partition=victim.partition,
              headers=list(victim.headers.items()))
    assert p.flush(10) == 0

    report = validate_run(spark, shop, window, run_id="after-forgery", context_root=tmp_path / "gx")

    assert not report.success
    assert {(f.suite, f.check) for f in report.failures} == {
        ("invoices", "source_offset_unique"),
        ("pairing", "invoice_has_shipment"),
        ("reconciliation", "invoices_equal_valid_inputs"),
        ("reconciliation", "shipments_equal_invoices"),
        ("reconciliation", "invoices_plus_dead_letters_equal_committed_inputs"),
    }, report.messages
    assert all(f.critical for f in report.failures)
    n, invalid = stats.valid, sum(stats.invalid.values())
    messages = report.messages
    assert "pairing: 1 invoice(s) without shipment (e.g. inv_orphan_0001)" in messages
    assert ("invoices: 1 extra invoice(s) for an input record that already has one "
            "(2 invoice(s) share a source offset)") in messages
    assert f"reconciliation: invoices={n + 1} but valid_inputs={n} (off by 1)" in messages
    assert f"reconciliation: shipments={n} but invoices={n + 1} (off by 1)" in messages
    assert (f"reconciliation: invoices+dead_letters={n + 1 + invalid} but committed_inputs=500 (off by 1)"
            in messages)
    assert report.counts.invoices == n + 1 and report.counts.shipments == n
    assert report.suites["invoices"].success is False and report.suites["shipments"].success is True
    data = json.loads(json.dumps(report.to_dict()))
    assert data["success"] is False and data["failures"] == messages
    assert {f["check"] for f in data["failed_expectations"]} == {f.check for f in report.failures}

    with pytest.raises(QualityError) as err:
        raise_for_failures(report)
    assert err.value.report is report
    for message in messages:
        assert message in str(err.value)


def _purchase() -> dict:
    return {
        "purchase_id": "p-1", "user_id": "u-1", "user_full_name": "Ada Lovelace", "product_id": "sku-1",
        "quantity": 3, "unit_price": "19.99", "currency": "EUR",
        "shipping_address": {"street": "1 Main St", "city": "Berlin", "postal_code": "10115", "country": "DE"},
        "purchase_time": "2026-11-21T10:00:00Z",
    }


def test_wrong_total_is_named_and_nothing_else_fails(spark, shop_factory, tmp_path):
    shop = shop_factory(partitions=1)
    root = tmp_path / "gx"
    # One valid purchase; its invoice and shipment are written by hand, as the
    # pipeline would, except that the total is off by one cent.
    purchase = _purchase()
    p = Producer(shop.connection.client_config())
    p.produce(shop.topics.purchases, json.dumps(purchase).encode(), b"u-1")
    assert p.flush(10) == 0
    window = shop.plan()
    assert window.ranges == {0: OffsetRange(0, 1)}
    headers = [("record_type", b"shop.invoice.v1"), ("source_topic", shop.topics.purchases.encode()),
               ("source_partition", b"0"), ("source_offset", b"0"), ("run_id", b"by-hand")]
    invoice = {"invoice_id": "inv_1", "purchase_id": "p-1", "user_id": "u-1", "user_full_name": "Ada Lovelace",
               "product_id": "sku-1", "quantity": 3, "unit_price": "19.99", "total": "59.98", "currency": "EUR",
               "purchase_time": "2026-11-21T10:00:00.000Z", "issued_at": "2026-11-21T10:00:01.000Z"}
    shipment = {"shipment_id": "shp_1", "invoice_id": "inv_1", "purchase_id": "p-1", "product_id": "sku-1",
                "recipient_name": "Ada Lovelace", "address": purchase["shipping_address"], "quantity": 3}
    p.produce(shop.topics.invoices, json.dumps(invoice).encode(), b"p-1", headers=headers)
    p.produce(shop.topics.shipments, json.dumps(shipment).encode(), b"p-1",
              headers=[("record_type", b"shop.shipment.v1"), *headers[1:]])
    assert p.flush(10) == 0

    # Offsets not committed yet (given explicitly here, as a caller may): named too.
    early = validate_run(spark, shop, window, run_id="not-committed", context_root=root,
                         committed_input_offsets={0: 0})
    assert {f.check for f in early.failures} == {"total_matches", "committed_offsets_match_window"}
    assert ("reconciliation: the group's committed offsets do not equal the window ends on 1 partition(s) "
            "(partition 0: committed 0, window end 1)") in early.messages

    consumer = Consumer({**shop.connection.client_config(), "group.id": shop.group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(shop.topics.purchases, 0, 1)], asynchronous=False)
    finally:
        consumer.close()

    report = validate_run(spark, shop, window, run_id="wrong-total", context_root=root)

    assert not report.success
    [failure] = report.failures
    assert (failure.suite, failure.check, failure.unexpected_count) == ("invoices", "total_matches", 1)
    assert failure.message == ("invoices: 1 invoice(s) whose total != quantity x unit_price "
                               "(e.g. inv_1: total 59.98, expected 3 x 19.99 = 59.97)")
    assert report.offsets[0].committed == 1
    with pytest.raises(QualityError, match="total != quantity x unit_price"):
        raise_for_failures(report)


def test_aborted_inputs_and_attempts_are_hidden_and_validate(spark, shop_factory, tmp_path):
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 600, invalid_share=0.1, seed=13,
                     transaction_size=50, abort_share=0.3)
    assert stats.aborted > 0
    window = shop.plan()
    marker = tmp_path / "crashed-once"
    # Partition 1's first attempt dies before committing its transaction; the retry aborts it.
    summary = run_shop_window(spark, shop, window, chunk_records=100,
                              failpoints=f"before_commit=crash,partition=1,once={marker}")
    assert marker.exists()

    report = validate_run(spark, shop, window, run_id=summary.run_id, context_root=tmp_path / "gx")

    assert report.success, report.messages
    c = report.counts
    assert c.committed_inputs == stats.produced == summary.records_read
    assert c.invoices == stats.valid and c.dead_letters == sum(stats.invalid.values())
    # The crashed attempt's records are in the log, visible only to read_uncommitted readers.
    assert c.invoices_read_uncommitted > c.invoices
    assert c.aborted_hidden["invoices"] == c.invoices_read_uncommitted - c.invoices > 0
    assert report.to_dict()["counts"]["aborted_hidden"]["invoices"] > 0
