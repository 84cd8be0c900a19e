"""The Kafka Streams peer's build and spec: kafka-streams from Maven Central at the broker's version (with
Jackson, which the transform parses with, as Spark does), the topology in ``streams/ShopStreams.java``
compiled once per machine by the JDK's ``javac`` into the cache (its digest names the build), and the
properties file its ``main`` reads.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from eos_etl.host.tools import require_tool
from eos_etl.jars.maven import Artifact, Bundle, fetch
from eos_etl.jars.versions import KAFKA_VERSION
from eos_etl.paths import cache_dir

from .environment import write_private

SOURCE = Path(__file__).resolve().parent / "streams" / "ShopStreams.java"
#: Jackson at the version Kafka's own distribution ships with it.
JACKSON_VERSION = "2.19.4"
BUNDLE = Bundle(name=f"kafka-streams-{KAFKA_VERSION}", description="Kafka Streams, the bench's peer",
                artifacts=(Artifact("org.apache.kafka", "kafka-streams", KAFKA_VERSION),
                           Artifact("com.fasterxml.jackson.core", "jackson-databind", JACKSON_VERSION),
                           Artifact("org.slf4j", "slf4j-nop", "1.7.36")))
#: Kafka Streams' own default commit interval under exactly_once_v2 (StreamsConfig), which the peer keeps.
DEFAULT_EOS_COMMIT_INTERVAL_MS = 100


def classpath() -> str:
    """The compiled topology and its jars, fetched and built on first use (a minute)."""
    fetch(BUNDLE)
    digest = hashlib.sha256(SOURCE.read_bytes() + BUNDLE.fingerprint().encode()).hexdigest()[:12]
    classes = cache_dir() / "peers" / f"kafka-streams-{digest}"
    if not (classes / "ShopStreams.class").is_file():
        classes.parent.mkdir(parents=True, exist_ok=True)
        with open(classes.parent / ".kafka-streams.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (classes / "ShopStreams.class").is_file():
                javac = require_tool("javac", install_hint="apt-get install openjdk-17-jdk-headless")
                partial = classes.with_name(classes.name + ".partial")
                shutil.rmtree(partial, ignore_errors=True)
                partial.mkdir()
                proc = subprocess.run([javac, "-d", str(partial), "-cp", BUNDLE.classpath(), str(SOURCE)],
                                      capture_output=True, text=True)
                if proc.returncode != 0:
                    raise RuntimeError(f"javac could not build the Kafka Streams peer: {proc.stderr.strip()[-2000:]}")
                partial.rename(classes)
    return f"{classes}{os.pathsep}{BUNDLE.classpath()}"


def java_client_config(connection) -> dict[str, str]:
    """The connection as the Java client's settings (``kafka.``-prefixed in the spec)."""
    conf = {"bootstrap.servers": connection.bootstrap_servers, "security.protocol": connection.security_protocol}
    if connection.sasl_mechanism:
        module = ("plain.PlainLoginModule" if connection.sasl_mechanism == "PLAIN"
                  else "scram.ScramLoginModule")
        conf["sasl.mechanism"] = connection.sasl_mechanism
        conf["sasl.jaas.config"] = (f"org.apache.kafka.common.security.{module} required "
                                    f'username="{connection.sasl_username}" password="{connection.sasl_password}";')
    if connection.ssl_ca_location:
        conf["ssl.truststore.type"] = "PEM"
        conf["ssl.truststore.location"] = connection.ssl_ca_location
    return conf


def write_spec(path: Path, contract: dict, lineage_headers: list[str], values: dict, connection=None) -> None:
    """The properties file ``ShopStreams.main`` reads (0600: it may hold the password); no connection: for
    the transform alone (``ShopStreams parity``)."""
    props = {"input_topic": contract["input_topic"], "topics": ",".join(contract["topics"]),
             "required": ",".join(contract["required"]), "address": ",".join(contract["address"]),
             "invoice_fields": ",".join(contract["invoice_fields"]),
             "shipment_fields": ",".join(contract["shipment_fields"]),
             "record_types": ",".join(contract["record_types"]), "lineage_headers": ",".join(lineage_headers),
             "max_payload_bytes": contract["max_payload_bytes"],
             "dead_letter_max_bytes": contract["dead_letter_max_bytes"], **values,
             **{f"kafka.{k}": v for k, v in (java_client_config(connection) if connection else {}).items()}}
    write_private(path, "".join(f"{k}={_escape(str(v))}\n" for k, v in props.items()))


def _escape(value: str) -> str:
    """A value as java.util.Properties reads it back."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")
