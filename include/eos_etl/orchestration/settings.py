"""Pipeline settings for the DAGs: Airflow connection + an optional Variable.

* Kafka: Airflow connection ``kafka_purchases`` (any conn type). ``host`` is a
  host or a comma-separated bootstrap list, ``port`` optional, ``login`` /
  ``password`` for SASL, ``extra`` may set ``security_protocol``,
  ``sasl_mechanism`` and ``ssl_ca_location``.
* Spark: Airflow connection ``spark_default`` (the provider's own): a
  spark-submit per window. With ``$EOS_ETL_SPARK_CONNECT_CONN_ID`` set when
  the DAGs are parsed (e.g. ``spark_connect_default``, conn type
  ``spark_connect``: host ``localhost``, the port, the token as password), every
  window runs on that long-lived Spark Connect server instead
  (``python -m eos_etl spark-connect start`` runs one on loopback).
* Topics, group, transactional-id prefix and defaults: Airflow Variable
  ``eos_etl_shop`` (JSON), every key optional::

      {"topics": {"purchases": "purchases", "invoices": "invoices",
                  "shipments": "shipments", "dead_letters": "purchases.dlq"},
       "group": "shop-invoicing", "transactional_id_prefix": "shop-invoicing",
       "max_payload_bytes": 262144, "chunk_records": 50000, "writer_slots": null}

  ``writer_slots`` (``engine.slots``): null or absent, the grouping the pipeline's positions were
  committed with (a new pipeline: 2 transactional ids for all its input partitions); N, N ids;
  ``"per-partition"``, one id per input partition. A committed grouping is changed only with
  ``python -m eos_etl offsets reslot`` (the DAGs stopped).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..errors import ConfigurationError
from ..kafka.connection import KafkaConnection
from ..shop.schema import ShopTopics
from ..shop.settings import ShopSettings
from ..spark.connect_client import AIRFLOW_CONN_ID, AIRFLOW_ROUTE_ENV

KAFKA_CONN_ID = "kafka_purchases"
SPARK_CONN_ID = "spark_default"
SPARK_CONNECT_CONN_ID = AIRFLOW_CONN_ID
SPARK_CONNECT_ROUTE_ENV = AIRFLOW_ROUTE_ENV
SHOP_VARIABLE = "eos_etl_shop"


def kafka_connection_from_airflow(conn) -> KafkaConnection:
    """An Airflow Connection -> KafkaConnection (the password stays inside the value)."""
    extra = conn.extra_dejson or {}
    hosts = conn.host or ""
    if conn.port and "," not in hosts and ":" not in hosts:
        hosts = f"{hosts}:{conn.port}"
    if not hosts:
        raise ConfigurationError(f"Airflow connection {conn.conn_id!r} has no host (bootstrap servers)")
    # No defaults for the security settings: a login without them is an error, not a
    # silent downgrade to an unencrypted protocol or a weaker mechanism.
    try:
        return KafkaConnection(
            bootstrap_servers=hosts,
            security_protocol=extra.get("security_protocol") or "PLAINTEXT",
            sasl_mechanism=extra.get("sasl_mechanism"),
            sasl_username=conn.login or None,
            sasl_password=conn.password or None,
            ssl_ca_location=extra.get("ssl_ca_location"),
        )
    except ConfigurationError as exc:
        raise ConfigurationError(f"Airflow connection {conn.conn_id!r}: {exc} (set security_protocol and "
                                 "sasl_mechanism in its extra)") from exc


def get_kafka_connection(conn_id: str = KAFKA_CONN_ID) -> KafkaConnection:
    # Deferred: Airflow loads only where a connection is read; the names and
    # kafka_connection_from_airflow serve code that runs without it (tests/{unit,integration}/kafka/test_acls.py,
    # the compose checks).
    from airflow.sdk import BaseHook

    # Fetching through Airflow registers the password with its secrets masker,
    # so it is replaced by *** in any task log line.
    return kafka_connection_from_airflow(BaseHook.get_connection(conn_id))


def validation_spark_master(conn_id: str = SPARK_CONN_ID) -> str:
    """Where the validate task runs Spark: the Spark connection's cluster (host[:port], as
    SparkSubmitHook resolves it), or two local cores when that connection is a local master."""
    from airflow.sdk import BaseHook  # deferred, as in get_kafka_connection

    conn = BaseHook.get_connection(conn_id)
    master = conn.host or "local"
    if master.startswith("local"):
        return "local[2]"  # the task's own process: leave the worker's other cores alone
    return f"{master}:{conn.port}" if conn.port else master


@dataclass(frozen=True)
class ShopDagConfig:
    """The DAGs' pipeline settings: the Variable's JSON (see the module docstring), read at task time."""

    variable: dict

    @classmethod
    def load(cls, variable: str = SHOP_VARIABLE) -> "ShopDagConfig":
        from airflow.sdk import Variable  # deferred, as in get_kafka_connection

        raw = Variable.get(variable, default=None)
        return cls(json.loads(raw) if raw else {})

    @property
    def topics(self) -> ShopTopics:
        return ShopTopics(**self.variable.get("topics", {}))

    def settings(self, connection: KafkaConnection, *, version: str | None = None) -> ShopSettings:
        """Settings for the main pipeline, or for a replay under output version ``version``."""
        settings = ShopSettings.from_mapping(self.variable, connection)
        return settings.replay(version) if version else settings
