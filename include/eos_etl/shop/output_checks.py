"""The shop's outputs as the data-quality checks judge them: for invoices and shipments, their value's
schema, the ids their lineage gives, the shop's own rules as Great Expectations expectations (quantity,
total, currency), and what pairs an invoice with its shipment (:data:`SHOP_OUTPUTS`).

The generic quality package reads this description through the settings a validation is
given (:meth:`eos_etl.shop.settings.ShopSettings.checked_outputs`; the shape it reads:
``eos_etl.quality.checked_outputs``), so neither imports the other. It adds its own rules of every
record output (:mod:`eos_etl.quality.window_suites`: the schema, the required fields, the lineage ids,
one record per input, the pairing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .schema import INVOICE_DECIMALS, INVOICE_FIELDS, INVOICE_REQUIRED, SHIPMENT_FIELDS, SHIPMENT_REQUIRED
from .transform import output_ids

CURRENCY_REGEX = r"^[A-Z]{3}$"
# Exact arithmetic: wide enough that quantity x unit_price never rounds.
_EXACT_PRICE = "decimal(26,8)"
_EXACT_TOTAL = "decimal(38,8)"


@dataclass(frozen=True)
class CheckedRecords:
    """One output of records: its asset's name, its noun, its value's schema (:mod:`.schema`), its id and
    the id its lineage gives, and the shop's own rules."""

    name: str
    noun: str
    fields: tuple[tuple[str, str], ...]
    decimals: tuple[str, ...]
    required: tuple[str, ...]
    id_column: str
    id_from_lineage: Callable
    #: The shop's own rules as Great Expectations expectations of the record's asset
    #: (:mod:`eos_etl.quality.window_suites`): ``{"type", "kwargs", "notes"}``, plain values.
    expectations: tuple = ()


@dataclass(frozen=True)
class CheckedOutputs:
    """The shop's two record outputs, an invoice paired with its shipment on ``pair_key``, both sharing
    ``pair_shared``."""

    primary: CheckedRecords
    companion: CheckedRecords
    pair_key: str
    pair_shared: tuple[str, ...]


def _rule(type_: str, notes: str, **kwargs) -> dict:
    return {"type": type_, "kwargs": kwargs, "notes": notes}


_QUANTITY_RULE = _rule("expect_column_values_to_be_between", "A purchase orders at least one item. Cost: counted in "
                       "the asset's one aggregate.", column="quantity", min_value=1)
_INVOICE_RULES = (
    _QUANTITY_RULE,
    _rule("expect_column_values_to_equal_product", "The total is quantity x unit_price exactly, in decimal "
          "arithmetic (no float rounding). Cost: counted in the asset's one aggregate.", column="total",
          factors=[["quantity", "decimal(10,0)"], ["unit_price", _EXACT_PRICE]], as_type=_EXACT_TOTAL),
    _rule("expect_column_values_to_match_regex", "An ISO 4217 code: three capital letters. Cost: counted in the "
          "asset's one aggregate.", column="currency", regex=CURRENCY_REGEX),
)

INVOICES = CheckedRecords(
    "invoices", "invoice", INVOICE_FIELDS, INVOICE_DECIMALS, INVOICE_REQUIRED, "invoice_id",
    lambda topic, partition, offset: output_ids(topic, partition, offset)[0], expectations=_INVOICE_RULES)
SHIPMENTS = CheckedRecords(
    "shipments", "shipment", SHIPMENT_FIELDS, (), SHIPMENT_REQUIRED, "shipment_id",
    lambda topic, partition, offset: output_ids(topic, partition, offset)[1], expectations=(_QUANTITY_RULE,))

#: What the data-quality checks judge of the shop's outputs.
SHOP_OUTPUTS = CheckedOutputs(INVOICES, SHIPMENTS, pair_key="invoice_id", pair_shared=("purchase_id", "quantity"))
