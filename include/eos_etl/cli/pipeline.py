"""The pipeline's commands: topics, demo purchases, windows, offsets, checks, transactions.

create-topics | generate | plan-window | run-window | offsets (offsets.py) | check | transactions | demo
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .. import arguments
from ..checker import check_shop
from ..demo import run_demo
from ..engine import checkpoint_log, identity
from ..engine.planning import identity_keeper
from ..engine.planning.planner import positions
from ..engine.planning.preflight import preflight
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
from . import offsets
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
    for add in (_add_create_topics, _add_generate, _add_plan_window, _add_run_window, offsets.add_offsets,
                _add_check, _add_transactions, _add_demo):
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
    _record_identity(settings.pipeline(), admin, input_created=states[settings.topics.purchases].created)
    print(json.dumps({name: state.to_dict() for name, state in states.items()}))  # topics only: its contract
    return 0


def _record_identity(pipeline, admin: ClusterAdmin, *, input_created: bool):
    """The pipeline is made: its identity recorded (version 1, born new where nothing can have been published
    from the input: this command created it, or no position and no output of the pipeline exists). An identity
    already recorded is kept as it is, after its settings are checked against this command's."""
    parts = admin.partitions(pipeline.input_topic)
    found = positions(admin, pipeline, parts, input_created=input_created)
    if found.recorded:
        return found.identity
    recorded = identity_keeper.establish(pipeline, found.identity, parts, change="create-topics")
    identity.check(recorded, pipeline)
    print(f"create-topics: recorded the pipeline's identity (born {recorded.born}; `offsets show` prints it): "
          f"{json.dumps(recorded.to_dict())}", file=sys.stderr)
    return recorded


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
