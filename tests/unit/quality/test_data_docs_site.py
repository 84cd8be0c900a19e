"""Data Docs are built for what changed: the window's pages and a bounded index, never the history.

Broker-free: a real Great Expectations file project, real pandas checkpoints and GE's own site builder.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd

from eos_etl.quality import data_docs_site
from eos_etl.quality.ge_project import open_context, prune_validation_results

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
FRAME = pd.DataFrame({"a": [1, 2]})


def _checkpoints(context, names):
    """One checkpoint per suite, without a Data Docs action, as validation runs them."""
    import great_expectations as gx
    import great_expectations.expectations as gxe

    source = context.data_sources.add_pandas(name="frames")
    out = {}
    for name in names:
        suite = context.suites.add(gx.ExpectationSuite(name=name, expectations=[gxe.ExpectColumnToExist(column="a")]))
        batch = source.add_dataframe_asset(name=name).add_batch_definition_whole_dataframe("whole")
        definition = context.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch, suite=suite))
        out[name] = context.checkpoints.add(gx.Checkpoint(name=name, validation_definitions=[definition], actions=[]))
    return out


def _window(checkpoints, hour: int) -> list:
    """Run every checkpoint for one window; the new validation result ids."""
    from great_expectations.core.run_identifier import RunIdentifier

    run = RunIdentifier(run_name=f"run-{hour}", run_time=START + timedelta(hours=hour))
    return [key for cp in checkpoints.values()
            for key in cp.run(batch_parameters={"dataframe": FRAME}, run_id=run).run_results]


def _site(root: Path) -> Path:
    return root / "gx" / "uncommitted" / "data_docs" / "local_site"


def _index_runs(root: Path) -> list[str]:
    html = (_site(root) / "index.html").read_text()
    return sorted({part.split("/")[0] for part in html.split("validations/mine/")[1:]})


def test_the_index_is_bounded_and_only_the_windows_pages_are_rendered(tmp_path, monkeypatch):
    import great_expectations as gx
    from great_expectations.data_context.data_context.abstract_data_context import AbstractDataContext

    data_docs_site.bound_index(gx.get_context(mode="file", project_root_dir=str(tmp_path)), limit=2)
    context = open_context(tmp_path)  # keeps a limit the project already has
    site = context.variables.data_docs_sites["local_site"]
    assert site["site_index_builder"]["validation_results_limit"] == 2
    checkpoints = _checkpoints(context, ["mine"])
    first = _window(checkpoints, 0)
    pages, index = data_docs_site.build_pages(context, first)
    first_page = Path(pages[first[0]])
    assert first_page.is_file() and "run-0" in first_page.parts and Path(index) == _site(tmp_path) / "index.html"
    assert (_site(tmp_path) / "expectations" / "mine.html").is_file()
    rendered_at = first_page.stat().st_mtime_ns

    for hour in range(1, 4):
        pages, _ = data_docs_site.build_pages(context, _window(checkpoints, hour))
        assert all(Path(p).is_file() and f"run-{hour}" in Path(p).parts for p in pages.values())

    # Each build parses only the results its index lists, however many are stored.
    parsed = []
    real = AbstractDataContext.get_validation_result
    monkeypatch.setattr(AbstractDataContext, "get_validation_result",
                        lambda self, *a, **kw: parsed.append(kw.get("run_id")) or real(self, *a, **kw))
    data_docs_site.build_pages(context, _window(checkpoints, 4))
    assert len(context.validation_results_store.list_keys()) == 5 and len(parsed) == 2
    assert _index_runs(tmp_path) == ["run-3", "run-4"]
    # Older runs keep their pages (linked from their run reports) and are not rendered again.
    assert first_page.is_file() and first_page.stat().st_mtime_ns == rendered_at
    assert len(list((_site(tmp_path) / "validations" / "mine").rglob("*.html"))) == 5


def test_a_late_result_gets_its_page_past_the_index_limit_and_pruned_pages_go(tmp_path):
    import great_expectations as gx

    data_docs_site.bound_index(gx.get_context(mode="file", project_root_dir=str(tmp_path)), limit=2)
    context = open_context(tmp_path)
    checkpoints = _checkpoints(context, ["mine"])
    for hour in range(11, 14):
        data_docs_site.build_pages(context, _window(checkpoints, hour))
    # A backfill's result dated before the index's newest two still gets its page.
    late = _window(checkpoints, 1)
    pages, _ = data_docs_site.build_pages(context, late)
    assert Path(pages[late[0]]).is_file() and "run-1" in Path(pages[late[0]]).parts
    assert _index_runs(tmp_path) == ["run-12", "run-13"]

    assert prune_validation_results(context, {"mine"}, keep=2) == 2
    # The pruned results went with their pages and every directory they had (GE's remove_key leaves them).
    for base, suffix in ((tmp_path / "gx" / "uncommitted" / "validations" / "mine", "*.json"),
                         (_site(tmp_path) / "validations" / "mine", "*.html")):
        assert sorted(p.name for p in base.iterdir()) == ["run-12", "run-13"]
        assert len(list(base.rglob(suffix))) == 2
    data_docs_site.build_pages(context, _window(checkpoints, 14))
    left = sorted(p.parent.parent.name for p in (_site(tmp_path) / "validations" / "mine").rglob("*.html"))
    assert left == ["run-12", "run-13", "run-14"]


def test_a_projects_own_index_limit_is_kept(tmp_path):
    import great_expectations as gx

    context = gx.get_context(mode="file", project_root_dir=str(tmp_path))
    data_docs_site.bound_index(context, limit=7)
    data_docs_site.bound_index(context)
    reopened = open_context(tmp_path)
    site = reopened.variables.data_docs_sites["local_site"]
    assert site["site_index_builder"]["validation_results_limit"] == 7
    assert site["site_section_builders"]["validations"]["validation_results_limit"] is None
    assert site["site_section_builders"]["profiling"] == "None"  # GE's word for no such section
    fresh = open_context(tmp_path / "fresh")
    limit = fresh.variables.data_docs_sites["local_site"]["site_index_builder"]["validation_results_limit"]
    assert limit == data_docs_site.INDEX_VALIDATIONS
