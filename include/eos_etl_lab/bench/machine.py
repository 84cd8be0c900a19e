"""What the benchmark ran on: CPU, memory, OS, and the versions of every component."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone

import confluent_kafka
import pyspark

from eos_etl.jars.versions import KAFKA_VERSION, SPARK_KAFKA_CLIENTS_VERSION
from eos_etl.jvm.options import spark_jvm_options_string


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what the platform says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_total_gib() -> float | None:
    """The machine's RAM in GiB (/proc/meminfo), None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _os_name() -> str:
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()


def _java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        return (out.stderr or out.stdout).splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def describe_machine() -> dict:
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": mem_total_gib(),
        "os": _os_name(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "java": _java_version(),
        "kafka_broker": KAFKA_VERSION,
        "spark": pyspark.__version__,
        "spark_kafka_clients": SPARK_KAFKA_CLIENTS_VERSION,
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "load_average": load_average(),
        # Changes what the JVMs cost (eos_etl.jvm.options): the project's JIT defaults, the class-data
        # archive (eos_etl.jvm.class_data) and $EOS_ETL_JVM_OPTIONS.
        "spark_jvm_options": spark_jvm_options_string(),
    }
