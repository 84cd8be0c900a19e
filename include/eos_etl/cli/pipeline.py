"""The pipeline's commands: topics, demo purchases, windows, offsets, checks, transactions.

create-topics | generate | plan-window | run-window | offsets {show,restore,reset} | check | transactions | demo
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from .. import arguments
from ..checker import check_shop
from ..demo import run_demo
from ..engine import checkpoint_log
from ..engine.errors import PublishError
from ..engine.planning.planner import positions, recovery_command
from ..engine.planning.preflight import preflight
from ..engine.planning.recovery import reslot_positions
from ..engine.position import Verdict, lineage_position
from ..engine.publishing.publisher import publish_without_spark, reset_positions
from ..engine.slots import AS_COMMITTED
from ..engine.slots import describe as describe_slots
from ..engine.window import OffsetRange
from ..errors import ConfigurationError
from ..kafka.admin import ClusterAdmin
from ..kafka.java_tools import TransactionsTool
from ..kafka.topics import Durability, ensure_topics
from ..kafka.transactions import inspect_pipeline
from ..shop.generator import generate
from ..shop.pipeline import run_shop_window, summary_dict
from ..spark.config import REMOTE_ENV, parse_conf_pairs
from ..spark.connect_client import server_lost
from ..spark.session import spark_route, spark_session, stop_session
from .options import (
    ID,
    POSITIVE,
    add_connection,
    add_planning,
    add_shop,
    checked,
    connection_from_args,
    plan_from_args,
    shop_settings_from_args,
)


def register(sub) -> None:
    """Add the pipeline's commands to the top parser's subparsers."""
    for add in (_add_create_topics, _add_generate, _add_plan_window, _add_run_window, _add_offsets, _add_check,
                _add_transactions, _add_demo):
        add(sub)


def _add_create_topics(sub) -> None:
    p = sub.add_parser("create-topics", help="create the shop's input and output topics")
    add_connection(p)
    add_shop(p)
    p.add_argument("--partitions", type=POSITIVE("--partitions"), default=4)
    p.add_argument("--replication-factor", type=POSITIVE("--replication-factor"),
                   help="copies of every partition (default: min(3, live brokers))")
    p.add_argument("--min-insync-replicas", type=POSITIVE("--min-insync-replicas"),
                   help="replicas an acks=all write needs (default: replication factor - 1, at least 1)")
    p.add_argument("--allow-existing", action="store_true",
                   help="keep existing topics that have fewer partitions, replicas or in-sync replicas than asked")
    p.set_defaults(func=cmd_create_topics)


def cmd_create_topics(args) -> int:
    settings = shop_settings_from_args(args)
    admin = ClusterAdmin(settings.connection)
    admin.check_reachable()
    brokers = admin.broker_count()
    durability = Durability.for_cluster(brokers, args.replication_factor, args.min_insync_replicas)
    print(f"create-topics: {brokers} live broker(s): {durability.describe()}", file=sys.stderr)
    checkpoint_topic = settings.pipeline().checkpoint_topic
    if grown := checkpoint_log.grow_topic(admin, checkpoint_topic, settings.topics.purchases):
        print(f"create-topics: grew {checkpoint_topic} to {grown} partitions, one per partition of "
              f"{settings.topics.purchases}", file=sys.stderr)
    states = ensure_topics(admin, settings.specs(args.partitions), durability,
                           allow_existing=args.allow_existing)
    print(json.dumps({name: state.to_dict() for name, state in states.items()}))
    return 0


def _add_generate(sub) -> None:
    p = sub.add_parser("generate", help="write demo purchases")
    add_connection(p)
    p.add_argument("--input-topic", default="purchases")
    p.add_argument("--count", type=int, default=10_000)
    p.add_argument("--rate", type=float, help="purchases per second (default: as fast as possible)")
    p.add_argument("--invalid-share", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--transaction-size", type=int, help="write in transactions of this many purchases")
    p.add_argument("--abort-share", type=float, default=0.0, help="share of those transactions to abort")
    p.add_argument("--timestamp", type=checked(arguments.timestamp_ms, "--timestamp"),
                   help="record time of every purchase, ISO-8601 with a timezone or epoch millis (default: when "
                        "sent); e.g. purchases that arrive late for an hour a backfill covers")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_generate)


def cmd_generate(args) -> int:
    conn = connection_from_args(args)
    stats = generate(
        conn, args.input_topic, args.count, invalid_share=args.invalid_share, rate=args.rate, seed=args.seed,
        transaction_size=args.transaction_size, abort_share=args.abort_share, progress=not args.no_progress,
        timestamp_ms=args.timestamp or 0,
    )
    print(json.dumps(stats.to_dict()))
    return 0


def _add_plan_window(sub) -> None:
    p = sub.add_parser("plan-window", help="plan and print the next window without running it")
    add_connection(p)
    add_shop(p)
    add_planning(p)
    p.add_argument("--compact", action="store_true")
    p.set_defaults(func=cmd_plan_window)


def cmd_plan_window(args) -> int:
    settings = shop_settings_from_args(args)
    window = plan_from_args(settings, args, for_run=False)  # writes nothing, fences nothing
    print(json.dumps(window.to_dict(), indent=None if args.compact else 2))
    return 0


def _add_run_window(sub) -> None:
    p = sub.add_parser("run-window", help="run one window exactly once and print a JSON summary")
    add_connection(p)
    add_shop(p)
    add_planning(p)
    g = p.add_argument_group("transactions")
    g.add_argument("--chunk-records", type=POSITIVE("--chunk-records"),
                   help="input records per transaction (default 50000)")
    g.add_argument("--chunk-seconds", type=checked(arguments.positive_float, "--chunk-seconds"),
                   help="max seconds a transaction stays open (default 20)")
    g.add_argument("--transaction-timeout-ms", type=POSITIVE("--transaction-timeout-ms"),
                   help="producer transaction.timeout.ms (default 120000)")
    p.add_argument("--run-id", type=ID("run id"), help="run identifier written to every output's run_id header")
    p.add_argument("--summary-file", help="also write the JSON summary here")
    p.add_argument("--compact", action="store_true")
    # No default here: spark_session picks spark-submit's --master, then $EOS_ETL_SPARK_MASTER, then local[*,4].
    p.add_argument("--master",
                   help="Spark master, e.g. spark://127.0.0.1:7077 (default: $EOS_ETL_SPARK_MASTER, else local[*,4]; "
                        "under spark-submit: its --master); a cluster gets the jars and this package shipped")
    p.add_argument("--spark-conf", action="append", metavar="spark.KEY=VALUE",
                   help="a Spark setting for this run (repeatable), e.g. spark.speculation=true")
    p.add_argument("--keep-spark", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_run_window)


def _pipeline_overrides(args) -> dict:
    out = {}
    for name in ("chunk_seconds", "transaction_timeout_ms", "run_id"):  # chunk_records: in the settings
        value = getattr(args, name, None)
        if value is not None:
            out[name] = value
    return out


def cmd_run_window(args) -> int:
    t0 = time.monotonic()
    spark_conf = _spark_conf_from_args(args)  # before anything connects: bad arguments touch nothing
    settings = shop_settings_from_args(args)
    pipeline = settings.pipeline(**_pipeline_overrides(args))
    admin = ClusterAdmin(settings.connection)  # every question of the preflight and the plan
    checked = preflight(pipeline, admin)  # before Spark starts: misconfiguration fails in seconds
    features = checked.features
    window = plan_from_args(settings, args, for_run=True, pipeline=pipeline, admin=admin)
    # A window with nothing new only renews its commits getting old: no Spark session for that.
    spark = None if window.is_empty else spark_session(f"eos-etl-{settings.topics.purchases}", master=args.master,
                                                       conf=spark_conf)
    route = spark_route(spark) if spark is not None else None
    try:
        summary = run_shop_window(spark, settings, window, check=False, pipeline=pipeline, preflighted=checked)
    except Exception as exc:
        remote = os.environ.get(REMOTE_ENV)
        if remote and (lost := server_lost(exc, remote)) is not None:
            raise lost from exc
        raise
    finally:
        if spark is not None and not args.keep_spark:
            stop_session(spark)
    data = summary_dict(settings, summary)
    data["cluster_features"] = features.to_dict() if features is not None else None
    data["route"] = route  # the report names its phases by it
    data["wall_seconds"] = round(time.monotonic() - t0, 3)
    text = json.dumps(data, indent=None if args.compact else 2)
    if args.summary_file:
        Path(args.summary_file).write_text(text + "\n")
    print(text)
    return 0


def _spark_conf_from_args(args) -> dict[str, str]:
    if args.master and os.environ.get(REMOTE_ENV):
        raise ConfigurationError(f"--master {args.master} and ${REMOTE_ENV} both given: a Spark Connect client "
                                 "runs on its server's master (unset one)")
    try:
        return parse_conf_pairs(args.spark_conf or [])
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc


def _add_offsets(sub) -> None:
    p = sub.add_parser("offsets", help="each input partition's position and the row of docs/positions.md that "
                       "decides it; restore: commit the positions the checkpoint records or the outputs' lineage "
                       "prove; reset: commit a position an operator decides for the partitions named; reslot: "
                       "commit every position again under --writer-slots, fencing the old transactional ids "
                       "(no run may be going on)")
    p.add_argument("action", choices=["show", "restore", "reset", "reslot"])
    p.add_argument("--from-lineage", action="store_true",
                   help="restore: also the partitions whose position only the outputs' lineage holds (one past "
                        "the largest source_offset this pipeline published from this topic)")
    p.add_argument("--to", choices=["earliest", "latest", "checkpoint"],
                   help="reset: where the partitions start again: the input's earliest offset (every record the "
                        "partition holds now is published), its last stable offset (none of them is: the pipeline "
                        "is known to have published them all), or the checkpoint record's position (a record that "
                        "names no topic id, when the topic was not re-created since)")
    p.add_argument("--partitions", type=_partition_list, metavar="0,1",
                   help="reset: the input partitions to reset (the run's error line names them)")
    add_connection(p)
    add_shop(p)
    p.set_defaults(func=cmd_offsets)


def _partition_list(text: str) -> list[int]:
    try:
        parts = sorted({int(p) for p in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--partitions: expected partition numbers like 0,1, got {text!r}") from None
    if any(p < 0 for p in parts):
        raise argparse.ArgumentTypeError(f"--partitions: partition numbers are never negative: {text!r}")
    return parts


#: The rows each reset may act on (docs/positions.md): any other partition's position is known, or
#: its records were published, and the reset would republish or skip them.
RESETTABLE = {
    "earliest": {"other-topic", "other-topic-at-zero", "record-without-id", "beyond-log-end", "below-log-start",
                 "unprovable", "new-partition", "never-published"},
    "checkpoint": {"record-without-id"},
}
RESETTABLE["latest"] = RESETTABLE["earliest"]


def cmd_offsets(args) -> int:
    """Each input partition's position, as :func:`~eos_etl.engine.position.decide` has it; ``restore``
    commits the ones the checkpoint records or the lineage prove; ``reset`` commits the operator's.
    Both refuse (exit 2, nothing moved) a partition whose state they would make wrong."""
    settings = shop_settings_from_args(args)
    pipeline = settings.pipeline()
    if args.action == "reset" and not (args.to and args.partitions):
        raise ConfigurationError("offsets reset needs --to earliest|latest|checkpoint and --partitions (e.g. "
                                 "--partitions 0,1): it moves the pipeline's position, so it is given explicitly")
    if args.action != "reset" and (args.to or args.partitions):
        raise ConfigurationError(f"--to and --partitions are for offsets reset, not offsets {args.action}")
    admin = ClusterAdmin(settings.connection)
    admin.check_reachable()
    parts = admin.partitions(pipeline.input_topic)
    found = positions(admin, pipeline, parts, lineage_progress=lambda line: print(line, file=sys.stderr))
    pipeline = replace(pipeline, input_topic_id=found.topic_id)  # the records it commits name this topic
    rows = {p: _offsets_row(found, p) for p in parts}
    if args.action in ("reset", "restore"):
        # The grouping a run would publish with: exit 2 naming `offsets reslot` if set otherwise (nothing moved).
        pipeline = replace(pipeline, writer_slots=found.grouping(pipeline))
    if args.action == "reslot":
        if pipeline.writer_slots == AS_COMMITTED:
            raise ConfigurationError("offsets reslot needs --writer-slots N|per-partition: the grouping it hands "
                                     "the pipeline's partitions to")
        outcome = reslot_positions(pipeline, _groupings(found), parts)
        for p in outcome["retagged"]:
            rows[p]["writer_slots"] = pipeline.writer_slots
        print(f"{pipeline.input_topic} partitions {sorted(outcome['retagged'])} of group {pipeline.group} now "
              f"published with {describe_slots(pipeline.writer_slots)} (positions unchanged); the other "
              "groupings' transactional ids fenced", file=sys.stderr)
        if outcome["changed"]:
            raise PublishError(f"partitions {outcome['changed']} were committed under another grouping while the "
                               "reslot ran (a run of the pipeline is going on?): stop it and run offsets reslot again")
    elif args.action == "reset":
        todo = _reset_positions(pipeline, found, args.partitions, args.to)
        done = {r.partition: r.committed_before for r in reset_positions(pipeline, todo)}
        for p, before in done.items():
            rows[p].update(position=todo[p], reset_from=before, **{"from": f"reset to {args.to}"})
        print(f"reset {pipeline.input_topic} partitions {sorted(done)} of group {pipeline.group} to {todo} (group "
              "offsets and checkpoint records, one transaction per partition)", file=sys.stderr)
    elif args.action == "restore":
        todo = _restore_positions(pipeline, found, from_lineage=args.from_lineage)
        if todo:
            publish_without_spark(pipeline, {p: OffsetRange(o, o) for p, o in todo.items()})
            print(f"restored {pipeline.input_topic} partitions {sorted(todo)} for group {pipeline.group} "
                  "(group offsets and checkpoint records, one transaction per partition)", file=sys.stderr)
    print(json.dumps({"input_topic": pipeline.input_topic, "group": pipeline.group,
                      "checkpoint_topic": pipeline.checkpoint_topic, "topic_id": found.topic_id,
                      "partitions": {str(p): row for p, row in rows.items()}}, indent=2))
    return 0


_SOURCES = {"group": "group", "checkpoint": "checkpoint topic", "lineage-found": "lineage",
            "new-partition": "start policy", "never-published": "start policy", "other-topic-at-zero": "start policy"}


def _offsets_row(found, p: int) -> dict:
    state, decision = found.states[p], found.decisions[p]
    row = {"group_offset": state.group_offset,
           "checkpoint": state.record.to_dict() if state.record is not None else None,
           "input_earliest": state.log_start, "input_last_stable": state.log_end,
           "position": decision.offset, "from": _SOURCES.get(decision.row.name, "unknown"),
           "writer_slots": found.groupings().get(p),
           "row": decision.row.name, "decision": decision.verdict.value, "why": decision.row.why}
    if decision.row.name == "lineage-found":
        row["position"] = lineage_position(state)
    return row


def _groupings(found) -> dict[int, int | None]:
    """Per partition with a committed position of this topic, the writer slots its record names (a group
    offset without a record of this topic: committed before checkpoint records named their grouping)."""
    named = found.groupings()
    return {p: named.get(p) for p, state in found.states.items()
            if state.group_offset is not None or p in named}


def _restore_positions(pipeline, found, *, from_lineage: bool) -> dict[int, int]:
    """The positions ``offsets restore`` commits: the checkpoint records' where the group's offsets are
    gone, the lineage's (with ``--from-lineage``) where both are. Refuses (the plan's own error) a
    partition it cannot restore: nothing is committed then."""
    todo, refused = {}, []
    for p, decision in found.decisions.items():
        if decision.row.name == "checkpoint":
            todo[p] = decision.offset
        elif decision.row.name == "lineage-found" and from_lineage:
            todo[p] = lineage_position(found.states[p])
        elif decision.verdict is Verdict.STOP:
            refused.append(p)
    if refused:
        replace(found, decisions={p: found.decisions[p] for p in refused}).raise_if_stopped(pipeline)
    return todo


def _reset_positions(pipeline, found, partitions: list[int], to: str) -> dict[int, int]:
    """The positions ``offsets reset --to TO`` commits; a partition whose row it would make wrong is
    refused (exit 2, nothing committed)."""
    if unknown := [p for p in partitions if p not in found.decisions]:
        raise ConfigurationError(f"--partitions {','.join(map(str, unknown))}: {pipeline.input_topic} has "
                                 f"partitions {min(found.decisions)}..{max(found.decisions)}")
    if refused := [p for p in partitions if found.decisions[p].row.name not in RESETTABLE[to]]:
        why = "; ".join(f"{pipeline.input_topic}[{p}] is in row {found.decisions[p].row.name} "
                        f"(position {found.decisions[p].offset})" for p in refused)
        hint = (f"its position is recovered with `{recovery_command(pipeline)}`"
                if any(found.decisions[p].row.name == "lineage-found" for p in refused)
                else "its position is known: a reset would publish its records again or skip them")
        raise ConfigurationError(f"offsets reset --to {to} refused: {why} (docs/positions.md); {hint}. "
                                 "Nothing was committed")
    if to == "checkpoint":
        return {p: found.states[p].record.next_offset for p in partitions}
    return {p: found.states[p].log_start if to == "earliest" else found.states[p].log_end for p in partitions}


def _add_check(sub) -> None:
    p = sub.add_parser("check", help="independent exactly-once check of inputs, outputs and committed offsets")
    add_connection(p)
    add_shop(p)
    p.add_argument("--expected-ends", help='JSON {"partition": end_offset} the committed offsets must equal')
    p.set_defaults(func=cmd_check)


def cmd_check(args) -> int:
    settings = shop_settings_from_args(args)
    expected = json.loads(args.expected_ends) if args.expected_ends else None
    report = check_shop(settings, expected_ends={int(k): v for k, v in expected.items()} if expected else None)
    data = report.to_dict()
    print(json.dumps(data, indent=2))
    if not report.ok:
        print(f"VIOLATIONS: {dict(report.violations)}", file=sys.stderr)
        return 1
    return 0


def _add_transactions(sub) -> None:
    p = sub.add_parser("transactions", help="the pipeline's transactional ids, their state, stuck output partitions")
    add_connection(p)
    add_shop(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_transactions)


def cmd_transactions(args) -> int:
    settings = shop_settings_from_args(args)
    report = inspect_pipeline(settings.connection, TransactionsTool(settings.connection),
                              transactional_id_prefix=settings.transactional_id_prefix,
                              output_topics=settings.topics.outputs)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.describe())
    return 1 if report.stuck else 0


def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="bring up the stack, create topics, generate purchases and run the pipeline")
    p.add_argument("--count", type=int, default=20_000)
    p.add_argument("--invalid-share", type=float, default=0.05)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--windows", type=int, default=1,
                   help="windows to run one after the other, --count purchases each (default 1): the second "
                        "and later show a window on warm servers")
    p.add_argument("--no-airflow", action="store_true", help="run the window directly, without Airflow")
    p.add_argument("--cluster", action="store_true",
                   help="run on the local clusters (3 Kafka nodes, Spark standalone) instead of the single node")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args) -> int:
    return run_demo(args)
