"""Security settings without a broker: incomplete SASL/TLS settings are refused, and an Airflow login
without the security settings fails instead of downgrading. Authentication and authorization on the real
broker (SASL_SSL with SCRAM-SHA-512, least-privilege ACLs per role): tests/integration/kafka/test_acls.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from eos_etl.errors import ConfigurationError
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.orchestration.settings import kafka_connection_from_airflow


# -- broker-free: incomplete security settings fail, never downgrade ---------------------------------
@pytest.mark.parametrize("kwargs, says", [
    ({"security_protocol": "SASL_SSL", "sasl_username": "etl", "sasl_password": "pw-9f2k"}, "needs a SASL mechanism"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "etl"}, "no password"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_password": "pw-9f2k"}, "no user name"),
    ({"sasl_mechanism": "PLAIN", "sasl_username": "etl", "sasl_password": "pw-9f2k"}, "sends no credentials"),
    ({"sasl_username": "etl", "sasl_password": "pw-9f2k"}, "sends no credentials"),
    ({"security_protocol": "TLS"}, "unknown Kafka security protocol"),
])
def test_incomplete_security_settings_are_refused(kwargs, says):
    with pytest.raises(ConfigurationError, match=says) as exc:
        KafkaConnection("127.0.0.1:9093", **kwargs)
    assert "pw-9f2k" not in str(exc.value)


def test_an_airflow_login_without_security_settings_fails_instead_of_downgrading():
    conn = SimpleNamespace(conn_id="kafka_purchases", host="broker:9093", port=None, login="etl",
                           password="s3cret-value", extra_dejson={})
    with pytest.raises(ConfigurationError, match="kafka_purchases.*sends no credentials") as exc:
        kafka_connection_from_airflow(conn)
    assert "s3cret-value" not in str(exc.value)
    conn.extra_dejson = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512"}
    kc = kafka_connection_from_airflow(conn)
    assert (kc.security_protocol, kc.sasl_mechanism, kc.sasl_username) == ("SASL_SSL", "SCRAM-SHA-512", "etl")
