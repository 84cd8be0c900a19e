"""The cluster's finalised feature levels (KIP-584): ``metadata.version``, ``transaction.version``, ...

Every Kafka client learns them in its first request, ApiVersions (version 3 and
later carry ``FinalizedFeatures`` as a tagged field), but librdkafka exposes
neither the request nor the features, and the Java tool (``FeatureCommand``)
costs a JVM start per run. So this module asks one broker that question itself,
the way every client does on connecting: one ApiVersions v3 request over the
connection's own transport (plain TCP, or TLS with the connection's CA and
client certificate). Brokers answer ApiVersions before any SASL exchange, so no
credentials are sent. The answer is read-only information for logs and the
operator's ``transactions`` view, never a decision the engine takes.

Why it matters here: ``transaction.version`` 2 (KIP-890 part 2, the default for
clusters formatted by Kafka 4.x) bumps the producer epoch on every transaction,
but only for clients that speak the new protocol; librdkafka does not, so
against either level the pipeline runs on the old protocol, defended by the
leader's partition verification (KIP-890 part 1).
"""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass

from .connection import KafkaConnection
from .errors import KafkaSetupError

API_VERSIONS = 18
_REQUEST_VERSION = 3
_TAG_FINALIZED_FEATURES_EPOCH = 1
_TAG_FINALIZED_FEATURES = 2
_CLIENT_ID = b"eos-etl-features"


@dataclass(frozen=True)
class FinalizedFeatures:
    """Finalised feature levels as one broker reported them (``epoch``: the cluster metadata's)."""

    levels: dict[str, int]
    epoch: int
    broker: str

    @property
    def transaction_version(self) -> int:
        """0 when the feature is not finalised (clusters from before Kafka 3.9 / 4.0)."""
        return self.levels.get("transaction.version", 0)

    @property
    def metadata_version(self) -> int | None:
        return self.levels.get("metadata.version")

    def describe(self) -> str:
        return (f"transaction.version {self.transaction_version}, metadata.version level "
                f"{self.metadata_version if self.metadata_version is not None else 'unknown'} "
                f"(finalised, as broker {self.broker} reports them)")

    def to_dict(self) -> dict:
        return {"transaction.version": self.transaction_version, "metadata.version": self.metadata_version,
                "levels": dict(sorted(self.levels.items())), "epoch": self.epoch, "broker": self.broker}


# -- the wire format (Kafka's protocol, big-endian; "compact" = unsigned-varint length + 1) --------------
def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _compact_string(text: bytes) -> bytes:
    return _uvarint(len(text) + 1) + text


def api_versions_request(correlation_id: int) -> bytes:
    """An ApiVersions v3 request with its size prefix (request header v2, no tagged fields)."""
    header = struct.pack(">hhih", API_VERSIONS, _REQUEST_VERSION, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
    header += _uvarint(0)
    body = _compact_string(b"eos-etl") + _compact_string(b"1") + _uvarint(0)
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("ApiVersions response ends early")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str:
        return self.take(self.uvarint() - 1).decode()

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def parse_api_versions_response(body: bytes, correlation_id: int) -> tuple[dict[str, int], int]:
    """(finalised feature -> max level, features epoch) from an ApiVersions v3 response (size prefix removed)."""
    r = _Reader(body)
    if r.int32() != correlation_id:  # response header v0: the correlation id only
        raise ValueError("ApiVersions response for another request")
    error = r.int16()
    if error:
        raise ValueError(f"ApiVersions answered error code {error}")
    for _ in range(r.uvarint() - 1):  # api keys: key, min, max, tagged fields
        r.take(6)
        r.skip_tags()
    r.int32()  # throttle time
    levels: dict[str, int] = {}
    epoch = -1
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        field = _Reader(r.take(size))
        if tag == _TAG_FINALIZED_FEATURES_EPOCH:
            epoch = field.int64()
        elif tag == _TAG_FINALIZED_FEATURES:
            for _ in range(field.uvarint() - 1):
                name = field.compact_string()
                max_level = field.int16()
                field.int16()  # min version level
                field.skip_tags()
                levels[name] = max_level
    return levels, epoch


def _ssl_context(connection: KafkaConnection) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=connection.ssl_ca_location)
    if connection.ssl_client_pem:
        context.load_cert_chain(connection.ssl_client_pem)
    return context


def _ask(connection: KafkaConnection, address: str, timeout_s: float) -> FinalizedFeatures:
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as raw:
        sock = raw
        if connection.security_protocol in ("SSL", "SASL_SSL"):
            sock = _ssl_context(connection).wrap_socket(raw, server_hostname=host)
        try:
            correlation_id = 1
            sock.sendall(api_versions_request(correlation_id))
            size = struct.unpack(">i", _read_exactly(sock, 4))[0]
            levels, epoch = parse_api_versions_response(_read_exactly(sock, size), correlation_id)
        finally:
            if sock is not raw:
                sock.close()
    return FinalizedFeatures(levels, epoch, address)


def _read_exactly(sock, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(65536, n - got))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def finalized_features(connection: KafkaConnection, timeout_s: float = 2.0) -> FinalizedFeatures:
    """The finalised feature levels from the first bootstrap server that answers within ``timeout_s``.

    Raises :class:`KafkaSetupError` naming every server and why, when none does.
    """
    failures = []
    for address in (a.strip() for a in connection.bootstrap_servers.split(",") if a.strip()):
        try:
            return _ask(connection, address, timeout_s)
        except (OSError, ValueError, ssl.SSLError) as exc:
            failures.append(f"{address}: {type(exc).__name__}: {exc}")
    raise KafkaSetupError("no broker told its finalised features (ApiVersions): " + "; ".join(failures))
