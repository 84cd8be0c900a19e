"""Great Expectations Data Docs, served inside the Airflow UI and rendered offline.

GE 1.x writes its Data Docs site under ``var/gx/gx/uncommitted/data_docs/local_site``
(the file-mode context ``validate`` opens at ``var/gx``). Its pages load
Bootstrap, jQuery, Font Awesome, Vega and friends from public CDNs; the
exact versions are vendored under ``include/web/static/vendor`` (see
``scripts/vendor_web_assets.py``) and :func:`rewrite_cdn_urls` points every
such URL at the plugin's static route, so the pages are styled with no
internet access.

One site holds every pipeline's validations: suite names start with the
pipeline's group (``<group>.<suite>``), which GE turns into the first
directory under ``expectations/`` and ``validations/``. :func:`page_allowed`
limits a DAG's Data Docs route to the groups that DAG's own reports name.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from .. import paths

# CDN prefix (as GE's templates write it) -> directory under static/vendor/ (npm package@version).
CDN_TO_VENDOR: dict[str, str] = {
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/": "bootstrap@4.3.1/dist/",
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/": "bootstrap@4.3.1/dist/",
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/": "@forevolve/bootstrap-dark@1.1.0/",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/": "bootstrap-datepicker@1.9.0/dist/",
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/": "@fortawesome/fontawesome-free@6.6.0/",
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/": "popper.js@1.12.9/dist/",
    "https://code.jquery.com/jquery-3.7.1.min.js": "jquery@3.7.1/dist/jquery.min.js",
    "https://unpkg.com/bootstrap-table@1.19.1/": "bootstrap-table@1.19.1/",
    "https://unpkg.com/bootstrap-table@1.19.0/": "bootstrap-table@1.19.0/",
    # Major-version URLs on jsdelivr serve the package's "jsdelivr" file: its minified build.
    "https://cdn.jsdelivr.net/npm/vega@5": "vega@5.33.1/build/vega.min.js",
    "https://cdn.jsdelivr.net/npm/vega-lite@5": "vega-lite@5.23.0/build/vega-lite.min.js",
    "https://cdn.jsdelivr.net/npm/vega-embed@6": "vega-embed@6.29.0/build/vega-embed.min.js",
}
# GE's hosted logos (with a tracking query string; the dark-mode one in inline CSS): the site ships
# logo-long.png under static/images, the only copy available offline.
_GE_LOGO = re.compile(r"https://great-expectations-web-assets\.s3\.[a-z0-9-]+\.amazonaws\.com/[A-Za-z0-9_.-]+[^\"')\s]*")
_CDN = re.compile("|".join(re.escape(k) for k in sorted(CDN_TO_VENDOR, key=len, reverse=True)))
_SCOPED_DIRS = ("expectations", "validations")


def site_root() -> Path:
    return paths.var_dir() / "gx" / "gx" / "uncommitted" / "data_docs" / "local_site"


def rewrite_cdn_urls(html: str, *, vendor_url: str, site_url: str) -> str:
    """Every CDN URL GE writes -> the vendored copy under ``vendor_url``; GE's logos -> the site's own."""
    html = _CDN.sub(lambda m: vendor_url.rstrip("/") + "/" + CDN_TO_VENDOR[m.group(0)], html)
    return _GE_LOGO.sub(site_url.rstrip("/") + "/static/images/logo-long.png", html)


def page_allowed(relative: str, groups: set[str]) -> bool:
    """Whether a DAG whose runs validated ``groups`` may see this page of the shared site.

    Pages of one suite live under ``expectations/<group>/`` or
    ``validations/<group>/``; everything else (index, static assets) is shared.
    """
    parts = PurePosixPath(relative).parts
    if not parts or parts[0] not in _SCOPED_DIRS:
        return True
    # GE turns the dots of a suite name into directories: group "a.b" -> expectations/a/b/<suite>.html.
    for group in groups:
        prefix = tuple(paths.safe_name(group).split("."))
        if parts[1:1 + len(prefix)] == prefix and len(parts) > 1 + len(prefix):
            return True
    return False


def relative_page(docs_path: str | None, root: Path | None = None) -> str | None:
    """A Data Docs file path recorded in a report -> its path inside the site (None if outside)."""
    if not docs_path:
        return None
    root = (root or site_root()).resolve()
    try:
        return Path(docs_path).resolve().relative_to(root).as_posix()
    except (OSError, ValueError):
        # Reports written elsewhere (another var dir): keep the part after local_site/.
        marker = "/data_docs/local_site/"
        text = str(docs_path).replace("\\", "/")
        return text.split(marker, 1)[1] if marker in text else None
