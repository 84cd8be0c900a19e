"""The command line as the integration tests run it: ``python -m eos_etl`` in a process of its own, a
shop's flags, a SASL connection's flags, and the check that a refused command touched nothing."""

from __future__ import annotations

import os
import subprocess
import sys

from eos_etl.checker import read_topic


def cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eos_etl", *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )


def shop_args(shop) -> list[str]:
    return shop.to_args()


def assert_untouched(shop, admin):
    parts = admin.partitions(shop.topics.purchases)
    assert set(admin.committed_offsets(shop.group, shop.topics.purchases, parts).values()) == {None}
    for topic in shop.topics.outputs:
        assert read_topic(shop.connection, topic, isolation="read_uncommitted") == []


def sasl_args(conn) -> list[str]:
    """The connection flags of a SASL_SSL connection (the password goes through the environment)."""
    return ["--bootstrap-servers", conn.bootstrap_servers, "--security-protocol", conn.security_protocol,
            "--sasl-mechanism", conn.sasl_mechanism, "--sasl-username", conn.sasl_username,
            "--ssl-ca-location", conn.ssl_ca_location]
