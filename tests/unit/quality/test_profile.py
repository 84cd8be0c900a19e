"""The window profile's decisions (eos_etl.quality.profile): when its fingerprints pass a window.

The fingerprints computed by Spark: tests/integration/quality/test_profile.py."""

from __future__ import annotations

from eos_etl.quality.profile import InputStats, OutputStats, WindowProfile


def _profile(valid=(3, 30), invalid=(1, 7), invoices=(3, 30, 99), shipments=(3, 30, 99), dead=(1, 7),
             ids_off=0, unattributable=0) -> WindowProfile:
    records = valid[0] + invalid[0]
    return WindowProfile(
        inputs={0: InputStats(records, valid[0], 1_000, valid[1], invalid[1])},
        outputs={"invoices": {0: OutputStats(invoices[0], invoices[1], invoices[2], ids_off)},
                 "shipments": {0: OutputStats(shipments[0], shipments[1], shipments[2])},
                 "dead_letters": {0: OutputStats(dead[0], dead[1])}},
        unattributable={"invoices": unattributable})


def test_a_window_whose_outputs_are_exactly_its_inputs_passes():
    found = _profile()
    assert found.clean and found.inconsistencies() == [] and found.earliest_ms == 1_000


def test_equal_counts_with_other_records_do_not_pass():
    # One invoice twice and one missing: the count holds, the fingerprint does not.
    found = _profile(invoices=(3, 31, 99))
    assert not found.clean
    assert found.inconsistencies() == ["partition 0: invoices are not exactly its valid inputs (3 for 3)"]


def test_each_lineage_fault_is_named():
    assert _profile(shipments=(3, 30, 98)).inconsistencies() == ["partition 0: invoices and shipments do not pair"]
    assert _profile(dead=(0, 0)).inconsistencies() == [
        "partition 0: dead_letters are not exactly its invalid inputs (0 for 1)"]
    assert _profile(ids_off=1).inconsistencies() == ["partition 0: ids not given by their lineage"]
    assert _profile(unattributable=2).inconsistencies() == ["2 invoices without readable lineage"]
    # An output for a partition the window has no input on.
    found = _profile()
    found.outputs["invoices"][5] = OutputStats(1, 4, 4)
    assert "partition 5: invoices are not exactly its valid inputs (1 for 0)" in found.inconsistencies()


def test_a_failing_value_check_does_not_pass():
    found = _profile()
    found.outputs["invoices"][0].failing["total_matches"] = 1
    assert found.inconsistencies() == [] and not found.clean


def test_the_suites_row_checks_are_the_profiles_columns_one_definition():
    """Every record-table check of the suites is a column the profile counts (profile.ROW_CHECKS), and
    every column the profile counts is checked: the names are defined once, in the profile."""
    from eos_etl.quality.row_checks import row_checks
    from eos_etl.quality.suites import all_suites as suites_of
    from eos_etl.shop.output_checks import SHOP_OUTPUTS

    ROW_CHECKS = row_checks(SHOP_OUTPUTS)

    def all_suites():
        return suites_of(SHOP_OUTPUTS)

    suites = {spec.name: [check.name for check in spec.checks] for spec in all_suites()}
    for suite, checks in ROW_CHECKS.items():
        assert sorted(suites[suite]) == sorted(checks), suite
        for spec in all_suites():
            if spec.name == suite:
                assert all(c.expectation.column == c.name for c in spec.checks)
