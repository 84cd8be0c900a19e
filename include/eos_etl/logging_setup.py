"""Operator-facing logging: one line per event, no payloads, no secrets.

Secrets this process holds (the Kafka password, a Spark Connect token) are
registered with :func:`mask` where they enter it, and every line of the
project's loggers, and of pyspark's Spark Connect client (which prints whole
plans, Kafka options included, at debug level), has them replaced by ``***``,
in each of the escaped forms they take inside JSON or a protobuf text dump.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s [pid %(process)d] %(message)s"
#: Loggers of libraries that may print a secret this process holds.
FOREIGN_LOGGERS = ("pyspark.sql.connect.logging",)
_SECRETS: set[str] = set()


def mask(*secrets: str | None) -> None:
    """Never print these (nor their JSON- or protobuf-escaped forms) in any log line."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            once = json.dumps(secret)[1:-1]
            _SECRETS.update({secret, once, json.dumps(once)[1:-1]})


class SecretsFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if _SECRETS:
            message = record.getMessage()
            masked = message
            for secret in sorted(_SECRETS, key=len, reverse=True):
                masked = masked.replace(secret, "***")
            if masked != message:
                record.msg, record.args = masked, None
        return True


_FILTER = SecretsFilter()


def configure(level: str | None = None, roots: tuple[str, ...] = ("eos_etl",)) -> None:
    """Log ``roots`` (the package's loggers; a command of the lab adds its own) to stderr at ``level``."""
    level = level or os.environ.get("EOS_ETL_LOG_LEVEL", "INFO")
    for name in roots:
        root = logging.getLogger(name)
        if not any(getattr(h, "_eos_etl", False) for h in root.handlers):
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter(FORMAT))
            handler._eos_etl = True  # type: ignore[attr-defined]
            handler.addFilter(_FILTER)
            root.addHandler(handler)
            root.propagate = False
        root.setLevel(level)
    for name in FOREIGN_LOGGERS:
        if _FILTER not in logging.getLogger(name).filters:
            logging.getLogger(name).addFilter(_FILTER)
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
