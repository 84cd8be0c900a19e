"""What a validation needs to know of a pipeline's outputs, as the pipeline describes them.

The quality package checks a window of a pipeline whose every valid input record gives one record
on each of two record outputs, a *primary* and its *companion*, paired with each other, and whose
every invalid input record gives one dead letter (the shop: an invoice and a shipment, or a dead
letter). What those records hold is the pipeline's own, and it describes it here: for each record
output its value's schema, its own rules, and the id the record of each input must carry; and what a
primary record shares with its companion.

The pipeline hands its description in with the settings a validation is given
(``settings.checked_outputs()``, e.g. :meth:`eos_etl.shop.settings.ShopSettings.checked_outputs`):
plain values and Spark column expressions of the shapes below, so that neither package imports the
other (the protocols say what is read, any object with those attributes does).

The quality package adds its own rules to every record output (:mod:`.window_suites`) and the
pipeline's after them (``expectations``: Great Expectations configurations).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class RecordOutput(Protocol):
    """One record output: its asset, its records' schema, its id, its own rules."""

    name: str  # its asset's name and the name the result counts it under (invoices, shipments)
    noun: str  # one record, in notes and lineage roles: "invoice"
    fields: tuple[tuple[str, str], ...]  # the value's schema: (field, Spark DDL type), in order
    decimals: tuple[str, ...]  # fields carried as decimal text: a text that is no decimal does not match
    required: tuple[str, ...]  # fields every record must have set
    id_column: str  # the record's own id, unique among the window's records of the output
    id_from_lineage: Callable  # (input topic, partition, offset) columns -> the id that input's record carries
    expectations: tuple  # the pipeline's own rules of the asset: {"type", "kwargs", "notes"}, plain values


class CheckedOutputs(Protocol):
    """A pipeline's record outputs and what pairs a primary record with its companion."""

    primary: RecordOutput
    companion: RecordOutput
    pair_key: str  # the primary's id, which its companion carries too: they are paired on it
    pair_shared: tuple[str, ...]  # the other fields a primary record and its companion must share


def record_outputs(outputs: CheckedOutputs) -> tuple[RecordOutput, RecordOutput]:
    """The primary record output, then its companion."""
    return outputs.primary, outputs.companion
