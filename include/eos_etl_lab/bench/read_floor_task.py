"""The validation bench's read floor as a fresh client process, run by file path
(``python .../read_floor_task.py SPEC_JSON``): imports, a session, the reads validation must do;
then the Great Expectations import alone. Prints its figures as JSON."""

from __future__ import annotations

import json
import sys
import time


def main(spec_json: str) -> None:
    t0 = time.monotonic()
    # Timed from the interpreter's start: the imports are part of what a fresh task pays.
    from eos_etl.engine.window import Window
    from eos_etl.spark.session import spark_session, stop_session
    from eos_etl_lab.bench.validation_scaling import read_floor, shop_settings

    spec = json.loads(spec_json)
    spark = spark_session(spec["app_name"])
    try:
        floor = read_floor(spark, shop_settings(spec), Window.from_dict(spec["window"]), spec["output_read"],
                           contract=False)
        task_s = time.monotonic() - t0
    finally:
        stop_session(spark)
    t1 = time.monotonic()
    import great_expectations  # noqa: F401 - timed: what a validate task pays on top of the reads

    print(json.dumps({**floor, "task_s": round(task_s, 3), "ge_import_s": round(time.monotonic() - t1, 3)}),
          flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
