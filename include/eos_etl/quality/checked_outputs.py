"""What a validation needs to know of a pipeline's outputs, as the pipeline describes them.

The quality package checks a window of a pipeline whose every valid input record gives one record
on each of two record outputs, a *primary* and its *companion*, paired with each other, and whose
every invalid input record gives one dead letter (the shop: an invoice and a shipment, or a dead
letter). What those records hold is the pipeline's own, and it describes it here: for each record
output its value's schema, the columns its checks look at, its own value checks, and the id the
record of each input must carry; and what a primary record shares with its companion.

The pipeline hands its description in with the settings a validation is given
(``settings.checked_outputs()``, e.g. :meth:`eos_etl.shop.settings.ShopSettings.checked_outputs`):
plain values and Spark column expressions of the shapes below, so that neither package imports the
other (the protocols say what is read, any object with those attributes does).

The quality package adds to every record output its standard checks, each where the output's
``checks`` name it (:data:`STANDARD_CHECKS`), and derives the pairing checks from the pair
(:mod:`.row_checks`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

#: The checks the quality package gives every record output, by name (``{id}`` is the output's
#: ``id_column``): its value matches its schema, its required fields are set, its id is unique, and at
#: most one record per input record.
STANDARD_CHECKS = ("value_matches_schema", "required_fields_present", "{id}_unique", "source_offset_unique")
#: The suite of the pairs of primary and companion records.
PAIRING = "pairing"


class ValueCheck(Protocol):
    """A check of a record output decided by each record's own value."""

    name: str  # stable, unique in its suite: the expectation's ``meta.check`` and its table's column
    column: str  # the column of the output's checked columns (``columns``) it looks at
    fails: Callable  # column -> the condition under which a record fails it (null: not this check's failure)
    expects: str  # what every record is expected to be, for the expectation's description
    what: str  # what a failing record is, for the failure's message: "<n> <noun>(s) <what>"
    example: Callable[[dict], str] | None  # tells one failing row in the message (None: the column's values)
    example_columns: tuple[str, ...]  # the columns (checked or lineage) of the rows ``example`` tells


class RecordOutput(Protocol):
    """One record output: its suite, its records' schema and checked columns, its checks."""

    name: str  # its suite's name and the name the result counts it under (invoices, shipments)
    noun: str  # one record, in messages: "3 invoice(s) ..."
    fields: tuple[tuple[str, str], ...]  # the value's schema: (field, Spark DDL type), in order
    decimals: tuple[str, ...]  # fields carried as decimal text: a text that is no decimal does not match
    required: tuple[str, ...]  # fields every record must have set
    id_column: str  # the record's own id, unique among the window's records of the output
    columns: Callable  # parsed value -> {column: expression} its checks look at, in order
    id_from_lineage: Callable  # (input topic, partition, offset) columns -> the id that input's record carries
    checks: tuple  # the suite's checks in order: ValueCheck, or the name of a standard check where it stands


class CheckedOutputs(Protocol):
    """A pipeline's record outputs and what pairs a primary record with its companion."""

    primary: RecordOutput
    companion: RecordOutput
    pair_key: str  # the primary's id, which its companion carries too: they are paired on it
    pair_shared: tuple[str, ...]  # the other fields a primary record and its companion must share


def record_outputs(outputs: CheckedOutputs) -> tuple[RecordOutput, RecordOutput]:
    """The primary record output, then its companion."""
    return outputs.primary, outputs.companion


def pairing_columns(outputs: CheckedOutputs) -> tuple[str, str, str]:
    """The pairing frame's check columns: a primary record without companion, a companion without
    primary (each holds the record's id), a pair whose lineage or shared fields differ."""
    primary, companion = outputs.primary.noun, outputs.companion.noun
    return f"{primary}_without_{companion}", f"{companion}_without_{primary}", "pair_mismatch"
