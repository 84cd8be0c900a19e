"""Where the project keeps its caches, state and logs.

Everything lives under the project root so a checkout is self-contained:
``.cache/`` holds downloaded jars (safe to delete, refetched on demand) and
``var/`` holds runtime state (broker data, Airflow home, logs). Both are
git-ignored. ``EOS_ETL_HOME`` moves the root, e.g. for an installed package.
"""

from __future__ import annotations

import os
import re
from pathlib import Path


def project_root() -> Path:
    env = os.environ.get("EOS_ETL_HOME")
    if env:
        return Path(env).resolve()
    # include/eos_etl/paths.py -> project root is two levels above the package
    return Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    return Path(os.environ.get("EOS_ETL_CACHE", project_root() / ".cache"))


def var_dir() -> Path:
    return Path(os.environ.get("EOS_ETL_VAR", project_root() / "var"))


def log_dir() -> Path:
    return var_dir() / "log"


_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(text: str) -> str:
    """``text`` (a DAG id, run id or transactional-id prefix) as one safe path component.

    Anything but letters, digits, ``_``, ``.`` and ``-`` becomes ``_``; leading and
    trailing dots and underscores go, so the result is never ``.``, ``..`` or hidden.
    """
    return _UNSAFE_IN_NAME.sub("_", text).strip("._") or "unnamed"
