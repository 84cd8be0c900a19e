"""The actions of a window's Checkpoint: its Data Docs update, and its data-quality report.

:class:`WindowDataDocsAction` is GE's ``UpdateDataDocsAction`` building the run's pages in one build: GE's
builds once per validation result, and every build renders the site's index again, which parses each
result it lists (up to :data:`eos_etl.quality.data_docs_site.INDEX_VALIDATIONS`): six builds per run for
the window's six suites, where one does.

:class:`WindowReportAction` runs after it: from the Checkpoint's result
it writes ``<reports_dir>/<run name>.json``, each rule's outcome as GE reported it (:class:`RuleResult`:
severity, observed value, unexpected count and percent, the unexpected rows with their source position)
with the Data Docs page of its validation result, and the run's verdict (a critical failure fails it, a
warning does not). The file is what GE said, nothing computed beside it: the run report reads it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlparse

from great_expectations.checkpoint.actions import UpdateDataDocsAction, ValidationAction
from great_expectations.data_context.types.resource_identifiers import ExpectationSuiteIdentifier

from .ge_project import VALIDATION_RESULTS_KEPT
from .results import RuleResult, passed

REPORT_ACTION = "eos_etl_window_report"
DATA_DOCS_ACTION = "eos_etl_update_data_docs"


def short_suite(name: str) -> str:
    """``<group>.invoices.records`` -> ``invoices.records``."""
    return name.split(".", 1)[1]


def rules_of(checkpoint_result) -> list[RuleResult]:
    """Every rule's outcome in a Checkpoint's result."""
    out = []
    for key, vr in checkpoint_result.run_results.items():
        suite = short_suite(key.expectation_suite_identifier.name)
        for r in vr.results:
            cfg, res = r.expectation_config, r.result or {}
            rows = tuple(dict(row) for row in res.get("partial_unexpected_index_list") or ())
            out.append(RuleResult(
                suite=suite, type=cfg.type, kwargs={k: v for k, v in cfg.kwargs.items() if k != "batch_id"},
                severity=str(getattr(cfg.severity, "value", cfg.severity)), success=bool(r.success),
                observed_value=res.get("observed_value"), unexpected_count=res.get("unexpected_count"),
                unexpected_percent=res.get("unexpected_percent"), element_count=res.get("element_count"),
                unexpected_rows=rows,
                notes=cfg.notes if isinstance(cfg.notes, str) else "\n".join(cfg.notes or []),
                added_by_settings=(cfg.meta or {}).get("added_by") == "settings",
                error=_exception_message(r.exception_info)))
    return out


def _exception_message(info) -> str | None:
    """GE's ``exception_info`` (flat, or keyed by metric) as one message."""
    if not info:
        return None
    if isinstance(info, dict):
        if info.get("raised_exception"):
            return str(info.get("exception_message") or "unknown error")
        for value in info.values():
            msg = _exception_message(value) if isinstance(value, dict) else None
            if msg:
                return msg
    return None


def _local(url: str | None) -> str | None:
    """A file site's page as its path; any other site's URL as it is."""
    return unquote(urlparse(url).path) if url and url.startswith("file://") else url


class WindowDataDocsAction(UpdateDataDocsAction):
    """The run's validation pages and their suites' pages, and the index, in one Data Docs build."""

    type: Literal["eos_etl_update_data_docs"] = DATA_DOCS_ACTION  # type: ignore[assignment]

    def run(self, checkpoint_result, action_context=None) -> dict:
        keys = list(checkpoint_result.run_results)
        suites = {ExpectationSuiteIdentifier(name=vr.suite_name) for vr in checkpoint_result.run_results.values()}
        self._build_data_docs(site_names=self.site_names, resource_identifiers=[*keys, *suites])
        return {key: {site["site_name"]: site["site_url"]
                      for site in self._get_docs_sites_urls(resource_identifier=key, site_names=self.site_names)}
                for key in keys}


class WindowReportAction(ValidationAction):
    """Writes the run's rules and their Data Docs pages to ``<reports_dir>/<run name>.json`` (a directory per
    pipeline: two pipelines' runs share names), keeping the newest ``kept`` reports: no file per run forever."""

    type: Literal["eos_etl_window_report"] = REPORT_ACTION
    reports_dir: str
    kept: int = VALIDATION_RESULTS_KEPT

    def run(self, checkpoint_result, action_context=None) -> dict:
        pages: dict[str, str | None] = {}
        for result in (action_context.filter_results(class_=UpdateDataDocsAction) if action_context else []):
            for key, sites in result.items():
                pages[short_suite(key.expectation_suite_identifier.name)] = _local(next(iter(sites.values()), None))
        rules = rules_of(checkpoint_result)
        path = Path(self.reports_dir) / f"{checkpoint_result.run_id.run_name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        report = {"run_name": checkpoint_result.run_id.run_name, "success": passed(rules), "pages": pages,
                  "rules": [asdict(r) for r in rules]}
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(report, default=str, indent=1))
        os.replace(tmp, path)  # whole or not at all: a reader never sees half a report
        older = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[self.kept:]
        for old in older:
            old.unlink(missing_ok=True)
        return {"report": str(path)}
