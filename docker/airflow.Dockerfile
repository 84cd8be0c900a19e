# Airflow 3 image for docker-compose.yaml: every Airflow component
# (api-server, scheduler, dag-processor, triggerer, init) runs this image.
#
# With the LocalExecutor the scheduler container also runs the tasks, so the
# image is also the Spark *driver*: spark-submit in client mode against
# spark://spark-master:7077. That needs the pinned Python stack
# (requirements.txt + constraints.txt, pyspark 4.1.3), a JRE, the eos_etl
# package and Spark's Kafka connector jars, fetched at build time with Maven
# by the project's own fetcher (eos_etl.stack.maven) so the pins in
# include/eos_etl/stack/versions.py stay the single source of truth.
#
# Layout mirrors the repository under AIRFLOW_HOME=/opt/airflow:
#   /opt/airflow/{dags,plugins,include,jobs}   baked in; docker-compose.yaml also bind-mounts them
#   /opt/airflow/.cache/jars/spark-kafka-*      connector jars (+ fingerprint stamp: never refetched)
#   /opt/airflow/var                            run reports (a named volume shared by all components)
# The package is installed editable from /opt/airflow, so eos_etl.paths
# resolves the project root to /opt/airflow and a bind-mounted ./include is
# what runs.
#
# Build (from the repository root): docker build -f docker/airflow.Dockerfile .
# The build context is filtered by docker/airflow.Dockerfile.dockerignore.

ARG AIRFLOW_IMAGE=apache/airflow:3.3.2-python3.11
# Only used to run Maven once; any Debian with Python 3.11+ would do.
ARG JARS_BUILDER_IMAGE=python:3.11-slim-bookworm

# --- stage 1: Spark's Kafka connector jars, fetched with Maven ---------------
FROM ${JARS_BUILDER_IMAGE} AS connector-jars
ENV DEBIAN_FRONTEND=noninteractive
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends openjdk-17-jre-headless maven; \
    rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Just the modules the fetcher imports (stdlib only), so editing the rest of
# the package does not invalidate this layer and refetch the jars.
COPY include/eos_etl/__init__.py include/eos_etl/errors.py include/eos_etl/paths.py include/eos_etl/
COPY include/eos_etl/stack/__init__.py include/eos_etl/stack/errors.py include/eos_etl/stack/tools.py \
     include/eos_etl/stack/maven.py include/eos_etl/stack/versions.py include/eos_etl/stack/
RUN EOS_ETL_CACHE=/cache PYTHONPATH=/src/include python -c "\
from eos_etl.stack import maven; \
from eos_etl.stack.versions import SPARK_KAFKA; \
path = maven.fetch(SPARK_KAFKA); \
print(path, [p.name for p in SPARK_KAFKA.jars()])"

# --- stage 2: the Airflow image -----------------------------------------------
FROM ${AIRFLOW_IMAGE}

USER root
# A JRE for spark-submit (the Spark driver runs in the task's container).
# JAVA_HOME through an arch-independent symlink (amd64 and arm64 builds).
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends openjdk-17-jre-headless; \
    apt-get autoremove -yqq --purge; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/*; \
    ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/default-jvm
ENV JAVA_HOME=/usr/lib/jvm/default-jvm

# Entrypoint helpers used by docker-compose.yaml (airflow-init, airflow-apiserver).
COPY docker/airflow/init.sh /usr/local/bin/eos-etl-airflow-init
COPY docker/airflow/api-server.sh /usr/local/bin/eos-etl-airflow-api-server
RUN chmod 0755 /usr/local/bin/eos-etl-airflow-init /usr/local/bin/eos-etl-airflow-api-server

# The image installs into the airflow user's virtualenv (/home/airflow/.local);
# pip refuses to run as root here on purpose.
USER airflow

# Dependencies first (the slow, rarely changing layer). requirements.txt
# starts with `-c constraints.txt`: every transitive version is pinned too,
# and apache-airflow is pinned to the base image's version.
COPY --chown=airflow:0 requirements.txt constraints.txt /opt/airflow/
RUN pip install --no-cache-dir -r /opt/airflow/requirements.txt

COPY --chown=airflow:0 pyproject.toml /opt/airflow/
COPY --chown=airflow:0 include/ /opt/airflow/include/
RUN pip install --no-cache-dir --no-deps -e /opt/airflow

COPY --chown=airflow:0 jobs/ /opt/airflow/jobs/
COPY --chown=airflow:0 dags/ /opt/airflow/dags/
COPY --chown=airflow:0 plugins/ /opt/airflow/plugins/
COPY --from=connector-jars --chown=airflow:0 /cache/jars/ /opt/airflow/.cache/jars/

ENV EOS_ETL_CACHE=/opt/airflow/.cache \
    EOS_ETL_VAR=/opt/airflow/var

# Fail the build, not the first DAG run, when the stack is inconsistent:
# * pyspark must be the pinned version (the Spark provider's pyspark-client
#   can overwrite it), the connector jars must be present with their stamp
#   (else the operator would try to run Maven at task time);
# * the interpreter path must be the one docker/spark.Dockerfile provides on
#   the executors: the driver sets spark.pyspark.python to its own
#   sys.executable (eos_etl.stack.spark.spark_submit_conf);
# * the metadata DB driver (psycopg2, from the base image) must import.
RUN set -eux; \
    mkdir -p /opt/airflow/var; \
    python -c "\
import sys, pyspark, psycopg2, eos_etl; \
from eos_etl.stack.versions import SPARK_VERSION, SPARK_KAFKA; \
assert pyspark.__version__ == SPARK_VERSION, f'pyspark {pyspark.__version__} != pinned {SPARK_VERSION}'; \
assert SPARK_KAFKA.is_fetched(), f'connector jars missing in {SPARK_KAFKA.directory}'; \
assert sys.executable == '/home/airflow/.local/bin/python', f'driver python is {sys.executable}: update docker/spark.Dockerfile'; \
print('ok', sys.version.split()[0], pyspark.__version__, [p.name for p in SPARK_KAFKA.jars()])"; \
    java -version; \
    spark-submit --version
