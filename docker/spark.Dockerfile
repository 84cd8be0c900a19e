# Spark standalone nodes for docker-compose.yaml: spark-master and
# spark-worker run this image (commands in docker-compose.yaml):
#   /opt/spark/bin/spark-class org.apache.spark.deploy.master.Master --host spark-master ...
#   /opt/spark/bin/spark-class org.apache.spark.deploy.worker.Worker spark://spark-master:7077
#
# Why not FROM apache/spark:<4.1.x>-scala2.13-java17-python3-ubuntu:
# * the driver (the Airflow image) runs Python 3.11 and PySpark refuses
#   executors whose Python minor version differs (PYTHON_VERSION_MISMATCH);
#   the official Spark images are Ubuntu 22.04 based, with Python 3.10, and
#   eos-etl itself requires Python >= 3.11;
# * the driver is pyspark 4.1.3 (pinned); the cluster should be exactly that
#   version, and a 4.1.3 tag of apache/spark could not be verified from here
#   (the newest build recipe seen in apache/spark-docker is 4.1.2).
# So the Spark runtime here is the pinned pyspark wheel itself: it ships the
# complete Spark distribution (jars/, bin/spark-class, the launcher), the
# same bytes the driver runs. /opt/spark links to it.
#
# Executors run the job's Python code (the publisher: confluent-kafka,
# pyarrow, eos_etl), so those are installed too, pinned by constraints.txt.
# The driver sets spark.pyspark.python to its own sys.executable, which in
# the Airflow image is /home/airflow/.local/bin/python; the virtualenv here
# lives at that same path so executors find an interpreter there.
#
# Build (from the repository root): docker build -f docker/spark.Dockerfile .
# The build context is filtered by docker/spark.Dockerfile.dockerignore.

# Same Python minor version and Debian release as apache/airflow:3.3.2-python3.11.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
FROM ${PYTHON_IMAGE}

ARG SPARK_UID=185
ENV DEBIAN_FRONTEND=noninteractive
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps; \
    rm -rf /var/lib/apt/lists/*; \
    ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/default-jvm; \
    groupadd --system --gid "${SPARK_UID}" spark; \
    useradd --system --uid "${SPARK_UID}" --gid spark --home-dir /opt/spark-work --no-create-home spark
ENV JAVA_HOME=/usr/lib/jvm/default-jvm

# The executors' Python environment, at the driver's interpreter path.
ENV VIRTUAL_ENV=/home/airflow/.local \
    PATH=/home/airflow/.local/bin:${PATH} \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY constraints.txt /opt/eos-etl/
RUN set -eux; \
    python -m venv /home/airflow/.local; \
    pip install -c /opt/eos-etl/constraints.txt pyspark confluent-kafka pyarrow pandas

# The eos_etl package (editable, so a bind-mounted ./include is what runs).
COPY pyproject.toml /opt/eos-etl/
COPY include/ /opt/eos-etl/include/
RUN set -eux; \
    pip install --no-deps -e /opt/eos-etl; \
    python -c "\
import sys, pyspark, confluent_kafka, pyarrow, pandas, eos_etl.engine.publisher; \
from eos_etl.stack.versions import SPARK_VERSION; \
assert pyspark.__version__ == SPARK_VERSION, f'pyspark {pyspark.__version__} != pinned {SPARK_VERSION}'; \
assert sys.executable == '/home/airflow/.local/bin/python', sys.executable; \
print('ok', sys.version.split()[0], pyspark.__version__)"; \
    ln -s "$(python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" /opt/spark; \
    test -x /opt/spark/bin/spark-class; \
    mkdir -p /opt/spark-work; \
    chown spark:spark /opt/spark-work

# SPARK_NO_DAEMONIZE: foreground processes, logs on stdout (docker logs).
# The worker's executors and their scratch files live in /opt/spark-work.
ENV SPARK_HOME=/opt/spark \
    SPARK_WORKER_DIR=/opt/spark-work \
    SPARK_NO_DAEMONIZE=1 \
    PYSPARK_PYTHON=/home/airflow/.local/bin/python

WORKDIR /opt/spark-work
USER spark
EXPOSE 7077 8080 8081
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["/opt/spark/bin/spark-class", "org.apache.spark.deploy.master.Master"]
