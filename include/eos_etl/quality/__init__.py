"""Data-quality validation of one pipeline run with Great Expectations 1.x.

``validate_window(spark, settings, window, run_id=..., context_root=...)`` validates what a
read_committed reader sees of a window with GE on the window's own data (:mod:`.window_checkpoint`)
and returns a :class:`WindowValidation`; ``raise_for_failures(result)`` turns critical failures into a
:class:`QualityError`. What the rules judge of the pipeline's outputs is the pipeline's own
description, which ``settings`` gives (:mod:`.checked_outputs`). Importing this package does not import
Great Expectations.
"""

from .results import QualityError, RuleResult, WindowValidation, raise_for_failures
from .window_checkpoint import validate_window

__all__ = ["QualityError", "RuleResult", "WindowValidation", "raise_for_failures", "validate_window"]
