"""The Great Expectations Data Docs site of a validation: built for what changed, its index bounded.

GE's ``UpdateDataDocsAction`` builds the site once per checkpoint. Each build
renders only the pages it is given, but then rebuilds the index page, and the
index builder opens and parses every validation result that has a page (GE
1.x ``DefaultSiteIndexBuilder``): four checkpoints per window made that four
parses of the project's whole history. Here the checkpoints carry no Data Docs
action; :func:`build_pages` renders the window's new validation pages and
their suites' pages in one ``build_data_docs(resource_identifiers=...)`` call,
with one index build, and :func:`bound_index` limits that index to the
newest :data:`INDEX_VALIDATIONS` results (``site_index_builder``'s
``validation_results_limit``) so it no longer grows with the history. Every
run's own pages stay linked from its run report.

:func:`forget_results` deletes a pruned validation result with its pages and the
directories they leave: GE's own ``remove_key`` means to remove emptied
directories but never does (its ``rrmdir`` tests a generator for emptiness), so
every pruned run would leave two directory chains behind, in the results store
and in the site, and every listing of either walks them all.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

#: Validation results the site's index page lists, newest first. The index build parses each
#: one listed (and only those), so this bounds its cost; older runs keep their pages, linked
#: from their run reports, until their results are pruned.
INDEX_VALIDATIONS = 100


def bound_index(context, limit: int = INDEX_VALIDATIONS) -> None:
    """Limit the index of every Data Docs site of ``context`` to the newest ``limit`` validation
    results (a limit already configured is kept), and leave pages of the window's own results
    unlimited: GE hands the index's limit to the validations section too, where it would skip
    rendering a new page once more than ``limit`` newer results exist. The profiling section is
    turned off unless configured."""
    sites = context.variables.data_docs_sites or {}
    changed = False
    for site in sites.values():
        index = site.setdefault("site_index_builder", {"class_name": "DefaultSiteIndexBuilder"})
        if index.get("validation_results_limit") is None:
            index["validation_results_limit"] = limit
            changed = True
        sections = site.setdefault("site_section_builders", {})
        validations = sections.setdefault("validations", {})
        if isinstance(validations, dict) and "validation_results_limit" not in validations:
            validations["validation_results_limit"] = None
            changed = True
        if "profiling" not in sections:
            # GE 1.x validations write no profiling results, yet the section lists the whole results
            # store at every build; the string is how GE's config says "no such section".
            sections["profiling"] = "None"
            changed = True
    if changed:
        context.variables.data_docs_sites = sites
        context.variables.save()


def build_pages(context, result_ids: list) -> tuple[dict, str | None]:
    """Render the pages of ``result_ids`` (GE ``ValidationResultIdentifier``) and of their suites,
    and the index, in one build. Returns ({result id: its page}, the index page); pages are local
    paths (file sites) or URLs, None for a site without the page."""
    suites = {key.expectation_suite_identifier.name: key.expectation_suite_identifier for key in result_ids}
    context.build_data_docs(resource_identifiers=[*result_ids, *suites.values()])
    return {key: page_location(context, key) for key in result_ids}, page_location(context, None)


def page_location(context, resource_identifier) -> str | None:
    """The page of ``resource_identifier`` (None: the index) on the first site that has it."""
    try:
        urls = context.get_docs_sites_urls(resource_identifier=resource_identifier)
    except Exception:  # noqa: BLE001 - a missing page link is not worth failing a validation
        return None
    for site in urls or []:
        url = site.get("site_url")
        if url and url.startswith("file://"):
            return unquote(urlparse(url).path)
        if url:
            return url
    return None


def forget_results(context, keys) -> None:
    """Delete validation results ``keys`` (``ValidationResultIdentifier``), their pages on every
    local Data Docs site, and the directories that leaves empty."""
    results = context.validation_results_store  # a property that costs milliseconds: read it once
    store = Path(results.store_backend.full_base_directory)
    sites = []
    for site in (context.variables.data_docs_sites or {}).values():
        backend = site.get("store_backend") or {}
        if backend.get("class_name") == "TupleFilesystemStoreBackend" and backend.get("base_directory"):
            sites.append(Path(context.root_directory, backend["base_directory"], "validations"))
    for key in keys:
        results.remove_key(key)
        # GE's layout: <suite name's dotted parts>/<run name>/<run time>/<batch id>(.json|.html)
        *dirs, name = key.to_tuple()
        _remove_empty_dirs(store, dirs)
        for pages in sites:
            pages.joinpath(*dirs, f"{name}.html").unlink(missing_ok=True)
            _remove_empty_dirs(pages, dirs)


def _remove_empty_dirs(base: Path, dirs: list[str]) -> None:
    """``base/dirs...`` and its parents below ``base``, deepest first, as long as they are empty."""
    for depth in range(len(dirs), 0, -1):
        try:
            base.joinpath(*dirs[:depth]).rmdir()
        except OSError:  # not empty (or already gone): its parents are not empty either
            return


def local_index(location: str | None) -> Path | None:
    """The index page as a local file, if the site is one."""
    return Path(location) if location and not location.startswith(("http:", "https:")) else None
