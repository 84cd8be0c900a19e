"""Great Expectations imported beside a validation's read: the import is seconds of this process's CPU
(about 3 s on 2 cores), the window's read mostly waits on the Spark server, so a validate task that
starts one before the other pays for the longer only (docs/data-quality.md, "What it costs").
"""

from __future__ import annotations

import logging
import sys
import threading

log = logging.getLogger(__name__)

_import_thread: threading.Thread | None = None


def start_importing_great_expectations() -> None:
    """Import Great Expectations and the project's modules of it in a background thread;
    :func:`await_great_expectations` before the first use. Started once the Spark session exists: the
    session's own imports (pyspark's Connect client) are done by then, so the two threads never import
    the same package at once (a concurrent circular import would hand one of them a partially
    initialised module)."""
    global _import_thread
    if _import_thread is None and "great_expectations" not in sys.modules:
        _import_thread = threading.Thread(target=_import_great_expectations, name="gx-import", daemon=True)
        _import_thread.start()


def await_great_expectations() -> None:
    """Wait for :func:`start_importing_great_expectations`' import, if one was started. An import that
    failed there fails again, with its own error, where the module is next imported."""
    if _import_thread is not None:
        _import_thread.join()


def _import_great_expectations() -> None:
    try:
        import great_expectations  # noqa: F401 - the import is the work

        from . import checkpoint_actions, expectations, spark_views  # noqa: F401 - GE's, deferred with it
    except Exception:  # noqa: BLE001 - raised again by the caller's own import, with its traceback
        log.debug("importing Great Expectations in the background failed", exc_info=True)
