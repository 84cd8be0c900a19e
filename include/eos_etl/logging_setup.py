"""Operator-facing logging: one line per event, no payloads, no secrets."""

from __future__ import annotations

import faulthandler
import logging
import os
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s [pid %(process)d] %(message)s"


def configure(level: str | None = None) -> None:
    level = level or os.environ.get("EOS_ETL_LOG_LEVEL", "INFO")
    root = logging.getLogger("eos_etl")
    if not any(getattr(h, "_eos_etl", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT))
        handler._eos_etl = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.propagate = False
    root.setLevel(level)
    # librdkafka's Python wrapper and py4j are chatty at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # Great Expectations logs every store write at INFO.
    logging.getLogger("great_expectations").setLevel(logging.WARNING)


def enable_crash_stacks() -> None:
    """Python's faulthandler on: a native crash (a SIGSEGV inside librdkafka, say) leaves every
    thread's Python stack on stderr, i.e. in the job's log, instead of a bare exit code 139.

    Also exported as ``PYTHONFAULTHANDLER`` so the Python processes this one starts
    (Spark's Python workers in local mode, spark-submit) have it from their first instruction.
    """
    if not faulthandler.is_enabled():
        faulthandler.enable(file=sys.stderr, all_threads=True)
    os.environ.setdefault("PYTHONFAULTHANDLER", "1")


def configure_task_logging() -> None:
    """Inside a Spark Python worker: log to stderr, which Spark keeps per executor; crash stacks too."""
    configure()
    enable_crash_stacks()
