"""The program that trains the Spark JVMs' class-data archive (:mod:`eos_etl.jvm.class_data`), in a process of its own:

    python -m eos_etl.spark.class_data_training ARCHIVE MODULE:FUNCTION

runs the workload ``MODULE:FUNCTION`` with a SparkSession whose JVM was started with
``-XX:ArchiveClassesAtExit=ARCHIVE``, then ends that JVM and waits while HotSpot writes the archive.
:func:`eos_etl.jvm.class_data.build` runs it and renames the archive into place only when it exited cleanly.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from pyspark import SparkContext

from ..jvm.class_data import BUILD_TIMEOUT_S
from ..jvm.options import spark_jvm_options_string
from .session import spark_session


def arrow_count(df) -> int:
    """Rows of ``df`` counted in Python over Arrow batches (mapInArrow), as a window's tasks receive them."""
    def count(batches):
        import pyarrow as pa  # deferred on purpose: imported by the Spark Python worker that runs this

        n = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_arrays([pa.array([n], pa.int64())], ["rows"])

    return sum(r["rows"] for r in df.mapInArrow(count, "rows long").collect())


def train(archive: Path, workload: str) -> None:
    """Run ``workload`` on a fresh JVM, then end the JVM and wait while it writes ``archive``."""
    module, _, function = workload.partition(":")
    run = getattr(importlib.import_module(module), function)
    # -Xlog:cds=off: HotSpot names every class it cannot archive (signed jars, generated accessors).
    options = f"{spark_jvm_options_string()} -XX:ArchiveClassesAtExit={archive} -Xlog:cds=off"
    spark = spark_session("eos-etl-class-data", master="local[2]",
                          conf={"spark.driver.extraJavaOptions": options, "spark.executor.extraJavaOptions": options})
    run(spark)
    gateway = SparkContext._gateway
    jvm = gateway.proc
    spark.stop()
    gateway.shutdown()
    jvm.stdin.close()  # pyspark's JVM exits when its stdin closes; HotSpot writes the archive then
    jvm.wait(timeout=BUILD_TIMEOUT_S)


if __name__ == "__main__":
    train(Path(sys.argv[1]), sys.argv[2])
