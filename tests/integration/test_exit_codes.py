"""The exit-code contract's rows marked *provoked* (docs/operations.md, "Exit codes, error by error"),
provoked against a real broker through the CLI: each ends with its row's exit code and one
``error:`` line of its shape.

The rest of the contract (every class has a row, its code, what Airflow does), broker-free:
tests/unit/test_exit_codes.py; the table's reader and the provocations: tests/support/exit_codes.py.
"""

from __future__ import annotations

import os

import pytest

from eos_etl.shop.generator import generate
from tests.support.exit_codes import PROVOKE, ROWS


# -- the provoked rows: through the CLI, against a real broker ---------------------------------------------------
def assert_row(name: str, res) -> None:
    """The run ended as ``name``'s row says: its exit code, exactly one error: line, of its shape."""
    row = ROWS[name]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert res.returncode == row.exit_code, f"{name}: exit code {res.returncode}: {errors or res.stderr[-3000:]}"
    assert len(errors) == 1, f"{name}: {len(errors)} error lines: {res.stderr[-3000:]}"
    assert errors[0].startswith(row.head), f"{name}: {errors[0]!r} is not of the shape {row.line}"
    # No traceback of the command's own (Spark's log quotes a failed task's, as "PythonException: Traceback").
    assert not any(line.startswith("Traceback") for line in res.stderr.splitlines()), res.stderr[-3000:]


#: Where each provoked exit-2 row leaves the group's offset of partition 0 (untouched by the run).
POSITION_LEFT = {"InputDataLossError": 0}


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(PROVOKE))
def test_the_provoked_rows_end_the_cli_as_documented(name, shop_factory, connection, sasl_connection, admin, tmp_path):
    shop = shop_factory(partitions=1)
    generate(shop.connection, shop.topics.purchases, 20, seed=7)
    extra = {"sasl_connection": sasl_connection} if name == "AuthenticationError" else {}
    res = PROVOKE[name](shop, connection, tmp_path, **extra)
    assert_row(name, res)
    if ROWS[name].exit_code == 2:  # nothing published, no offset moved
        parts = admin.partitions(shop.topics.purchases)
        assert admin.committed_offsets(shop.group, shop.topics.purchases, parts) == {0: POSITION_LEFT.get(name)}
    assert os.environ.get("EOS_ETL_FAILPOINTS") is None  # the failpoints were the run's own
