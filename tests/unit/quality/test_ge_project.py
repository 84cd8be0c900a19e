"""The Great Expectations project across windows: opened once per process, and a suite's definitions
(suite, validation definition, checkpoint) written only when they changed.

Broker-free: a real GE file project and the real reconciliation suite (pandas).
"""

from __future__ import annotations

import pandas as pd
import pytest

from eos_etl.quality import ge_project
from eos_etl.quality.suites import RECONCILIATION_COLUMNS, SuiteSpec, all_suites
from eos_etl.shop.output_checks import SHOP_OUTPUTS

NAME = "shop.reconciliation"
META = {"pipeline_group": "shop", "input_topic": "purchases"}


@pytest.fixture(autouse=True)
def no_open_projects():
    ge_project._PROJECTS.clear()
    yield
    ge_project._PROJECTS.clear()


def _reconciliation() -> SuiteSpec:
    return next(s for s in all_suites(SHOP_OUTPUTS) if s.name == "reconciliation")


def _row(**changes) -> pd.DataFrame:
    row = {k: 0 for k in RECONCILIATION_COLUMNS} | {"offsets_match": True} | changes
    return pd.DataFrame({k: pd.Series([row[k]], dtype=dtype) for k, dtype in RECONCILIATION_COLUMNS.items()})


def test_the_project_is_opened_once_and_an_unchanged_suite_is_not_written_again(tmp_path):
    spec = _reconciliation()
    project = ge_project._project(tmp_path)
    first = ge_project._checkpoint(project, NAME, spec, META)
    assert first.run(batch_parameters={"dataframe": _row()}).success  # what was just written runs as it is
    assert ge_project._project(tmp_path) is project
    assert ge_project._checkpoint(project, NAME, spec, META) is first
    stored = sorted(p for p in (tmp_path / "gx").rglob("*") if p.is_file() and "uncommitted" not in p.parts)
    stamps = {p: p.stat().st_mtime_ns for p in stored}

    # The next window's process: nothing in memory; the stored checkpoint runs as it is, nothing is written.
    ge_project._PROJECTS.clear()
    later = ge_project._project(tmp_path)
    again = ge_project._checkpoint(later, NAME, spec, META)
    assert later is not project and again is not first and again.name == NAME
    assert {p: p.stat().st_mtime_ns for p in stored} == stamps
    passed = again.run(batch_parameters={"dataframe": _row()})
    assert passed.success
    failed = again.run(batch_parameters={"dataframe": _row(invoices=1)})
    assert not failed.success
    later.release_batches()

    # A changed definition is written anew.
    fewer = SuiteSpec(spec.name, spec.noun, spec.checks[:-1], engine=spec.engine)
    ge_project._checkpoint(later, NAME, fewer, META)
    suite = later.context.suites.get(NAME)
    assert len(suite.expectations) == len(spec.checks) - 1
    assert suite.meta["definition"] == ge_project._fingerprint(fewer, META, ge_project._actions())
    ge_project._PROJECTS.clear()
    fresh = ge_project._project(tmp_path)
    assert len(ge_project._checkpoint(fresh, NAME, fewer, META).validation_definitions[0].suite.expectations) == (
        len(spec.checks) - 1)
