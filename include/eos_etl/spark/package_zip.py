"""The ``eos_etl`` package as a zip, the way a Spark cluster ships Python code.

Executors on a real cluster have no checkout of this project: Spark hands
them the driver's code through ``spark.submit.pyFiles`` / ``--py-files``
(fetched from the driver's file server and put first on the Python workers'
``sys.path``). :func:`package_zip` builds that zip from the package's
sources, named by a hash of their contents under ``.cache/pyfiles/``: it is
rebuilt exactly when a source changes, and two processes with different
sources never overwrite each other's zip.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import zipfile
from pathlib import Path

from .. import paths
from ..errors import StackError

# Fixed timestamp: the same sources give byte-identical zips.
_ZIP_DATE = (2020, 1, 1, 0, 0, 0)
_SUFFIXES = (".py", ".json", ".html", ".css", ".js", ".yaml", ".yml", ".txt")
# Zips of older sources are pruned once nobody could still be submitting them.
_STALE_AFTER_S = 24 * 3600


def package_dir() -> Path:
    """The directory of the ``eos_etl`` package this process runs."""
    return Path(__file__).resolve().parents[1]


def _sources(root: Path) -> list[Path]:
    return sorted(
        p for p in root.rglob("*")
        if p.is_file() and p.suffix in _SUFFIXES and "__pycache__" not in p.parts
    )


def source_digest() -> str:
    """A hash of the package's sources (names and contents): equal exactly when the code is."""
    root = package_dir()
    digest = hashlib.sha256()
    for f in _sources(root):
        digest.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def package_zip(cache: Path | None = None) -> Path:
    """Path of a zip holding ``eos_etl/...`` (build it if the sources changed since the last one)."""
    root = package_dir()
    files = _sources(root)
    out_dir = cache or paths.cache_dir() / "pyfiles"
    target = out_dir / f"eos_etl-{source_digest()}.zip"
    if target.is_file():
        return target
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".zip.tmp")
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
            for f in files:
                info = zipfile.ZipInfo(f"eos_etl/{f.relative_to(root).as_posix()}", _ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, f.read_bytes())
        os.replace(tmp, target)  # atomic: a concurrent reader sees the whole zip or none
    except OSError as exc:
        raise StackError(f"could not build the code zip for Spark executors in {out_dir}: {exc}") from exc
    _prune(out_dir, keep=target)
    return target


def _prune(out_dir: Path, keep: Path) -> None:
    cutoff = time.time() - _STALE_AFTER_S
    for old in out_dir.glob("eos_etl-*.zip*"):
        try:
            if old != keep and old.stat().st_mtime < cutoff:
                old.unlink()
        except FileNotFoundError:
            pass
