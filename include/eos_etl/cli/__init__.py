"""Command line: ``python -m eos_etl <command>`` (or ``eos-etl``), one module per subject.

    stack.py     fetch-jars, jvm-archive, broker, airflow, up, down, status, cluster, spark-connect
    pipeline.py  create-topics, generate, plan-window, run-window, offsets, check, transactions, demo
    security.py  acl, scram-user
    options.py   the options several commands share: Kafka connection, pipeline, window

Each command's parser sits beside its handler; a subject module's
``register(subparsers)`` adds its commands to the top parser built here.
One error path for everything: a bad argument and a diagnosed problem
(:class:`~eos_etl.errors.EosEtlError`) both end in one ``error:`` line on
stderr and the error's exit code (2 for configuration), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from .. import logging_setup
from ..errors import EosEtlError
from . import pipeline, security, stack


class Parser(argparse.ArgumentParser):
    """argparse, with a bad argument reported like every other error: one ``error:`` line, exit 2."""

    def error(self, message: str):
        print(f"error: {self.prog}: {' '.join(message.split())}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: the top parser and every subject's commands."""
    parser = Parser(prog="eos-etl", description="Exactly-once batch ETL from Kafka to Kafka")
    parser.add_argument("--log-level", default=os.environ.get("EOS_ETL_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True)
    for subject in (stack, pipeline, security):
        subject.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv)


def run(parser: argparse.ArgumentParser, argv: list[str] | None = None, log_roots: tuple[str, ...] = ("eos_etl",)
        ) -> int:
    """Parse ``argv`` with ``parser`` and run the chosen command's handler: one ``error:`` line and the
    error's exit code for a diagnosed problem, never a traceback (the lab's command line runs the same, its
    own loggers among ``log_roots``)."""
    logging_setup.enable_crash_stacks()  # a native crash (librdkafka, py4j) must leave a stack in the log
    args = parser.parse_args(argv)
    logging_setup.configure(args.log_level, log_roots)
    try:
        return args.func(args)
    except EosEtlError as exc:
        # Diagnosed problems: one clear message, no traceback.
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code

