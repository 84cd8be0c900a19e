"""The shop pipeline: the generic engine run with the shop's settings and transform."""

from __future__ import annotations

from ..engine.pipeline import PipelineConfig
from ..engine.planning.preflight import Preflight
from ..engine.tasks.runner import RunSummary, run_window
from ..engine.window import Window
from .settings import ShopSettings


def summary_dict(settings: ShopSettings, summary: RunSummary) -> dict:
    """The run summary with the shop's names for the output counts."""
    data = summary.to_dict()
    outputs = summary.outputs()
    data["invoices"] = outputs.get(settings.topics.invoices, 0)
    data["shipments"] = outputs.get(settings.topics.shipments, 0)
    data["dead_letters"] = outputs.get(settings.topics.dead_letters, 0)
    return data


def run_shop_window(spark, settings: ShopSettings, window: Window, *, check: bool = True,
                    pipeline: PipelineConfig | None = None, preflighted: Preflight | None = None,
                    **pipeline_overrides) -> RunSummary:
    """``pipeline``: the run's configuration when the caller built it already (and ``preflighted``:
    the :func:`~eos_etl.engine.planning.preflight.preflight` it ran with it); else built here with
    ``pipeline_overrides``."""
    if pipeline is None:
        pipeline = settings.pipeline(**pipeline_overrides)
    elif pipeline_overrides:
        raise ValueError("pass the run's pipeline configuration or overrides to build one, not both")
    return run_window(spark, pipeline, window, settings.transform(), check=check, preflighted=preflighted)
