"""The shop's outputs as the data-quality checks judge them: for invoices and shipments, the
columns their checks look at, the shop's own value checks (quantity, total, currency), the ids
their lineage gives, and what pairs an invoice with its shipment (:data:`SHOP_OUTPUTS`).

The generic quality package reads this description through the settings a validation is
given (:meth:`eos_etl.shop.settings.ShopSettings.checked_outputs`; the shape it reads:
``eos_etl.quality.checked_outputs``), so neither imports the other. It adds its standard checks
of every record output where ``checks`` name them (the value's schema, the required fields, a
unique id, one record per input record), the pairing checks, and the reconciliation of counts.

Plain values and Spark column expressions, evaluated where Spark runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from pyspark.sql import functions as F

from .schema import INVOICE_DECIMALS, INVOICE_FIELDS, INVOICE_REQUIRED, SHIPMENT_FIELDS, SHIPMENT_REQUIRED
from .transform import output_ids

CURRENCY_REGEX = r"^[A-Z]{3}$"
# Exact arithmetic: wide enough that quantity x unit_price never rounds.
_EXACT_PRICE = "decimal(26,8)"
_EXACT_TOTAL = "decimal(38,8)"


@dataclass(frozen=True)
class ValueCheck:
    """A check of one output decided by each record's own value: ``fails`` on ``column`` makes a record
    fail it; ``expects`` and ``what`` are its expectation's description and its failure's message;
    ``example`` (if any) tells one failing row, read with ``example_columns``, in that message."""

    name: str
    column: str
    fails: Callable
    expects: str
    what: str
    example: Callable[[dict], str] | None = None
    example_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckedRecords:
    """One output of records: its suite's name, its noun, its value's schema (:mod:`.schema`), the
    columns its checks look at, its id and the id its lineage gives, and its checks in order (a
    :class:`ValueCheck`, or the name of one of the quality package's standard checks where it stands)."""

    name: str
    noun: str
    fields: tuple[tuple[str, str], ...]
    decimals: tuple[str, ...]
    required: tuple[str, ...]
    id_column: str
    columns: Callable
    id_from_lineage: Callable
    checks: tuple
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


def invoice_columns(j) -> dict:
    """The columns the invoice checks look at, from a parsed invoice ``j``."""
    quantity = j["quantity"]
    price = j["unit_price"].try_cast(_EXACT_PRICE)
    total = j["total"].try_cast(_EXACT_TOTAL)
    expected = price * quantity.cast("decimal(10,0)")
    # Judged only where all three parse: a missing or malformed amount is its own check's finding.
    matches = F.when(quantity.isNotNull() & price.isNotNull() & total.isNotNull(), total == expected)
    wrong = F.coalesce(~matches, F.lit(False))
    return {
        "invoice_id": j["invoice_id"], "purchase_id": j["purchase_id"], "quantity": quantity,
        "unit_price": j["unit_price"].try_cast("decimal(14,2)"), "currency": j["currency"],
        "total_matches": matches,
        # The texts only where the total is wrong: the examples show them, no other row carries them.
        "total_text": F.when(wrong, j["total"]), "expected_total_text": F.when(wrong, expected.cast("string")),
    }


def shipment_columns(j) -> dict:
    """The columns the shipment checks look at, from a parsed shipment ``j``."""
    return {"shipment_id": j["shipment_id"], "invoice_id": j["invoice_id"], "purchase_id": j["purchase_id"],
            "quantity": j["quantity"]}


def _money(text) -> str:
    try:
        d = Decimal(str(text))
    except (InvalidOperation, ValueError):
        return repr(text)
    q = d.quantize(Decimal("0.01"))
    return str(q) if q == d else str(d.normalize())


def _wrong_total(e: dict) -> str:
    return (f"{e['invoice_id']}: total {_money(e['total_text'])}, expected {e['quantity']} x "
            f"{_money(e['unit_price'])} = {_money(e['expected_total_text'])}")


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

# Both outputs carry the purchase's quantity.
_QUANTITY_POSITIVE = ValueCheck("quantity_positive", "quantity", lambda q: q <= 0, "quantity > 0",
                                "with quantity <= 0")

INVOICES = CheckedRecords(
    "invoices", "invoice", INVOICE_FIELDS, INVOICE_DECIMALS, INVOICE_REQUIRED, "invoice_id", invoice_columns,
    lambda topic, partition, offset: output_ids(topic, partition, offset)[0],
    checks=(
        "value_matches_schema", "required_fields_present",
        _QUANTITY_POSITIVE,
        ValueCheck("total_matches", "total_matches", lambda ok: ~ok,
                   "total = quantity x unit_price exactly (decimal arithmetic, computed in Spark)",
                   "whose total != quantity x unit_price", example=_wrong_total,
                   example_columns=("invoice_id", "quantity", "unit_price", "total_text", "expected_total_text",
                                    "source_partition", "source_offset")),
        "invoice_id_unique", "source_offset_unique",
        ValueCheck("currency_iso", "currency", lambda cur: ~cur.rlike(CURRENCY_REGEX),
                   f"the currency matches {CURRENCY_REGEX}", f"with a currency not matching {CURRENCY_REGEX}"),
    ), expectations=_INVOICE_RULES)
SHIPMENTS = CheckedRecords(
    "shipments", "shipment", SHIPMENT_FIELDS, (), SHIPMENT_REQUIRED, "shipment_id", shipment_columns,
    lambda topic, partition, offset: output_ids(topic, partition, offset)[1],
    checks=("value_matches_schema", "required_fields_present", "shipment_id_unique", "source_offset_unique",
            _QUANTITY_POSITIVE), expectations=(_QUANTITY_RULE,))

#: What the data-quality checks judge of the shop's outputs.
SHOP_OUTPUTS = CheckedOutputs(INVOICES, SHIPMENTS, pair_key="invoice_id", pair_shared=("purchase_id", "quantity"))
