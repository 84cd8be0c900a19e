"""The lab's soak command: fault injection on a private broker, a private cluster, or network partitions.

soak | soak --cluster | soak --partitions | soak --model
(``make soak``, ``make soak-cluster``, ``make soak-partitions``, ``make soak-model``)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from eos_etl.errors import ConfigurationError

from .faults import partition_soak
from .faults.model import ModelSoakOptions, run_model_soak
from .faults.model import report as model_report
from .faults.partition_soak import PartitionSoakOptions, PartitionSoakRun, run_partition_soak
from .faults.soak import (
    CLUSTER_SECTION,
    SCENARIOS,
    ClusterSoakOptions,
    SoakOptions,
    load_results,
    merge_rerun,
    run_cluster_soak,
    run_soak,
    save_results,
    summarize,
    write_cluster_markdown,
    write_markdown,
)


def register(sub) -> None:
    """Add the soak command to the top parser's subparsers."""
    p = sub.add_parser("soak", help="fault-injection soak on a private broker; writes docs/reliability.md")
    p.add_argument("--records", type=int, default=100_000, help="backlog of the random-kills scenario")
    p.add_argument("--kills", type=int, default=20, help="random SIGKILLs of the job in that scenario")
    p.add_argument("--seeds", type=int, default=3, help="seeds per step boundary and trials per other scenario")
    p.add_argument("--broker-restarts", type=int, default=5, help="broker SIGKILL + restart trials")
    p.add_argument("--start-phase-kills", type=int, default=30,
                   help="trials with the broker SIGKILLed in a run's first 10 s (start_phase_broker_kill)")
    p.add_argument("--duration", type=float, default=0, help="repeat all scenarios until this many seconds passed")
    p.add_argument("--endurance-windows", type=int, default=500,
                   help="consecutive windows on one Spark Connect server in connect_endurance")
    p.add_argument("--client-kills", type=int, default=300,
                   help="client SIGKILLs mid-window on one Spark Connect server in connect_client_kills "
                        "(a scenario of its own: --scenarios connect_client_kills, `make soak-connect-kills`)")
    p.add_argument("--scenarios", help="comma-separated subset (default: all but connect_client_kills)")
    p.add_argument("--out", help="results table (default: docs/reliability.md)")
    p.add_argument("--cluster", action="store_true",
                   help="broker faults on a private 3-node cluster (var/soak-cluster); --seeds trials per scenario, "
                        "--scenarios from faults.cluster_scenarios; writes the cluster section")
    p.add_argument("--partitions", action="store_true",
                   help="network partitions on a private 3-node cluster whose nodes and job are network "
                        "namespaces of their own (root; var/soak-partitions): --seeds trials per scenario on each "
                        "--transaction-versions cluster, --scenarios from faults.partition_scenarios; writes the "
                        "partition section")
    p.add_argument("--model", action="store_true",
                   help="randomized operation soak on a private broker (var/soak-model): --seeds histories (seeds "
                        "1..N, or --seed-list) of --length operations and faults, each judged after every step and "
                        "shrunk when it fails; writes the model section")
    p.add_argument("--length", type=int, default=8, help="with --model: operations per history")
    p.add_argument("--seed-list", help="with --model: comma-separated seeds instead of 1..--seeds")
    p.add_argument("--shrink-budget", type=int, default=8,
                   help="with --model: re-executions to shrink a failing history (0: do not shrink)")
    p.add_argument("--no-broker-faults", action="store_true",
                   help="with --model: draw no broker restart, pause or offsets expiry")
    p.add_argument("--connect", action="store_true",
                   help="with --model: a Spark Connect server of its own; each run on a drawn route (spark-submit "
                        "or Connect client), and the server killed under a run")
    p.add_argument("--shrink-repeats", type=int, default=2,
                   help="with --model: executions of a shrinking candidate before it counts as not failing")
    p.add_argument("--transaction-versions", default="1,2",
                   help="with --partitions: the transaction.version levels to format a cluster with (default 1,2)")
    p.add_argument("--rolling-records", type=int, default=200_000,
                   help="with --cluster: window of the rolling-restart scenario")
    p.add_argument("--merge-into", metavar="RESULTS_JSON",
                   help="with --cluster or --partitions: re-run only --scenarios and replace their trials in this "
                        "earlier soak's results (var/soak-cluster/results.json or var/soak-partitions/results.json "
                        "is rewritten by the run, so copy it first); the page then shows the merged set and both "
                        "commands")
    p.set_defaults(func=cmd_soak)


def cmd_soak(args) -> int:
    if args.cluster and args.partitions:
        raise ConfigurationError("soak: --cluster and --partitions are two soaks; run one, then the other")
    if args.model and (args.cluster or args.partitions):
        raise ConfigurationError("soak: --model is a soak of its own; run it without --cluster or --partitions")
    if args.model:
        return _cmd_soak_model(args)
    if args.cluster:
        return _cmd_soak_cluster(args)
    if args.partitions:
        return _cmd_soak_partitions(args)
    opts = SoakOptions(records=args.records, kills=args.kills, seeds=args.seeds,
                       broker_restarts=args.broker_restarts, start_phase_kills=args.start_phase_kills,
                       duration_s=args.duration, endurance_windows=args.endurance_windows,
                       client_kills=args.client_kills,
                       scenarios=tuple(args.scenarios.split(",")) if args.scenarios else SCENARIOS,
                       out=Path(args.out) if args.out else None)
    results, wall = run_soak(opts)
    command = " ".join(["python -m eos_etl_lab soak", *sys.argv[2:]])
    out = write_markdown(results, wall, opts, command.strip())
    for row in summarize(results):
        print(f"{row['scenario']:<22} trials={row['trials']:<3} records={row['records']:<8} kills={row['faults']:<3} "
              f"violations={row['violations']} errors={row['errors']} wall={row['seconds']:.0f}s")
    bad = [r for r in results if not r.ok]
    print(f"{len(results)} trials in {wall / 60:.1f} min, {len(bad)} failed; table written to {out}")
    return 1 if bad else 0


def _cmd_soak_model(args) -> int:
    command = ("python -m eos_etl_lab soak " + " ".join(sys.argv[sys.argv.index("soak") + 1:])).strip()
    seeds = (tuple(int(s) for s in args.seed_list.split(",")) if args.seed_list
             else tuple(range(1, args.seeds + 1)))
    opts = ModelSoakOptions(seeds=seeds, length=args.length, shrink_budget=args.shrink_budget,
                            broker_ops=not args.no_broker_faults, connect=args.connect,
                            shrink_repeats=args.shrink_repeats)
    out = Path(args.out) if args.out else None
    t0 = time.monotonic()
    done, wall = run_model_soak(
        opts, on_done=lambda d: model_report.write_markdown(d, time.monotonic() - t0, opts, command, out))
    path = model_report.write_markdown(done, wall, opts, command, out)
    bad = [o for o, _ in done if not o.ok]
    print(f"{len(done)} histories in {wall / 60:.1f} min, {len(bad)} failed "
          f"(seeds {[o.seed for o in bad]}); section written to {path}")
    return 1 if bad else 0


def _cmd_soak_cluster(args) -> int:
    command = ("python -m eos_etl_lab soak " + " ".join(sys.argv[2:])).strip()
    opts = ClusterSoakOptions(seeds=args.seeds, rolling_records=args.rolling_records,
                              start_phase_kills=args.start_phase_kills,
                              scenarios=tuple(args.scenarios.split(",")) if args.scenarios else (),
                              out=Path(args.out) if args.out else None, command=command)
    earlier, earlier_wall, earlier_command = [], 0.0, ""
    if args.merge_into:
        # Read before the soak starts: it rewrites results.json as it goes.
        earlier, earlier_wall, earlier_command = load_results(Path(args.merge_into))

    def write(done, wall):
        if not args.merge_into:
            section = f"{CLUSTER_SECTION}: {', '.join(opts.scenarios)}" if opts.scenarios else CLUSTER_SECTION
            return write_cluster_markdown(done, wall, opts, command, section)
        merged = merge_rerun(earlier, done)
        label = (f"{earlier_command or 'an earlier soak'}`, with the trials of {sorted({r.scenario for r in done})} "
                 f"replaced by `{command}")
        save_results(merged, earlier_wall + wall, Path(args.merge_into), label)
        return write_cluster_markdown(merged, earlier_wall + wall, opts, label)

    results, wall = run_cluster_soak(opts, on_trial=write)
    out = write(results, wall)
    for row in summarize(results):
        print(f"{row['scenario']:<36} trials={row['trials']:<3} records={row['records']:<8} faults={row['faults']:<3} "
              f"violations={row['violations']} hangs={row['hangs']} errors={row['errors']} "
              f"longest recovery={row['longest_recovery_s']}s")
    bad = [r for r in results if not r.ok]
    print(f"{len(results)} cluster trials in {wall / 60:.1f} min, {len(bad)} failed; section written to {out}")
    return 1 if bad else 0


def _cmd_soak_partitions(args) -> int:
    command = ("python -m eos_etl_lab soak " + " ".join(sys.argv[2:])).strip()
    try:
        versions = tuple(int(v) for v in args.transaction_versions.split(","))
    except ValueError:
        raise ConfigurationError(f"--transaction-versions: a comma-separated list of numbers, not "
                                 f"{args.transaction_versions!r}") from None
    opts = PartitionSoakOptions(seeds=args.seeds, transaction_versions=versions,
                                scenarios=tuple(args.scenarios.split(",")) if args.scenarios else (),
                                out=Path(args.out) if args.out else None, command=command)
    if not args.merge_into:
        run = run_partition_soak(opts, on_trial=lambda done: partition_soak.write_markdown(done, opts, command))
        out = partition_soak.write_markdown(run, opts, command)
    else:
        out, run = _rerun_partitions(args, opts, command)
    for row in partition_soak.summarize(run.results):
        print(f"{row['scenario']:<30} {row['variant']:<22} trials={row['trials']:<3} faults={row['faults']:<3} "
              f"violations={row['violations']} hangs={row['hangs']} errors={row['errors']} "
              f"new_epochs={row['new_epochs']} longest={row['longest_s']}s")
    bad = [r for r in run.results if not r.ok]
    print(f"{len(run.results)} partition trials in {run.wall_s / 60:.1f} min, {len(bad)} failed; section written "
          f"to {out}")
    return 1 if bad else 0


def _rerun_partitions(args, opts, command: str):
    """Re-run ``--scenarios`` and replace their trials in an earlier partition soak's results."""
    # Read first: the soak rewrites its results.json.
    earlier, earlier_command = partition_soak.load(Path(args.merge_into))
    label = (f"{earlier_command or 'an earlier soak'}`, with the trials of {', '.join(opts.scenarios)} "
             f"replaced by `{command}")

    def merged(done: PartitionSoakRun) -> PartitionSoakRun:
        return PartitionSoakRun(merge_rerun(earlier.results, done.results), earlier.clusters or done.clusters,
                                earlier.wall_s + done.wall_s)

    run = run_partition_soak(opts, on_trial=lambda done: partition_soak.write_markdown(merged(done), opts, label))
    whole = merged(run)
    partition_soak.save(whole, Path(args.merge_into), label)
    return partition_soak.write_markdown(whole, opts, label), whole
