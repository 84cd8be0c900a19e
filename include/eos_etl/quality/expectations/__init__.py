"""The project's own Great Expectations expectations, for what a window's outputs must satisfy and GE has
no native form of: GE 1.x classes, each with its own metric, computed by GE's Spark execution engine.

Importing this package registers them with Great Expectations (its registry maps an expectation's
``type`` in a stored suite to its class, so a suite that names one loads only after this import).
Every metric is an aggregate GE bundles with the native expectations' into the same ``df.agg`` of its
asset (a table aggregate, or a column-map condition counted there): a clean window pays no extra job.

* :mod:`.lineage`: outputs one per committed input and none from another record (count and
  fingerprint of source positions per role of the lineage asset), every primary record paired with its
  companion (a fingerprint of what a pair shares);
* :mod:`.record_values`: a value matches its schema, a record's id is the one its lineage gives, a
  total is the exact product of its factors (column maps: their unexpected rows come with their index
  columns at SUMMARY, as a native expectation's).
"""

from .lineage import ExpectOutputsToBeOnePerInput, ExpectRecordsToBePaired
from .record_values import (
    ExpectColumnValuesToBeLineageIds,
    ExpectColumnValuesToEqualProduct,
    ExpectColumnValuesToMatchValueSchema,
)

__all__ = [
    "ExpectColumnValuesToBeLineageIds",
    "ExpectColumnValuesToEqualProduct",
    "ExpectColumnValuesToMatchValueSchema",
    "ExpectOutputsToBeOnePerInput",
    "ExpectRecordsToBePaired",
]
