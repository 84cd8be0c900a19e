"""The expectation suites: what each checks, as Great Expectations expectations.

Four suites, each run by its own Checkpoint. The three record suites check the
window's profile (:mod:`eos_etl.quality.profile`): one row per input partition,
a column per check holding how many of the partition's records fail it, each
expected to sum to zero. Their checks are the row checks' (:mod:`.row_checks`),
made from the pipeline's description of its outputs (:mod:`.checked_outputs`).
The reconciliation suite checks the window's one row of counts. For the shop:

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

Every expectation carries ``meta.check`` (a stable name) and is critical; how each
failure is told to a human: :mod:`.messages`.

Great Expectations is imported inside the functions that build suites: importing
:mod:`eos_etl.quality` must not load it (see the package docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import messages
from .checked_outputs import PAIRING, record_outputs
from .row_checks import RowCheck, record_checks

CRITICAL = "critical"

# The one-row reconciliation table: column -> dtype.
RECONCILIATION_COLUMNS = {
    "committed_inputs": "int64", "valid_inputs": "int64", "invalid_inputs": "int64", "invoices": "int64",
    "shipments": "int64", "dead_letters": "int64", "invoices_plus_dead_letters": "int64",
    "aborted_visible": "int64", "inputs_without_output": "int64",
    "offsets_match": "bool", "offset_mismatches": "int64",
}


@dataclass(frozen=True)
class Check:
    name: str
    expectation: object  # a great_expectations Expectation
    describe: messages.Describe


@dataclass(frozen=True)
class SuiteSpec:
    name: str  # invoices | shipments | pairing | reconciliation
    noun: str  # what one row is, for messages
    checks: tuple[Check, ...]
    engine: str = "pandas"  # every suite checks a table of counts

    def by_name(self) -> dict[str, Check]:
        return {c.name: c for c in self.checks}


# -- suites ------------------------------------------------------------------------------


def _row_check(check: RowCheck) -> Check:
    """A record table's check: the profile's column of that name (records of each input partition that
    fail it, :func:`eos_etl.quality.row_checks.record_checks`) sums to zero."""
    import great_expectations.expectations as gxe  # deferred: see the module docstring

    return Check(check.name, gxe.ExpectColumnSumToBeBetween(column=check.name, min_value=0, max_value=0,
                                                            description=f"no {check.noun} fails: {check.expects}"),
                 check.describe)


def record_suites(outputs) -> list[SuiteSpec]:
    """The primary record output's suite, its companion's, the pairing suite."""
    nouns = {r.name: r.noun for r in record_outputs(outputs)} | {PAIRING: "pair"}
    return [SuiteSpec(suite, nouns[suite], tuple(_row_check(c) for c in checks.values()))
            for suite, checks in record_checks(outputs).items()]


def reconciliation_suite() -> SuiteSpec:
    import great_expectations.expectations as gxe  # deferred: see the module docstring

    def eq(a: str, b: str, text: str) -> Check:
        return Check(f"{a}_equal_{b}", gxe.ExpectColumnPairValuesToBeEqual(column_A=a, column_B=b, description=text),
                     messages.pair_equal(a, b))

    def zero(column: str, text: str, what: str) -> Check:
        return Check(f"no_{column}", gxe.ExpectColumnValuesToBeBetween(column=column, min_value=0, max_value=0,
                                                                      description=text),
                     messages.count(column, what))

    checks = [
        eq("invoices", "valid_inputs", "one invoice per valid input record in the window"),
        eq("shipments", "invoices", "as many shipments as invoices"),
        eq("invoices_plus_dead_letters", "committed_inputs",
           "invoices + dead letters = input records in the window visible read_committed"),
        Check("committed_offsets_match_window",
              gxe.ExpectColumnValuesToBeInSet(column="offsets_match", value_set=[True],
                                              description="the group's committed offsets equal the window ends"),
              messages.offsets),
        zero("aborted_visible", "no read_committed output comes from an input record that is not "
                                "visible read_committed (aborted input)",
             "visible output(s) whose source offset is no committed input record (output of aborted input)"),
        zero("inputs_without_output", "every committed input record in the window has an output",
             "committed input record(s) in the window without any output"),
    ]
    return SuiteSpec("reconciliation", "row", tuple(checks))


def all_suites(outputs) -> list[SuiteSpec]:
    """The record suites of ``outputs`` (:mod:`.checked_outputs`), then the reconciliation suite."""
    from great_expectations.expectations.metadata_types import FailureSeverity  # deferred: see the module docstring

    specs = [*record_suites(outputs), reconciliation_suite()]
    for spec in specs:
        for check in spec.checks:
            check.expectation.meta = {**(check.expectation.meta or {}), "check": check.name}
            check.expectation.severity = FailureSeverity.CRITICAL
    return specs
