"""spark-submit entry point: run one window of the shop pipeline exactly once.

    spark-submit --jars <connector jars> --py-files <eos_etl zip> jobs/run_window.py run-window [options]

Takes exactly the options of ``python -m eos_etl run-window``; the session
comes from spark-submit (master, jars, code), the exactly-once settings from
eos_etl.spark.config. The ``eos_etl`` package must be importable on the driver
and executors: ship it with ``--py-files`` (the zip from
``eos_etl.spark.package_zip.package_zip()``, which the Airflow operator
passes; spark-submit also puts it on the driver's PYTHONPATH) or install it
in the image every worker runs.
"""

import sys

from eos_etl.cli import main

if __name__ == "__main__":
    argv = sys.argv[1:]
    if not argv or argv[0] != "run-window":
        argv = ["run-window", *argv]
    sys.exit(main(argv))
