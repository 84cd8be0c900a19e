"""The project's own Great Expectations expectations (eos_etl.quality.expectations), validated by GE's Spark
execution engine on real Spark DataFrames: each fails on the defect it exists for and passes without it,
lists its unexpected rows with their source position at SUMMARY, and costs no Spark job of its own."""

from __future__ import annotations

import copy

import great_expectations as gx
import great_expectations.expectations as gxe
import pytest
from pyspark.sql import functions as F

from eos_etl.quality.expectations import (
    ExpectColumnValuesToBeLineageIds,
    ExpectColumnValuesToEqualProduct,
    ExpectColumnValuesToMatchValueSchema,
    ExpectOutputsToBeOnePerInput,
    ExpectRecordsToBePaired,
)

ROLES = ["valid_input", "invalid_input", "invoice", "shipment", "dead_letter"]
PAIR = ["invoice_id", "purchase_id", "quantity"]
FIELDS = [("invoice_id", "STRING"), ("quantity", "INT"), ("unit_price", "STRING")]
INDEX = ["source_partition", "source_offset"]
N = 600


@pytest.fixture(scope="module")
def context():
    return gx.get_context(mode="ephemeral")


def _validate(context, spark, df, expectations, result_format="BOOLEAN_ONLY"):
    """(validation result, Spark jobs it ran) of ``expectations`` on ``df`` as a dataframe asset."""
    name = f"t{len(context.suites.all())}"
    source = context.data_sources.add_spark(name, persist=False)
    batch = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("whole")
    suite = context.suites.add(gx.ExpectationSuite(name=name, expectations=[copy.copy(e) for e in expectations]))
    definition = context.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch, suite=suite))
    if result_format == "SUMMARY":
        result_format = {"result_format": "SUMMARY", "unexpected_index_column_names": INDEX}
    store = spark.sparkContext._jsc.sc().statusStore()
    before = store.jobsList(None).size()
    result = definition.run(batch_parameters={"dataframe": df}, result_format=result_format)
    return result, store.jobsList(None).size() - before


def _positions(spark, n=N):
    return spark.range(n).select((F.col("id") % 3).cast("int").alias("source_partition"),
                                 F.col("id").alias("source_offset"))


def _records(positions):
    return positions.select("*", F.concat(F.lit("inv-"), F.col("source_offset")).alias("invoice_id"),
                            F.concat(F.lit("p-"), F.col("source_offset")).alias("purchase_id"),
                            (F.col("source_offset") % 5 + 1).cast("int").alias("quantity"))


def _lineage(spark, *, invoices=None, shipments=None):
    """A lineage asset: every position a valid input but offsets divisible by 10 (invalid, a dead letter
    each); an invoice and a shipment per valid input unless given."""
    pos = _positions(spark)
    valid, invalid = pos.where("source_offset % 10 != 0"), pos.where("source_offset % 10 = 0")
    records = _records(valid)
    none = [F.lit(None).cast(t).alias(c) for c, t in (("invoice_id", "string"), ("purchase_id", "string"),
                                                      ("quantity", "int"))]

    def role(df, name, with_pairs):
        return df.select(F.lit(name).alias("role"), "source_partition", "source_offset",
                         *(PAIR if with_pairs else none))

    parts = [role(valid, "valid_input", False), role(invalid, "invalid_input", False),
             role(invoices if invoices is not None else records, "invoice", True),
             role(shipments if shipments is not None else records, "shipment", True),
             role(invalid, "dead_letter", False)]
    frame = parts[0]
    for part in parts[1:]:
        frame = frame.unionByName(part)
    return frame.localCheckpoint(), records


def _lineage_suite():
    return [ExpectOutputsToBeOnePerInput(roles=ROLES, pair_columns=PAIR,
                                         outputs={"invoice": "valid_input", "shipment": "valid_input",
                                                  "dead_letter": "invalid_input"}),
            ExpectRecordsToBePaired(roles=ROLES, pair_columns=PAIR, primary="invoice", companion="shipment")]


def _outcomes(result):
    return {r.expectation_config.type: r for r in result.results}


def test_the_lineage_expectations_pass_exact_outputs_and_cost_one_aggregate(spark, context):
    frame, _ = _lineage(spark)
    result, jobs = _validate(context, spark, frame, _lineage_suite(), "SUMMARY")
    assert result.success
    one = _outcomes(result)["expect_outputs_to_be_one_per_input"].result
    assert one["observed_value"] == {"dead_letter": 60, "invoice": 540, "shipment": 540}
    # Both read one metric with the same arguments: one aggregate (Spark's adaptive plan: a job for its
    # shuffle stage, one for the result).
    _, alone = _validate(context, spark, frame, _lineage_suite()[:1])
    assert jobs == alone <= 2


def test_a_duplicate_a_missing_and_a_foreign_output_fail_one_per_input_with_equal_counts(spark, context):
    _, records = _lineage(spark)
    # One invoice twice and one missing: the count is right, the positions are not.
    dup = records.where("source_offset != 1").unionByName(records.where("source_offset = 2"))
    frame, _ = _lineage(spark, invoices=dup, shipments=dup)
    result, _ = _validate(context, spark, frame, _lineage_suite()[:1], "SUMMARY")
    details = _outcomes(result)["expect_outputs_to_be_one_per_input"].result["details"]
    assert not result.success
    assert details["invoice"] == {"records": 540, "expected": 540, "same_positions": False}
    # An output of an input that is no committed valid input (an aborted one's: offset 0 is invalid here).
    foreign = records.unionByName(_records(_positions(spark).where("source_offset = 0")))
    frame, _ = _lineage(spark, invoices=foreign)
    result, _ = _validate(context, spark, frame, _lineage_suite(), "SUMMARY")
    outcome = _outcomes(result)
    assert outcome["expect_outputs_to_be_one_per_input"].result["details"]["invoice"]["records"] == 541
    assert not outcome["expect_outputs_to_be_one_per_input"].success
    assert not outcome["expect_records_to_be_paired"].success  # an invoice without its shipment


def test_a_pair_that_disagrees_fails_pairing_only(spark, context):
    _, records = _lineage(spark)
    other_quantity = records.withColumn("quantity", F.when(F.col("source_offset") == 5, 99)
                                        .otherwise(F.col("quantity")))
    frame, _ = _lineage(spark, shipments=other_quantity)
    result, _ = _validate(context, spark, frame, _lineage_suite(), "SUMMARY")
    outcome = _outcomes(result)
    assert outcome["expect_outputs_to_be_one_per_input"].success  # every position has its outputs
    assert not outcome["expect_records_to_be_paired"].success
    assert outcome["expect_records_to_be_paired"].result["observed_value"] == {"invoice": 540, "shipment": 540}


def _invoices(spark, *, bad_value_at=None, bad_total_at=None, bad_id_at=None):
    rec = _records(_positions(spark))
    at = F.col("source_offset")
    price = F.lit("1.50")
    value_price = F.when(at == F.lit(bad_value_at), F.lit("x")).otherwise(price) if bad_value_at is not None else price
    total = (F.col("quantity") * F.lit(1.5)).cast("decimal(10,2)").cast("string")
    if bad_total_at is not None:
        total = F.when(at == F.lit(bad_total_at), F.lit("9.99")).otherwise(total)
    invoice_id = F.col("invoice_id")
    if bad_id_at is not None:
        invoice_id = F.when(at == F.lit(bad_id_at), F.lit("inv-forged")).otherwise(invoice_id)
    return rec.select("source_partition", "source_offset", invoice_id.alias("invoice_id"), "quantity",
                      F.concat(F.lit("inv-"), at).alias("lineage_invoice_id"), price.alias("unit_price"),
                      total.alias("total"),
                      F.to_json(F.struct(invoice_id.alias("invoice_id"), "quantity",
                                         value_price.alias("unit_price"))).alias("value")).localCheckpoint()


def _record_suite():
    return [ExpectColumnValuesToMatchValueSchema(column="value", fields=FIELDS, decimals=["unit_price"]),
            ExpectColumnValuesToBeLineageIds(column="invoice_id", lineage_column="lineage_invoice_id"),
            ExpectColumnValuesToEqualProduct(column="total", factors=[("quantity", "decimal(10,0)"),
                                                                      ("unit_price", "decimal(26,8)")])]


@pytest.mark.parametrize("defect, failing, unexpected", [
    ({"bad_value_at": 7}, "expect_column_values_to_match_value_schema",
     '{"invoice_id":"inv-7","quantity":3,"unit_price":"x"}'),
    ({"bad_id_at": 8}, "expect_column_values_to_be_lineage_ids", "inv-forged"),
    ({"bad_total_at": 9}, "expect_column_values_to_equal_product", "9.99"),
])
def test_each_record_rule_fails_on_its_defect_alone_and_names_the_row(spark, context, defect, failing, unexpected):
    clean, _ = _validate(context, spark, _invoices(spark), _record_suite())
    assert clean.success
    result, _ = _validate(context, spark, _invoices(spark, **defect), _record_suite(), "SUMMARY")
    outcome = _outcomes(result)
    assert [t for t, r in outcome.items() if not r.success] == [failing]
    found = outcome[failing].result
    offset = next(iter(defect.values()))
    assert found["unexpected_count"] == 1 and found["partial_unexpected_list"] == [unexpected]
    assert found["partial_unexpected_index_list"] == [{"source_partition": offset % 3, "source_offset": offset,
                                                        found_column(failing): unexpected}]


def found_column(expectation: str) -> str:
    return {"expect_column_values_to_match_value_schema": "value", "expect_column_values_to_be_lineage_ids":
            "invoice_id", "expect_column_values_to_equal_product": "total"}[expectation]


def test_the_record_rules_join_the_native_expectations_aggregates(spark, context):
    """The custom column maps add no Spark job to a suite of native ones on the same asset."""
    frame = _invoices(spark)
    native = [gxe.ExpectColumnValuesToNotBeNull(column="invoice_id"),
              gxe.ExpectColumnValuesToBeBetween(column="quantity", min_value=1)]
    _, native_jobs = _validate(context, spark, frame, native)
    result, all_jobs = _validate(context, spark, frame, native + _record_suite())
    assert result.success and all_jobs == native_jobs
