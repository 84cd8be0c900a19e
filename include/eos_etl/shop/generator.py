"""Demo purchase generator: realistic purchases, a share of invalid ones.

Deterministic for a given seed. Writes with an idempotent producer, or in
transactions (``transaction_size``) of which a share can be aborted on
purpose, so the input itself contains aborted records and markers.
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from confluent_kafka import Producer

from ..kafka.admin import ClusterAdmin
from ..kafka.connection import KafkaConnection
from ..kafka.produce import produce_waiting

#: How long :func:`generate` waits for its transactions' markers to land (seconds).
MARKERS_TIMEOUT_S = 10.0

log = logging.getLogger(__name__)

_FIRST = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Margaret", "Linus", "Frances", "Ken", "Zoë",
          "José", "Søren", "Anaïs", "Łukasz", "Chloé", "Mei", "Aarav", "Olúwadámilọ́lá", "Renée"]
_LAST = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Hamilton", "Torvalds", "Allen",
         "Thompson", "O'Brien", "García", "Müller", "Nguyễn", "Kowalski", "Björk", "Smith \"Jr\"", "Dubois"]
_CITIES = [("Berlin", "DE", "10115"), ("Paris", "FR", "75001"), ("Lisbon", "PT", "1100-148"),
           ("Kraków", "PL", "30-001"), ("Amsterdam", "NL", "1012 AB"), ("Austin", "US", "73301"),
           ("Kyoto", "JP", "600-8001"), ("São Paulo", "BR", "01000-000")]
_STREETS = ["Main St", "Rue de Rivoli", "Avenida da Liberdade", "Floriańska", "Damrak", "Congress Ave",
            "Shijo-dori", "Avenida Paulista"]
_CURRENCIES = ["EUR", "USD", "GBP", "PLN", "JPY", "BRL"]

INVALID_KINDS = (
    "malformed_json", "missing_field", "invalid_type", "non_positive_quantity",
    "negative_price", "invalid_currency", "null_value", "oversized",
)


@dataclass
class GeneratorStats:
    produced: int = 0
    valid: int = 0
    invalid: Counter = field(default_factory=Counter)
    aborted: int = 0  # records written in transactions that were aborted on purpose
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"produced": self.produced, "valid": self.valid, "invalid": dict(self.invalid),
                "invalid_total": sum(self.invalid.values()), "aborted": self.aborted, "seconds": self.seconds}


def valid_purchase(rng: random.Random, now: datetime) -> dict:
    city, country, postal = rng.choice(_CITIES)
    user = rng.randrange(10_000)
    return {
        "purchase_id": f"p-{uuid.UUID(int=rng.getrandbits(128)).hex}",
        "user_id": f"u-{user:05d}",
        "user_full_name": f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
        "product_id": f"sku-{rng.randrange(5000):04d}",
        "quantity": rng.choice([1, 1, 1, 2, 2, 3, 5, 10]),
        "unit_price": f"{rng.randrange(50, 500_00) / 100:.2f}",
        "currency": rng.choice(_CURRENCIES),
        "shipping_address": {
            "street": f"{rng.randrange(1, 300)} {rng.choice(_STREETS)}",
            "city": city,
            "postal_code": postal,
            "country": country,
        },
        "purchase_time": (now - timedelta(seconds=rng.randrange(86_400))).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def invalid_purchase(rng: random.Random, now: datetime, kind: str, max_payload_bytes: int) -> bytes | None:
    p = valid_purchase(rng, now)
    if kind == "malformed_json":
        whole = json.dumps(p).encode()
        return rng.choice([b'{"purchase_id": "p-1", "quantity": ', b"not json at all", b"[1, 2, 3]",
                           b"\xff\xfe\x00garbage", whole[:-7], whole + b" trailing", whole + whole,
                           b"[" + whole + b"]"])
    if kind == "missing_field":
        p.pop(rng.choice(list(p)))
    elif kind == "invalid_type":
        key, bad = rng.choice([("quantity", "three"), ("unit_price", "12,50"), ("purchase_time", "yesterday"),
                               ("quantity", 2.5), ("shipping_address", "nowhere"), ("purchase_id", {"id": 1})])
        p[key] = bad
    elif kind == "non_positive_quantity":
        p["quantity"] = rng.choice([0, -1, -20])
    elif kind == "negative_price":
        p["unit_price"] = "-" + p["unit_price"]
    elif kind == "invalid_currency":
        p["currency"] = rng.choice(["euro", "E", "usd", "€€€"])
    elif kind == "null_value":
        return None
    elif kind == "oversized":
        p["user_full_name"] = "x" * (max_payload_bytes + 1)
    return json.dumps(p, ensure_ascii=False).encode()


def purchases(count: int, *, invalid_share: float = 0.0, seed: int = 42,
              max_payload_bytes: int = 256 * 1024) -> Iterator[tuple[bytes, bytes | None, str | None]]:
    """Yield (key, value, invalid_kind) triples; key is the user id."""
    rng = random.Random(seed)
    now = datetime.now(timezone.utc)
    for _ in range(count):
        if invalid_share and rng.random() < invalid_share:
            kind = rng.choice(INVALID_KINDS)
            value = invalid_purchase(rng, now, kind, max_payload_bytes)
            yield f"u-{rng.randrange(10_000):05d}".encode(), value, kind
        else:
            p = valid_purchase(rng, now)
            yield p["user_id"].encode(), json.dumps(p, ensure_ascii=False).encode(), None


def generate(
    connection: KafkaConnection,
    topic: str,
    count: int,
    *,
    invalid_share: float = 0.05,
    rate: float | None = None,
    seed: int = 42,
    transaction_size: int | None = None,
    abort_share: float = 0.0,
    progress: bool = False,
    max_payload_bytes: int = 256 * 1024,
    timestamp_ms: int = 0,
) -> GeneratorStats:
    """Produce ``count`` purchases to ``topic``; returns what was written (and aborted).

    ``timestamp_ms``: every purchase's record time (CreateTime), e.g. an hour that a scheduled run
    or a backfill covers; 0 stamps each with the time it is sent."""
    t0 = time.monotonic()
    conf = connection.client_config()
    conf.update({"enable.idempotence": True, "linger.ms": 20, "compression.type": "lz4",
                 "partitioner": "murmur2_random", "message.max.bytes": 10_485_760, "log_level": 3})
    transactional = transaction_size is not None
    if transactional:
        conf["transactional.id"] = f"eos-etl-generator-{topic}-{uuid.uuid4().hex[:8]}"
    producer = Producer(conf)
    stats = GeneratorStats()
    failures: list = []
    abort_rng = random.Random(seed + 1)

    written: dict[int, int] = {}  # partition -> the last offset written to it

    def on_delivery(err, msg):
        if err is not None:
            failures.append(err)
        else:
            written[msg.partition()] = max(written.get(msg.partition(), -1), msg.offset())

    bar = None
    if progress:
        from tqdm import tqdm  # deferred: only the command line's progress bar needs it

        bar = tqdm(total=count, unit="purchase", desc=f"-> {topic}")
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    pending: list[str | None] = []
    for i, (key, value, kind) in enumerate(purchases(count, invalid_share=invalid_share, seed=seed,
                                                     max_payload_bytes=max_payload_bytes)):
        produce_waiting(producer, topic, value, key, on_delivery=on_delivery, timestamp=timestamp_ms)
        pending.append(kind)
        if transactional and len(pending) >= transaction_size:
            _end_transaction(producer, pending, stats, abort_rng, abort_share)
            producer.begin_transaction()
        elif not transactional:
            _account(pending, stats)
        producer.poll(0)
        if bar is not None:
            bar.update(1)
        if rate:
            delay = t0 + (i + 1) / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    if transactional:
        _end_transaction(producer, pending, stats, abort_rng, 0.0 if not pending else abort_share)
    left = producer.flush(60)
    if bar is not None:
        bar.close()
    if failures or left:
        raise RuntimeError(f"{len(failures)} purchases failed delivery, {left} undelivered; first: {failures[:1]}")
    if transactional:
        await_markers(connection, topic, written)
    stats.seconds = round(time.monotonic() - t0, 3)
    log.info("generated %s into %s", stats.to_dict(), topic)
    return stats


def await_markers(connection: KafkaConnection, topic: str, written: dict[int, int],
                  timeout_s: float = MARKERS_TIMEOUT_S) -> bool:
    """Wait until a read_committed reader sees past each partition's last record ``written``.

    A commit or an abort returns once the coordinator has decided it; its markers reach the
    partitions after that, and until they do the partitions' last stable offsets stop short of the
    transaction. What was generated is what a plan made right after must see: a window ends at the
    last stable offset. False (and a warning) when another producer's open transaction holds a
    partition back past ``timeout_s``: nothing this producer can settle.
    """
    admin = ClusterAdmin(connection)
    deadline = time.monotonic() + timeout_s
    while True:
        stable = admin.offsets(topic, sorted(written))
        behind = {p: stable[p].last_stable for p, last in written.items() if stable[p].last_stable <= last}
        if not behind:
            return True
        if time.monotonic() >= deadline:
            log.warning("%s: the last stable offsets %s are still at or below the generator's last records "
                        "after %.0fs (another open transaction?)", topic, behind, timeout_s)
            return False
        time.sleep(0.02)


def _account(kinds: list, stats: GeneratorStats) -> None:
    for kind in kinds:
        stats.produced += 1
        if kind is None:
            stats.valid += 1
        else:
            stats.invalid[kind] += 1
    kinds.clear()


def _end_transaction(producer, kinds: list, stats: GeneratorStats, rng: random.Random, abort_share: float) -> None:
    if abort_share and rng.random() < abort_share:
        # Flush first: the aborted records then really sit in the log (what we
        # want input tests to face), and it avoids librdkafka issue #4849
        # (abort right after produce can fail with INVALID_TXN_STATE).
        producer.flush(30)
        producer.abort_transaction(30)
        stats.aborted += len(kinds)
        kinds.clear()
    else:
        producer.commit_transaction(30)
        _account(kinds, stats)


def hostile_purchases(max_payload_bytes: int = 256 * 1024) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) pairs a careless or malicious producer could write.

    Every one must end up as exactly one invoice+shipment pair or one dead
    letter with a reason, never crash a run. Includes valid purchases dressed
    in hostile text (quoting, unicode, control characters), which must pass.
    """
    now = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
    base = valid_purchase(random.Random(7), now)

    def variant(**fields) -> bytes:
        return json.dumps({**base, **fields}, ensure_ascii=False).encode()

    values: list[bytes | None] = [
        None, b"", b"null", b"{}", b"[]", b'"just a string"', b"0", b"\x00\x01\x02\x03", b"\xff\xfe\xfd",
        b"\xef\xbb\xbf" + variant(),  # UTF-8 byte-order mark before valid JSON
        b"[" * 5000 + b"]" * 5000,  # nesting deeper than JSON parsers allow
        b'{"a":' * 2000 + b"1" + b"}" * 2000,
        variant()[:-1],  # truncated
        variant() + b" trailing garbage",
        variant().replace(b'"quantity": ', b'"quantity": 1, "quantity": '),  # duplicate key
        variant(quantity=10**30),
        variant(quantity="NaN"), variant(unit_price="1e400"), variant(unit_price="0.000000001"),
        variant(unit_price="NaN"), variant(unit_price="Infinity"), variant(unit_price=" 12.50 "),
        variant(quantity=True), variant(quantity=None), variant(currency=None), variant(purchase_id=""),
        variant(purchase_time="2026-13-45T99:99:99Z"), variant(purchase_time="0000-01-01T00:00:00Z"),
        variant(shipping_address=None), variant(shipping_address={}), variant(shipping_address=[1, 2]),
        variant(extra_field={"nested": ["x"] * 50}),
        # Valid, but hostile as text: quoting, escapes, unicode, control characters.
        variant(user_full_name="O'Brien \"the \\ quoted\" <script>alert(1)</script>"),
        variant(user_full_name="Robert'); DROP TABLE invoices;--"),
        variant(user_full_name="ZWJ\u200d RTL\u202e emoji 🛒🧾 combining e\u0301 nul\u0000 tab\t nl\n"),
        variant(user_full_name="a,b;c|d\r\n\"e\""),
        variant(shipping_address={**base["shipping_address"], "street": "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 Straße 1"}),
        # Too big for the pipeline (dead letter "oversized"), but within the broker's limits.
        variant(user_full_name="x" * (max_payload_bytes + 1)),
        variant(user_full_name="y" * 900_000),
    ]
    keys: list[bytes | None] = [None, b"", "ключ-🔑".encode(), b"\x00\xff", b"k" * 10_000]
    corpus = [(keys[i % len(keys)], v) for i, v in enumerate(values)]
    # Incompressible and about as big as the broker's default record limit allows.
    corpus.append((None, random.Random(11).randbytes(1_048_000)))
    return corpus
