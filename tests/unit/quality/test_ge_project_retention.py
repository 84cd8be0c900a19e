"""The Great Expectations project keeps a bounded number of validation results per suite.

Broker-free: a real GE file project and real pandas checkpoints with the Data Docs action.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd

from eos_etl.quality.ge_project import open_context, prune_validation_results


def _checkpoint(context, name: str):
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.checkpoint import UpdateDataDocsAction

    suite = context.suites.add(gx.ExpectationSuite(name=name, expectations=[gxe.ExpectColumnToExist(column="a")]))
    asset = context.data_sources.add_pandas(name=f"{name}-source").add_dataframe_asset(name=name)
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=name, data=asset.add_batch_definition_whole_dataframe("whole"), suite=suite))
    return context.checkpoints.add(gx.Checkpoint(name=name, validation_definitions=[definition],
                                                 actions=[UpdateDataDocsAction(name="docs")]))


def _pages(root, suite: str) -> list:
    return sorted((root / "gx" / "uncommitted" / "data_docs" / "local_site" / "validations" / suite).rglob("*.html"))


def test_prune_keeps_the_newest_results_of_the_named_suites_only(tmp_path):
    from great_expectations.core.run_identifier import RunIdentifier

    context = open_context(tmp_path)
    mine, other = _checkpoint(context, "mine"), _checkpoint(context, "other")
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    frame = pd.DataFrame({"a": [1, 2]})
    for hour in range(4):
        run_time = start + timedelta(hours=hour)
        for checkpoint in (mine, other):
            checkpoint.run(batch_parameters={"dataframe": frame},
                           run_id=RunIdentifier(run_name=f"run-{hour}", run_time=run_time))
    assert len(_pages(tmp_path, "mine")) == 4

    assert prune_validation_results(context, {"mine"}, keep=2) == 2

    kept = {(k.expectation_suite_identifier.name, k.run_id.run_name)
            for k in context.validation_results_store.list_keys()}
    assert kept == {("mine", "run-2"), ("mine", "run-3"), *(("other", f"run-{h}") for h in range(4))}
    # GE drops the pages of deleted results at its next Data Docs build.
    mine.run(batch_parameters={"dataframe": frame}, run_id=RunIdentifier(run_name="run-4",
                                                                         run_time=start + timedelta(hours=4)))
    assert [p.parent.parent.name for p in _pages(tmp_path, "mine")] == ["run-2", "run-3", "run-4"]
    assert len(_pages(tmp_path, "other")) == 4
    assert prune_validation_results(context, {"mine"}, keep=3) == 0
