"""python -m eos_etl_lab bench: run every case, write docs/benchmarks.md and docs/benchmarks.png.

``--only cluster-compare`` runs just the cluster comparison (S and B3 on a
3-node Kafka cluster and on the single node) and merges it into the results
of the last full run in ``--out`` (benchmarks.json), so the report keeps the
full run's figures and gains (or refreshes) the cluster section.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from eos_etl.engine import slots
from eos_etl.logging_setup import configure

from . import breakdown, partitions, validation_scaling
from .cluster_compare import merge_into
from .page import TARGETS, end_proof_shares, write_page
from .peers import comparison
from .run import Bench, Options

log = logging.getLogger("eos_etl_lab.bench")


def _ints(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def _slot_settings(text: str) -> list[int | None]:
    """``none,2``: writer-slot settings, none (or per-partition) for one transactional id per partition."""
    return [slots.parse(x) for x in text.split(",") if x.strip()]


def _add_sweep(p: argparse.ArgumentParser) -> None:
    """The partition sweep's options (``--only partitions``)."""
    p.add_argument("--sweep-partitions", type=_ints, default=[4, 32, 128, 512, 1024],
                   help="--only partitions: the input partition counts (default 4,32,128,512,1024)")
    p.add_argument("--sweep-slots", type=_slot_settings, default=[None, slots.DEFAULT_WRITER_SLOTS],
                   help="--only partitions: the writer-slot settings measured side by side, none for one "
                        f"transactional id per partition (default none,{slots.DEFAULT_WRITER_SLOTS}: the default's)")
    p.add_argument("--sweep-records", type=int, default=200_000,
                   help="--only partitions: purchases in each count's topic and full window (default 200000)")
    p.add_argument("--sweep-small", type=int, default=2_000,
                   help="--only partitions: purchases in the small window (default 2000)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m eos_etl_lab bench", description=__doc__)
    p.add_argument("--records", type=int, default=100_000, help="purchases in the main window (default 100000)")
    p.add_argument("--partitions", type=int, default=4, help="input partitions of the main window (default 4)")
    p.add_argument("--repeats", type=int, default=3, help="repetitions per figure; medians are reported (default 3)")
    p.add_argument("--sizes", type=_ints, default=[10_000, 100_000, 1_000_000],
                   help="window sizes of the scale curve (default 10000,100000,1000000)")
    p.add_argument("--partition-counts", type=_ints, default=[1, 2, 4, 8],
                   help="input partition counts of the scale curve (default 1,2,4,8)")
    p.add_argument("--txn-sizes", type=_ints, default=[1, 100, 1_000, 10_000, 100_000],
                   help="B2 purchases per transaction (default 1,100,1000,10000,100000)")
    p.add_argument("--input-transaction-size", type=int, default=0,
                   help="purchases per transaction of the input topics (default 0: no transactions); with "
                        "transactions, a window at the log end ends with a commit marker its tasks must prove "
                        "(windows capped below the log end then hold slightly fewer purchases than their size)")
    p.add_argument("--sample", type=int, default=500, help="purchases for N (one transaction each; default 500)")
    p.add_argument("--max-transactions", type=int, default=500,
                   help="B2 runs at most this many transactions (k x this purchases when below --records; default 500)")
    p.add_argument("--big-repeats", type=int, default=None,
                   help="S repetitions for sizes above --records (default: --repeats)")
    p.add_argument("--big-b3-repeats", type=int, default=1,
                   help="B3 repetitions for sizes above --records (default 1: B3 at 1M takes minutes)")
    p.add_argument("--no-scale-b3", action="store_true", help="scale curve without B3")
    p.add_argument("--no-cluster-compare", action="store_true",
                   help="skip the cluster comparison (S and B3 on a 3-node Kafka cluster vs the single node)")
    p.add_argument("--no-spark-connect", action="store_true",
                   help="skip SC (the job as a client of a long-lived Spark Connect server) beside S")
    p.add_argument("--proof-sizes", type=_ints, default=[100_000, 1_000_000],
                   help="windows of the window-end proof's cost, each over a transactional input of that size "
                        "(default 100000,1000000)")
    p.add_argument("--breakdown-size", type=int, default=1_000_000,
                   help="purchases in the per-purchase breakdown's window (default 1000000)")
    p.add_argument("--idle-pause-s", type=float, default=80.0,
                   help="idle seconds before each SC window after a pause, past Spark's idle-worker minute "
                        "(default 80)")
    _add_sweep(p)
    p.add_argument("--only", choices=["cluster-compare", "validation-scaling", "end-proof", "breakdown", "partitions",
                                     "peers"],
                   default=None,
                   help="run only this part: cluster-compare is merged into the earlier results in "
                        "--out/benchmarks.json; validation-scaling writes --out/validation_scaling.json")
    p.add_argument("--validation-window-records", type=int, default=2_000,
                   help="validation-scaling: purchases per window of the history phase (default 2000)")
    p.add_argument("--validation-history", type=int, default=20,
                   help="validation-scaling: earlier windows before the last validated one (default 20)")
    p.add_argument("--validation-sizes", type=_ints, default=[20_000, 100_000, 1_000_000],
                   help="validation-scaling: window sizes for validate vs run_window, the read floor and "
                        "memory (default 20000,100000,1000000)")
    p.add_argument("--validation-before-max", type=int, default=100_000,
                   help="validation-scaling: the before column (validation in a fresh local Spark application, "
                        "as the validate task did it before) for window sizes up to this (default 100000)")
    p.add_argument("--validation-before-code", type=Path, default=None, metavar="INCLUDE_DIR",
                   help="validation-scaling: the `include` directory of the checkout whose validation is the "
                        "before column (default: this checkout's)")
    p.add_argument("--validation-ge-history", type=int, default=2_000,
                   help="validation-scaling: earlier GE validation results per suite seeded before the "
                        "second history figure (default 2000, about three months of an hourly DAG)")
    p.add_argument("--validation-margin-ms", type=int, default=None,
                   help="validation-scaling: clock-skew margin of the output read (default: the module's, 5 min)")
    p.add_argument("--quick", action="store_true", help="tiny sizes, one repetition: a smoke run")
    p.add_argument("--out", type=Path, default=Path("docs"), help="where benchmarks.md/.png go (default docs/)")
    p.add_argument("--report-only", type=Path, default=None, metavar="RESULTS_JSON",
                   help="only regenerate the report from a results.json of an earlier run")
    args = p.parse_args(argv)
    if args.quick:
        args.validation_window_records, args.validation_history = 500, 3
        args.validation_sizes, args.validation_ge_history = [5_000], 50
        args.validation_before_max = 5_000
        args.records, args.repeats, args.sample, args.max_transactions = 2_000, 1, 50, 20
        args.sizes, args.partition_counts, args.txn_sizes = [1_000, 2_000], [1, args.partitions], [1, 100, 1_000]
        args.proof_sizes = [2_000]
        args.breakdown_size = 2_000
        args.sweep_partitions, args.sweep_records, args.sweep_small = [1, 8], 2_000, 100
        args.idle_pause_s = 0.0
    return args


def _validation_scaling(args: argparse.Namespace) -> int:
    opts = validation_scaling.ScalingOptions(
        window_records=args.validation_window_records, history=args.validation_history,
        sizes=args.validation_sizes, partitions=args.partitions, out=args.out,
        repeats=max(1, min(args.repeats, 2)), ge_history=args.validation_ge_history,
        before_max=args.validation_before_max, before_code=args.validation_before_code)
    if args.validation_margin_ms is not None:
        opts.margin_ms = args.validation_margin_ms
    data = validation_scaling.run(opts)
    print(validation_scaling.summary(data))
    ok = data["history"]["ok"] and all(s["ok"] for s in data["sizes"])
    return 0 if ok else 1


def _end_proof_report(data: dict, out: Path) -> int:
    """``--only end-proof``: its rows to --out/end_proof.json and a table on stdout; 1 when a window's proof
    took more than its target share, or a run failed."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "end_proof.json").write_text(json.dumps(data, indent=1))
    shares = end_proof_shares(data["rows"])
    print("| case | window | job s (median) | slowest task's proof s | share |\n|---|---:|---:|---:|---:|")
    for (case, size), share in sorted(shares.items()):
        rows = [r for r in data["rows"] if r["case"] == case and r["size"] == size and r["ok"]]
        jobs = sorted(r["job_s"] for r in rows)
        proof = max(max(r["result"]["end_proof_s"]) for r in rows)
        print(f"| {case} | {size:,} | {jobs[len(jobs) // 2]:.1f} | {proof:.3f} | {100 * share:.2f} % |")
    failed = [r["name"] for r in data["rows"] if not r["ok"]]
    if failed:
        print(f"failed runs: {failed}")
    return 0 if shares and not failed and max(shares.values()) <= TARGETS["end_proof_share"] else 1


def _breakdown_report(data: dict, out: Path, opts: Options) -> int:
    """``--only breakdown``: its rows to --out/breakdown.json and its tables on stdout; 1 when a run failed."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "breakdown.json").write_text(json.dumps(data, indent=1))
    rows = [r for r in data["rows"] if r.get("stage")]
    print(breakdown.markdown(rows, opts.breakdown_size, opts.partitions))
    failed = [r["name"] for r in rows if not r["ok"]]
    if failed:
        print(f"failed runs: {failed}")
    return 1 if failed else 0


def _partitions_report(data: dict, out: Path) -> int:
    """``--only partitions``: its rows to --out/partitions.json and its table on stdout; 1 when a run or a
    check failed (a target missed is reported, not failed: it is what the sweep measures)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "partitions.json").write_text(json.dumps(data, indent=1))
    rows = [r for r in data["rows"] if r.get("sweep")]
    print(partitions.markdown(rows))
    for setting in partitions.settings(rows):
        for pc, met in partitions.verdicts(rows, setting).items():
            print(f"targets at {pc:,} partitions with {partitions.describe(setting)} (ratio to the smallest count): "
                  + ", ".join(f"{sweep} {'met' if ok else 'MISSED'} (<= {partitions.TARGETS[pc][sweep]}x)"
                              for sweep, ok in met.items()))
    failed = [r["name"] for r in data["rows"] if not r["ok"]] + [
        f"check {c['size']}/p{c['partitions']}" for c in data["checks"] if not c["ok"]]
    if failed:
        print(f"failed: {failed}")
    return 1 if failed else 0


def _peers_report(data: dict, out: Path, command: str) -> int:
    """``--only peers``: its rows to --out/peers.json, its page to --out/peers.md, its table on stdout; 1 when
    a run failed (a peer that is not exactly once is what the table reports, not a failure)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "peers.json").write_text(json.dumps({**data, "peers": comparison.summary(data["rows"])}, indent=1))
    (out / "peers.md").write_text(comparison.page(data, command))
    print(comparison.markdown(data["rows"]))
    failed = [r["name"] for r in data["rows"] if not r["ok"]]
    if failed:
        print(f"failed: {failed}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    configure()
    args = parse_args(argv)
    if args.only == "validation-scaling":
        return _validation_scaling(args)
    if args.report_only:
        data = json.loads(args.report_only.read_text())
    else:
        opts = Options(records=args.records, partitions=args.partitions, repeats=args.repeats, sizes=args.sizes,
                       partition_counts=args.partition_counts, txn_sizes=args.txn_sizes, sample=args.sample,
                       max_transactions=args.max_transactions, big_repeats=args.big_repeats,
                       input_transaction_size=args.input_transaction_size or None,
                       big_b3_repeats=args.big_b3_repeats,
                       scale_b3=not args.no_scale_b3, out=args.out, quick=args.quick,
                       cluster_compare=not args.no_cluster_compare, spark_connect=not args.no_spark_connect,
                       only_cluster_compare=args.only == "cluster-compare", proof_sizes=args.proof_sizes,
                       only_end_proof=args.only == "end-proof", breakdown_size=args.breakdown_size,
                       only_breakdown=args.only == "breakdown", idle_pause_s=args.idle_pause_s,
                       sweep_partitions=args.sweep_partitions, sweep_slots=args.sweep_slots,
                       sweep_records=args.sweep_records, sweep_small=args.sweep_small,
                       only_partitions=args.only == "partitions", only_peers=args.only == "peers")
        t0 = time.monotonic()
        data = Bench(opts).run()
        log.info("bench finished in %.1f min", (time.monotonic() - t0) / 60)
        if opts.only_end_proof:
            return _end_proof_report(data, args.out)
        if opts.only_breakdown:
            return _breakdown_report(data, args.out, opts)
        if opts.only_partitions:
            return _partitions_report(data, args.out)
        if opts.only_peers:
            command = " ".join(["python -m eos_etl_lab bench", *(argv if argv is not None else sys.argv[1:])])
            return _peers_report(data, args.out, command)
    command = " ".join(["python -m eos_etl_lab bench", *(argv if argv is not None else sys.argv[1:])])
    data.setdefault("command", command)
    if data.get("cluster_compare"):
        data["cluster_compare"].setdefault("command", data["command"])
    if args.only:
        previous_path = args.out / "benchmarks.json"
        if not previous_path.is_file():
            print(f"{previous_path} holds no full run to merge into; run `python -m eos_etl_lab bench` first",
                  file=sys.stderr)
            return 2
        data = merge_into(json.loads(previous_path.read_text()), data)
    if args.only:
        shown = (f"`{data.get('command', 'python -m eos_etl_lab bench')}` (`make bench`); its cluster comparison "
                 f"measured again by `{command}` and merged into its results")
    elif args.report_only:
        shown = (f"`{data.get('command', 'python -m eos_etl_lab bench')}` (`make bench`), report re-rendered from its "
                 f"results with `{command}`")
    else:
        shown = f"`{command}` (`make bench`)"
    md, png = write_page(data, args.out, command=shown)
    print(f"wrote {md} and {png}")
    failed = [r["name"] for r in data["rows"] if not r["ok"]] + [
        f"check {c['size']}/p{c['partitions']}" for c in data["checks"] if not c["ok"]]
    if failed:
        print(f"FAILED cases: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
