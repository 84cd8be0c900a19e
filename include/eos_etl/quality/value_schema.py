"""One output record's value against its output's schema: parsed once, and which of its fields are
missing or not of their type.

The schema is the pipeline's (a record output's ``fields``, ``decimals`` and ``required``:
:mod:`.checked_outputs`); :func:`checked_columns` adds the two columns the schema checks look at to
the columns the pipeline's own checks look at. Spark column expressions only.
"""

from __future__ import annotations

from pyspark.sql import functions as F

# Where from_json puts the whole value when a field does not parse as its type (the other
# fields are still parsed: Spark's partial results).
CORRUPT = "_corrupt_record"
# Wide enough for any decimal text a pipeline carries: a text that does not cast is no decimal.
_DECIMAL_TEXT = "decimal(38,8)"


def ddl(fields) -> str:
    """``(name, type)`` pairs as a Spark DDL string."""
    return ", ".join(f"{name} {type_}" for name, type_ in fields)


def parse_value(value, fields):
    """``value`` (JSON bytes) parsed with ``fields`` plus :data:`CORRUPT`, which holds the whole text
    when the value is no JSON object or a field does not parse as its type."""
    return F.from_json(value.cast("string"), f"{ddl(fields)}, {CORRUPT} STRING",
                       {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})


def _present(j, name: str):
    """The field is in the JSON text with a non-null value although it did not parse (evaluated only
    for a value that did not match its schema)."""
    return F.coalesce(F.get_json_object(j[CORRUPT], f"$.{name}").isNotNull(), F.lit(False))


def _names(flags):
    """``(condition, name)`` pairs -> the names whose condition holds, comma-separated; null for none."""
    return F.nullif(F.concat_ws(",", *[F.when(cond, F.lit(name)) for cond, name in flags]), F.lit(""))


def missing_required(j, required):
    """The ``required`` fields absent or null in the JSON (one column checks them all: null when all are
    set). A field present with a value of the wrong type is not missing: :func:`schema_mismatch` names it."""
    return _names([(j[f].isNull() & ~_present(j, f), f) for f in required])


def schema_mismatch(j, fields, decimals=()):
    """Fields of a parsed value (:func:`parse_value`) present in the JSON but not of their type, and
    ``decimals`` whose text is no decimal, comma-separated; ``value`` when the value is no JSON object
    of the schema at all; null when it matches."""
    wrong_type = _names([(j[name].isNull() & _present(j, name), name) for name, _ in fields])
    corrupt = F.when(j[CORRUPT].isNotNull(), F.coalesce(wrong_type, F.lit("value")))
    not_decimal = [F.when(j[d].isNotNull() & j[d].try_cast(_DECIMAL_TEXT).isNull(), F.lit(d)) for d in decimals]
    return F.nullif(F.concat_ws(",", corrupt, *not_decimal), F.lit(""))


def checked_columns(record, j) -> dict:
    """The columns a record output's checks look at, from its parsed value ``j``, in order: the
    pipeline's own (``record.columns``), then ``missing_required`` and ``schema_mismatch``."""
    return {**record.columns(j), "missing_required": missing_required(j, record.required),
            "schema_mismatch": schema_mismatch(j, record.fields, record.decimals)}
