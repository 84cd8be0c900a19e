"""The shop's transform (``eos_etl.shop.transform``) in plain Python, for the peers that run Python per
record (quixstreams): the same invoices, shipments and dead letters, byte for byte, on the purchases the
bench writes (``scripts/peer_parity.py`` compares every output with Spark's).

Standard library only: it runs in the peers' own environment, which has neither pyspark nor eos_etl's
dependencies. What the pipeline names (topics, lineage headers, record types, fields) comes in with
:class:`Contract`, built by the bench from the shop's own constants, so that nothing here restates them.

Where Spark's semantics are emulated, the emulation covers what the contract's rules look at:
Jackson's rendering of a JSON value held as text, Java's ``$`` before a final line terminator, Spark's
``trim`` (spaces only), its cast of text to a timestamp (ISO dates and times with an optional zone; the
forms Spark takes beyond those, such as a bare year, are refused here) and its JSON escaping.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import ROUND_DOWN, Decimal, InvalidOperation

_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
_INT = re.compile(r"-?[0-9]{1,9}")
_PRICE = re.compile(r"-?[0-9]{1,12}(\.[0-9]{1,2})?")
_CURRENCY = re.compile(r"[A-Z]{3}")
# Java's `$` (no MULTILINE) also matches before one line terminator that ends the input.
_JAVA_FINAL_TERMINATOR = re.compile(r"(\r\n|[\n\r\u0085\u2028\u2029])\Z")
_TIME = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?"
                   r"\s*(Z|UTC|[+-]\d{1,2}(?::?\d{2})?)?\s*")
_CENT = Decimal("0.01")
_CYCLE = 400


@dataclass(frozen=True)
class Contract:
    """What the transform needs of the pipeline, as the bench gives it (a JSON object)."""

    input_topic: str
    topics: tuple[str, str, str]  # invoices, shipments, dead letters
    required: tuple[str, ...]
    address: tuple[str, ...]
    invoice_fields: tuple[str, ...]
    shipment_fields: tuple[str, ...]
    record_types: tuple[str, str, str]
    max_payload_bytes: int
    dead_letter_max_bytes: int

    @classmethod
    def from_json(cls, d: dict) -> Contract:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def java_full_match(pattern: re.Pattern, text: str) -> bool:
    """``text rlike ^pattern$`` as Java evaluates it."""
    return pattern.fullmatch(_JAVA_FINAL_TERMINATOR.sub("", text, count=1)) is not None


def _jackson_text(value) -> str | None:
    """A JSON value held as text, as Spark's parser holds it: a string its content, null None, anything
    else its compact JSON (Jackson's rendering)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return render(value)


def _escape(text: str) -> str:
    out = []
    for ch in text:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20:
            out.append({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}.get(o) or f"\\u{o:04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def render(value) -> str:
    """Compact JSON as Spark's ``to_json`` (Jackson) writes it: null fields left out, non-ASCII as is."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_escape(k)}:{render(v)}" for k, v in value.items() if v is not None) + "}"
    if isinstance(value, list):
        return "[" + ",".join(render(v) for v in value) + "]"
    if isinstance(value, str):
        return _escape(value)
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else (
            '"NaN"' if value != value else ('"Infinity"' if value > 0 else '"-Infinity"'))
    return str(value)


def _one_object(text: str):
    """``text`` parsed if it is exactly one JSON object (whitespace around it allowed), else None."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _timestamp(text: str | None) -> tuple[datetime, int] | None:
    """Spark's cast of text to a timestamp (session time zone UTC) as (a datetime, the years it is late by),
    None where Spark gives null."""
    m = _TIME.fullmatch(text) if text is not None else None
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    # Spark's calendar has a year 0, Python's starts at 1: the Gregorian calendar repeats every 400 years.
    shift = _CYCLE if int(year) < 1 else 0
    try:
        t = datetime(int(year) + shift, int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0),
                     int(((fraction or "") + "000000")[:6]), tzinfo=timezone.utc)
    except ValueError:
        return None
    if zone and zone not in ("Z", "UTC"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        hours, minutes = (int(digits[:-2]), int(digits[-2:])) if len(digits) > 2 else (int(digits), 0)
        t -= sign * timedelta(hours=hours, minutes=minutes)
    return t, shift


def _format_time(t: datetime, shift: int = 0) -> str:
    """``date_format(t, "yyyy-MM-dd'T'HH:mm:ss.SSSXXX")`` in UTC (``t`` ``shift`` years late)."""
    return f"{t.year - shift:04d}" + t.strftime("-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _blank(text: str | None) -> bool:
    return text is None or text.strip(" ") == ""


def reject_reason(value: bytes | None, c: Contract):
    """(reason, field, fields, address, time, quantity, price): the first failing check of the contract, in
    its order; reason None for a valid purchase."""
    if value is None:
        return ("null_value", "", None, None, None, None, None)
    if len(value) > c.max_payload_bytes:
        return ("oversized", "", None, None, None, None, None)
    raw = _one_object(value.decode("utf-8", "replace"))
    if raw is None:
        return ("malformed_json", "", None, None, None, None, None)
    fields = {name: _jackson_text(raw.get(name)) for name in c.required}
    for name in c.required:
        if _blank(fields[name]):
            return ("missing_field", name, fields, None, None, None, None)
    for name in ("purchase_id", "user_id", "product_id"):
        if not java_full_match(_ID, fields[name]):
            return ("invalid_type", name, fields, None, None, None, None)
    if len(fields["user_full_name"]) > 256:
        return ("invalid_type", "user_full_name", fields, None, None, None, None)
    if not java_full_match(_INT, fields["quantity"]):
        return ("invalid_type", "quantity", fields, None, None, None, None)
    if not java_full_match(_PRICE, fields["unit_price"]):
        return ("invalid_type", "unit_price", fields, None, None, None, None)
    time = _timestamp(fields["purchase_time"])
    if time is None:
        return ("invalid_type", "purchase_time", fields, None, None, None, None)
    address_object = _one_object(fields["shipping_address"])
    if address_object is None:
        return ("invalid_type", "shipping_address", fields, None, None, None, None)
    address = {name: _jackson_text(address_object.get(name)) for name in c.address}
    for name in c.address:
        if _blank(address[name]):
            return ("missing_field", f"shipping_address.{name}", fields, address, time, None, None)
    quantity = int(fields["quantity"])
    if quantity <= 0:
        return ("non_positive_quantity", "quantity", fields, address, time, quantity, None)
    try:
        price = Decimal(fields["unit_price"]).quantize(_CENT, rounding=ROUND_DOWN)
    except InvalidOperation:
        price = None
    if price is not None and price == 0:
        price = abs(price)  # Spark's decimals have no negative zero: "-0.00" is 0.00
    if price is not None and price < 0:
        return ("negative_price", "unit_price", fields, address, time, quantity, price)
    if not java_full_match(_CURRENCY, fields["currency"]):
        return ("invalid_currency", "currency", fields, address, time, quantity, price)
    return (None, None, fields, address, time, quantity, price)


def _id(prefix: str, kind: str, source: str) -> str:
    return prefix + hashlib.sha256(f"{kind}:{source}".encode()).hexdigest()[:32]


def outputs(key: bytes | None, value: bytes | None, partition: int, offset: int, timestamp_ms: int,
            c: Contract) -> list[tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    """One purchase's outputs: (topic, key, value, the transform's own headers), as Spark's transform
    makes them (the lineage headers are the publisher's, added before these)."""
    reason, bad, fields, address, time, quantity, price = reject_reason(value, c)
    invoices, shipments, dead_letters = c.topics
    if reason is not None:
        return [_dead_letter(dead_letters, key, value, reason, bad, c)]
    source = f"{c.input_topic}:{partition}:{offset}"
    invoice_id, shipment_id = _id("inv_", "invoice", source), _id("shp_", "shipment", source)
    issued = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=timestamp_ms)
    invoice = {"invoice_id": invoice_id, "purchase_id": fields["purchase_id"], "user_id": fields["user_id"],
               "user_full_name": fields["user_full_name"], "product_id": fields["product_id"],
               "quantity": quantity, "unit_price": str(price), "total": str((price * quantity).quantize(_CENT)),
               "currency": fields["currency"], "purchase_time": _format_time(*time), "issued_at": _format_time(issued)}
    shipment = {"shipment_id": shipment_id, "invoice_id": invoice_id, "purchase_id": fields["purchase_id"],
                "product_id": fields["product_id"], "recipient_name": fields["user_full_name"],
                "address": address, "quantity": quantity}
    purchase_key = _utf8(fields["purchase_id"])
    return [(invoices, purchase_key, _utf8(render({f: invoice[f] for f in c.invoice_fields})),
             [("record_type", c.record_types[0].encode())]),
            (shipments, purchase_key, _utf8(render({f: shipment[f] for f in c.shipment_fields})),
             [("record_type", c.record_types[1].encode())])]


def _utf8(text: str) -> bytes:
    """Text as the JVM encodes it: a lone surrogate (a JSON escape may make one) becomes '?'."""
    return text.encode("utf-8", "replace")


def _dead_letter(topic: str, key: bytes | None, value: bytes | None, reason: str, bad: str, c: Contract):
    key_len, value_len = len(key or b""), len(value or b"")
    headers = [("record_type", c.record_types[2].encode()), ("dlq_reason", reason.encode()),
               ("dlq_field", bad.encode())]
    if key_len + value_len <= c.dead_letter_max_bytes:
        return (topic, key, value, headers)
    key_budget = min(key_len, c.dead_letter_max_bytes // 2)
    cut_key = key[:key_budget] if key is not None else None
    cut_value = value[:c.dead_letter_max_bytes - key_budget] if value is not None else None
    return (topic, cut_key, cut_value, [*headers, ("dlq_original_bytes", f"{key_len}:{value_len}".encode())])
