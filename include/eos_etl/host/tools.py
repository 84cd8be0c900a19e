"""Checks for the external programs the stack needs."""

from __future__ import annotations

import shutil

from .errors import MissingToolError


def require_tool(name: str, *, install_hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MissingToolError(f"'{name}' is not installed or not on PATH. Install it with: {install_hint}")
    return path
