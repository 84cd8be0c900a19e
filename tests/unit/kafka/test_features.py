"""The cluster's finalised transaction.version and metadata.version, as preflight reads them: an
ApiVersions v3 response parsed, broker-free. Against real brokers (preflight and Kafka's own FeatureCommand
agree): tests/integration/kafka/test_features.py.
"""

from __future__ import annotations

import struct

import pytest

from eos_etl.kafka.features import api_versions_request, parse_api_versions_response


def _compact(text: bytes) -> bytes:
    return bytes([len(text) + 1]) + text


def test_the_finalised_features_are_read_from_an_api_versions_v3_response():
    finalized = _compact(b"metadata.version") + struct.pack(">hh", 27, 1) + b"\x00"
    finalized += _compact(b"transaction.version") + struct.pack(">hh", 1, 1) + b"\x00"
    finalized_array = bytes([3]) + finalized
    supported = bytes([2]) + _compact(b"transaction.version") + struct.pack(">hh", 0, 2) + b"\x00"
    body = struct.pack(">ih", 7, 0)  # correlation id, no error
    body += bytes([3]) + struct.pack(">hhh", 0, 0, 12) + b"\x00" + struct.pack(">hhh", 18, 0, 4) + b"\x00"
    body += struct.pack(">i", 0)  # throttle time
    epoch = struct.pack(">q", 42)
    body += bytes([3])  # three tagged fields: supported features, their epoch, finalised features
    body += bytes([0, len(supported)]) + supported
    body += bytes([1, len(epoch)]) + epoch
    body += bytes([2, len(finalized_array)]) + finalized_array
    assert parse_api_versions_response(body, 7) == ({"metadata.version": 27, "transaction.version": 1}, 42)
    with pytest.raises(ValueError):
        parse_api_versions_response(body, 8)  # the answer to another request
    request = api_versions_request(7)
    assert struct.unpack(">ihhi", request[:12]) == (len(request) - 4, 18, 3, 7)
