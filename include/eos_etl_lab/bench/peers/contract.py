"""What a peer is told of the shop (:class:`.shop_python.Contract`), built from the shop's own constants,
and of the pipeline's lineage headers: one source for the project and its peers."""

from __future__ import annotations

from eos_etl.engine import lineage
from eos_etl.shop import schema


def shop_contract(input_topic: str, invoices: str, shipments: str, dead_letters: str) -> dict:
    """The JSON form of :class:`.shop_python.Contract` for these topics."""
    return {"input_topic": input_topic, "topics": [invoices, shipments, dead_letters],
            "required": list(schema.REQUIRED_FIELDS), "address": list(schema.ADDRESS_FIELDS),
            "invoice_fields": [name for name, _ in schema.INVOICE_FIELDS],
            "shipment_fields": [name for name, _ in schema.SHIPMENT_FIELDS],
            "record_types": [schema.RECORD_TYPE_INVOICE, schema.RECORD_TYPE_SHIPMENT,
                             schema.RECORD_TYPE_DEAD_LETTER],
            "max_payload_bytes": schema.DEFAULT_MAX_PAYLOAD_BYTES,
            "dead_letter_max_bytes": schema.DEAD_LETTER_MAX_BYTES}


#: The lineage headers in the order the publisher writes them (``LineageWriter``), before the transform's.
LINEAGE_HEADERS = [lineage.H_SOURCE_TOPIC, lineage.H_SOURCE_PARTITION, lineage.H_SOURCE_OFFSET, lineage.H_RUN_ID,
                   lineage.H_SOURCE_TOPIC_ID, lineage.H_PIPELINE]
