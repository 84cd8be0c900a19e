"""How to reach a Kafka cluster, for librdkafka (confluent-kafka) and for Spark.

One value carries the bootstrap servers and the optional SASL/SSL settings and
renders them for both client libraries. Its ``repr`` never shows the password,
so it can be logged.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

from .. import logging_setup
from ..errors import ConfigurationError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class KafkaConnection:
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"  # PLAINTEXT | SASL_PLAINTEXT | SASL_SSL | SSL
    sasl_mechanism: str | None = None  # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_ca_location: str | None = None
    # PEM file with this client's key and certificate: mutual TLS (SSL, SASL_SSL), e.g. the
    # embedded broker's admin when its PLAINTEXT listener is off.
    ssl_client_pem: str | None = None

    def __post_init__(self) -> None:
        logging_setup.mask(self.sasl_password)
        # Incomplete security settings fail here, never fall back to something weaker.
        if self.security_protocol not in PROTOCOLS:
            raise ConfigurationError(f"unknown Kafka security protocol {self.security_protocol!r}: "
                                     f"one of {', '.join(PROTOCOLS)}")
        if self.security_protocol.startswith("SASL_"):
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ConfigurationError(f"{self.security_protocol} needs a SASL mechanism, one of "
                                         f"{', '.join(SASL_MECHANISMS)} (got {self.sasl_mechanism!r})")
            if not self.sasl_username or not self.sasl_password:
                raise ConfigurationError(f"{self.security_protocol} needs a SASL user name and a password "
                                         f"({'no password' if self.sasl_username else 'no user name'} given)")
        elif self.sasl_mechanism or self.sasl_username or self.sasl_password:
            raise ConfigurationError(f"a SASL login is set but the security protocol is {self.security_protocol}, "
                                     "which sends no credentials: set SASL_SSL (or SASL_PLAINTEXT)")
        if self.ssl_client_pem and not self.security_protocol.endswith("SSL"):
            raise ConfigurationError(f"a client certificate is set but the security protocol is "
                                     f"{self.security_protocol}, which has no TLS: set SSL (or SASL_SSL)")

    def __repr__(self) -> str:  # never leak the password into logs
        auth = f", sasl={self.sasl_mechanism}:{self.sasl_username}:***" if self.sasl_mechanism else ""
        auth += ", client certificate" if self.ssl_client_pem else ""
        return f"KafkaConnection({self.bootstrap_servers}, {self.security_protocol}{auth})"

    __str__ = __repr__

    # -- librdkafka --------------------------------------------------------------
    def client_config(self) -> dict[str, str]:
        conf = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": self.security_protocol}
        if self.sasl_mechanism:
            conf["sasl.mechanism"] = self.sasl_mechanism
            conf["sasl.username"] = self.sasl_username or ""
            conf["sasl.password"] = self.sasl_password or ""
        if self.ssl_ca_location:
            conf["ssl.ca.location"] = self.ssl_ca_location
        if self.ssl_client_pem:  # librdkafka reads the certificate and the key from the same PEM file
            conf["ssl.certificate.location"] = self.ssl_client_pem
            conf["ssl.key.location"] = self.ssl_client_pem
        return conf

    # -- Spark's Kafka source (Java client, options prefixed with "kafka.") ------
    def spark_options(self) -> dict[str, str]:
        opts = {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            "kafka.security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            module = {
                "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
            }[self.sasl_mechanism]
            user = json.dumps(self.sasl_username or "")
            password = json.dumps(self.sasl_password or "")
            opts["kafka.sasl.mechanism"] = self.sasl_mechanism
            opts["kafka.sasl.jaas.config"] = f"{module} required username={user} password={password};"
        if self.ssl_ca_location:
            opts["kafka.ssl.truststore.type"] = "PEM"
            opts["kafka.ssl.truststore.location"] = self.ssl_ca_location
        if self.ssl_client_pem:
            opts["kafka.ssl.keystore.type"] = "PEM"
            opts["kafka.ssl.keystore.location"] = self.ssl_client_pem
        return opts

    # -- transport (JSON; contains the secret, so only for process boundaries) ---
    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "KafkaConnection":
        # The message names what is wrong, never the text: it holds the password.
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigurationError(f"the Kafka connection is not JSON (line {exc.lineno}, column {exc.colno})"
                                     ) from None
        if not isinstance(data, dict):
            raise ConfigurationError("the Kafka connection JSON is not an object")
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ConfigurationError(f"the Kafka connection JSON has unknown keys: {', '.join(map(repr, unknown))}")
        not_text = sorted(k for k, v in data.items() if v is not None and not isinstance(v, str))
        if not_text:
            raise ConfigurationError(f"the Kafka connection JSON has values that are not text: {', '.join(not_text)}")
        if not data.get("bootstrap_servers"):
            raise ConfigurationError("the Kafka connection JSON has no bootstrap_servers")
        return cls(**data)
