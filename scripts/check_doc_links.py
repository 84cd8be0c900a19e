"""Check the relative links of README.md and docs/*.md: every target file exists, every #anchor is a heading.

    python3 scripts/check_doc_links.py      # prints how many links it checked; exit 1 on a broken one

Web links (http, https, mailto) are not followed.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(md: Path) -> set[str]:
    return {slug(h) for h in HEADING.findall(FENCE.sub("", md.read_text()))}


def _name(md: Path) -> str:
    return str(md.relative_to(ROOT)) if md.is_relative_to(ROOT) else str(md)


def check(files: list[Path]) -> tuple[int, list[str]]:
    checked, broken = 0, []
    for md in files:
        for target in LINK.findall(md.read_text()):
            if re.match(r"(https?|mailto):", target):
                continue
            checked += 1
            path, _, anchor = target.partition("#")
            dest = (md.parent / path).resolve() if path else md
            if not dest.exists():
                broken.append(f"{_name(md)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{_name(md)}: {target} (no such heading)")
    return checked, broken


def main() -> int:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    checked, broken = check(files)
    for line in broken:
        print(f"broken: {line}")
    print(f"{checked} relative links in {len(files)} files, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
