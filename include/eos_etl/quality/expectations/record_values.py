"""Column-map expectations on a record asset (the shop: invoices, shipments) for rules GE has no native
form of. Each is a condition on a row, so GE counts its unexpected rows in the same aggregate as the
native column maps of the asset, and at SUMMARY lists them with their index columns (the record's source
partition and offset).

* :class:`ExpectColumnValuesToMatchValueSchema`: the record's JSON value (the column) is an object of the
  given fields, each present field of its type, each decimal field a decimal text;
* :class:`ExpectColumnValuesToBeLineageIds`: the record's id (the column) is the id its lineage gives (a
  column the asset derives from the record's source position: the pipeline's deterministic ids);
* :class:`ExpectColumnValuesToEqualProduct`: the column, as a decimal, is exactly the product of its
  factors (the shop: total = quantity x unit_price); a row where one of them does not parse is not its
  failure (the schema's).
"""

from __future__ import annotations

from functools import reduce

from great_expectations.compatibility import pydantic
from great_expectations.execution_engine import SparkDFExecutionEngine
from great_expectations.expectations.expectation import ColumnMapExpectation
from great_expectations.expectations.metrics.map_metric_provider import (
    ColumnMapMetricProvider,
    column_condition_partial,
)
from great_expectations.render.renderer_configuration import RendererConfiguration, RendererValueType
from pyspark.sql import functions as F

from ..value_schema import ddl, parse_value, schema_mismatch


class ColumnValuesMatchValueSchema(ColumnMapMetricProvider):
    condition_metric_name = "column_values.eos_etl_match_value_schema"
    condition_value_keys = ("fields", "decimals")

    @column_condition_partial(engine=SparkDFExecutionEngine)
    def _spark(cls, column, fields, decimals=(), **kwargs):
        fields = tuple(tuple(f) for f in fields)
        return schema_mismatch(parse_value(column, fields), fields, tuple(decimals)).isNull()


class ColumnValuesAreLineageIds(ColumnMapMetricProvider):
    condition_metric_name = "column_values.eos_etl_lineage_ids"
    condition_value_keys = ("lineage_column",)
    # A missing id is no lineage id either: counted here (and by the required-fields rule).
    filter_column_isnull = False

    @column_condition_partial(engine=SparkDFExecutionEngine)
    def _spark(cls, column, lineage_column, **kwargs):
        return column.eqNullSafe(F.col(lineage_column))


class ColumnValuesEqualProduct(ColumnMapMetricProvider):
    condition_metric_name = "column_values.eos_etl_equal_product"
    condition_value_keys = ("factors", "as_type")

    @column_condition_partial(engine=SparkDFExecutionEngine)
    def _spark(cls, column, factors, as_type, **kwargs):
        product = reduce(lambda a, b: a * b, [F.col(name).try_cast(type_) for name, type_ in factors])
        value = column.try_cast(as_type)
        # Null (not judged) unless the column and every factor parse.
        judged = reduce(lambda a, b: a & b, [F.col(name).try_cast(type_).isNotNull() for name, type_ in factors],
                        value.isNotNull())
        return F.when(judged, value == product)


class ExpectColumnValuesToMatchValueSchema(ColumnMapExpectation):
    """Each record's JSON value is an object of ``fields`` (name, Spark type): every field present has its
    type, every one of ``decimals`` is a decimal text. Unexpected values: the JSON texts.

    Cost: none of its own beyond parsing the value once more in the asset's aggregate."""

    fields: list[tuple[str, str]] = pydantic.Field(description="(field, Spark DDL type) of the value, in order")
    decimals: list[str] = pydantic.Field(default_factory=list, description="fields carried as decimal text")

    map_metric = "column_values.eos_etl_match_value_schema"
    success_keys = ("fields", "decimals", "mostly")
    args_keys = ("column", "fields")

    @classmethod
    def _prescriptive_template(cls, renderer_configuration: RendererConfiguration) -> RendererConfiguration:
        kwargs = renderer_configuration.kwargs
        renderer_configuration.add_param(name="column", param_type=RendererValueType.STRING)
        renderer_configuration.add_param(name="schema", param_type=RendererValueType.STRING,
                                         value=ddl(tuple(tuple(f) for f in kwargs.get("fields") or ())))
        template = "values must be JSON objects of the schema $schema: each field present has its type"
        if kwargs.get("decimals"):
            renderer_configuration.add_param(name="decimals", param_type=RendererValueType.STRING,
                                             value=", ".join(kwargs["decimals"]))
            template += ", $decimals decimal text"
        renderer_configuration.template_str = template
        return renderer_configuration


class ExpectColumnValuesToBeLineageIds(ColumnMapExpectation):
    """Each record's id is the one its lineage gives (``lineage_column``: the asset's id derived from the
    record's source position), so a replayed window writes the same ids and none is taken twice.

    Cost: none of its own (a condition counted in the asset's aggregate)."""

    lineage_column: str = pydantic.Field(description="the asset's column holding the id the lineage gives")

    map_metric = "column_values.eos_etl_lineage_ids"
    success_keys = ("lineage_column", "mostly")
    args_keys = ("column", "lineage_column")

    @classmethod
    def _prescriptive_template(cls, renderer_configuration: RendererConfiguration) -> RendererConfiguration:
        renderer_configuration.add_param(name="column", param_type=RendererValueType.STRING)
        renderer_configuration.add_param(name="lineage_column", param_type=RendererValueType.STRING)
        renderer_configuration.template_str = ("values must be the id the record's lineage gives "
                                               "($lineage_column, from its source partition and offset)")
        return renderer_configuration


class ExpectColumnValuesToEqualProduct(ColumnMapExpectation):
    """The column, cast to ``as_type``, equals the product of ``factors`` ((column, type) each) exactly;
    rows where one of them does not parse are not judged (the schema rule finds them).

    Cost: none of its own (a condition counted in the asset's aggregate)."""

    factors: list[tuple[str, str]] = pydantic.Field(description="(column, decimal type) of each factor")
    as_type: str = pydantic.Field(default="decimal(38,8)", description="the type the column is compared as")

    map_metric = "column_values.eos_etl_equal_product"
    success_keys = ("factors", "as_type", "mostly")
    args_keys = ("column", "factors")

    @classmethod
    def _prescriptive_template(cls, renderer_configuration: RendererConfiguration) -> RendererConfiguration:
        factors = renderer_configuration.kwargs.get("factors") or ()
        renderer_configuration.add_param(name="column", param_type=RendererValueType.STRING)
        renderer_configuration.add_param(name="product", param_type=RendererValueType.STRING,
                                         value=" x ".join(name for name, _ in factors))
        renderer_configuration.template_str = "values must equal $product exactly (decimal arithmetic)"
        return renderer_configuration
