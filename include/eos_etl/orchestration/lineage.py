"""OpenLineage for a published window: what the ``run_window`` task reports itself.

Spark's OpenLineage listener sees the Kafka *read* only: the outputs are written
by the transactional confluent-kafka producers, which bypass Spark's writers.
So the operator tells the Airflow OpenLineage provider what the window did,
through the provider's operator hook ``get_openlineage_facets_on_complete``:

* input: the purchases topic, with the number of records read;
* outputs: the invoices, shipments and dead-letter topics, each with the number
  of records the window committed to it (``outputStatistics``);
* run facet ``eosEtlWindow``: the input window (per-partition offset ranges),
  the output offset ranges the window's transactions were written in, the run id
  of the attempt that published and the counts. Its schema ships with the
  project (``docs/openlineage/EosEtlWindowRunFacet.json``).

Datasets are named by OpenLineage's Kafka convention (namespace
``kafka://<first bootstrap server>``, name = topic), the same as the Kafka
provider's conversion of ``kafka://`` Assets, so the Asset events and the
lineage events name the same datasets. Nothing is emitted unless the provider
has a transport configured (``[openlineage] transport``).
"""

from __future__ import annotations

from typing import ClassVar

import attr
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.generated.base import RunFacet
from openlineage.client.generated.input_statistics_input_dataset import InputStatisticsInputDatasetFacet
from openlineage.client.generated.output_statistics_output_dataset import OutputStatisticsOutputDatasetFacet

#: The facet's key in an event's ``run.facets``.
WINDOW_FACET = "eosEtlWindow"


@attr.define
class EosEtlWindowRunFacet(RunFacet):
    """The window a run published: input offset ranges, output offset ranges, counts, run id."""

    window: dict = attr.field(factory=dict)
    outputRanges: dict = attr.field(factory=dict)  # noqa: N815 (OpenLineage field names are camelCase)
    counts: dict = attr.field(factory=dict)
    publishRunId: str = attr.field(default="")  # noqa: N815

    # Offsets, counts and ids are not secrets: keep the provider's redaction off them.
    _additional_skip_redact: ClassVar[list[str]] = ["window", "outputRanges", "counts", "publishRunId"]

    @staticmethod
    def _get_schema() -> str:
        return "urn:eos-etl:openlineage:facets:EosEtlWindowRunFacet:1-0-0"


def kafka_namespace(bootstrap_servers: str) -> str:
    return f"kafka://{bootstrap_servers.split(',')[0].strip()}"


def window_lineage(plan: dict, summary: dict, extras: dict[str, dict], bootstrap_servers: str):
    """The ``OperatorLineage`` of a published window (``extras``: the asset events' extras per output)."""
    namespace = kafka_namespace(bootstrap_servers)
    counts = {k: summary[k] for k in ("records_read", "invoices", "shipments", "dead_letters", "transactions")}
    inputs = [InputDataset(namespace=namespace, name=plan["window"]["topic"], inputFacets={
        "inputStatistics": InputStatisticsInputDatasetFacet(rowCount=summary["records_read"])})]
    outputs = [OutputDataset(namespace=namespace, name=extra["topic"], outputFacets={
        "outputStatistics": OutputStatisticsOutputDatasetFacet(rowCount=summary[output])})
        for output, extra in extras.items()]
    facet = EosEtlWindowRunFacet(window=plan["window"], counts=counts, publishRunId=summary["run_id"],
                                 outputRanges={extra["topic"]: extra["ranges"] for extra in extras.values()})
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets={WINDOW_FACET: facet})
