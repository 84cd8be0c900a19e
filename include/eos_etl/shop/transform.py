"""Purchases -> invoices + shipments (or a dead letter), in Spark expressions only.

No Python runs per record here: parsing, validation, money arithmetic and
JSON rendering are Catalyst expressions, so the work stays in the JVM and the
publishing task receives ready-made bytes.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, DecimalType, IntegerType, StringType, StructField, StructType

from .schema import (
    ADDRESS_FIELDS,
    DEAD_LETTER_MAX_BYTES,
    DEFAULT_MAX_PAYLOAD_BYTES,
    INVOICE_FIELDS,
    RECORD_TYPE_DEAD_LETTER,
    RECORD_TYPE_INVOICE,
    RECORD_TYPE_SHIPMENT,
    REQUIRED_FIELDS,
    SHIPMENT_FIELDS,
    ShopTopics,
)

_ID_PATTERN = r"^[A-Za-z0-9._:@-]{1,128}$"
_INT_PATTERN = r"^-?[0-9]{1,9}$"
_PRICE_PATTERN = r"^-?[0-9]{1,12}(\.[0-9]{1,2})?$"
_CURRENCY_PATTERN = r"^[A-Z]{3}$"
_ID_FIELDS = ("purchase_id", "user_id", "product_id")
_TEXT_FIELDS = ("user_full_name",)

# Types as objects, not strings such as "decimal(14,2)": a type string goes through Spark's SQL
# parser (ANTLR) on the driver, a cold-JVM cost every window paid once per cast; an object is
# sent as JSON.
_STRING = StringType()
_BINARY = BinaryType()
_INT = IntegerType()
_PRICE = DecimalType(14, 2)
_QUANTITY_DECIMAL = DecimalType(10, 0)
_TOTAL = DecimalType(26, 2)


def _strings(names) -> StructType:
    return StructType([StructField(name, _STRING) for name in names])


# Every field as text, whatever its JSON type (Spark renders a number or an object as its JSON
# text): the checks below decide what each must be. A struct, not a map: a field is read by
# position, not by a scan over the keys, and a repeated key counts once, the last one, as in
# Python's and JavaScript's JSON parsers.
_PURCHASE = _strings(REQUIRED_FIELDS)
# The address is a value inside the purchase (Jackson's own rendering of it, or the text of a JSON
# string): a struct with a corrupt-record column, which Spark fills when the text is no object.
_NOT_AN_OBJECT = "_not_an_object"
_ADDRESS = _strings([*ADDRESS_FIELDS, _NOT_AN_OBJECT])
_ADDRESS_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _NOT_AN_OBJECT}


def _with_one_object(df: DataFrame, name: str, text: Column, struct: StructType) -> DataFrame:
    """``df`` with column ``name``: ``text`` parsed as ``struct`` if it is exactly one JSON object
    (whitespace around it allowed), else null.

    Spark's JSON parser stops at the end of the first value and ignores what follows
    (``{"a":"1"} trailing`` parses), and parses anything that is not an object into a struct
    of nulls. So the text is parsed as the only element of an array, ``[text]``: a second
    value makes the array longer, and anything else after the object (``}``, a word) is a
    syntax error there, except a ``]`` that closes the array early. That one case is caught
    by the same text inside an object, ``{"v":text}``, where a ``]`` is always an error; it is
    tokenized only for the rare text that holds a ``]`` at all.

    The parsed array is a column of its own, then dropped: in one expression Spark parsed it
    once for its size and again for its element (measured: a third more time per purchase).
    """
    parsed = f"{name}_array"
    df = df.withColumn(parsed, F.from_json(F.concat(F.lit("["), text, F.lit("]")), ArrayType(struct)))
    closes_no_array_early = (F.instr(text, "]") == 0) | F.json_object_keys(
        F.concat(F.lit('{"v":'), text, F.lit("}"))).isNotNull()
    one = (F.size(parsed) == 1) & closes_no_array_early
    return df.withColumn(name, F.when(one, F.try_element_at(F.col(parsed), F.lit(1)))).drop(parsed)


def _header(name: str, value: Column) -> Column:
    return F.struct(F.lit(name).alias("key"), value.cast(_BINARY).alias("value"))


def _output(topic: str, key: Column, value: Column, headers: list[Column]) -> Column:
    return F.struct(
        F.lit(topic).alias("topic"),
        key.cast(_BINARY).alias("key"),
        value.cast(_BINARY).alias("value"),
        F.array(*headers).alias("headers"),
    )


def _first_failure(checks: list[tuple[Column, str, str]]) -> Column:
    """The number (1-based) of the first failing check, 0 when all pass.

    One CASE over the checks, in order: each row evaluates its checks once and stops at the
    first failure. (A CASE chain per result column, reason and field, evaluated them all twice:
    docs/performance-history.md, "The transform ran interpreted", has the figures.)"""
    first = F.when(checks[0][0], F.lit(1))
    for number, (failed, _, _) in enumerate(checks[1:], start=2):
        first = first.when(failed, F.lit(number))
    return first.otherwise(F.lit(0))


def _by_check_number(number: Column, labels: list[str]) -> Column:
    """``labels[number - 1]``, null for 0: a literal array lookup, no second pass over the checks."""
    return F.get(F.array(F.lit(None).cast(_STRING), *map(F.lit, labels)), number)


def _field(name: str) -> Column:
    """A field of the parsed purchase (``_raw``)."""
    return F.col("_raw").getField(name)


def _address_field(name: str) -> Column:
    """A field of the parsed shipping address (``_addr``)."""
    return F.col("_addr").getField(name)


def with_reject_reason(df: DataFrame, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> DataFrame:
    """Kafka source rows with the purchase contract applied: ``_reason`` and ``_bad_field`` are
    null for a valid purchase, else the first failing check's reason code and field. ``_raw``
    and ``_addr`` are the parsed value and shipping address; ``_time``, ``_quantity`` and ``_price``
    its typed fields (null where a field does not parse).

    The one definition of a valid purchase: the transform routes on it, and validation counts
    the window's valid inputs with it (without rendering any output).
    """
    df = _with_one_object(df, "_raw", F.col("value").cast(_STRING), _PURCHASE)
    # The typed values the checks and the outputs both use, in a projection of their own: each is
    # computed once per record, not once per check and once more per output field that uses it.
    # try_cast: ANSI casts raise, and invalid rows are evaluated too (then discarded).
    df = df.withColumns({
        "_addr": F.from_json(_field("shipping_address"), _ADDRESS, _ADDRESS_OPTIONS),
        "_time": F.try_to_timestamp(_field("purchase_time")),
        "_quantity": _field("quantity").try_cast(_INT),
        "_price": _field("unit_price").try_cast(_PRICE),
    })
    field, addr = _field, _address_field

    def blank(c: Column) -> Column:
        return c.isNull() | (F.trim(c) == "")

    checks: list[tuple[Column, str, str]] = [
        (F.col("value").isNull(), "null_value", ""),
        (F.octet_length("value") > max_payload_bytes, "oversized", ""),
        (F.col("_raw").isNull(), "malformed_json", ""),
    ]
    checks += [(blank(field(f)), "missing_field", f) for f in REQUIRED_FIELDS]
    checks += [(~field(f).rlike(_ID_PATTERN), "invalid_type", f) for f in _ID_FIELDS]
    checks += [(F.length(field(f)) > 256, "invalid_type", f) for f in _TEXT_FIELDS]
    checks += [
        (~field("quantity").rlike(_INT_PATTERN), "invalid_type", "quantity"),
        (~field("unit_price").rlike(_PRICE_PATTERN), "invalid_type", "unit_price"),
        (F.col("_time").isNull(), "invalid_type", "purchase_time"),
        (F.col("_addr").isNull() | _address_field(_NOT_AN_OBJECT).isNotNull(), "invalid_type", "shipping_address"),
    ]
    checks += [(blank(addr(f)), "missing_field", f"shipping_address.{f}") for f in ADDRESS_FIELDS]
    checks += [
        # An int: the quantity passed its pattern above (at most 9 digits).
        (F.col("_quantity") <= 0, "non_positive_quantity", "quantity"),
        (F.col("_price") < 0, "negative_price", "unit_price"),
        (~field("currency").rlike(_CURRENCY_PATTERN), "invalid_currency", "currency"),
    ]
    # Its own column: referenced twice below, Spark keeps it one projection (computed once).
    df = df.withColumn("_failed_check", _first_failure(checks))
    number = F.col("_failed_check")
    return df.withColumns({"_reason": _by_check_number(number, [code for _, code, _ in checks]),
                           "_bad_field": _by_check_number(number, [name for _, _, name in checks])})


def output_ids(topic: Column, partition: Column, offset: Column) -> tuple[Column, Column]:
    """(invoice id, shipment id) of the purchase at ``topic:partition:offset``: a hash of its source
    position, so a replayed window writes the same ids, and validation can tell an id from its lineage."""
    source = F.concat_ws(":", topic, partition.cast(_STRING), offset.cast(_STRING))
    return (F.concat(F.lit("inv_"), F.substring(F.sha2(F.concat(F.lit("invoice:"), source), 256), 1, 32)),
            F.concat(F.lit("shp_"), F.substring(F.sha2(F.concat(F.lit("shipment:"), source), 256), 1, 32)))


class _Ids:
    """The purchase's deterministic output ids (:func:`output_ids` of the row's own position)."""

    def __init__(self) -> None:
        self.invoice, self.shipment = output_ids(F.col("topic"), F.col("partition"), F.col("offset"))


def _record(fields, values: dict[str, Column]) -> Column:
    """The JSON value of an output record: ``values`` in the order of its schema's ``fields``
    (:data:`~eos_etl.shop.schema.INVOICE_FIELDS`, ...), which the checks parse it with; a schema field
    without a value, or a value of no field, fails here, when the transform is built."""
    names = [name for name, _type in fields]
    if set(names) != set(values):
        raise ValueError(f"output fields {sorted(values)} are not the schema's {names}")
    return F.to_json(F.struct(*[values[name].alias(name) for name in names]))


def invoice_output(topic: str, ids: _Ids) -> Column:
    """The invoice record (topic, key, JSON value, headers) of a valid purchase."""
    quantity, unit_price = F.col("_quantity"), F.col("_price")
    total = (unit_price * quantity.cast(_QUANTITY_DECIMAL)).cast(_TOTAL)
    purchase_time = F.date_format(F.col("_time"), "yyyy-MM-dd'T'HH:mm:ss.SSSXXX")
    issued_at = F.date_format(F.col("timestamp"), "yyyy-MM-dd'T'HH:mm:ss.SSSXXX")
    invoice = _record(INVOICE_FIELDS, {
        "invoice_id": ids.invoice, "purchase_id": _field("purchase_id"), "user_id": _field("user_id"),
        "user_full_name": _field("user_full_name"), "product_id": _field("product_id"), "quantity": quantity,
        "unit_price": unit_price.cast(_STRING), "total": total.cast(_STRING), "currency": _field("currency"),
        "purchase_time": purchase_time, "issued_at": issued_at})
    return _output(topic, _field("purchase_id"), invoice, [_header("record_type", F.lit(RECORD_TYPE_INVOICE))])


def shipment_output(topic: str, ids: _Ids) -> Column:
    """The shipment record of a valid purchase, pointing at its invoice."""
    shipment = _record(SHIPMENT_FIELDS, {
        "shipment_id": ids.shipment, "invoice_id": ids.invoice, "purchase_id": _field("purchase_id"),
        "product_id": _field("product_id"), "recipient_name": _field("user_full_name"),
        "address": F.struct(*[_address_field(f).alias(f) for f in ADDRESS_FIELDS]), "quantity": F.col("_quantity")})
    return _output(topic, _field("purchase_id"), shipment, [_header("record_type", F.lit(RECORD_TYPE_SHIPMENT))])


def dead_letter_output(topic: str) -> Column:
    """The dead letter of a rejected purchase: its original key and value, with the reason.

    A dead letter must fit the broker's record limit even when its input barely did (the
    lineage headers add ~150 bytes, and an input topic may allow bigger records than the
    dead-letter topic): beyond DEAD_LETTER_MAX_BYTES of key + value the copy is cut, and the
    header dlq_original_bytes says so ("key_bytes:value_bytes"). The whole original stays in
    the input topic at the lineage headers' position.
    """
    key_len = F.coalesce(F.octet_length("key"), F.lit(0))
    value_len = F.coalesce(F.octet_length("value"), F.lit(0))
    cut = key_len + value_len > DEAD_LETTER_MAX_BYTES
    key_budget = F.least(key_len, F.lit(DEAD_LETTER_MAX_BYTES // 2))
    dlq_key = F.when(cut, F.col("key").substr(F.lit(1), key_budget)).otherwise(F.col("key"))
    dlq_value = F.when(cut, F.col("value").substr(F.lit(1), F.lit(DEAD_LETTER_MAX_BYTES) - key_budget)
                       ).otherwise(F.col("value"))
    headers = [
        _header("record_type", F.lit(RECORD_TYPE_DEAD_LETTER)),
        _header("dlq_reason", F.col("_reason")),
        _header("dlq_field", F.col("_bad_field")),
    ]
    original = _header("dlq_original_bytes", F.concat_ws(":", key_len.cast(_STRING), value_len.cast(_STRING)))
    return F.when(cut, _output(topic, dlq_key, dlq_value, [*headers, original])
                  ).otherwise(_output(topic, F.col("key"), F.col("value"), headers))


def purchases_to_outputs(
    df: DataFrame, topics: ShopTopics = ShopTopics(), max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
) -> DataFrame:
    """Engine transform: Kafka source rows -> (partition, offset, outputs): checks
    (:func:`with_reject_reason`), then an invoice and its shipment for a valid purchase, else
    one dead letter. Invalid rows evaluate the invoice and shipment expressions too (to nulls
    that are never used): Spark has no lazy branch per row."""
    df = with_reject_reason(df, max_payload_bytes)
    ids = _Ids()
    valid = F.array(invoice_output(topics.invoices, ids), shipment_output(topics.shipments, ids))
    outputs = F.when(F.col("_reason").isNull(), valid).otherwise(F.array(dead_letter_output(topics.dead_letters)))
    return df.select(F.col("partition").cast(_INT).alias("partition"), F.col("offset"), outputs.alias("outputs"))
