"""The window's suites (eos_etl.quality.window_suites), broker-free: every rule is an expectation Great
Expectations builds, the failing-window and old-window variants, and the user's own rules from the settings."""

from __future__ import annotations

import pytest

from eos_etl.errors import ConfigurationError
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.quality.window_assets import lineage_shape
from eos_etl.quality.window_suites import window_rules
from eos_etl.shop.settings import ShopSettings

SHOP = ShopSettings(connection=KafkaConnection("127.0.0.1:9092"))
ROLES, PAIR = lineage_shape(SHOP.checked_outputs())
SUITES = {"inputs.counts", "invoices.records", "shipments.records", "dead_letters.rows", "positions.offsets",
          "lineage.one_to_one"}


def _types(rules) -> list[str]:
    return [r["type"] for r in rules]


def test_every_rule_is_an_expectation_great_expectations_builds():
    from eos_etl.quality.window_checkpoint import _expectation

    for failing in (False, True):
        rules = window_rules(SHOP, ROLES, PAIR, failing=failing)
        assert set(rules) == SUITES
        for suite, suite_rules in rules.items():
            for rule in suite_rules:
                expectation = _expectation(rule)  # raises on an unknown type or a bad argument
                assert expectation.notes and "Cost:" in expectation.notes, (suite, rule["type"])
                assert expectation.severity.value == "critical"


def test_the_shops_own_rules_are_native_where_ge_has_one():
    invoices = window_rules(SHOP, ROLES, PAIR)["invoices.records"]
    by_column = {(r["type"], r["kwargs"].get("column")) for r in invoices}
    assert {("expect_column_values_to_match_regex", "currency"), ("expect_column_values_to_be_between", "quantity"),
            ("expect_column_values_to_equal_product", "total"),
            ("expect_column_values_to_be_lineage_ids", "invoice_id")} <= by_column
    required = {r["kwargs"]["column"] for r in invoices if r["type"] == "expect_column_values_to_not_be_null"}
    assert set(SHOP.checked_outputs().primary.required) <= required
    [count] = [r for r in invoices if r["type"] == "expect_table_row_count_to_equal"]
    assert count["kwargs"]["value"] == {"$PARAMETER": "valid_inputs"}  # measured by inputs.counts, not given
    counts = window_rules(SHOP, ROLES, PAIR)["inputs.counts"]
    assert [r["meta"]["parameter"] for r in counts] == ["valid_inputs", "invalid_inputs"]


def test_uniqueness_only_on_a_failing_window_and_an_old_window_may_be_passed():
    clean, failing = (window_rules(SHOP, ROLES, PAIR, failing=f)["invoices.records"] for f in (False, True))
    unique = ["expect_column_values_to_be_unique", "expect_compound_columns_to_be_unique"]
    assert not set(unique) & set(_types(clean)) and _types(failing) == _types(clean) + unique
    assert _types(window_rules(SHOP, ROLES, PAIR, exact_offsets=False)["positions.offsets"])[-1] == (
        "expect_column_pair_values_a_to_be_greater_than_b")


def test_a_users_rule_from_the_settings_json_joins_its_assets_suite():
    rule = {"type": "expect_column_values_to_be_between", "severity": "warning",
            "kwargs": {"column": "total", "min_value": 0, "max_value": 10_000}}
    shop = ShopSettings.from_mapping({"expectations": {"invoices": [rule]}}, SHOP.connection)
    invoices = window_rules(shop, ROLES, PAIR)["invoices.records"]
    assert invoices[-1]["type"] == rule["type"] and invoices[-1]["severity"] == "warning"
    assert invoices[-1]["meta"] == {"added_by": "settings"} and invoices[-1]["kwargs"] == rule["kwargs"]
    assert len(invoices) == len(window_rules(SHOP, ROLES, PAIR)["invoices.records"]) + 1


@pytest.mark.parametrize("expectations, message", [
    ({"refunds": [{"type": "expect_column_values_to_not_be_null"}]}, "no such asset"),
    ({"invoices": [{"kwargs": {}}]}, "has no type"),
    ({"invoices": [{"type": "expect_column_values_to_not_be_null", "severity": "loud"}]}, "severity 'loud'"),
    (["expect_column_values_to_not_be_null"], "must map an asset name"),
])
def test_a_users_rule_that_cannot_be_one_is_refused(expectations, message):
    shop = ShopSettings(connection=SHOP.connection, expectations=expectations)
    with pytest.raises(ConfigurationError, match=message):
        window_rules(shop, ROLES, PAIR)
