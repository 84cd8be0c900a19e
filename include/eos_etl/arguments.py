"""Checks for everything an operator passes in (CLI flags, DAG Params): one clear message each.

Each checker takes the raw text and returns the typed value or raises
``ValueError`` with a message fit for one ``error:`` line (it never echoes a
secret: none of these values is one). The CLI wraps them as argparse types;
the DAGs use the same functions on their Params.
"""

from __future__ import annotations

import os
import re
from datetime import datetime

from .paths import safe_name

#: Kafka's own rule for topic names (legal characters, at most 249), used for every id we accept:
#: topics, groups, transactional-id prefixes and run ids. ``..`` is refused on top: ids become path names.
_ID = re.compile(r"[A-Za-z0-9._-]{1,249}")


def identifier(text: str, what: str = "id") -> str:
    if not _ID.fullmatch(text or "") or ".." in text or text == ".":
        raise ValueError(f"{what} {(text or '')[:60]!r} is not allowed: use 1-249 of A-Z a-z 0-9 . _ - (no '..')")
    return text


def positive_int(text: str, what: str = "value") -> int:
    try:
        value = int(str(text).strip(), 10)
    except ValueError:
        raise ValueError(f"{what} must be a positive integer, not {str(text)[:40]!r}") from None
    if value < 1:
        raise ValueError(f"{what} must be a positive integer, not {value}")
    return value


def positive_float(text: str, what: str = "value") -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ValueError(f"{what} must be a positive number, not {str(text)[:40]!r}") from None
    if not value > 0 or value == float("inf"):  # also refuses nan
        raise ValueError(f"{what} must be a positive number, not {value}")
    return value


def timestamp_ms(text: str, what: str = "time") -> int:
    """Epoch milliseconds, or an ISO-8601 time **with** a timezone (``Z`` or ``+hh:mm``)."""
    raw = str(text).strip()
    if raw.isascii() and raw.isdigit():
        return int(raw)
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{what} {raw[:40]!r} is not an ISO-8601 time (e.g. 2026-11-23T10:00:00Z) "
                         "or epoch milliseconds") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{what} {raw[:40]!r} has no timezone: add Z or an offset such as +01:00")
    try:
        return int(parsed.timestamp() * 1000)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"{what} {raw[:40]!r} is out of range") from None


def attempt_run_id(run_id: str, attempt: int) -> str:
    """An acceptable run id (see :func:`identifier`) that is unique per attempt: an orchestrator's
    run id (Airflow's hold ``:`` and ``+``) as a safe name, plus the attempt number."""
    base = re.sub(r"\.{2,}", ".", safe_name(run_id))[:200]
    return identifier(f"{base}.try{int(attempt)}", "run id")


def switch_on(env: str) -> bool:
    """An on/off environment switch that defaults to on: ``off``, ``0``, ``false`` or ``no`` turn it off."""
    return os.environ.get(env, "on").strip().lower() not in ("off", "0", "false", "no")
