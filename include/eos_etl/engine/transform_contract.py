"""The transform's contract: what it is given and what it must return.

The transform is the only domain-specific part of a run. It is given Spark's Kafka source
DataFrame over the window (:mod:`.kafka_source`: key, value, topic, partition, offset,
timestamp, ...) and must return, without reordering or shuffling, the columns of
:func:`output_schema` first: ``partition``, ``offset`` and ``outputs``, an array of
``struct<topic, key, value, headers>`` per input record (an empty array drops the record; its
offset is still committed). Each output is published with the lineage headers
(:mod:`.lineage`) ahead of its own ``headers``.

Checked twice: :func:`check_contract` checks the columns and their types on the driver, before
any task starts; the publishing tasks check, as they read, that a Spark partition holds one
Kafka partition (:mod:`.publish_task`) and that offsets keep their input order within the
window (:mod:`.publisher`). A violation raises
:class:`~eos_etl.engine.errors.TransformContractError` (columns, a shuffle) or
:class:`~eos_etl.engine.errors.PublishError` (order, an offset outside the window).
"""

from __future__ import annotations

from .errors import TransformContractError


# The schema as an object, not a DDL string: a string goes through Spark's SQL parser (ANTLR) on
# the driver JVM, which on a fresh JVM costs more than the rest of building the query.
def output_schema():
    """The transform's contract: ``partition INT, offset BIGINT, outputs ARRAY<STRUCT<topic: STRING,
    key: BINARY, value: BINARY, headers: ARRAY<STRUCT<key: STRING, value: BINARY>>>>``."""
    # Deferred: the engine's modules load no Spark code until a run builds its query.
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    output = StructType([StructField("topic", StringType()), StructField("key", BinaryType()),
                         StructField("value", BinaryType()), StructField("headers", ArrayType(header))])
    return StructType([StructField("partition", IntegerType()), StructField("offset", LongType()),
                       StructField("outputs", ArrayType(output))])


def check_contract(df) -> None:
    """Raise :class:`TransformContractError` unless ``df`` starts with the columns of :func:`output_schema`."""
    expected = output_schema()
    got = df.schema
    names = [f.name for f in got.fields]
    if names[:3] != ["partition", "offset", "outputs"]:
        raise TransformContractError(f"transform must return columns partition, offset, outputs; got {names}")
    for want, have in zip(expected.fields, got.fields[:3], strict=True):
        if want.dataType.simpleString() != have.dataType.simpleString():
            raise TransformContractError(
                f"column {want.name} must be {want.dataType.simpleString()}, got {have.dataType.simpleString()}"
            )
