"""Data-quality validation (Great Expectations 1.x) of pipeline runs, against a real broker and Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import functions as F

from eos_etl.checker import read_topic
from eos_etl.engine.window import OffsetRange
from eos_etl.kafka.admin import ClusterAdmin
from eos_etl.quality import QualityError, raise_for_failures, validate_run
from eos_etl.quality.window_reads import CLOCK_SKEW_MARGIN_MS
from eos_etl.shop.generator import generate
from eos_etl.shop.pipeline import run_shop_window
from tests.support.forged_outputs import forge_second_invoice

pytestmark = pytest.mark.spark

SUITES = {"invoices", "shipments", "pairing", "reconciliation"}


def test_clean_run_validates_and_writes_data_docs(spark, shop_factory, tmp_path, capfd):
    shop = shop_factory(partitions=3)
    stats = generate(shop.connection, shop.topics.purchases, 500, invalid_share=0.1)
    window = shop.plan()
    summary = run_shop_window(spark, shop, window)

    report = validate_run(spark, shop, window, run_id=summary.run_id, context_root=tmp_path / "gx")

    assert report.success, report.messages
    # A clean window is passed by its profile: two aggregates, its records are not read again.
    assert {"profile_inputs", "profile_outputs"} <= set(report.timings) and "records" not in report.timings
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
    assert c.aborted_visible == 0 and c.inputs_without_output == 0
    assert {o.partition: o.committed for o in report.offsets} == {p: r.end for p, r in window.ranges.items()}

    assert set(report.suites) == SUITES and all(s.success for s in report.suites.values())
    # One schema check per output, not one existence and one type check per column.
    assert {s: report.suites[s].evaluated for s in SUITES} == {"invoices": 7, "shipments": 5, "pairing": 3,
                                                                "reconciliation": 6}
    assert report.suites["invoices"].rows == stats.valid and report.suites["reconciliation"].rows == 1
    assert report.data_docs_path is not None and report.data_docs_path.name == "index.html"
    assert report.data_docs_path.is_file() and report.data_docs_path.is_relative_to(tmp_path / "gx")
    for suite in report.suites.values():
        assert suite.docs_page and suite.docs_page.endswith(".html"), suite
    assert f"{shop.group}.reconciliation" in report.data_docs_path.read_text()
    data = json.loads(json.dumps(report.to_dict()))
    assert data["success"] is True and data["failures"] == []
    assert data["spark"]["session"] == "classic" and data["spark"]["application_id"] == spark.sparkContext.applicationId
    assert "Calculating Metrics" not in capfd.readouterr().err  # GE's tqdm progress bars are off

    # The report's data: every expectation (all passed, no examples), dead letters by reason, per partition.
    assert len(data["expectations"]) == sum(s.evaluated for s in report.suites.values())
    assert all(e["success"] and e["examples"] == [] for e in data["expectations"])
    assert data["dead_letters_by_reason"] == dict(stats.invalid)
    parts = data["per_partition"]
    assert [(p["partition"], p["window_start"], p["window_end"], p["committed_offset"]) for p in parts] == [
        (p, r.start, r.end, r.end) for p, r in sorted(window.ranges.items())]
    assert all(p["invoices"] == p["shipments"] and p["invoices"] + p["dead_letters"] == p["inputs"] for p in parts)
    assert sum(p["inputs"] for p in parts) == 500 and sum(p["invoices"] for p in parts) == stats.valid
    assert data["output_read"]["clock_skew_margin_ms"] == CLOCK_SKEW_MARGIN_MS


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
    victim = forge_second_invoice(shop, "inv_orphan_0001")

    report = validate_run(spark, shop, window, run_id="after-forgery", context_root=tmp_path / "gx")
    assert "records" in report.timings  # the profile could not pass it: read row by row for the counts

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
    # The failing rows come with their lineage: where the forged invoice is, and which input it claims.
    [unpaired] = [e for e in data["expectations"] if e["check"] == "invoice_has_shipment"]
    assert unpaired["success"] is False and unpaired["unexpected_count"] == 1
    [row] = unpaired["examples"]
    assert row["invoice_without_shipment"] == "inv_orphan_0001"
    assert (row["source_partition"], row["source_offset"], row["run_id"]) == (
        int(victim.headers["source_partition"]), int(victim.headers["source_offset"]),
        victim.headers["run_id"].decode())
    assert row["kafka_partition"] == victim.partition and row["kafka_offset"] > victim.offset
    [twice] = [e for e in data["expectations"] if (e["suite"], e["check"]) == ("invoices", "source_offset_unique")]
    assert sorted(r["kafka_offset"] for r in twice["examples"]) == [victim.offset, row["kafka_offset"]]
    assert {f["check"] for f in data["failed_expectations"]} == {f.check for f in report.failures}

    with pytest.raises(QualityError) as err:
        raise_for_failures(report)
    assert err.value.result is report
    for message in messages:
        assert message in str(err.value)


def _purchase() -> dict:
    return {
        "purchase_id": "p-1", "user_id": "u-1", "user_full_name": "Ada Lovelace", "product_id": "sku-1",
        "quantity": 3, "unit_price": "19.99", "currency": "EUR",
        "shipping_address": {"street": "1 Main St", "city": "Berlin", "postal_code": "10115", "country": "DE"},
        "purchase_time": "2026-11-21T10:00:00Z",
    }


def _by_hand(shop, *, invoice: dict | None = None, shipment: dict | None = None):
    """One valid purchase, and its invoice and shipment written by hand as the pipeline would, with
    ``invoice`` / ``shipment`` changes; the window over it (the group's offsets not committed)."""
    purchase = _purchase()
    p = Producer(shop.connection.client_config())
    p.produce(shop.topics.purchases, json.dumps(purchase).encode(), b"u-1")
    assert p.flush(10) == 0
    window = shop.plan()
    assert window.ranges == {0: OffsetRange(0, 1)}
    headers = [("record_type", b"shop.invoice.v1"), ("source_topic", shop.topics.purchases.encode()),
               ("source_partition", b"0"), ("source_offset", b"0"), ("run_id", b"by-hand")]
    written = {"invoice_id": "inv_1", "purchase_id": "p-1", "user_id": "u-1", "user_full_name": "Ada Lovelace",
               "product_id": "sku-1", "quantity": 3, "unit_price": "19.99", "total": "59.97", "currency": "EUR",
               "purchase_time": "2026-11-21T10:00:00.000Z", "issued_at": "2026-11-21T10:00:01.000Z"}
    shipped = {"shipment_id": "shp_1", "invoice_id": "inv_1", "purchase_id": "p-1", "product_id": "sku-1",
               "recipient_name": "Ada Lovelace", "address": purchase["shipping_address"], "quantity": 3}
    p.produce(shop.topics.invoices, json.dumps({**written, **(invoice or {})}).encode(), b"p-1", headers=headers)
    p.produce(shop.topics.shipments, json.dumps({**shipped, **(shipment or {})}).encode(), b"p-1",
              headers=[("record_type", b"shop.shipment.v1"), *headers[1:]])
    assert p.flush(10) == 0
    return window


def _commit(shop, window) -> None:
    consumer = Consumer({**shop.connection.client_config(), "group.id": shop.group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(shop.topics.purchases, p, r.end) for p, r in window.ranges.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def test_wrong_total_is_named_and_nothing_else_fails(spark, shop_factory, tmp_path):
    shop = shop_factory(partitions=1)
    root = tmp_path / "gx"
    window = _by_hand(shop, invoice={"total": "59.98"})  # off by one cent

    # Offsets not committed yet (given explicitly here, as a caller may): named too.
    early = validate_run(spark, shop, window, run_id="not-committed", context_root=root,
                         committed_input_offsets={0: 0})
    assert {f.check for f in early.failures} == {"total_matches", "committed_offsets_match_window"}
    assert ("reconciliation: the group's committed offsets do not equal the window ends on 1 partition(s) "
            "(partition 0: committed 0, window end 1)") in early.messages

    _commit(shop, window)
    report = validate_run(spark, shop, window, run_id="wrong-total", context_root=root)

    assert not report.success
    [failure] = report.failures
    assert (failure.suite, failure.check, failure.unexpected_count) == ("invoices", "total_matches", 1)
    assert failure.message == ("invoices: 1 invoice(s) whose total != quantity x unit_price "
                               "(e.g. inv_1: total 59.98, expected 3 x 19.99 = 59.97)")
    assert report.offsets[0].committed == 1
    with pytest.raises(QualityError, match="total != quantity x unit_price"):
        raise_for_failures(report)


def test_a_field_of_the_wrong_type_fails_the_schema_check_and_nothing_else(spark, shop_factory, tmp_path):
    shop = shop_factory(partitions=1)
    # Quantities as text on both sides (so the pair still agrees), and an address that is no object.
    window = _by_hand(shop, invoice={"quantity": "3"}, shipment={"quantity": "3", "address": "1 Main St, Berlin"})
    _commit(shop, window)

    report = validate_run(spark, shop, window, run_id="wrong-type", context_root=tmp_path / "gx")

    assert not report.success
    assert {(f.suite, f.check, f.unexpected_count) for f in report.failures} == {
        ("invoices", "value_matches_schema", 1), ("shipments", "value_matches_schema", 1)}, report.messages
    assert "invoices: 1 invoice(s) not matching the invoice schema (mismatching: quantity)" in report.messages
    assert ("shipments: 1 shipment(s) not matching the shipment schema (mismatching: address,quantity)"
            in report.messages)
    [row] = [e for e in report.expectations if (e.suite, e.check) == ("invoices", "value_matches_schema")][0].examples
    assert (row["schema_mismatch"], row["source_partition"], row["source_offset"], row["run_id"]) == (
        "quantity", 0, 0, "by-hand")


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
    assert c.aborted_visible == 0 and c.inputs_without_output == 0
    # The crashed attempt's records are in the log, visible only to read_uncommitted readers: validation
    # counted none of them.
    assert len(read_topic(shop.connection, shop.topics.invoices, isolation="read_uncommitted")) > c.invoices


def test_outputs_are_read_from_the_window_time_bound_on(spark, shop_factory, tmp_path):
    """Outputs stamped before the window's earliest input (minus the margin) are not read:
    earlier windows' history changes nothing, and a stale record there stays unseen."""
    shop = shop_factory(partitions=2)
    root = tmp_path / "gx"
    admin = ClusterAdmin(shop.connection)
    generate(shop.connection, shop.topics.purchases, 200, invalid_share=0.1, seed=1)
    run_shop_window(spark, shop, shop.plan())
    time.sleep(0.05)  # the next inputs are stamped strictly after the first window's outputs
    stats = generate(shop.connection, shop.topics.purchases, 200, invalid_share=0.1, seed=2)
    window = shop.plan()
    # A stale invoice claiming the second window's first input, stamped an hour ago,
    # written after the first window's outputs and before the second's.
    victim = read_topic(shop.connection, shop.topics.invoices)[0]
    p = Producer(shop.connection.client_config())
    stale = dict(json.loads(victim.value), invoice_id="inv_stale_0001")
    source = [("source_topic", shop.topics.purchases.encode()), ("source_partition", b"0"),
              ("source_offset", str(window.ranges[0].start).encode()), ("run_id", b"stale")]
    p.produce(shop.topics.invoices, json.dumps(stale).encode(), victim.key, partition=0, headers=source,
              timestamp=int(time.time() * 1000) - 3_600_000)
    assert p.flush(10) == 0
    outputs = (shop.topics.invoices, shop.topics.shipments, shop.topics.dead_letters)
    history = {t: {q: o.last_stable for q, o in admin.offsets(t, admin.partitions(t)).items()} for t in outputs}
    summary = run_shop_window(spark, shop, window)

    report = validate_run(spark, shop, window, run_id=summary.run_id, context_root=root, clock_skew_margin_ms=0)

    assert report.success, report.messages
    assert (report.counts.committed_inputs, report.counts.invoices) == (200, stats.valid)
    read = report.output_read
    assert read["from_offsets"] == {t: {str(q): o for q, o in ends.items()} for t, ends in history.items()}
    assert read["since_ms"] == read["earliest_input_ms"]

    # Read from an earlier time on, the stale invoice is there and is a second invoice for that input.
    wide = validate_run(spark, shop, window, run_id="wide", context_root=root, clock_skew_margin_ms=7_200_000)
    assert ("invoices", "source_offset_unique") in {(f.suite, f.check) for f in wide.failures}
    assert wide.counts.invoices == stats.valid + 1
    assert all(o == 0 for o in wide.output_read["from_offsets"][shop.topics.invoices].values())


def test_schema_mismatch_and_missing_required_name_each_field_apart(spark):
    from eos_etl.quality.value_schema import missing_required, parse_value, schema_mismatch
    from eos_etl.shop.schema import INVOICE_DECIMALS, INVOICE_FIELDS, INVOICE_REQUIRED

    good = {"invoice_id": "inv_1", "purchase_id": "p-1", "quantity": 3, "unit_price": "19.99", "total": "59.97",
            "currency": "EUR"}
    values = [
        good,
        {**good, "quantity": "three"},  # a text where an integer belongs
        {**good, "quantity": None, "total": "59.9x"},  # null (missing) and a total that is no decimal
        {k: v for k, v in good.items() if k != "invoice_id"},  # absent
        {**good, "quantity": {"n": 3}, "unit_price": None},  # an object where an integer belongs, and a null
        [1, 2],  # no JSON object
    ]
    df = spark.createDataFrame([(json.dumps(v).encode(),) for v in values] + [(b"{not json",)], "value binary")
    j = parse_value(F.col("value"), INVOICE_FIELDS)
    rows = df.select(schema_mismatch(j, INVOICE_FIELDS, INVOICE_DECIMALS).alias("schema"),
                     missing_required(j, INVOICE_REQUIRED).alias("missing")).collect()
    assert [(r["schema"], r["missing"]) for r in rows] == [
        (None, None),
        ("quantity", None),
        ("total", "quantity"),
        (None, "invoice_id"),
        ("quantity", "unit_price"),
        ("value", ",".join(INVOICE_REQUIRED)),
        ("value", ",".join(INVOICE_REQUIRED)),
    ]


def test_failing_rows_are_the_rows_each_check_counts_with_their_lineage(spark):
    from eos_etl.quality.row_checks import row_checks
    from eos_etl.shop.output_checks import SHOP_OUTPUTS

    ROW_CHECKS = row_checks(SHOP_OUTPUTS)
    from eos_etl.quality.row_checks import failing_per_partition, failing_rows

    df = spark.createDataFrame(
        [("a", 5, "EUR", None, 0, 10), ("b", -1, "eur", "a", 0, 11), ("c", 0, "USD", None, 1, 12),
         ("d", 2, None, "d", 1, 13)],
        "invoice_id string, quantity int, currency string, repeated_id string, source_partition int, "
        "source_offset bigint",
    ).withColumns({"run_id": F.lit("r-1"), "kafka_partition": F.col("source_partition"),
                   "kafka_offset": F.col("source_offset") + 100})
    checks = {name: ROW_CHECKS["invoices"][name] for name in ("quantity_positive", "currency_iso", "invoice_id_unique")}

    def offsets(check: str) -> list[int]:
        column, condition = checks[check]
        rows = failing_rows(df, column, condition)
        assert all(r["run_id"] == "r-1" and r["kafka_offset"] == r["source_offset"] + 100 for r in rows)
        return sorted(r["source_offset"] for r in rows)

    assert offsets("quantity_positive") == [11, 12]
    assert offsets("currency_iso") == [11]  # a missing currency is the required-fields check's finding
    assert offsets("invoice_id_unique") == [11, 13]
    column, condition = checks["quantity_positive"]
    assert len(failing_rows(df, column, condition, limit=1)) == 1
    # The counts per input partition come from the same conditions.
    failing, records = failing_per_partition(df, checks)
    assert records == {0: 2, 1: 2}
    assert failing == {"quantity_positive": {0: 1, 1: 1}, "currency_iso": {0: 1, 1: 0},
                       "invoice_id_unique": {0: 1, 1: 1}}


_VALIDATE_ON_A_CLUSTER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from eos_etl.kafka.connection import KafkaConnection
    from eos_etl.quality import validate_run
    from eos_etl.shop.settings import ShopSettings
    from eos_etl.shop.pipeline import run_shop_window
    from eos_etl.shop.schema import ShopTopics
    from eos_etl.spark.session import spark_session

    master, spec = sys.argv[1], json.loads(sys.argv[2])
    spark = spark_session("eos-etl-validate-on-a-cluster", master=master)
    settings = ShopSettings(connection=KafkaConnection(spec["bootstrap_servers"]), topics=ShopTopics(**spec["topics"]),
                            group=spec["group"], transactional_id_prefix=spec["group"])
    window = settings.plan()
    summary = run_shop_window(spark, settings, window)
    report = validate_run(spark, settings, window, run_id=summary.run_id, context_root=Path(spec["gx"]))
    print(json.dumps({"app_id": spark.sparkContext.applicationId, "report": report.to_dict()}), flush=True)
    spark.stop()
""")


@pytest.mark.slow
def test_validation_runs_on_a_standalone_spark_cluster(shop_factory, spark_cluster, tmp_path):
    """Nothing in the validation needs the local master: the Kafka reads, the lineage attribution
    and the aggregates run on the cluster's executors (the driver in a child process: one
    SparkContext per process)."""
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 400, invalid_share=0.1, seed=5)
    t = shop.topics
    spec = {"bootstrap_servers": shop.connection.bootstrap_servers, "group": shop.group, "gx": str(tmp_path / "gx"),
            "topics": {"purchases": t.purchases, "invoices": t.invoices, "shipments": t.shipments,
                       "dead_letters": t.dead_letters}}
    proc = subprocess.run([sys.executable, "-c", _VALIDATE_ON_A_CLUSTER, spark_cluster.master_url, json.dumps(spec)],
                          check=False, capture_output=True, text=True, timeout=420,
                          env={**os.environ, "EOS_ETL_SPARK_DRIVER_MEMORY": "1g"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    report = out["report"]
    assert report["success"] is True, report["failures"]
    assert report["counts"]["committed_inputs"] == 400 and report["counts"]["invoices"] == stats.valid
    assert report["dead_letters_by_reason"] == dict(stats.invalid)
    assert out["app_id"].startswith("app-")  # a standalone application, not local-*
