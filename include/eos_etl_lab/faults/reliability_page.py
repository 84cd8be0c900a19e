"""docs/reliability.md: its sections, and the Jinja2 templates every soak renders its section from.

Each soak (single-node, cluster, partition) owns one section of the page, between markers,
and replaces only its own (:func:`write_section`). The sections are rendered from
``templates/*.md.j2`` with the data of the soak's trials; values from the runs reach the page
through the templates' autoescaping, so markup in an error message or a command is shown,
never rendered.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from ..bench.machine import cpu_model, mem_total_gib
from .lab import TrialResult

TEMPLATES = Path(__file__).parent / "templates"
SINGLE_NODE_SECTION = "single-node soak"
CLUSTER_SECTION = "cluster soak"
PARTITION_SECTION = "partition soak"


def cell(text) -> Markup:
    """Text for a Markdown table cell: one line, no column separator, ``&`` and ``<`` escaped.

    Those two are all it takes for no tag or entity to start in a cell; quotes and ``>`` (as in
    "pid 1903 -> 2822") stay as they are, so the page's source stays as readable as it renders.
    """
    line = " ".join(str(text).split()).replace("|", "/")
    return Markup(line.replace("&", "&amp;").replace("<", "&lt;"))


def seconds(value: float | None) -> str:
    """A duration for a table cell: whole seconds, or ``-`` when it was not measured."""
    return "-" if value is None else f"{value:.0f} s"


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)),
                      autoescape=select_autoescape(default_for_string=True, default=True),
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["cell"] = cell
    env.filters["seconds"] = seconds
    return env


_ENV = _environment()


def render(template: str, **context) -> str:
    return _ENV.get_template(template).render(**context)


def machine() -> str:
    """The machine a soak ran on, in one line (CPU, cores, RAM, kernel, Python)."""
    ram = mem_total_gib()
    mem = f", {ram:.0f} GiB RAM" if ram is not None else ""
    return (f"{cpu_model()}, {os.cpu_count()} cores{mem}, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def verdict_cells(r: TrialResult) -> tuple[str, str]:
    """A trial's violations and detail, as the trial tables show them."""
    v = ", ".join(f"{k}={n}" for k, n in r.violations.items()) or "0"
    if not r.lso_settled:
        v += ", hanging transaction"
    detail = (r.error and f"NOT CARRIED OUT: {r.error}") or r.detail
    return v, detail


def trial_rows(results: list[TrialResult]) -> list[dict]:
    """Each trial with its violations and detail cells, for a trials table."""
    rows = []
    for r in results:
        violations, detail = verdict_cells(r)
        rows.append({"r": r, "violations": violations, "detail": detail})
    return rows


def _markers(section: str) -> tuple[str, str]:
    return f"<!-- {section}: begin (generated) -->", f"<!-- {section}: end -->"


def write_section(out: Path, section: str, text: str) -> None:
    """Put ``text`` between ``section``'s markers in ``out``, leaving every other section as it is.

    A file written before the markers existed is the single-node soak's table: it is kept as that section.
    Sections appear in the order they were first written.
    """
    begin, end = _markers(section)
    block = f"{begin}\n{text.rstrip()}\n{end}\n"
    old = out.read_text() if out.is_file() else ""
    if old and "<!-- " not in old:
        legacy_begin, legacy_end = _markers(SINGLE_NODE_SECTION)
        old = f"{legacy_begin}\n{old.rstrip()}\n{legacy_end}\n"
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        new = (old.rstrip() + "\n\n" if old else "") + block
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(new)
