"""Command line: ``python -m eos_etl <command>`` (or ``eos-etl``).

Stack:    fetch-jars | broker {start,stop,kill,restart,status} | airflow {start,stop,status} | up | down | status
          cluster {up,down,status}
Pipeline: create-topics | generate | plan-window | run-window | offsets {show,restore}
Demo:     demo

Kafka connection options are shared by every pipeline command. Passwords are
never taken on the command line (they would show in ``ps`` and in Airflow's
rendered templates): they come from ``$EOS_ETL_KAFKA_PASSWORD`` or a file.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

from . import arguments, logging_setup
from .errors import ConfigurationError, EosEtlError
from .kafka.acls import ROLES

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad argument reported like every other error: one ``error:`` line, exit 2."""

    def error(self, message: str):
        print(f"error: {self.prog}: {' '.join(message.split())}", file=sys.stderr)
        raise SystemExit(2)


def _checked(check, what: str):
    """An argparse type from a checker of :mod:`eos_etl.arguments`."""
    def parse(text: str):
        try:
            return check(text, what)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


_ID = functools.partial(_checked, arguments.identifier)
_POSITIVE = functools.partial(_checked, arguments.positive_int)


# -- shared option groups ---------------------------------------------------------------
def _add_connection(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Kafka connection")
    g.add_argument("--bootstrap-servers", default=os.environ.get("EOS_ETL_BOOTSTRAP_SERVERS", DEFAULT_BOOTSTRAP))
    g.add_argument("--security-protocol", default=os.environ.get("EOS_ETL_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT"),
                   choices=["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"])
    g.add_argument("--sasl-mechanism", default=os.environ.get("EOS_ETL_KAFKA_SASL_MECHANISM"),
                   choices=[None, "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    g.add_argument("--sasl-username", default=os.environ.get("EOS_ETL_KAFKA_USERNAME"))
    g.add_argument("--sasl-password-file", type=Path,
                   help="file holding the SASL password (default: $EOS_ETL_KAFKA_PASSWORD)")
    g.add_argument("--ssl-ca-location", default=os.environ.get("EOS_ETL_KAFKA_SSL_CA_LOCATION"),
                   help="PEM file of the CA the brokers' certificates are verified against (SSL, SASL_SSL)")
    g.add_argument("--ssl-client-pem", default=os.environ.get("EOS_ETL_KAFKA_SSL_CLIENT_PEM"),
                   help="PEM file with this client's key and certificate (mutual TLS): the embedded broker's "
                        "admin when its PLAINTEXT listener is off (<kafka home>/tls/eos-etl-admin.pem)")
    g.add_argument("--connection-json-file", metavar="PATH", type=Path,
                   help="read the whole connection, password included, as JSON from this file: a private file "
                        "written by the DAG's task, or a mounted secret (see docs/security.md)")


def _read_file(option: str, path: Path) -> str:
    """A file named by ``option``; one error line that names the path, never the content."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigurationError(f"{option}: cannot read {str(path)!r}: {reason}") from None


def connection_from_args(args):
    from .kafka.connection import KafkaConnection

    if args.connection_json_file:
        return KafkaConnection.from_json(_read_file("--connection-json-file", args.connection_json_file))
    password = None
    if args.sasl_password_file:
        password = _read_file("--sasl-password-file", args.sasl_password_file).strip()
    elif args.sasl_mechanism:
        password = os.environ.get("EOS_ETL_KAFKA_PASSWORD")
    return KafkaConnection(
        bootstrap_servers=args.bootstrap_servers,
        security_protocol=args.security_protocol,
        sasl_mechanism=args.sasl_mechanism,
        sasl_username=args.sasl_username,
        sasl_password=password,
        ssl_ca_location=args.ssl_ca_location,
        ssl_client_pem=args.ssl_client_pem,
    )


def _add_shop(p: argparse.ArgumentParser) -> None:
    from .shop.job import DEFAULT_GROUP, DEFAULT_TRANSACTIONAL_ID_PREFIX
    from .shop.schema import DEFAULT_MAX_PAYLOAD_BYTES, ShopTopics

    t = ShopTopics()
    g = p.add_argument_group("pipeline")
    g.add_argument("--input-topic", default=t.purchases, type=_ID("input topic"))
    g.add_argument("--invoices-topic", default=t.invoices, type=_ID("invoices topic"))
    g.add_argument("--shipments-topic", default=t.shipments, type=_ID("shipments topic"))
    g.add_argument("--dlq-topic", default=t.dead_letters, type=_ID("dead-letter topic"))
    g.add_argument("--group", default=DEFAULT_GROUP, type=_ID("group"))
    g.add_argument("--transactional-id-prefix", default=DEFAULT_TRANSACTIONAL_ID_PREFIX,
                   type=_ID("transactional-id prefix"),
                   help="ownership claim: ids are <prefix>-<topic>-<partition>; never share between pipelines")
    g.add_argument("--max-payload-bytes", type=_POSITIVE("--max-payload-bytes"), default=DEFAULT_MAX_PAYLOAD_BYTES)


def shop_settings_from_args(args):
    from .shop.job import ShopSettings
    from .shop.schema import ShopTopics

    return ShopSettings(
        connection=connection_from_args(args),
        topics=ShopTopics(args.input_topic, args.invoices_topic, args.shipments_topic, args.dlq_topic),
        group=args.group,
        transactional_id_prefix=args.transactional_id_prefix,
        max_payload_bytes=args.max_payload_bytes,
    )


def _add_planning(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("window")
    g.add_argument("--max-records-per-partition", type=_POSITIVE("--max-records-per-partition"))
    g.add_argument("--until", type=_checked(arguments.timestamp_ms, "--until"),
                   help="ISO-8601 time with a timezone, or epoch millis: only records before it")
    g.add_argument("--start-policy", default="earliest", choices=["earliest", "latest", "fail"],
                   help="where a partition starts when the group never committed")
    g.add_argument("--window-json", help="run exactly this window (from plan-window) instead of planning")


def plan_from_args(settings, args):
    if args.window_json is not None:  # an empty --window-json is a bad window, never "plan one instead"
        return _given_window(settings, args.window_json)
    return settings.plan(
        start_policy=args.start_policy,
        max_records_per_partition=args.max_records_per_partition,
        until_timestamp_ms=args.until,
    )


def _given_window(settings, text: str):
    """A window from ``--window-json`` (``@file`` reads a file), checked against the pipeline's
    topic and group and against what the input holds now (ends at most the last stable offsets)."""
    from .engine.window import Window
    from .kafka.admin import ClusterAdmin

    raw = _read_file("--window-json", Path(text[1:])) if text.startswith("@") else text
    try:
        window = Window.from_json(raw)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ConfigurationError(f"--window-json is not a window from plan-window ({type(exc).__name__}: "
                                 f"{str(exc)[:80]})") from None
    admin = ClusterAdmin(settings.connection)
    partitions = admin.partitions(settings.topics.purchases) if window.topic == settings.topics.purchases else []
    window.check_against(settings.topics.purchases, settings.group,
                         {p: o.last_stable for p, o in admin.offsets(window.topic, partitions).items()})
    return window


# -- commands ---------------------------------------------------------------------------
def cmd_fetch_jars(args) -> int:
    from .stack import maven
    from .stack.versions import KAFKA_BROKER, SPARK_KAFKA

    for bundle in (KAFKA_BROKER, SPARK_KAFKA):
        path = maven.fetch(bundle, force=args.force)
        print(f"{bundle.name}: {len(bundle.jars())} jars in {path}")
    return 0


def cmd_jvm_archive(args) -> int:
    from .shop.jvm_training import SHOP_JVM_WORKLOAD
    from .stack import class_data

    archive = class_data.build(SHOP_JVM_WORKLOAD, force=args.force)
    print(f"Spark JVM class-data archive: {archive} ({archive.stat().st_size / 2**20:.0f} MB)")
    return 0


def cmd_broker(args) -> int:
    from .stack.kafka_cluster import KafkaCluster

    broker = KafkaCluster.local()
    if args.action == "start":
        broker.start()
    elif args.action == "stop":
        broker.stop()
    elif args.action == "kill":
        broker.kill()
    elif args.action == "restart":
        broker.restart(hard=args.hard)
    print(broker.status().describe())
    return 0


def cmd_airflow(args) -> int:
    from .stack.airflow import AirflowStandalone

    af = AirflowStandalone.local()
    if args.action == "start":
        af.start()
        print(af.describe())
    elif args.action == "stop":
        af.stop()
        print(af.status().describe())
    else:
        print(af.status().describe())
    return 0


def cmd_up(args) -> int:
    from .stack.airflow import AirflowStandalone
    from .stack.kafka_cluster import KafkaCluster

    broker = KafkaCluster.local().start()
    print(broker.status().describe())
    if not args.no_airflow:
        from .stack.spark_connect import start_for_windows

        af = AirflowStandalone.local(spark_connect=start_for_windows()).start()
        print(af.describe())
    return 0


def cmd_down(_args) -> int:
    from .stack.airflow import AirflowStandalone
    from .stack.kafka_cluster import KafkaCluster

    from .stack.spark_connect import SparkConnectServer

    AirflowStandalone.local().stop()
    SparkConnectServer.local().stop()
    KafkaCluster.local().stop()
    print("stopped Airflow, the Spark Connect server and the Kafka broker")
    return 0


def cmd_status(_args) -> int:
    from .stack.airflow import AirflowStandalone
    from .stack.kafka_cluster import KafkaCluster

    from .stack.spark_connect import SparkConnectServer

    print(KafkaCluster.local().status().describe())
    print(SparkConnectServer.local().describe())
    print(AirflowStandalone.local().status().describe())
    return 0


def cmd_cluster(args) -> int:
    from .stack.kafka_cluster import KafkaCluster
    from .stack.spark_cluster import SparkStandalone

    kafka, spark = KafkaCluster.local(3), SparkStandalone.local()
    if args.action == "up":
        kafka.start()
        spark.start()
    elif args.action == "down":
        spark.stop()
        kafka.stop()
    print(kafka.status().describe())
    print(spark.status().describe())
    if args.action == "up":
        print(f"run a window on it: python -m eos_etl run-window --master {spark.master_url} "
              f"--bootstrap-servers {kafka.bootstrap_servers}")
    return 0


def cmd_spark_connect(args) -> int:
    from .stack.spark_connect import SparkConnectServer

    server = SparkConnectServer.local()
    if args.action == "run":
        server.exec_in_foreground()  # never returns: this process becomes the server
    if args.action in ("stop", "restart"):
        server.stop()
    if args.action in ("start", "restart"):
        server.start()
    print(server.describe())
    if server.is_running() and args.action != "stop":
        # The address only: the token stays in its file (never printed).
        print(f"run windows on it: SPARK_REMOTE={server.url} SPARK_CONNECT_AUTHENTICATE_TOKEN=\"$(cat "
              f"{server.token_file})\" python -m eos_etl run-window ...")
    return 0


def cmd_create_topics(args) -> int:
    from .kafka.admin import ClusterAdmin
    from .kafka.topics import Durability, ensure_topics

    settings = shop_settings_from_args(args)
    admin = ClusterAdmin(settings.connection)
    admin.check_reachable()
    brokers = admin.broker_count()
    durability = Durability.for_cluster(brokers, args.replication_factor, args.min_insync_replicas)
    print(f"create-topics: {brokers} live broker(s): {durability.describe()}", file=sys.stderr)
    states = ensure_topics(admin, settings.specs(args.partitions), durability,
                           allow_existing=args.allow_existing)
    print(json.dumps({name: state.to_dict() for name, state in states.items()}))
    return 0


def cmd_generate(args) -> int:
    from .shop.generator import generate

    conn = connection_from_args(args)
    stats = generate(
        conn, args.input_topic, args.count, invalid_share=args.invalid_share, rate=args.rate, seed=args.seed,
        transaction_size=args.transaction_size, abort_share=args.abort_share, progress=not args.no_progress,
        timestamp_ms=args.timestamp or 0,
    )
    print(json.dumps(stats.to_dict()))
    return 0


def cmd_plan_window(args) -> int:
    settings = shop_settings_from_args(args)
    window = plan_from_args(settings, args)
    print(json.dumps(window.to_dict(), indent=None if args.compact else 2))
    return 0


def _pipeline_overrides(args) -> dict:
    out = {}
    for name in ("chunk_records", "chunk_seconds", "transaction_timeout_ms", "run_id"):
        value = getattr(args, name, None)
        if value is not None:
            out[name] = value
    return out


def cmd_run_window(args) -> int:
    from .shop.job import run_shop_window, summary_dict
    from .stack.connect_client import server_lost
    from .stack.session import spark_session, stop_session
    from .stack.spark import REMOTE_ENV

    t0 = time.monotonic()
    spark_conf = _spark_conf_from_args(args)  # before anything connects: bad arguments touch nothing
    settings = shop_settings_from_args(args)
    from .engine.runner import preflight

    pipeline = settings.pipeline(**_pipeline_overrides(args))
    features = preflight(pipeline).features  # before Spark starts: misconfiguration fails in seconds
    window = plan_from_args(settings, args)
    # A window with nothing new only renews its commits: no Spark session for that.
    spark = None if window.is_empty else spark_session(f"eos-etl-{settings.topics.purchases}", master=args.master,
                                                       conf=spark_conf)
    try:
        summary = run_shop_window(spark, settings, window, check=False,
                                  **{**_pipeline_overrides(args), "run_id": pipeline.run_id})
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
    data["wall_seconds"] = round(time.monotonic() - t0, 3)
    text = json.dumps(data, indent=None if args.compact else 2)
    if args.summary_file:
        Path(args.summary_file).write_text(text + "\n")
    print(text)
    return 0


def _spark_conf_from_args(args) -> dict[str, str]:
    from .stack.spark import REMOTE_ENV, parse_conf_pairs

    if args.master and os.environ.get(REMOTE_ENV):
        raise ConfigurationError(f"--master {args.master} and ${REMOTE_ENV} both given: a Spark Connect client "
                                 "runs on its server's master (unset one)")
    try:
        return parse_conf_pairs(args.spark_conf or [])
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc


def cmd_acl(args) -> int:
    from .kafka.acls import grant, principal_name

    settings = shop_settings_from_args(args)
    if args.replay_version:
        settings = settings.replay(args.replay_version)
    grants = list(dict.fromkeys(g for role in args.role for g in settings.pipeline().resources().grants(role)))
    grant(connection_from_args(args), args.principal, grants)
    for g in grants:
        print(f"granted {principal_name(args.principal)}: {g}")
    return 0


def cmd_scram_user(args) -> int:
    from .kafka.users import MECHANISM, set_scram_users

    if args.password_file:
        password = _read_file("--password-file", args.password_file).strip()
    else:
        password = os.environ.get(args.password_env, "")
    if len(password) < 12:
        raise ConfigurationError(f"the password for {args.username!r} is empty or shorter than 12 characters "
                                 f"({'--password-file' if args.password_file else '$' + args.password_env})")
    set_scram_users(connection_from_args(args), {args.username: password})
    print(f"{MECHANISM} credentials stored for User:{args.username}")
    return 0


def cmd_transactions(args) -> int:
    from .kafka.transactions import inspect_pipeline
    from .stack.kafka_tools import TransactionsTool

    settings = shop_settings_from_args(args)
    report = inspect_pipeline(settings.connection, TransactionsTool(settings.connection),
                              transactional_id_prefix=settings.transactional_id_prefix,
                              output_topics=settings.topics.outputs)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.describe())
    return 1 if report.stuck else 0


def cmd_offsets(args) -> int:
    """Each input partition's position and where it comes from; ``restore`` commits the recoverable ones."""
    from .engine import checkpoint_log
    from .engine.lineage_positions import last_published
    from .engine.publisher import publish_without_spark
    from .engine.window import OffsetRange
    from .kafka.admin import ClusterAdmin

    settings = shop_settings_from_args(args)
    pipeline = settings.pipeline()
    admin = ClusterAdmin(settings.connection)
    admin.check_reachable()
    parts = admin.partitions(pipeline.input_topic)
    group = admin.committed_offsets(pipeline.group, pipeline.input_topic, parts)
    entries = checkpoint_log.read_entries(settings.connection, pipeline.checkpoint_topic, pipeline.group,
                                          pipeline.input_topic)
    inputs = admin.offsets(pipeline.input_topic, parts)
    lineage = {}
    if args.from_lineage:
        lineage = last_published(admin, pipeline.input_topic, [p for p in parts if group[p] is None
                                                               and p not in entries], pipeline.output_topics,
                                 progress=lambda line: print(line, file=sys.stderr))
    rows, todo = {}, {}
    for p in parts:
        row = {"group_offset": group[p], "checkpoint": entries[p].to_dict() if p in entries else None,
               "input_earliest": inputs[p].earliest, "input_last_stable": inputs[p].last_stable}
        if group[p] is not None:
            position, source = group[p], "group"
        elif p in entries:
            position = todo[p] = entries[p].next_offset
            source = "checkpoint topic"
        elif args.from_lineage:
            position = todo[p] = lineage[p] + 1 if p in lineage else inputs[p].earliest
            source = "lineage" if p in lineage else "no output: earliest"
        else:
            position, source = None, "unknown: --from-lineage reads the outputs"
        rows[str(p)] = {**row, "position": position, "from": source}
    if args.action == "restore" and todo:
        publish_without_spark(pipeline, {p: OffsetRange(o, o) for p, o in todo.items()})
        print(f"restored {pipeline.input_topic} partitions {sorted(todo)} for group {pipeline.group} "
              "(group offsets and checkpoint records, one transaction per partition)", file=sys.stderr)
    print(json.dumps({"input_topic": pipeline.input_topic, "group": pipeline.group,
                      "checkpoint_topic": pipeline.checkpoint_topic, "partitions": rows}, indent=2))
    return 0


def cmd_check(args) -> int:
    from .checker import check_shop

    settings = shop_settings_from_args(args)
    expected = json.loads(args.expected_ends) if args.expected_ends else None
    report = check_shop(settings, expected_ends={int(k): v for k, v in expected.items()} if expected else None)
    data = report.to_dict()
    print(json.dumps(data, indent=2))
    if not report.ok:
        print(f"VIOLATIONS: {dict(report.violations)}", file=sys.stderr)
        return 1
    return 0


def cmd_soak(args) -> int:
    from .faults.soak import SCENARIOS, SoakOptions, run_soak, summarize, write_markdown

    if args.cluster and args.partitions:
        raise ConfigurationError("soak: --cluster and --partitions are two soaks; run one, then the other")
    if args.cluster:
        return _cmd_soak_cluster(args)
    if args.partitions:
        return _cmd_soak_partitions(args)
    opts = SoakOptions(records=args.records, kills=args.kills, seeds=args.seeds,
                       broker_restarts=args.broker_restarts, start_phase_kills=args.start_phase_kills,
                       duration_s=args.duration, endurance_windows=args.endurance_windows,
                       scenarios=tuple(args.scenarios.split(",")) if args.scenarios else SCENARIOS,
                       out=Path(args.out) if args.out else None)
    results, wall = run_soak(opts)
    command = "python -m eos_etl soak " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "python -m eos_etl soak"
    out = write_markdown(results, wall, opts, command.strip())
    for row in summarize(results):
        print(f"{row['scenario']:<22} trials={row['trials']:<3} records={row['records']:<8} kills={row['faults']:<3} "
              f"violations={row['violations']} errors={row['errors']} wall={row['seconds']:.0f}s")
    bad = [r for r in results if not r.ok]
    print(f"{len(results)} trials in {wall / 60:.1f} min, {len(bad)} failed; table written to {out}")
    return 1 if bad else 0


def _cmd_soak_cluster(args) -> int:
    from .faults.soak import (CLUSTER_SECTION, ClusterSoakOptions, save_results, load_results, merge_rerun,
                              run_cluster_soak, summarize, write_cluster_markdown)

    command = ("python -m eos_etl soak " + " ".join(sys.argv[2:])).strip()
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
    from .faults.partition_soak import PartitionSoakOptions, run_partition_soak, summarize, write_markdown

    command = ("python -m eos_etl soak " + " ".join(sys.argv[2:])).strip()
    try:
        versions = tuple(int(v) for v in args.transaction_versions.split(","))
    except ValueError:
        raise ConfigurationError(f"--transaction-versions: a comma-separated list of numbers, not "
                                 f"{args.transaction_versions!r}") from None
    opts = PartitionSoakOptions(seeds=args.seeds, transaction_versions=versions,
                                scenarios=tuple(args.scenarios.split(",")) if args.scenarios else (),
                                out=Path(args.out) if args.out else None, command=command)
    if not args.merge_into:
        run = run_partition_soak(opts, on_trial=lambda done: write_markdown(done, opts, command))
        out = write_markdown(run, opts, command)
    else:
        out, run = _rerun_partitions(args, opts, command)
    for row in summarize(run.results):
        print(f"{row['scenario']:<30} {row['variant']:<22} trials={row['trials']:<3} faults={row['faults']:<3} "
              f"violations={row['violations']} hangs={row['hangs']} errors={row['errors']} "
              f"new_epochs={row['new_epochs']} longest={row['longest_s']}s")
    bad = [r for r in run.results if not r.ok]
    print(f"{len(run.results)} partition trials in {run.wall_s / 60:.1f} min, {len(bad)} failed; section written "
          f"to {out}")
    return 1 if bad else 0


def _rerun_partitions(args, opts, command: str):
    """Re-run ``--scenarios`` and replace their trials in an earlier partition soak's results."""
    from .faults.partition_soak import PartitionSoakRun, load, run_partition_soak, save, write_markdown
    from .faults.soak import merge_rerun

    earlier, earlier_command = load(Path(args.merge_into))  # read first: the soak rewrites its results.json
    label = (f"{earlier_command or 'an earlier soak'}`, with the trials of {', '.join(opts.scenarios)} "
             f"replaced by `{command}")

    def merged(done: PartitionSoakRun) -> PartitionSoakRun:
        return PartitionSoakRun(merge_rerun(earlier.results, done.results), earlier.clusters or done.clusters,
                                earlier.wall_s + done.wall_s)

    run = run_partition_soak(opts, on_trial=lambda done: write_markdown(merged(done), opts, label))
    whole = merged(run)
    save(whole, Path(args.merge_into), label)
    return write_markdown(whole, opts, label), whole


def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(args)


# -- parser -----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="eos-etl", description="Exactly-once batch ETL from Kafka to Kafka")
    parser.add_argument("--log-level", default=os.environ.get("EOS_ETL_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("fetch-jars", help="fetch the Kafka broker and Spark connector jars from Maven Central")
    p.add_argument("--force", action="store_true")
    p.set_defaults(func=cmd_fetch_jars)

    p = sub.add_parser("jvm-archive", help="build this machine's class-data archive for Spark's JVMs (make setup "
                       "does; a window's JVM then starts ~1.6 s sooner and uses ~3 CPU s less)")
    p.add_argument("--force", action="store_true", help="rebuild it even if a whole one is there")
    p.set_defaults(func=cmd_jvm_archive)

    p = sub.add_parser("broker", help="the local Kafka broker (var/kafka, port $EOS_ETL_KAFKA_PORT or 9092)")
    p.add_argument("action", choices=["start", "stop", "kill", "restart", "status"])
    p.add_argument("--hard", action="store_true", help="restart with SIGKILL instead of a clean stop")
    p.set_defaults(func=cmd_broker)

    p = sub.add_parser("airflow", help="the local Airflow standalone (var/airflow, port $EOS_ETL_AIRFLOW_PORT or 8080)")
    p.add_argument("action", choices=["start", "stop", "status"])
    p.set_defaults(func=cmd_airflow)

    p = sub.add_parser("up", help="start the broker, the Spark Connect server the DAGs' windows run on "
                       "(EOS_ETL_SPARK_CONNECT=off: a spark-submit per window) and Airflow")
    p.add_argument("--no-airflow", action="store_true")
    p.set_defaults(func=cmd_up)
    sub.add_parser("down", help="stop Airflow, the Spark Connect server and the broker").set_defaults(func=cmd_down)
    sub.add_parser("status", help="show what runs where").set_defaults(func=cmd_status)

    p = sub.add_parser("cluster", help="the local clusters: 3 Kafka nodes (var/kafka-cluster) and a Spark "
                                       "standalone master with 2 workers (var/spark-cluster)")
    p.add_argument("action", choices=["up", "down", "status"])
    p.set_defaults(func=cmd_cluster)

    p = sub.add_parser("spark-connect", help="a long-lived Spark application that runs windows without a "
                       "spark-submit each (var/spark-connect, loopback port $EOS_ETL_SPARK_CONNECT_PORT or 15002)")
    p.add_argument("action", choices=["start", "stop", "restart", "status", "run"],
                   help="run: the server in the foreground, in place of this process (a container's command)")
    p.set_defaults(func=cmd_spark_connect)

    p = sub.add_parser("create-topics", help="create the shop's input and output topics")
    _add_connection(p)
    _add_shop(p)
    p.add_argument("--partitions", type=_POSITIVE("--partitions"), default=4)
    p.add_argument("--replication-factor", type=_POSITIVE("--replication-factor"),
                   help="copies of every partition (default: min(3, live brokers))")
    p.add_argument("--min-insync-replicas", type=_POSITIVE("--min-insync-replicas"),
                   help="replicas an acks=all write needs (default: replication factor - 1, at least 1)")
    p.add_argument("--allow-existing", action="store_true",
                   help="keep existing topics that have fewer partitions, replicas or in-sync replicas than asked")
    p.set_defaults(func=cmd_create_topics)

    p = sub.add_parser("generate", help="write demo purchases")
    _add_connection(p)
    p.add_argument("--input-topic", default="purchases")
    p.add_argument("--count", type=int, default=10_000)
    p.add_argument("--rate", type=float, help="purchases per second (default: as fast as possible)")
    p.add_argument("--invalid-share", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--transaction-size", type=int, help="write in transactions of this many purchases")
    p.add_argument("--abort-share", type=float, default=0.0, help="share of those transactions to abort")
    p.add_argument("--timestamp", type=_checked(arguments.timestamp_ms, "--timestamp"),
                   help="record time of every purchase, ISO-8601 with a timezone or epoch millis (default: when "
                        "sent); e.g. purchases that arrive late for an hour a backfill covers")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("plan-window", help="plan and print the next window without running it")
    _add_connection(p)
    _add_shop(p)
    _add_planning(p)
    p.add_argument("--compact", action="store_true")
    p.set_defaults(func=cmd_plan_window)

    p = sub.add_parser("run-window", help="run one window exactly once and print a JSON summary")
    _add_connection(p)
    _add_shop(p)
    _add_planning(p)
    g = p.add_argument_group("transactions")
    g.add_argument("--chunk-records", type=_POSITIVE("--chunk-records"),
                   help="input records per transaction (default 50000)")
    g.add_argument("--chunk-seconds", type=_checked(arguments.positive_float, "--chunk-seconds"),
                   help="max seconds a transaction stays open (default 20)")
    g.add_argument("--transaction-timeout-ms", type=_POSITIVE("--transaction-timeout-ms"),
                   help="producer transaction.timeout.ms (default 120000)")
    p.add_argument("--run-id", type=_ID("run id"), help="run identifier written to every output's run_id header")
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

    p = sub.add_parser("offsets", help="each input partition's committed position and where it comes from (group "
                       "offset, checkpoint topic, outputs' lineage); restore: commit it where the group's is gone")
    p.add_argument("action", choices=["show", "restore"])
    p.add_argument("--from-lineage", action="store_true",
                   help="for partitions with neither a group offset nor a checkpoint record: one past the largest "
                        "source_offset in the outputs' lineage headers (reads the outputs back from their end)")
    _add_connection(p)
    _add_shop(p)
    p.set_defaults(func=cmd_offsets)

    p = sub.add_parser("check", help="independent exactly-once check of inputs, outputs and committed offsets")
    _add_connection(p)
    _add_shop(p)
    p.add_argument("--expected-ends", help='JSON {"partition": end_offset} the committed offsets must equal')
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("acl", help="grant a principal exactly the ACLs a pipeline role needs, and print them")
    p.add_argument("action", choices=["grant"])
    p.add_argument("--principal", required=True, help="the SASL user (or User:<name>) to grant to")
    p.add_argument("--role", action="append", choices=list(ROLES), required=True,
                   help="pipeline: plan and run windows; validator: data-quality validation; watcher: the "
                        "event-driven DAG's arrivals consumer (its group: the pipeline's + '-arrivals') (repeatable)")
    p.add_argument("--replay-version", metavar="VERSION",
                   help="grant on the resources of a replay under this output version instead (its topics "
                        "<topic>.VERSION, group and transactional ids)")
    _add_connection(p)
    _add_shop(p)
    p.set_defaults(func=cmd_acl)

    p = sub.add_parser("scram-user", help="create or update a SCRAM-SHA-512 user (as the super-user); the "
                                          "password comes from a file or an environment variable, never a flag")
    p.add_argument("--username", required=True, type=_ID("--username"))
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--password-file", type=Path, help="file holding the new user's password")
    source.add_argument("--password-env", metavar="VAR", help="environment variable holding the new user's password")
    _add_connection(p)
    p.set_defaults(func=cmd_scram_user)

    p = sub.add_parser("transactions", help="the pipeline's transactional ids, their state, stuck output partitions")
    _add_connection(p)
    _add_shop(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_transactions)

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
    p.add_argument("--scenarios", help="comma-separated subset (default: all)")
    p.add_argument("--out", help="results table (default: docs/reliability.md)")
    p.add_argument("--cluster", action="store_true",
                   help="broker faults on a private 3-node cluster (var/soak-cluster); --seeds trials per scenario, "
                        "--scenarios from faults.cluster_scenarios; writes the cluster section")
    p.add_argument("--partitions", action="store_true",
                   help="network partitions on a private 3-node cluster whose nodes and job are network "
                        "namespaces of their own (root; var/soak-partitions): --seeds trials per scenario on each "
                        "--transaction-versions cluster, --scenarios from faults.partition_scenarios; writes the "
                        "partition section")
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

    p = sub.add_parser("demo", help="bring up the stack, create topics, generate purchases and run the pipeline")
    p.add_argument("--count", type=int, default=20_000)
    p.add_argument("--invalid-share", type=float, default=0.05)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--no-airflow", action="store_true", help="run the window directly, without Airflow")
    p.add_argument("--cluster", action="store_true",
                   help="run on the local clusters (3 Kafka nodes, Spark standalone) instead of the single node")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging_setup.enable_crash_stacks()  # a native crash (librdkafka, py4j) must leave a stack in the log
    args = build_parser().parse_args(argv)
    logging_setup.configure(args.log_level)
    try:
        return args.func(args)
    except EosEtlError as exc:
        # Diagnosed problems: one clear message, no traceback.
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
