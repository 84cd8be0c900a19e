"""A Great Expectations data source over the Spark session's temporary views: one asset per view.

Why not GE's own Spark data source: its only asset is the dataframe asset, whose DataFrame comes in the
batch parameters, and a Checkpoint hands the same batch parameters to every validation definition it
runs. A run's Checkpoint validates several frames (invoices, shipments, dead letters, inputs,
positions, lineage), so each asset here names the view that holds its frame and reads it when GE asks
for its batch: the Checkpoint needs no batch parameters, and one Checkpoint validates them all.

Everything else is GE's: the Spark execution engine (a view's batch is the DataFrame
``spark.table(view)``, so GE bundles its metrics as on any DataFrame), batch definitions, validation
definitions, Checkpoints, stores and Data Docs. The data source is stored in the project's
configuration as type ``spark_views``; importing this module registers the type, so a project that
holds one opens only after the import.

The views are the session's (``DataFrame.createOrReplaceTempView``): a Spark Connect client's live in
its own server-side session, so two validations through one Connect server do not see each other's.
The session is the validation's own, given by :func:`session_of` around the Checkpoint's run, never
one GE would make: GE's Spark engine, given none, starts a classic session (a local JVM) even in a
Spark Connect client.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar, List, Literal, Type

from great_expectations.core.batch import LegacyBatchDefinition
from great_expectations.core.batch_spec import RuntimeDataBatchSpec
from great_expectations.core.id_dict import IDDict
from great_expectations.datasource.fluent.batch_request import BatchRequest
from great_expectations.datasource.fluent.constants import _DATA_CONNECTOR_NAME
from great_expectations.datasource.fluent.interfaces import Batch, DataAsset
from great_expectations.datasource.fluent.spark_datasource import _SparkDatasource

from ..errors import ConfigurationError

#: The one batch definition of a view asset: the whole view.
WHOLE_VIEW = "whole_view"
# The session whose views are validated now (session_of); GE's objects are rebuilt from its stores
# between calls, so the session cannot live on them.
_SESSION: list = []


@contextmanager
def session_of(spark) -> Iterator[None]:
    """Within: view assets read ``spark``'s views, and GE's Spark engine runs on ``spark``."""
    _SESSION.append(spark)
    try:
        yield
    finally:
        _SESSION.pop()


class SparkViewAsset(DataAsset):
    """A temporary view of the active Spark session, validated whole."""

    type: Literal["spark_view"] = "spark_view"
    view: str

    class Config:
        extra = "forbid"

    def test_connection(self) -> None:  # the view exists only while a validation runs
        return None

    def get_batch_parameters_keys(self, partitioner=None) -> tuple[str, ...]:
        return ()

    def build_batch_request(self, options=None, batch_slice=None, partitioner=None) -> BatchRequest:
        if options or batch_slice is not None or partitioner is not None:
            raise ConfigurationError(f"the view asset {self.name!r} takes no batch parameters, slice or partitioner")
        return BatchRequest(datasource_name=self.datasource.name, data_asset_name=self.name, options={})

    def _validate_batch_request(self, batch_request: BatchRequest) -> None:
        if (batch_request.datasource_name, batch_request.data_asset_name) != (self.datasource.name, self.name):
            raise ConfigurationError(f"batch request for {batch_request.data_asset_name!r} given to {self.name!r}")

    def get_batch_identifiers_list(self, batch_request: BatchRequest) -> List[dict]:
        return [IDDict({"view": self.view})]

    def get_batch(self, batch_request: BatchRequest) -> Batch:
        self._validate_batch_request(batch_request)
        spec = RuntimeDataBatchSpec(batch_data=_session().table(self.view))
        data, markers = self.datasource.get_execution_engine().get_batch_data_and_markers(batch_spec=spec)
        legacy = LegacyBatchDefinition(datasource_name=self.datasource.name, data_connector_name=_DATA_CONNECTOR_NAME,
                                       data_asset_name=self.name, batch_identifiers=IDDict({"view": self.view}),
                                       batch_spec_passthrough=None)
        return Batch(datasource=self.datasource, data_asset=self, batch_request=batch_request, data=data,
                     metadata=self._get_batch_metadata_from_batch_request(batch_request=batch_request),
                     batch_markers=markers, batch_spec=spec, batch_definition=legacy)

    def whole_view(self):
        """The asset's batch definition (added on first use)."""
        for definition in self.batch_definitions:
            if definition.name == WHOLE_VIEW:
                return definition
        return self.add_batch_definition(name=WHOLE_VIEW, partitioner=None)


class SparkViewsDatasource(_SparkDatasource):
    """Assets over the active Spark session's temporary views (see the module docstring)."""

    asset_types: ClassVar[List[Type[DataAsset]]] = [SparkViewAsset]
    type: Literal["spark_views"] = "spark_views"
    assets: List[SparkViewAsset] = []

    def get_execution_engine(self):
        session = _session()
        if self._spark is not session:  # the engine of this validation's session, not one GE would start
            self._spark, self._execution_engine = session, None
        return super().get_execution_engine()

    def add_view_asset(self, name: str, view: str) -> SparkViewAsset:
        return self._add_asset(asset=SparkViewAsset(name=name, view=view))

    def view_asset(self, name: str, view: str) -> SparkViewAsset:
        """The asset ``name`` over ``view``, added or re-pointed."""
        try:
            asset = self.get_asset(name)  # GE's lookup ties a loaded asset to this data source
        except LookupError:
            return self.add_view_asset(name, view)
        if asset.view != view:
            asset.view = view
            self._save_context_project_config()
        return asset


def _session():
    if not _SESSION:
        raise ConfigurationError("a view asset is read only within spark_views.session_of(spark)")
    return _SESSION[-1]
