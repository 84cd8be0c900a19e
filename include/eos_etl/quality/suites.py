"""The expectation suites, and how each failed expectation is told to a human.

Four suites, each run by its own Checkpoint. The three record suites check the
window's profile (:mod:`eos_etl.quality.profile`): one row per input partition,
a column per check holding how many of the partition's records fail it, each
expected to sum to zero. The reconciliation suite checks the window's one row of
counts.

* ``invoices``: the contract of an invoice (every value matches the invoice
  schema: one check over all fields and types; required fields: one check over
  all of them; quantity > 0, total = quantity x unit_price exactly, unique
  invoice_id, one invoice per source record, ISO currency code);
* ``shipments``: the shipment schema, required ids, unique shipment_id, one
  shipment per source record, quantity > 0;
* ``pairing``: every invoice has its shipment and the reverse, with the same
  lineage, purchase and quantity;
* ``reconciliation`` (one row): counts: valid inputs = invoices = shipments,
  invoices + dead letters = committed inputs, committed offsets = window
  ends, no output from an aborted input, every input has an output.

Every expectation carries ``meta.check`` (a stable name) and is critical.

Great Expectations is imported inside the functions that build suites: importing
:mod:`eos_etl.quality` must not load it (see the package docstring).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from ..shop.schema import INVOICE_DECIMALS, INVOICE_FIELDS, INVOICE_REQUIRED, SHIPMENT_FIELDS, SHIPMENT_REQUIRED
from .profile import CURRENCY_REGEX

CRITICAL = "critical"

# The one-row reconciliation table: column -> dtype.
RECONCILIATION_COLUMNS = {
    "committed_inputs": "int64", "valid_inputs": "int64", "invalid_inputs": "int64", "invoices": "int64",
    "shipments": "int64", "dead_letters": "int64", "invoices_plus_dead_letters": "int64",
    "aborted_visible": "int64", "inputs_without_output": "int64",
    "offsets_match": "bool", "offset_mismatches": "int64",
}


@dataclass
class Facts:
    """What the messages need beyond a Great Expectations result."""

    reconciliation: dict = field(default_factory=dict)  # the reconciliation row
    invoice_surplus: int = 0  # invoices beyond the first per source record
    shipment_surplus: int = 0
    wrong_totals: list[dict] = field(default_factory=list)  # examples
    offset_mismatches: list[tuple[int, int | None, int]] = field(default_factory=list)  # (p, committed, end)
    exact_offsets: bool = True


Describe = Callable[[dict, Facts], str]


@dataclass(frozen=True)
class Check:
    name: str
    expectation: object  # a great_expectations Expectation
    describe: Describe


@dataclass(frozen=True)
class SuiteSpec:
    name: str  # invoices | shipments | pairing | reconciliation
    noun: str  # what one row is, for messages
    checks: tuple[Check, ...]
    engine: str = "pandas"  # every suite checks a table of counts

    def by_name(self) -> dict[str, Check]:
        return {c.name: c for c in self.checks}


# -- message helpers ------------------------------------------------------------------


def _n(result: dict) -> int:
    return int(result.get("unexpected_count") or 0)


def _examples(result: dict, limit: int = 3) -> list:
    seen: list = []
    for v in result.get("partial_unexpected_list") or []:
        if v is not None and v not in seen:
            seen.append(v)
        if len(seen) == limit:
            break
    return seen


def _eg(values: list) -> str:
    return f" (e.g. {', '.join(str(v) for v in values)})" if values else ""


def _money(text) -> str:
    try:
        d = Decimal(str(text))
    except (InvalidOperation, ValueError):
        return repr(text)
    q = d.quantize(Decimal("0.01"))
    return str(q) if q == d else str(d.normalize())


def rows(noun: str, what: str, *, examples: bool = True) -> Describe:
    def describe(result: dict, _facts: Facts) -> str:
        return f"{_n(result)} {noun}(s) {what}" + (_eg(_examples(result)) if examples else "")

    return describe


def pair_equal(a: str, b: str) -> Describe:
    def describe(_r: dict, facts: Facts) -> str:
        row = facts.reconciliation
        va, vb = row.get(a), row.get(b)
        off = abs(va - vb) if isinstance(va, int) and isinstance(vb, int) else "?"
        label_a = "invoices+dead_letters" if a == "invoices_plus_dead_letters" else a
        return f"{label_a}={va} but {b}={vb} (off by {off})"

    return describe


def _wrong_totals(result: dict, facts: Facts) -> str:
    ex = [f"{e['invoice_id']}: total {_money(e['total_text'])}, expected {e['quantity']} x "
          f"{_money(e['unit_price'])} = {_money(e['expected_total_text'])}" for e in facts.wrong_totals]
    return f"{_n(result)} invoice(s) whose total != quantity x unit_price" + (f" (e.g. {'; '.join(ex)})" if ex else "")


def _schema_mismatch(noun: str) -> Describe:
    def describe(result: dict, _facts: Facts) -> str:
        fields = _examples(result)
        return (f"{_n(result)} {noun}(s) not matching the {noun} schema"
                + (f" (mismatching: {'; '.join(str(f) for f in fields)})" if fields else ""))

    return describe


def _surplus(noun: str, attr: str) -> Describe:
    def describe(result: dict, facts: Facts) -> str:
        return (f"{getattr(facts, attr)} extra {noun}(s) for an input record that already has one "
                f"({_n(result)} {noun}(s) share a source offset)")

    return describe


def _offsets(_r: dict, facts: Facts) -> str:
    rel = "equal" if facts.exact_offsets else "reach"
    parts = ", ".join(f"partition {p}: committed {c}, window end {e}" for p, c, e in facts.offset_mismatches)
    return (f"the group's committed offsets do not {rel} the window ends on "
            f"{len(facts.offset_mismatches)} partition(s) ({parts})")


def _count_col(column: str, what: str) -> Describe:
    return lambda _r, facts: f"{facts.reconciliation.get(column)} {what}"


# -- suites ------------------------------------------------------------------------------


def _row_check(check: str, noun: str, description: str, describe: Describe) -> Check:
    """The check ``check`` of a record table: the profile's column of that name (records of each input
    partition that fail it, :data:`eos_etl.quality.profile.ROW_CHECKS`) sums to zero."""
    import great_expectations.expectations as gxe  # deferred: see the module docstring

    return Check(check, gxe.ExpectColumnSumToBeBetween(column=check, min_value=0, max_value=0,
                                                       description=f"no {noun} fails: {description}"), describe)


def _schema(noun: str, fields, decimals=()) -> Check:
    """Every value matches the output's schema: no record fails it (a failing record's
    ``schema_mismatch``, :func:`eos_etl.quality.collect.schema_mismatch`, names the fields that do not)."""
    shape = ", ".join(f"{name} {'decimal text' if name in decimals else type_}" for name, type_ in fields)
    return _row_check("value_matches_schema", noun,
                      f"every {noun} is a JSON object of the {noun} schema ({shape}): each field "
                      "present has its type",
                      _schema_mismatch(noun))


def _required(noun: str, columns) -> Check:
    """Every one of ``columns`` is set: no record fails it (a failing record's ``missing_required``,
    :func:`eos_etl.quality.collect.missing_required`, names the missing fields)."""
    return _row_check("required_fields_present", noun, f"{', '.join(columns)} are set",
                      rows(noun, "missing required field(s)"))


def _unique_id(noun: str, column: str) -> Check:
    """``column`` is unique: no record shares its id (decided by the profile's fingerprints, or counted
    on a failing window's ``repeated_id``, :func:`eos_etl.quality.collect.with_repeats`)."""
    return _row_check(f"{column}_unique", noun, f"{column} is unique among the window's {noun}s",
                      rows(noun, f"share a {column} with another {noun}"))


def _one_per_source(noun: str, surplus: str) -> Check:
    return _row_check("source_offset_unique", noun,
                      "at most one per input record (lineage source_partition, source_offset)",
                      _surplus(noun, surplus))


def invoices_suite() -> SuiteSpec:
    checks = [_schema("invoice", INVOICE_FIELDS, INVOICE_DECIMALS), _required("invoice", INVOICE_REQUIRED)]
    checks += [
        _row_check("quantity_positive", "invoice", "quantity > 0",
                   rows("invoice", "with quantity <= 0")),
        _row_check("total_matches", "invoice",
                   "total = quantity x unit_price exactly (decimal arithmetic, computed in Spark)",
                   _wrong_totals),
        _unique_id("invoice", "invoice_id"),
        _one_per_source("invoice", "invoice_surplus"),
        _row_check("currency_iso", "invoice", f"the currency matches {CURRENCY_REGEX}",
                   rows("invoice", f"with a currency not matching {CURRENCY_REGEX}")),
    ]
    return SuiteSpec("invoices", "invoice", tuple(checks))


def shipments_suite() -> SuiteSpec:
    checks = [_schema("shipment", SHIPMENT_FIELDS), _required("shipment", SHIPMENT_REQUIRED)]
    checks += [
        _unique_id("shipment", "shipment_id"),
        _one_per_source("shipment", "shipment_surplus"),
        _row_check("quantity_positive", "shipment", "quantity > 0",
                   rows("shipment", "with quantity <= 0")),
    ]
    return SuiteSpec("shipments", "shipment", tuple(checks))


def pairing_suite() -> SuiteSpec:
    checks = [
        _row_check("invoice_has_shipment", "invoice", "every invoice has its shipment (on invoice_id)",
                   rows("invoice", "without shipment")),
        _row_check("shipment_has_invoice", "shipment", "every shipment has its invoice (on invoice_id)",
                   rows("shipment", "without invoice")),
        _row_check("pair_consistent", "invoice/shipment pair",
                   "an invoice and its shipment share source partition/offset, purchase_id and quantity",
                   rows("invoice/shipment pair", "whose lineage, purchase_id or quantity differ")),
    ]
    return SuiteSpec("pairing", "pair", tuple(checks))


def reconciliation_suite() -> SuiteSpec:
    import great_expectations.expectations as gxe  # deferred: see the module docstring

    def eq(a: str, b: str, text: str) -> Check:
        return Check(f"{a}_equal_{b}", gxe.ExpectColumnPairValuesToBeEqual(column_A=a, column_B=b, description=text),
                     pair_equal(a, b))

    def zero(column: str, text: str, what: str) -> Check:
        return Check(f"no_{column}", gxe.ExpectColumnValuesToBeBetween(column=column, min_value=0, max_value=0,
                                                                      description=text),
                     _count_col(column, what))

    checks = [
        eq("invoices", "valid_inputs", "one invoice per valid input record in the window"),
        eq("shipments", "invoices", "as many shipments as invoices"),
        eq("invoices_plus_dead_letters", "committed_inputs",
           "invoices + dead letters = input records in the window visible read_committed"),
        Check("committed_offsets_match_window",
              gxe.ExpectColumnValuesToBeInSet(column="offsets_match", value_set=[True],
                                              description="the group's committed offsets equal the window ends"),
              _offsets),
        zero("aborted_visible", "no read_committed output comes from an input record that is not "
                                "visible read_committed (aborted input)",
             "visible output(s) whose source offset is no committed input record (output of aborted input)"),
        zero("inputs_without_output", "every committed input record in the window has an output",
             "committed input record(s) in the window without any output"),
    ]
    return SuiteSpec("reconciliation", "row", tuple(checks))


def all_suites() -> list[SuiteSpec]:
    from great_expectations.expectations.metadata_types import FailureSeverity  # deferred: see the module docstring

    specs = [invoices_suite(), shipments_suite(), pairing_suite(), reconciliation_suite()]
    for spec in specs:
        for check in spec.checks:
            check.expectation.meta = {**(check.expectation.meta or {}), "check": check.name}
            check.expectation.severity = FailureSeverity.CRITICAL
    return specs
