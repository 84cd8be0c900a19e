"""The Great Expectations project across windows: opened once per process, and a suite's definitions
(suite, validation definition, checkpoint) written only when they changed.

Broker-free: a real GE file project and the real reconciliation suite (pandas).
"""

from __future__ import annotations

import pandas as pd
import pytest

from eos_etl.quality import validation
from eos_etl.quality.suites import RECONCILIATION_COLUMNS, SuiteSpec, all_suites

NAME = "shop.reconciliation"
META = {"pipeline_group": "shop", "input_topic": "purchases"}


@pytest.fixture(autouse=True)
def no_open_projects():
    validation._PROJECTS.clear()
    yield
    validation._PROJECTS.clear()


def _reconciliation() -> SuiteSpec:
    return next(s for s in all_suites() if s.name == "reconciliation")


def _row(**changes) -> pd.DataFrame:
    row = {k: 0 for k in RECONCILIATION_COLUMNS} | {"offsets_match": True} | changes
    return pd.DataFrame({k: pd.Series([row[k]], dtype=dtype) for k, dtype in RECONCILIATION_COLUMNS.items()})


def test_the_project_is_opened_once_and_an_unchanged_suite_is_not_written_again(tmp_path):
    spec = _reconciliation()
    project = validation._project(tmp_path)
    first = validation._checkpoint(project, NAME, spec, META)
    assert first.run(batch_parameters={"dataframe": _row()}).success  # what was just written runs as it is
    assert validation._project(tmp_path) is project
    assert validation._checkpoint(project, NAME, spec, META) is first
    stored = sorted(p for p in (tmp_path / "gx").rglob("*") if p.is_file() and "uncommitted" not in p.parts)
    stamps = {p: p.stat().st_mtime_ns for p in stored}

    # The next window's process: nothing in memory; the stored checkpoint runs as it is, nothing is written.
    validation._PROJECTS.clear()
    later = validation._project(tmp_path)
    again = validation._checkpoint(later, NAME, spec, META)
    assert later is not project and again is not first and again.name == NAME
    assert {p: p.stat().st_mtime_ns for p in stored} == stamps
    passed = again.run(batch_parameters={"dataframe": _row()})
    assert passed.success
    failed = again.run(batch_parameters={"dataframe": _row(invoices=1)})
    assert not failed.success
    later.release_batches()

    # A changed definition is written anew.
    fewer = SuiteSpec(spec.name, spec.noun, spec.checks[:-1], engine=spec.engine)
    validation._checkpoint(later, NAME, fewer, META)
    suite = later.context.suites.get(NAME)
    assert len(suite.expectations) == len(spec.checks) - 1
    assert suite.meta["definition"] == validation._fingerprint(fewer, META, validation._actions())
    validation._PROJECTS.clear()
    fresh = validation._project(tmp_path)
    assert len(validation._checkpoint(fresh, NAME, fewer, META).validation_definitions[0].suite.expectations) == (
        len(spec.checks) - 1)
