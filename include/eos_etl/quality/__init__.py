"""Data-quality validation of one pipeline run with Great Expectations 1.x.

``validate_run(spark, settings, window, run_id=..., context_root=...)`` checks
what a read_committed reader sees for a window and returns a
:class:`QualityResult`; ``raise_for_failures(result)`` turns critical
failures into a :class:`QualityError`. What the checks judge of the pipeline's
outputs is the pipeline's own description, which ``settings`` gives
(:mod:`.checked_outputs`). Importing this package does not import
Great Expectations.
"""

from .results import (
    ExpectationOutcome,
    FailedExpectation,
    PartitionCounts,
    PartitionOffsets,
    QualityCounts,
    QualityError,
    QualityResult,
    SuiteResult,
    raise_for_failures,
)
from .validation import validate_run

__all__ = [
    "ExpectationOutcome",
    "FailedExpectation",
    "PartitionCounts",
    "PartitionOffsets",
    "QualityCounts",
    "QualityError",
    "QualityResult",
    "SuiteResult",
    "raise_for_failures",
    "validate_run",
]
