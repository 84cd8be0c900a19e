"""The suites a window's assets (:mod:`.window_assets`) are validated with: one per asset, named for its
rules, each expectation Great Expectations' own where one exists, the project's
(:mod:`.expectations`) where none does, and the user's (from the settings) after them.

=====================  ======================================================================
suite                  rules
=====================  ======================================================================
``inputs.counts``      the committed inputs the contract finds valid, and invalid (row counts under a
                       row condition: their observed values are the suite parameters below)
``<output>.records``   columns as the schema gives them; one row per valid input
                       (``$valid_inputs``); required fields not null; the value matches its schema;
                       the id is its lineage's; a source position on every record; the pipeline's
                       own rules (the shop: quantity >= 1, currency ISO, total = quantity x
                       unit_price)
``dead_letters.rows``  one row per invalid input (``$invalid_inputs``); a reason and a source
                       position on every row
``positions.offsets``  the group's committed offset of every partition is the window's end (at or
                       past it when validating an old window)
``lineage.one_to_one`` one output per committed input of its role, same positions (count and
                       fingerprint); every primary record paired with its companion
=====================  ======================================================================

A window that fails is validated again at SUMMARY with the uniqueness rules added
(:func:`uniqueness_rules`): they shuffle, and on a window that passes the rules above they cannot fail
(ids are their lineage's and positions one per input), so only a failing window pays for them.

Every rule is critical (a failure fails the run) unless it says otherwise; a user's rule says which it
is. Notes say why each rule holds and what it costs.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ConfigurationError
from .checked_outputs import record_outputs
from .window_assets import DEAD_LETTER, DEAD_LETTERS, INPUTS, INVALID_INPUT, LINEAGE, POSITIONS, VALID_INPUT
from .window_reads import LINEAGE_COLUMNS

VALID_INPUTS, INVALID_INPUTS = "valid_inputs", "invalid_inputs"
#: The suite of the counts the other suites' parameters are.
COUNTS_SUITE = f"{INPUTS}.counts"
_AGG = "Cost: counted in the asset's one aggregate."


def _rule(type_: str, notes: str, severity: str = "critical", meta: dict | None = None, **kwargs) -> dict:
    return {"type": type_, "kwargs": kwargs, "notes": notes, "severity": severity, "meta": meta or {}}


def counts_rules() -> list[dict]:
    """The inputs' counts: what the contract finds valid, and invalid (observed values at BASIC)."""
    return [_rule("expect_table_row_count_to_be_between", f"The committed inputs the contract finds valid: "
                  f"the row count the record outputs must have. {_AGG}", min_value=0, row_condition="valid",
                  condition_parser="spark", meta={"parameter": VALID_INPUTS}),
            _rule("expect_table_row_count_to_be_between", f"The committed inputs the contract rejects: the "
                  f"dead letters' row count. {_AGG}", min_value=0, row_condition="NOT valid",
                  condition_parser="spark", meta={"parameter": INVALID_INPUTS})]


def record_rules(record) -> list[dict]:
    """A record output's rules (the module docstring's table)."""
    columns = ["value", *(name for name, _ in record.fields), "lineage_id", *LINEAGE_COLUMNS]
    rules = [
        # Not an exact match: GE lists a struct's fields as columns of their own (address.city, ...).
        _rule("expect_table_columns_to_match_set", "Every column the schema gives is there. Cost: none (the "
              "schema).", column_set=columns, exact_match=False),
        _rule("expect_table_row_count_to_equal", f"Every valid input gives one {record.noun}: as many as the "
              f"valid committed inputs (inputs.counts). {_AGG}", value={"$PARAMETER": VALID_INPUTS}),
        *(_rule("expect_column_values_to_not_be_null", f"Every {record.noun} carries its {field}. {_AGG}",
                column=field) for field in record.required),
        _rule("expect_column_values_to_match_value_schema", f"A reader parses every {record.noun} with the "
              f"schema. {_AGG}", column="value", fields=[list(f) for f in record.fields],
              decimals=list(record.decimals)),
        _rule("expect_column_values_to_be_lineage_ids", f"The {record.id_column} is the one the source "
              f"position gives, so a replay writes the same ids. {_AGG}", column=record.id_column,
              lineage_column="lineage_id"),
        *(_rule("expect_column_values_to_not_be_null", f"Every {record.noun} names its input ({c} header). {_AGG}",
                column=c) for c in ("source_partition", "source_offset")),
    ]
    return rules + [dict(r, severity=r.get("severity", "critical"), meta=r.get("meta", {}))
                    for r in record.expectations]


def dead_letter_rules() -> list[dict]:
    return [
        _rule("expect_table_row_count_to_equal", "Every rejected input gives one dead letter: as many as the "
              f"invalid committed inputs (inputs.counts). {_AGG}", value={"$PARAMETER": INVALID_INPUTS}),
        *(_rule("expect_column_values_to_not_be_null", f"Every dead letter carries {what}. {_AGG}", column=c)
          for c, what in (("dlq_reason", "its reason"), ("source_partition", "its input's partition"),
                          ("source_offset", "its input's offset"))),
    ]


def position_rules(exact_offsets: bool) -> list[dict]:
    exact = _rule("expect_column_pair_values_to_be_equal", "The run committed exactly the window's end: nothing "
                  "skipped, nothing read twice. Cost: a count on a row per partition.",
                  column_A="committed_offset", column_B="window_end")
    past = _rule("expect_column_pair_values_a_to_be_greater_than_b", "An old window: later runs moved the "
                 "offsets on, never back. Cost: a count on a row per partition.", column_A="committed_offset",
                 column_B="window_end", or_equal=True)
    return [_rule("expect_column_values_to_not_be_null", "Every partition of the window has a committed offset. "
                  f"{_AGG}", column="committed_offset"), exact if exact_offsets else past]


def lineage_rules(outputs, roles: tuple[str, ...], pair_columns: tuple[str, ...]) -> list[dict]:
    primary, companion = record_outputs(outputs)
    one_per_input = {primary.noun: VALID_INPUT, companion.noun: VALID_INPUT, DEAD_LETTER: INVALID_INPUT}
    common = {"roles": list(roles), "pair_columns": list(pair_columns)}
    return [
        _rule("expect_outputs_to_be_one_per_input", "Exactly once: every committed input has one output of each "
              "of its roles, none twice, none from an aborted or foreign record (count and fingerprint of source "
              f"positions per role). {_AGG}", outputs=one_per_input, **common),
        _rule("expect_records_to_be_paired", f"Never a {primary.noun} without its {companion.noun}: same source "
              f"position and shared fields (a fingerprint). Cost: the same metric.", primary=primary.noun,
              companion=companion.noun, **common),
    ]


def uniqueness_rules(record) -> list[dict]:
    """Added on a failing window only (see the module docstring): each a shuffle of the asset."""
    return [
        _rule("expect_column_values_to_be_unique", f"No {record.id_column} twice. Cost: a shuffle; run only on a "
              "failing window (lineage ids and one per input imply it).", column=record.id_column),
        _rule("expect_compound_columns_to_be_unique", f"No input with two {record.noun}s. Cost: a shuffle; run "
              "only on a failing window.", column_list=["source_partition", "source_offset"]),
    ]


def user_rules(settings) -> dict[str, list[dict]]:
    """The settings' own expectations, asset -> rules (``settings.expectations``: a mapping of asset name to
    a list of ``{"type", "kwargs", "severity", "notes"}``; severity ``critical`` or ``warning``)."""
    given = getattr(settings, "expectations", None) or {}
    if not isinstance(given, Mapping):
        raise ConfigurationError("expectations must map an asset name to a list of expectations")
    out: dict[str, list[dict]] = {}
    for asset, rules in given.items():
        for rule in rules:
            if not isinstance(rule, Mapping) or "type" not in rule:
                raise ConfigurationError(f"an expectation of {asset!r} has no type: {rule!r}")
            severity = rule.get("severity", "critical")
            if severity not in ("critical", "warning", "info"):
                raise ConfigurationError(f"expectation {rule['type']} of {asset!r}: severity {severity!r} is none "
                                         "of critical, warning, info")
            out.setdefault(asset, []).append({"type": rule["type"], "kwargs": dict(rule.get("kwargs", {})),
                                              "notes": rule.get("notes", "Added in the pipeline's settings."),
                                              "severity": severity, "meta": {"added_by": "settings"}})
    return out


def window_rules(settings, roles, pair_columns, *, exact_offsets: bool = True,
                 failing: bool = False) -> dict[str, list[dict]]:
    """suite name -> its rules, for every asset of the window (user rules last)."""
    outputs = settings.checked_outputs()
    rules: dict[str, list[dict]] = {COUNTS_SUITE: counts_rules()}
    for record in record_outputs(outputs):
        rules[f"{record.name}.records"] = record_rules(record) + (uniqueness_rules(record) if failing else [])
    rules[f"{DEAD_LETTERS}.rows"] = dead_letter_rules()
    rules[f"{POSITIONS}.offsets"] = position_rules(exact_offsets)
    rules[f"{LINEAGE}.one_to_one"] = lineage_rules(outputs, roles, pair_columns)
    names = {suite.split(".")[0]: suite for suite in rules}
    for asset, extra in user_rules(settings).items():
        if asset not in names:
            raise ConfigurationError(f"expectations for {asset!r}: no such asset (one of {', '.join(sorted(names))})")
        rules[names[asset]] = rules[names[asset]] + extra
    return rules


def suite_asset(suite: str) -> str:
    return suite.split(".")[0]
