"""Failing rows of a failed expectation, with their lineage, queried in Spark.

Great Expectations' SUMMARY results carry the unexpected values only (no
row, no lineage), and COMPLETE would ship every failing row to the driver.
Instead, after a failure the expectation's own condition is asked again of
the validated DataFrame, as a Spark column expression, with ``limit``: the
driver gets at most ``limit`` rows, each with the lineage columns
(source_partition, source_offset, run_id, kafka_partition, kafka_offset).

Only the column-map expectations the suites use are translated; for any other
type (table-level ones such as column types) there are no rows to show and
:func:`failing_rows` returns ``[]``.
"""

from __future__ import annotations

from pyspark.sql import Window as W
from pyspark.sql import functions as F

from .collect import EXAMPLE_LIMIT, LINEAGE_COLUMNS


def _unexpected(expectation_type: str, kwargs: dict):
    """The Spark condition that selects the rows ``expectation_type`` counts as unexpected (None: no rows)."""
    column = kwargs.get("column")
    col = F.col(column) if column else None
    if expectation_type == "expect_column_values_to_not_be_null":
        return col.isNull()
    if expectation_type == "expect_column_values_to_be_null":
        return col.isNotNull()
    if expectation_type == "expect_column_values_to_be_in_set":
        return col.isNotNull() & ~col.isin(list(kwargs["value_set"]))
    if expectation_type == "expect_column_values_to_match_regex":
        return col.isNotNull() & ~col.rlike(kwargs["regex"])
    if expectation_type == "expect_column_values_to_be_between":
        ok = F.lit(True)
        if kwargs.get("min_value") is not None:
            low = F.lit(kwargs["min_value"])
            ok = ok & ((col > low) if kwargs.get("strict_min") else (col >= low))
        if kwargs.get("max_value") is not None:
            high = F.lit(kwargs["max_value"])
            ok = ok & ((col < high) if kwargs.get("strict_max") else (col <= high))
        return col.isNotNull() & ~ok
    if expectation_type == "expect_column_values_to_be_unique":
        return col.isNotNull() & (F.count(F.lit(1)).over(W.partitionBy(column)) > 1)
    if expectation_type == "expect_compound_columns_to_be_unique":
        columns = list(kwargs["column_list"])
        return F.count(F.lit(1)).over(W.partitionBy(*columns)) > 1
    return None


def failing_rows(df, expectation_type: str, kwargs: dict, limit: int = EXAMPLE_LIMIT) -> list[dict]:
    """Up to ``limit`` rows of ``df`` that fail the expectation: its columns plus lineage."""
    condition = _unexpected(expectation_type, kwargs)
    if condition is None:
        return []
    checked = [kwargs["column"]] if kwargs.get("column") else list(kwargs.get("column_list") or [])
    shown = list(dict.fromkeys([*checked, *(c for c in LINEAGE_COLUMNS if c in df.columns)]))
    # A window expression cannot sit in a WHERE clause: compute it as a column first.
    rows = (df.select(*shown, condition.alias("_unexpected")).where("_unexpected").drop("_unexpected")
            .limit(limit).collect())
    return [r.asDict(recursive=True) for r in rows]
