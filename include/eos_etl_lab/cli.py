"""The lab's command line: ``python -m eos_etl_lab <command>``, beside the product's (``python -m eos_etl``).

    soak    fault injection and the randomized operation soak (:mod:`.soak_command`; ``make soak*``)
    bench   the benchmarks (:mod:`.bench`; ``make bench*``): its own options, ``bench --help``

Errors end as the product's do: one ``error:`` line and the error's exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from eos_etl.cli import Parser, run

from . import soak_command


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m eos_etl_lab", description="The lab: fault injection, soaks and benchmarks")
    parser.add_argument("--log-level", default=os.environ.get("EOS_ETL_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True)
    soak_command.register(sub)
    # listed for --help; main() hands its arguments to the benchmarks' own parser
    sub.add_parser("bench", help="the benchmarks; writes docs/benchmarks.md (bench --help: its options)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        from .bench.__main__ import main as bench_main  # deferred: the benchmarks import matplotlib

        return bench_main(argv[1:])
    return run(build_parser(), argv, log_roots=("eos_etl", "eos_etl_lab"))
