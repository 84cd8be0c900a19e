"""Defects seeded into a shop's outputs for the data-quality tests."""

from __future__ import annotations

import json

from confluent_kafka import Producer

from eos_etl.checker import read_topic


def forge_second_invoice(shop, invoice_id: str):
    """A second invoice for an input record inside the window (the first invoice's lineage headers), with its
    own ``invoice_id`` and no shipment, written outside any transaction; returns the invoice it copies."""
    victim = read_topic(shop.connection, shop.topics.invoices)[0]
    forged = dict(json.loads(victim.value), invoice_id=invoice_id)
    p = Producer(shop.connection.client_config())
    p.produce(shop.topics.invoices, json.dumps(forged).encode(), victim.key, partition=victim.partition,
              headers=list(victim.headers.items()))
    assert p.flush(10) == 0
    return victim
