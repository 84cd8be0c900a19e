"""The executors' Python worker daemon (eos_etl.spark.pyspark_daemon) in a real Spark: its workers
import pyspark from the installed package, not from the archives Spark puts first on their path.

The daemon's choices without Spark: tests/unit/spark/test_pyspark_daemon.py."""

from __future__ import annotations

import os


def test_spark_workers_import_pyspark_from_the_installed_package(spark) -> None:
    def where(_rows):
        import sys

        import pyspark

        yield pyspark.__file__, [p for p in sys.path if p.endswith((".zip", ".jar"))]

    (module_file, archives), = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert os.path.isfile(module_file) and module_file.endswith(os.path.join("pyspark", "__init__.py")), module_file
    import pyspark

    assert module_file == pyspark.__file__
    assert not [a for a in archives if os.path.abspath(a).startswith(os.path.dirname(pyspark.__file__))], archives
