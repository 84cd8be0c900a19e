"""Lineage expectations on a window's *lineage* asset: one row per committed input record and per output
record, each with its ``role`` and the source position its lineage names.

The asset (``role``, ``source_partition``, ``source_offset`` and the pair columns, null where a role has
none): an input record is a row of role ``valid_input`` or ``invalid_input`` at its own position; an
output record (an invoice, a shipment, a dead letter) a row of its role at the position of the input it
came from. The metric :class:`LineageByRole` sums, per role, in one aggregate:

* ``records``: the rows of the role;
* ``fingerprint``: the sum of a salted 64-bit hash of each row's ``(source_partition, source_offset)``;
* ``pairs``: the sum of a hash of each row's position and pair columns.

Two multisets of positions with the same count and the same sum are the same multiset, except with the
chance of a 64-bit collision. So :class:`ExpectOutputsToBeOnePerInput` (an output role's records have
its input role's count and fingerprint) says, without a join: every committed input has exactly one
output of the role, none is there twice, none comes from an aborted or foreign input. And
:class:`ExpectRecordsToBePaired` (the primary's and the companion's pair sums are equal) says every
primary record has its companion with the same lineage and shared fields, and the reverse.

Both read the same metric with the same arguments, so Great Expectations computes it once.
"""

from __future__ import annotations

import json
from typing import ClassVar

from great_expectations.compatibility import pydantic
from great_expectations.core.metric_domain_types import MetricDomainTypes
from great_expectations.core.metric_function_types import MetricPartialFunctionTypes
from great_expectations.execution_engine import SparkDFExecutionEngine
from great_expectations.expectations.expectation import BatchExpectation
from great_expectations.expectations.metrics.metric_provider import metric_partial
from great_expectations.expectations.metrics.table_metric_provider import TableMetricProvider
from great_expectations.render.renderer_configuration import RendererConfiguration, RendererValueType
from pyspark.sql import functions as F

from ..fingerprint import NULL_FIELD, fingerprint

METRIC = "eos_etl.lineage_by_role"


class LineageByRole(TableMetricProvider):
    """role -> {records, fingerprint, pairs} over the lineage asset (see the module docstring); the sums
    as decimal text, exact."""

    metric_name = METRIC
    value_keys = ("roles", "pair_columns")

    @metric_partial(engine=SparkDFExecutionEngine, partial_fn_type=MetricPartialFunctionTypes.AGGREGATE_FN,
                    domain_type=MetricDomainTypes.TABLE)
    def _spark(cls, execution_engine, metric_domain_kwargs, metric_value_kwargs, metrics, runtime_configuration):
        position = fingerprint(F.col("source_partition").cast("int"), F.col("source_offset").cast("bigint"))
        pair = fingerprint(F.col("source_partition").cast("int"), F.col("source_offset").cast("bigint"),
                           *(F.coalesce(F.col(c).cast("string"), F.lit(NULL_FIELD))
                             for c in metric_value_kwargs["pair_columns"]))
        per_role = []
        for role in metric_value_kwargs["roles"]:
            of = F.col("role") == F.lit(role)
            per_role.append(F.struct(F.count_if(of).alias("records"),
                                     F.coalesce(F.sum(F.when(of, position)), F.lit(0)).cast("string")
                                     .alias("fingerprint"),
                                     F.coalesce(F.sum(F.when(of, pair)), F.lit(0)).cast("string").alias("pairs"))
                            .alias(role))
        # One JSON text: a struct's Row would reach the expectation as a bare list.
        return F.to_json(F.struct(*per_role)), metric_domain_kwargs, {}


def _by_role(metrics: dict) -> dict[str, dict]:
    return {role: {"records": int(v["records"]), "fingerprint": v["fingerprint"], "pairs": v["pairs"]}
            for role, v in json.loads(metrics[METRIC]).items()}


class _LineageExpectation(BatchExpectation):
    roles: list[str] = pydantic.Field(description="every role of the lineage asset the suite's metrics sum")
    pair_columns: list[str] = pydantic.Field(default_factory=list,
                                             description="the columns a primary record shares with its companion")

    metric_dependencies = (METRIC,)
    domain_keys: ClassVar[tuple[str, ...]] = ("row_condition", "condition_parser")


class ExpectOutputsToBeOnePerInput(_LineageExpectation):
    """Each output role's records are exactly its input role's positions: for ``{"invoice": "valid_input"}``,
    one invoice per committed valid input, none twice, none from a record that is no committed input.

    Cost: none of its own (a table aggregate bundled with the asset's others)."""

    outputs: dict[str, str] = pydantic.Field(description="output role -> the input role whose positions it has")

    success_keys = ("outputs", "roles", "pair_columns")
    args_keys = ("outputs",)

    @classmethod
    def _prescriptive_template(cls, renderer_configuration: RendererConfiguration) -> RendererConfiguration:
        outputs = renderer_configuration.kwargs.get("outputs") or {}
        parts = []
        for i, (out, inp) in enumerate(sorted(outputs.items())):
            renderer_configuration.add_param(name=f"out_{i}", param_type=RendererValueType.STRING, value=out)
            renderer_configuration.add_param(name=f"in_{i}", param_type=RendererValueType.STRING, value=inp)
            parts.append(f"exactly one $out_{i} per $in_{i}")
        renderer_configuration.template_str = ("source positions (count and fingerprint): "
                                               + ("; ".join(parts) or "no output role named"))
        return renderer_configuration

    def _validate(self, metrics, runtime_configuration=None, execution_engine=None):
        got = _by_role(metrics)
        details, success = {}, True
        for out, inp in sorted(self.outputs.items()):
            o, i = got.get(out), got.get(inp)
            same = o is not None and i is not None and (o["records"], o["fingerprint"]) == (i["records"],
                                                                                            i["fingerprint"])
            success = success and same
            details[out] = {"records": o["records"] if o else None, "expected": i["records"] if i else None,
                            "same_positions": same}
        return {"success": success,
                "result": {"observed_value": {out: d["records"] for out, d in details.items()}, "details": details}}


class ExpectRecordsToBePaired(_LineageExpectation):
    """Every ``primary`` record has its ``companion`` with the same source position and ``pair_columns``
    values, and the reverse (equal counts and equal pair fingerprints).

    Cost: none of its own (the same metric as :class:`ExpectOutputsToBeOnePerInput`)."""

    primary: str = pydantic.Field(description="the role of the primary records (the shop: invoice)")
    companion: str = pydantic.Field(description="the role of their companions (the shop: shipment)")

    success_keys = ("primary", "companion", "roles", "pair_columns")
    args_keys = ("primary", "companion")

    @classmethod
    def _prescriptive_template(cls, renderer_configuration: RendererConfiguration) -> RendererConfiguration:
        kwargs = renderer_configuration.kwargs
        renderer_configuration.add_param(name="primary", param_type=RendererValueType.STRING)
        renderer_configuration.add_param(name="companion", param_type=RendererValueType.STRING)
        renderer_configuration.add_param(name="shared", param_type=RendererValueType.STRING,
                                         value=", ".join(kwargs.get("pair_columns") or []))
        renderer_configuration.template_str = ("every $primary has its $companion and the reverse, with the same "
                                               "source position and $shared")
        return renderer_configuration

    def _validate(self, metrics, runtime_configuration=None, execution_engine=None):
        got = _by_role(metrics)
        p, c = got.get(self.primary), got.get(self.companion)
        success = p is not None and c is not None and (p["records"], p["pairs"]) == (c["records"], c["pairs"])
        return {"success": success,
                "result": {"observed_value": {self.primary: p["records"] if p else None,
                                              self.companion: c["records"] if c else None},
                           "details": {"pairs_agree": success}}}
