"""The window Checkpoint's report action (eos_etl.quality.checkpoint_actions.WindowReportAction), without a
broker or Spark: what it writes for a Checkpoint's result, and that a pipeline's reports do not pile up."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

from eos_etl.quality.checkpoint_actions import WindowReportAction


def _result(run_name: str):
    # The two attributes the action reads of GE's CheckpointResult: no validation ran, so no rule.
    return SimpleNamespace(run_results={}, run_id=SimpleNamespace(run_name=run_name))


def test_the_report_is_written_whole_and_only_the_newest_are_kept(tmp_path):
    action = WindowReportAction(name="window_report", reports_dir=str(tmp_path / "shop"), kept=3)
    for i in range(5):
        out = action.run(_result(f"run-{i}"))
        os.utime(out["report"], (1_000_000 + i, 1_000_000 + i))  # written in this order
    assert sorted(p.name for p in (tmp_path / "shop").iterdir()) == ["run-2.json", "run-3.json", "run-4.json"]
    report = json.loads((tmp_path / "shop" / "run-4.json").read_text())
    assert report == {"run_name": "run-4", "success": True, "pages": {}, "rules": []}
