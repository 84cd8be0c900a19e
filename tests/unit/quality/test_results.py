"""A window's validation result as the report shows it (eos_etl.quality.results): broker-free, no GE."""

from __future__ import annotations

import json

import pytest

from eos_etl.engine.window import OffsetRange, Window
from eos_etl.quality.results import QualityError, RuleResult, WindowValidation, raise_for_failures

WINDOW = Window(topic="purchases", group="shop", ranges={0: OffsetRange(0, 60), 1: OffsetRange(5, 45)})
PARAMETERS = {"valid_inputs": 90, "invalid_inputs": 10}


def rule(suite: str, type_: str, success: bool = True, **fields) -> RuleResult:
    kwargs = fields.pop("kwargs", {})
    return RuleResult(suite=suite, type=type_, kwargs=kwargs, severity=fields.pop("severity", "critical"),
                      success=success, **fields)


def validation(rules, **fields) -> WindowValidation:
    return WindowValidation(run_id="r-1", window=WINDOW, rules=rules, parameters=dict(PARAMETERS),
                            data_docs={"invoices.records": "/gx/docs/inv.html"}, report=None, index="/gx/index.html",
                            summary_run=fields.pop("summary_run", False), seconds=1.5,
                            committed_offsets={0: 60, 1: 45}, **fields)


def row_count(suite: str, success=True, observed=None, value=None) -> RuleResult:
    return rule(suite, "expect_table_row_count_to_equal", success,
                kwargs={"value": value if value is not None else {"$PARAMETER": "valid_inputs"}},
                observed_value=observed)


def test_counts_are_observed_or_proven_equal_and_never_defaulted():
    clean = validation([row_count("invoices.records"), row_count("shipments.records", value=90),
                        rule("dead_letters.rows", "expect_column_values_to_not_be_null", kwargs={"column": "x"})])
    # A passing row-count rule proves the count equal to its value (a parameter or a number); the dead
    # letters' suite has no row-count rule here: not measured, so None (the report's "–"), never 0.
    assert clean.counts() == {"committed_inputs": 100, "valid_inputs": 90, "invalid_inputs": 10,
                              "invoices": 90, "shipments": 90, "dead_letters": None}
    failing = validation([row_count("invoices.records", success=False, observed=91)], summary_run=True)
    assert failing.counts()["invoices"] == 91
    # A failed rule without an observed value measured nothing.
    unknown = validation([row_count("invoices.records", success=False)])
    assert unknown.counts()["invoices"] is None
    no_inputs = WindowValidation(run_id="r", window=WINDOW, rules=[], parameters={}, data_docs={}, report=None,
                                 index=None, summary_run=False, seconds=0.1)
    assert no_inputs.counts() == {"committed_inputs": None, "valid_inputs": None, "invalid_inputs": None}


def test_a_warning_is_shown_and_does_not_fail_the_run_a_critical_rule_does():
    warning = rule("invoices.records", "expect_column_values_to_be_between", False, severity="warning",
                   kwargs={"column": "total", "max_value": 1000}, unexpected_count=3, unexpected_percent=3.3333,
                   unexpected_rows=({"source_partition": 1, "source_offset": 7},), added_by_settings=True)
    result = validation([row_count("invoices.records"), warning])
    assert result.success and result.failures == [warning] and result.critical_failures == []
    raise_for_failures(result)  # nothing critical: quiet
    assert warning.message == ("invoices.records: column_values_to_be_between(total) (warning): 3 unexpected "
                               "(3.33%), e.g. partition 1 offset 7")
    paired = rule("lineage.one_to_one", "expect_records_to_be_paired", False,
                  kwargs={"primary": "invoice", "companion": "shipment"}, observed_value={"invoice": 91})
    failing = validation([warning, paired], summary_run=True)
    assert not failing.success
    with pytest.raises(QualityError) as raised:
        raise_for_failures(failing)
    assert raised.value.result is failing
    assert "failed 1 critical expectation(s)" in str(raised.value)
    assert "lineage.one_to_one: records_to_be_paired(invoice, shipment): observed {'invoice': 91}" in str(raised.value)
    assert "(Data Docs: /gx/index.html)" in str(raised.value)


def test_a_rule_ge_could_not_evaluate_says_why():
    broken = rule("invoices.records", "expect_column_values_to_not_be_null", False, kwargs={"column": "nope"},
                  error="The column 'nope' in BatchData does not exist.")
    assert broken.message == ("invoices.records: column_values_to_not_be_null(nope): could not be evaluated: "
                              "The column 'nope' in BatchData does not exist.")


def test_the_report_dict_is_json_with_failures_first_and_each_suites_page():
    failed = rule("invoices.records", "expect_compound_columns_to_be_unique", False,
                  kwargs={"column_list": ["source_partition", "source_offset"]}, unexpected_count=2,
                  unexpected_rows=({"source_partition": 0, "source_offset": 3},) * 2)
    result = validation([row_count("invoices.records"), failed], summary_run=True,
                        dead_letters_by_reason={"bad_json": 10}, spark={"session": "classic"})
    data = json.loads(json.dumps(result.to_dict()))
    assert [e["success"] for e in data["expectations"]] == [False, True]
    assert data["expectations"][0]["check"] == "compound_columns_to_be_unique(source_partition+source_offset)"
    assert data["expectations"][0]["examples"] == [{"source_partition": 0, "source_offset": 3}] * 2
    assert data["suites"] == {"invoices.records": {"name": "invoices.records", "success": False, "evaluated": 2,
                                                   "successful": 1, "failed": 1, "docs_page": "/gx/docs/inv.html"}}
    assert data["offsets"] == [{"partition": 0, "window": [0, 60], "committed": 60},
                               {"partition": 1, "window": [5, 45], "committed": 45}]
    assert data["failures"] == [failed.message] and data["success"] is False
    assert data["data_docs_path"] == "/gx/index.html" and data["dead_letters_by_reason"] == {"bad_json": 10}
