"""python -m eos_etl.bench: run every case, write docs/benchmarks.md and docs/benchmarks.png."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from ..logging_setup import configure
from .run import Bench, Options

log = logging.getLogger("eos_etl.bench")


def _ints(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m eos_etl.bench", description=__doc__)
    p.add_argument("--records", type=int, default=100_000, help="purchases in the main window (default 100000)")
    p.add_argument("--partitions", type=int, default=4, help="input partitions of the main window (default 4)")
    p.add_argument("--repeats", type=int, default=3, help="repetitions per figure; medians are reported (default 3)")
    p.add_argument("--sizes", type=_ints, default=[10_000, 100_000, 1_000_000],
                   help="window sizes of the scale curve (default 10000,100000,1000000)")
    p.add_argument("--partition-counts", type=_ints, default=[1, 2, 4, 8],
                   help="input partition counts of the scale curve (default 1,2,4,8)")
    p.add_argument("--txn-sizes", type=_ints, default=[1, 100, 1_000, 10_000, 100_000],
                   help="B2 purchases per transaction (default 1,100,1000,10000,100000)")
    p.add_argument("--sample", type=int, default=500, help="purchases for N (one transaction each; default 500)")
    p.add_argument("--max-transactions", type=int, default=500,
                   help="B2 runs at most this many transactions (k x this purchases when below --records; default 500)")
    p.add_argument("--big-repeats", type=int, default=None,
                   help="S repetitions for sizes above --records (default: --repeats)")
    p.add_argument("--big-b3-repeats", type=int, default=1,
                   help="B3 repetitions for sizes above --records (default 1: B3 at 1M takes minutes)")
    p.add_argument("--no-scale-b3", action="store_true", help="scale curve without B3")
    p.add_argument("--quick", action="store_true", help="tiny sizes, one repetition: a smoke run")
    p.add_argument("--out", type=Path, default=Path("docs"), help="where benchmarks.md/.png go (default docs/)")
    p.add_argument("--report-only", type=Path, default=None, metavar="RESULTS_JSON",
                   help="only regenerate the report from a results.json of an earlier run")
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.repeats, args.sample, args.max_transactions = 2_000, 1, 50, 20
        args.sizes, args.partition_counts, args.txn_sizes = [1_000, 2_000], [1, args.partitions], [1, 100, 1_000]
    return args


def main(argv: list[str] | None = None) -> int:
    configure()
    args = parse_args(argv)
    from .report import write_report

    if args.report_only:
        data = json.loads(args.report_only.read_text())
    else:
        opts = Options(records=args.records, partitions=args.partitions, repeats=args.repeats, sizes=args.sizes,
                       partition_counts=args.partition_counts, txn_sizes=args.txn_sizes, sample=args.sample,
                       max_transactions=args.max_transactions, big_repeats=args.big_repeats,
                       big_b3_repeats=args.big_b3_repeats,
                       scale_b3=not args.no_scale_b3, out=args.out, quick=args.quick)
        t0 = time.monotonic()
        data = Bench(opts).run()
        log.info("bench finished in %.1f min", (time.monotonic() - t0) / 60)
    command = " ".join(["python -m eos_etl.bench", *(argv if argv is not None else sys.argv[1:])])
    if args.report_only:
        shown = (f"`{data.get('command', 'python -m eos_etl.bench')}` (`make bench`), report re-rendered from its "
                 f"results with `{command}`")
    else:
        data["command"] = command
        shown = f"`{command}` (`make bench`)"
    md, png = write_report(data, args.out, command=shown)
    print(f"wrote {md} and {png}")
    failed = [r["name"] for r in data["rows"] if not r["ok"]] + [
        f"check {c['size']}/p{c['partitions']}" for c in data["checks"] if not c["ok"]]
    if failed:
        print(f"FAILED cases: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
