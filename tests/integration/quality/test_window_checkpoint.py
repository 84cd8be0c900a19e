"""A window validated by Great Expectations on its own read_committed data (eos_etl.quality.window_checkpoint):
real broker, real Spark, GE's Spark execution engine and one Checkpoint per run with its Data Docs action."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import pytest

from eos_etl.quality.window_checkpoint import validate_window
from eos_etl.shop.generator import generate
from eos_etl.shop.pipeline import run_shop_window
from tests.integration.embedded.test_spark_connect import server_application_id
from tests.support.forged_outputs import forge_second_invoice

pytestmark = pytest.mark.spark


def _jobs(spark):
    return spark.sparkContext._jsc.sc().statusStore().jobsList(None).size()


def _by(result, suite, type_, **kwargs):
    found = [r for r in result.rules if r.suite == suite and r.type == type_
             and all(r.kwargs.get(k) == v for k, v in kwargs.items())]
    assert len(found) == 1, (suite, type_, kwargs, [(r.suite, r.type) for r in result.rules])
    return found[0]


def test_clean_window_then_a_forged_invoice_and_a_users_warning(spark, shop_factory, tmp_path):
    total_at_most = {"type": "expect_column_values_to_be_between", "severity": "warning",
                     "kwargs": {"column": "total", "min_value": 0, "max_value": 1000}}
    shop = shop_factory(partitions=2, expectations={"invoices": [total_at_most]})
    stats = generate(shop.connection, shop.topics.purchases, 600, invalid_share=0.1)
    window = shop.plan()
    summary = run_shop_window(spark, shop, window)
    root = tmp_path / "gx"

    jobs = _jobs(spark)
    clean = validate_window(spark, shop, window, run_id=summary.run_id, context_root=root)
    clean_jobs = _jobs(spark) - jobs
    # GE measured the counts the output suites are held to, on the window's inputs.
    assert clean.parameters == {"valid_inputs": stats.valid, "invalid_inputs": sum(stats.invalid.values())}
    # The user's warning fails (totals go up to 5,000) and is shown; it does not fail the run.
    assert [(r.suite, r.type, r.severity, r.added_by_settings) for r in clean.failures] == [
        ("invoices.records", "expect_column_values_to_be_between", "warning", True)], [
        (r.type, r.observed_value) for r in clean.failures]
    assert clean.success and clean.summary_run
    user = clean.failures[0]
    assert user.unexpected_count and 0 < user.unexpected_count < stats.valid
    assert user.unexpected_rows and {"source_partition", "source_offset"} <= set(user.unexpected_rows[0])
    suites = {r.suite for r in clean.rules}
    assert suites == {"inputs.counts", "invoices.records", "shipments.records", "dead_letters.rows",
                      "positions.offsets", "lineage.one_to_one"}
    assert _by(clean, "lineage.one_to_one", "expect_outputs_to_be_one_per_input").success
    assert _by(clean, "invoices.records", "expect_column_values_to_match_regex", column="currency").success
    assert _by(clean, "positions.offsets", "expect_column_pair_values_to_be_equal").success
    # Validated again at SUMMARY, so the uniqueness rules ran too (and passed).
    assert _by(clean, "invoices.records", "expect_column_values_to_be_unique", column="invoice_id").success
    assert all(page and page.endswith(".html") for page in clean.data_docs.values()), clean.data_docs
    assert clean.index and clean.index.endswith("index.html")
    page = open(clean.data_docs["invoices.records"]).read()
    assert "source_partition" in page  # the unexpected rows' index columns, in the Data Docs page
    # The report action wrote what GE said, with each suite's page of this run.
    report = json.loads(open(clean.report).read())
    assert report["success"] is True and report["pages"] == clean.data_docs
    [user_rule] = [r for r in report["rules"] if not r["success"]]
    assert (user_rule["type"], user_rule["severity"], user_rule["unexpected_count"]) == (
        "expect_column_values_to_be_between", "warning", user.unexpected_count)

    # Without the user's warning a clean window is one BOOLEAN_ONLY pass: nothing re-validated.
    relaxed = dataclasses.replace(shop, expectations={"invoices": [
        dict(total_at_most, kwargs={"column": "total", "min_value": 0, "max_value": 10_000})]})
    jobs = _jobs(spark)
    passing = validate_window(spark, relaxed, window, run_id="relaxed", context_root=root)
    passing_jobs = _jobs(spark) - jobs
    assert passing.success and passing.failures == [] and not passing.summary_run
    assert passing_jobs < clean_jobs, (passing_jobs, clean_jobs)
    print(f"spark jobs: clean window {passing_jobs} {passing.spark_jobs} {passing.timings}, "
          f"with a failure (SUMMARY again) {clean_jobs} {clean.spark_jobs} {clean.timings}")

    # A forged invoice: a second one for an input of the window, its own id, no shipment, outside any
    # transaction. GE's own rules find it and list it with its source position.
    victim = forge_second_invoice(shop, "inv_forged_0001")
    bad = validate_window(spark, relaxed, window, run_id="forged", context_root=root)
    assert not bad.success and bad.summary_run
    failed = {(r.suite, r.type) for r in bad.failures}
    assert failed == {
        ("invoices.records", "expect_table_row_count_to_equal"),
        ("invoices.records", "expect_column_values_to_be_lineage_ids"),
        ("invoices.records", "expect_compound_columns_to_be_unique"),
        ("lineage.one_to_one", "expect_outputs_to_be_one_per_input"),
        ("lineage.one_to_one", "expect_records_to_be_paired"),
    }, failed
    ids = _by(bad, "invoices.records", "expect_column_values_to_be_lineage_ids")
    assert ids.unexpected_count == 1
    [row] = ids.unexpected_rows
    assert (row["source_partition"], row["source_offset"]) == (int(victim.headers["source_partition"]),
                                                               int(victim.headers["source_offset"]))
    assert _by(bad, "invoices.records", "expect_table_row_count_to_equal").observed_value == stats.valid + 1
    one = _by(bad, "lineage.one_to_one", "expect_outputs_to_be_one_per_input")
    assert one.observed_value == {"invoice": stats.valid + 1, "shipment": stats.valid,
                                  "dead_letter": sum(stats.invalid.values())}


# One process has one kind of Spark session: the Connect client runs in a child process.
_ON_CONNECT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import psutil
    import pyspark
    from eos_etl.kafka.connection import KafkaConnection
    from eos_etl.quality.window_checkpoint import validate_window
    from eos_etl.shop.pipeline import run_shop_window
    from eos_etl.shop.settings import ShopSettings
    from eos_etl.spark.session import spark_route, spark_session, stop_session

    spec = json.loads(sys.argv[1])
    shop = ShopSettings.from_mapping(spec, KafkaConnection(spec["bootstrap_servers"]))
    session = spark_session("eos-etl-validate-connect")
    try:
        window = shop.plan()
        summary = run_shop_window(session, shop, window)
        r = validate_window(session, shop, window, run_id=summary.run_id, context_root=Path(spec["gx"]))
        print(json.dumps({"route": spark_route(session), "success": r.success, "parameters": r.parameters,
                          "failures": [(f.suite, f.type) for f in r.failures], "summary_run": r.summary_run,
                          "spark_jobs": r.spark_jobs, "pages": list(r.data_docs.values()), "result": r.to_dict(),
                          "classic_context": pyspark.SparkContext._active_spark_context is not None,
                          "children": [p.pid for p in psutil.Process().children(recursive=True)]}))
    finally:
        stop_session(session)
""")


def test_a_window_validates_on_the_spark_connect_route(spark_connect_server, shop_factory, tmp_path):
    """The default route: the window and its validation are clients of one Connect server; GE's engine runs
    on the client's session (none of its own: that would start a local JVM in the client)."""
    shop = shop_factory(partitions=2)
    stats = generate(shop.connection, shop.topics.purchases, 300, invalid_share=0.1)
    t = shop.topics
    spec = {"bootstrap_servers": shop.connection.bootstrap_servers, "group": shop.group, "gx": str(tmp_path / "gx"),
            "transactional_id_prefix": shop.transactional_id_prefix, "writer_slots": shop.writer_slots,
            "topics": {"purchases": t.purchases, "invoices": t.invoices, "shipments": t.shipments,
                       "dead_letters": t.dead_letters}}
    proc = subprocess.run([sys.executable, "-c", _ON_CONNECT, json.dumps(spec)], check=False, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **spark_connect_server.client_env()})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["route"] == "connect" and out["success"] and out["failures"] == [] and not out["summary_run"], out
    assert out["parameters"] == {"valid_inputs": stats.valid, "invalid_inputs": sum(stats.invalid.values())}
    assert out["spark_jobs"] == {}  # a Connect client sees no job list: not counted, not guessed
    assert all(page and page.endswith(".html") for page in out["pages"])
    # Where the window ran: the server's application; no JVM of the client's own.
    result = out["result"]
    assert result["spark"]["session"] == "connect"
    assert result["spark"]["application_id"] == server_application_id(spark_connect_server)
    assert out["classic_context"] is False and out["children"] == []
    # The report's counts are GE's: the inputs' observed, the outputs' proven equal to them.
    assert result["counts"] == {"committed_inputs": 300, "valid_inputs": stats.valid,
                                "invalid_inputs": sum(stats.invalid.values()), "invoices": stats.valid,
                                "shipments": stats.valid, "dead_letters": sum(stats.invalid.values())}
    assert result["dead_letters_by_reason"] == dict(stats.invalid)
