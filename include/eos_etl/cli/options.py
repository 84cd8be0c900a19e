"""The options several commands share: the Kafka connection, the pipeline, the window.

Kafka connection options are shared by every pipeline command. Passwords are
never taken on the command line (they would show in ``ps`` and in Airflow's
rendered templates): they come from ``$EOS_ETL_KAFKA_PASSWORD`` or a file.
"""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path

from .. import arguments
from ..engine import slots
from ..engine.window import Window
from ..errors import ConfigurationError
from ..kafka.admin import ClusterAdmin
from ..kafka.connection import KafkaConnection
from ..shop.schema import DEFAULT_MAX_PAYLOAD_BYTES, ShopTopics
from ..shop.settings import DEFAULT_GROUP, DEFAULT_TRANSACTIONAL_ID_PREFIX, ShopSettings

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def checked(check, what: str):
    """An argparse type from a checker of :mod:`eos_etl.arguments`."""
    def parse(text: str):
        try:
            return check(text, what)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


ID = functools.partial(checked, arguments.identifier)
POSITIVE = functools.partial(checked, arguments.positive_int)


def read_file(option: str, path: Path) -> str:
    """A file named by ``option``; one error line that names the path, never the content."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigurationError(f"{option}: cannot read {str(path)!r}: {reason}") from None


# -- Kafka connection -------------------------------------------------------------------
def add_connection(p: argparse.ArgumentParser) -> None:
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


def connection_from_args(args) -> KafkaConnection:
    if args.connection_json_file:
        return KafkaConnection.from_json(read_file("--connection-json-file", args.connection_json_file))
    password = None
    if args.sasl_password_file:
        password = read_file("--sasl-password-file", args.sasl_password_file).strip()
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


# -- the shop pipeline ------------------------------------------------------------------
def add_shop(p: argparse.ArgumentParser) -> None:
    t = ShopTopics()
    g = p.add_argument_group("pipeline")
    g.add_argument("--input-topic", default=t.purchases, type=ID("input topic"))
    g.add_argument("--invoices-topic", default=t.invoices, type=ID("invoices topic"))
    g.add_argument("--shipments-topic", default=t.shipments, type=ID("shipments topic"))
    g.add_argument("--dlq-topic", default=t.dead_letters, type=ID("dead-letter topic"))
    g.add_argument("--group", default=DEFAULT_GROUP, type=ID("group"))
    g.add_argument("--transactional-id-prefix", default=DEFAULT_TRANSACTIONAL_ID_PREFIX,
                   type=ID("transactional-id prefix"),
                   help="ownership claim: ids are <prefix>-<topic>-s<slot>of<N> (or -<partition>); never share "
                        "between pipelines")
    g.add_argument("--max-payload-bytes", type=POSITIVE("--max-payload-bytes"), default=DEFAULT_MAX_PAYLOAD_BYTES)
    g.add_argument("--writer-slots", type=writer_slots, default=slots.AS_COMMITTED, metavar="N|per-partition",
                   help="publish with N transactional ids (<prefix>-<topic>-s<i>of<N>, partition p by slot p %% N), "
                        "or one per partition (per-partition); unset: as the positions were committed (a new "
                        f"pipeline: {slots.DEFAULT_WRITER_SLOTS}). A committed grouping changes only with "
                        "`offsets reslot`")


def writer_slots(text: str) -> int | None | str:
    """``--writer-slots``: a positive count, ``per-partition`` (or ``none``), or ``as-committed``."""
    try:
        return slots.parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--writer-slots: expected a positive count or per-partition, "
                                         f"got {text!r}") from None


def shop_settings_from_args(args) -> ShopSettings:
    return ShopSettings.from_args(args, connection_from_args(args))


# -- the window -------------------------------------------------------------------------
def add_planning(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("window")
    g.add_argument("--max-records-per-partition", type=POSITIVE("--max-records-per-partition"))
    g.add_argument("--until", type=checked(arguments.timestamp_ms, "--until"),
                   help="ISO-8601 time with a timezone, or epoch millis: only records before it")
    g.add_argument("--start-policy", default="earliest", choices=["earliest", "latest", "fail"],
                   help="where a partition starts when the group never committed")
    g.add_argument("--window-json", help="run exactly this window (from plan-window) instead of planning")


def plan_from_args(settings: ShopSettings, args, *, for_run: bool, pipeline=None, admin=None) -> Window:
    """``for_run``: run-window's plan (may fence a stuck transaction, see ShopSettings.plan);
    plan-window's is read-only. ``pipeline``, ``admin``: the run's configuration and admin client,
    when it has them already."""
    if args.window_json is not None:  # an empty --window-json is a bad window, never "plan one instead"
        return _given_window(settings, args.window_json, admin)
    return settings.plan(
        for_run=for_run,
        pipeline=pipeline,
        admin=admin,
        start_policy=args.start_policy,
        max_records_per_partition=args.max_records_per_partition,
        until_timestamp_ms=args.until,
    )


def _given_window(settings: ShopSettings, text: str, admin: ClusterAdmin | None = None) -> Window:
    """A window from ``--window-json`` (``@file`` reads a file), checked against the pipeline's
    topic and group and against what the input holds now (ends at most the last stable offsets)."""
    raw = read_file("--window-json", Path(text[1:])) if text.startswith("@") else text
    try:
        window = Window.from_json(raw)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ConfigurationError(f"--window-json is not a window from plan-window ({type(exc).__name__}: "
                                 f"{str(exc)[:80]})") from None
    admin = admin or ClusterAdmin(settings.connection)
    same = window.topic == settings.topics.purchases
    partitions = admin.partitions(settings.topics.purchases) if same else []
    window.check_against(settings.topics.purchases, settings.group,
                         {p: o.last_stable for p, o in admin.offsets(window.topic, partitions).items()},
                         admin.topic_id(window.topic) if same and window.topic_id else "")
    return window
