"""The shop's record contracts: purchases in, invoices, shipments and dead letters out.

Purchase (JSON object, UTF-8)::

    {"purchase_id": "p-...", "user_id": "u-...", "user_full_name": "Ada Lovelace",
     "product_id": "sku-...", "quantity": 2, "unit_price": "19.99", "currency": "EUR",
     "shipping_address": {"street": "...", "city": "...", "postal_code": "...", "country": "DE"},
     "purchase_time": "2026-11-21T10:00:00Z"}

``unit_price`` may be a JSON number or a decimal string, with at most two
decimals; it is never handled as a float. Numeric fields given as numeric
strings are accepted.

Invoice (topic ``invoices``, key = purchase_id)::

    {"invoice_id", "purchase_id", "user_id", "user_full_name", "product_id",
     "quantity", "unit_price", "total", "currency", "purchase_time", "issued_at"}

``total`` = quantity x unit_price, exact, as a decimal string; ``issued_at`` is
the purchase record's Kafka timestamp, so a re-run produces identical bytes.

Shipment (topic ``shipments``, key = purchase_id)::

    {"shipment_id", "invoice_id", "purchase_id", "product_id", "recipient_name",
     "address": {...}, "quantity"}

Both are keyed by purchase_id, so with equal partition counts a purchase's
invoice and shipment land in the same-numbered partition of their topics,
and all records of one purchase stay in order (murmur2, like Java clients).

Dead letter (topic ``purchases.dlq``): the original key and value bytes,
untouched, with headers ``dlq_reason`` (one of :data:`REASONS`) and
``dlq_field`` (the offending field, or empty). Key and value beyond
:data:`DEAD_LETTER_MAX_BYTES` together are cut, with header
``dlq_original_bytes`` = ``"<key bytes>:<value bytes>"``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..kafka.topic_spec import TopicSpec

REQUIRED_FIELDS = (
    "purchase_id",
    "user_id",
    "user_full_name",
    "product_id",
    "quantity",
    "unit_price",
    "currency",
    "shipping_address",
    "purchase_time",
)
ADDRESS_FIELDS = ("street", "city", "postal_code", "country")

# Machine-readable reasons, in the order they are checked.
REASONS = (
    "null_value",  # tombstone: the record has no value
    "oversized",  # value larger than max_payload_bytes
    "malformed_json",  # not exactly one JSON object (nothing but whitespace around it)
    "missing_field",  # a required field is absent or null
    "invalid_type",  # a field does not parse as its type
    "non_positive_quantity",
    "negative_price",
    "invalid_currency",  # not a three-letter upper-case ISO code
)

RECORD_TYPE_INVOICE = "shop.invoice.v1"
RECORD_TYPE_SHIPMENT = "shop.shipment.v1"
RECORD_TYPE_DEAD_LETTER = "shop.purchase.dead_letter.v1"

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
# Key + value bytes a dead letter copies at most (the broker's default record
# limit is 1 MiB; the rest is left for headers). See transform.py.
DEAD_LETTER_MAX_BYTES = 1_000_000


# Dead letters carry the original bytes: allow anything the input allows, and more.
DEAD_LETTER_TOPIC_MAX_BYTES = 10_485_760


@dataclass(frozen=True)
class ShopTopics:
    purchases: str = "purchases"
    invoices: str = "invoices"
    shipments: str = "shipments"
    dead_letters: str = "purchases.dlq"

    @property
    def outputs(self) -> tuple[str, str, str]:
        return (self.invoices, self.shipments, self.dead_letters)

    def specs(self, partitions: int, *, outputs_only: bool = False) -> list:
        """The shop's topic layout: input, invoices and shipments with the same partition count (a
        purchase's invoice and shipment land in the same-numbered partition), one partition of dead
        letters, which keep the original bytes and so accept larger records."""
        specs = [] if outputs_only else [TopicSpec(self.purchases, partitions)]
        return specs + [TopicSpec(self.invoices, partitions), TopicSpec(self.shipments, partitions),
                        TopicSpec(self.dead_letters, 1, {"max.message.bytes": str(DEAD_LETTER_TOPIC_MAX_BYTES)})]


# -- the output records' schemas as code: the transform writes these fields in this order, the
# data-quality checks parse and judge them (.output_checks), Spark DDL types. Money is carried as decimal text
# and cast to decimals in Spark, never through a float.
INVOICE_FIELDS = (
    ("invoice_id", "STRING"), ("purchase_id", "STRING"), ("user_id", "STRING"), ("user_full_name", "STRING"),
    ("product_id", "STRING"), ("quantity", "INT"), ("unit_price", "STRING"), ("total", "STRING"),
    ("currency", "STRING"), ("purchase_time", "STRING"), ("issued_at", "STRING"),
)
SHIPMENT_FIELDS = (
    ("shipment_id", "STRING"), ("invoice_id", "STRING"), ("purchase_id", "STRING"), ("product_id", "STRING"),
    ("recipient_name", "STRING"),
    ("address", "STRUCT<street: STRING, city: STRING, postal_code: STRING, country: STRING>"),
    ("quantity", "INT"),
)
#: Amounts carried as JSON strings: a text that is no decimal does not match the schema.
INVOICE_DECIMALS = ("unit_price", "total")
#: Fields every invoice / shipment must have.
INVOICE_REQUIRED = ("invoice_id", "purchase_id", "quantity", "unit_price", "total", "currency")
SHIPMENT_REQUIRED = ("shipment_id", "invoice_id", "purchase_id", "quantity")
