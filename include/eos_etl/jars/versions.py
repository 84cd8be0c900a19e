"""Pinned versions of everything the stack fetches from Maven Central."""

from .maven import Artifact, Bundle

KAFKA_VERSION = "4.1.2"
LOG4J_VERSION = "2.24.3"
SPARK_VERSION = "4.1.3"  # must equal the pinned pyspark
SPARK_KAFKA_CLIENTS_VERSION = "3.9.1"  # what spark-sql-kafka 4.1.3's POM asks for
COMMONS_POOL2_VERSION = "2.12.1"
# spark-token-provider-kafka-0-10 is published on Maven Central for 4.0.0 but
# the 4.1.x jars are not served by the registry this project can reach. The
# 4.0.0 jar is binary compatible with spark-sql-kafka 4.1.3: all 11 methods
# spark-sql-kafka calls on it (KafkaConfigUpdater, KafkaTokenUtil,
# KafkaRedactionUtil) exist there with identical descriptors (checked with
# javap). Move it to SPARK_VERSION as soon as that jar can be fetched.
SPARK_TOKEN_PROVIDER_VERSION = "4.0.0"

KAFKA_BROKER = Bundle(
    name=f"kafka-{KAFKA_VERSION}",
    description="Apache Kafka broker (KRaft) with a log4j2 binding and kafka-tools",
    artifacts=(
        Artifact("org.apache.kafka", "kafka_2.13", KAFKA_VERSION),
        Artifact("org.apache.kafka", "kafka-tools", KAFKA_VERSION),
        # Kafka pins slf4j-api 1.7.x, so the binding is log4j2's slf4j 1.x one.
        Artifact("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
        Artifact("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
    ),
)

# pyspark's own jars/ already has Scala, Hadoop, slf4j, lz4, snappy, zstd; the
# Kafka source needs exactly these four more, taken without dependencies.
SPARK_KAFKA = Bundle(
    name=f"spark-kafka-{SPARK_VERSION}",
    description="Spark's Kafka source/sink for the pinned pyspark",
    artifacts=(
        Artifact("org.apache.spark", "spark-sql-kafka-0-10_2.13", SPARK_VERSION, alone=True),
        Artifact(
            "org.apache.spark", "spark-token-provider-kafka-0-10_2.13", SPARK_TOKEN_PROVIDER_VERSION, alone=True
        ),
        Artifact("org.apache.kafka", "kafka-clients", SPARK_KAFKA_CLIENTS_VERSION, alone=True),
        Artifact("org.apache.commons", "commons-pool2", COMMONS_POOL2_VERSION, alone=True),
    ),
)

# The sources of the Spark classes the project patches (eos_etl.jvm.spark_patches), to apply its diffs to.
SPARK_SOURCES = Bundle(
    name=f"spark-sources-{SPARK_VERSION}",
    description="Sources of spark-core and spark-sql for the pinned pyspark (the patches' base)",
    artifacts=(
        Artifact("org.apache.spark", "spark-core_2.13", SPARK_VERSION, alone=True),
        Artifact("org.apache.spark", "spark-sql_2.13", SPARK_VERSION, alone=True),
    ),
    classifier="sources",
)
