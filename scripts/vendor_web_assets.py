"""Vendor the browser libraries the reports plugin serves, from the npm registry.

Run once when a version changes: ``python scripts/vendor_web_assets.py``. The
files are committed under ``include/web/static/vendor/<package>@<version>/``
(npm's own layout inside the package, plus its licence and package.json), so
nothing is loaded from the internet when a page is viewed.

The first group are exactly the libraries Great Expectations 1.x's Data Docs
pages load from CDNs (see ``eos_etl.reports.data_docs.CDN_TO_VENDOR``);
Chart.js draws the trends page.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "include" / "web" / "static" / "vendor"

# package@version -> files inside the npm tarball (under package/); licence and package.json are added.
PACKAGES: dict[str, list[str]] = {
    "bootstrap@4.3.1": ["dist/css/bootstrap.min.css", "dist/js/bootstrap.min.js"],
    "@forevolve/bootstrap-dark@1.1.0": ["dist/css/bootstrap-prefers-dark.css"],
    "bootstrap-datepicker@1.9.0": ["dist/css/bootstrap-datepicker.min.css", "dist/js/bootstrap-datepicker.min.js"],
    "@fortawesome/fontawesome-free@6.6.0": ["css/all.min.css", "webfonts/"],
    "popper.js@1.12.9": ["dist/umd/popper.min.js"],
    "jquery@3.7.1": ["dist/jquery.min.js"],
    "bootstrap-table@1.19.1": ["dist/bootstrap-table.min.css", "dist/bootstrap-table.min.js",
                               "dist/extensions/filter-control/bootstrap-table-filter-control.min.js"],
    "bootstrap-table@1.19.0": ["dist/extensions/filter-control/bootstrap-table-filter-control.css",
                               "dist/extensions/filter-control/bootstrap-table-filter-control.min.css"],
    "vega@5.33.1": ["build/vega.min.js"],
    "vega-lite@5.23.0": ["build/vega-lite.min.js"],
    "vega-embed@6.29.0": ["build/vega-embed.min.js"],
    "chart.js@4.6.1": ["dist/chart.umd.min.js"],
}


def vendor_dir(spec: str) -> Path:
    """``@scope/name@1.0`` -> vendor/@scope/name@1.0 (npm's own naming, so the path says what it is)."""
    return VENDOR / spec


def _wanted(member: str, files: list[str]) -> bool:
    rel = member.removeprefix("package/")
    name = rel.rsplit("/", 1)[-1].lower()
    if "/" not in rel and (name.startswith(("license", "licence", "copying")) or name == "package.json"):
        return True
    return any(rel == f or (f.endswith("/") and rel.startswith(f)) for f in files)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        for spec, files in PACKAGES.items():
            out = subprocess.run(["npm", "pack", spec, "--silent"], cwd=tmp, check=True, capture_output=True,
                                 text=True).stdout.strip().splitlines()[-1]
            target = vendor_dir(spec)
            shutil.rmtree(target, ignore_errors=True)
            with tarfile.open(Path(tmp) / out) as tar:
                members = [m for m in tar.getmembers() if m.isfile() and _wanted(m.name, files)]
                for m in members:
                    dest = target / m.name.removeprefix("package/")
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    with tar.extractfile(m) as src:
                        dest.write_bytes(src.read())
            missing = [f for f in files if not (target / f).exists()]
            if missing:
                print(f"{spec}: missing {missing}", file=sys.stderr)
                return 1
            print(f"{spec}: {len(members)} files -> {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
