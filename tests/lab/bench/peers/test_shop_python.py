"""The peers' Python shop transform without Spark or a broker: it routes every generated purchase as the
generator meant it, and its records hold their purchase. Its bytes against Spark's: scripts/peer_parity.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import pytest

from eos_etl.shop.generator import purchases
from eos_etl.shop.schema import ShopTopics
from eos_etl_lab.bench.peers.contract import shop_contract
from eos_etl_lab.bench.peers.shop_python import _ID, Contract, java_full_match, outputs, render

TOPICS = ShopTopics()
CONTRACT = Contract.from_json(shop_contract(TOPICS.purchases, *TOPICS.outputs))
AT_MS = 1_796_000_000_123
# The Kafka timestamp as date_format(..., "yyyy-MM-dd'T'HH:mm:ss.SSSXXX") renders it in UTC.
ISSUED_AT = datetime.fromtimestamp(AT_MS / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace(
    "+00:00", "Z")


@pytest.fixture(scope="module")
def generated():
    return list(purchases(3_000, invalid_share=0.3, seed=11))


def test_every_generated_purchase_goes_where_the_generator_meant(generated):
    kinds = set()
    for offset, (key, value, kind) in enumerate(generated):
        made = outputs(key, value, 0, offset, AT_MS, CONTRACT)
        if kind is None:
            assert [m[0] for m in made] == [TOPICS.invoices, TOPICS.shipments]
        else:
            [(topic, dlq_key, dlq_value, headers)] = made
            assert (topic, dlq_key, dlq_value) == (TOPICS.dead_letters, key, value)  # the original bytes
            assert dict(headers)["dlq_reason"] == kind.encode()
            kinds.add(kind)
    assert len(kinds) == 8  # every kind the generator makes was met


def test_an_invoice_and_its_shipment_hold_their_purchase(generated):
    ids = set()
    for offset, (key, value, kind) in enumerate(generated):
        if kind is not None:
            continue
        purchase = json.loads(value)
        (_, k1, invoice, h1), (_, k2, shipment, h2) = outputs(key, value, 3, offset, AT_MS, CONTRACT)
        invoice, shipment = json.loads(invoice), json.loads(shipment)
        assert k1 == k2 == purchase["purchase_id"].encode()
        assert list(invoice) == list(CONTRACT.invoice_fields) and list(shipment) == list(CONTRACT.shipment_fields)
        assert Decimal(invoice["total"]) == Decimal(purchase["unit_price"]) * purchase["quantity"]
        assert invoice["total"].split(".")[1].__len__() == 2 == len(invoice["unit_price"].split(".")[1])
        assert shipment["address"] == purchase["shipping_address"]
        assert shipment["invoice_id"] == invoice["invoice_id"] and invoice["quantity"] == purchase["quantity"]
        assert invoice["purchase_time"] == purchase["purchase_time"].replace("Z", ".000Z")
        assert invoice["issued_at"] == ISSUED_AT
        ids.update((invoice["invoice_id"], shipment["shipment_id"]))
        assert dict(h1)["record_type"] != dict(h2)["record_type"]
    assert len(ids) == 2 * sum(kind is None for _, _, kind in generated)  # an id per record, none twice


def test_the_same_position_gives_the_same_ids_and_another_position_others(generated):
    key, value, _ = next(g for g in generated if g[2] is None)
    first = outputs(key, value, 1, 42, AT_MS, CONTRACT)
    assert outputs(key, value, 1, 42, AT_MS + 5, CONTRACT)[0][2][:60] == first[0][2][:60]
    assert json.loads(outputs(key, value, 1, 43, AT_MS, CONTRACT)[0][2])["invoice_id"] != \
        json.loads(first[0][2])["invoice_id"]


def test_rendering_escapes_as_jackson_does():
    rendered = render({"a": 'q"\\\u001f\n\u00e9', "b": None, "c": [1, True]})
    assert rendered == '{"a":"q\\"\\\\\\u001F\\n\u00e9","c":[1,true]}'


@pytest.mark.parametrize(("text", "matches"), [("abc", True), ("abc\n", True), ("abc\r\n", True), ("abc\u2028", True),
                                               ("abc\n\n", False), ("\nabc", False), ("", False)])
def test_a_pattern_matches_as_java_rlike_does(text, matches):
    """Java's `$` also matches before one line terminator that ends the input."""
    assert java_full_match(_ID, text) is matches


def test_spark_timestamps_of_year_zero_and_with_offsets():
    base = {"purchase_id": "p-1", "user_id": "u-1", "user_full_name": "A B", "product_id": "s-1", "quantity": 1,
            "unit_price": "-0", "currency": "EUR",
            "shipping_address": {"street": "s", "city": "c", "postal_code": "1", "country": "DE"}}
    for given, rendered in (("0000-01-01T00:00:00Z", "0000-01-01T00:00:00.000Z"),
                            ("2026-03-01 01:30:00.9876+02:00", "2026-02-28T23:30:00.987Z")):
        made = outputs(None, json.dumps({**base, "purchase_time": given}).encode(), 0, 0, AT_MS, CONTRACT)
        invoice = json.loads(made[0][2])
        assert invoice["purchase_time"] == rendered
        assert invoice["unit_price"] == "0.00"  # Spark's decimals have no negative zero
