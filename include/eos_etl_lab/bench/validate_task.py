"""The validation bench's stand-in for the DAG's validate task, run as a fresh process by file path
(``python .../validate_task.py SPEC_JSON``): a session (a Connect client with ``$SPARK_REMOTE``,
else a local Spark application of its own), then the validation (``validate_window``; an older checkout's
``validate_run``); prints its figures as JSON.

Run by path, not as ``-m eos_etl...``: the before column runs it with ``PYTHONPATH`` on an older
checkout's code, which has no such module, and only with APIs that code has too.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(spec_json: str) -> None:
    t0 = time.monotonic()
    # The package under test is whichever PYTHONPATH gives (this checkout's, or the before column's).
    from eos_etl.engine.window import Window
    from eos_etl.kafka.connection import KafkaConnection
    from eos_etl.shop.schema import ShopTopics
    from eos_etl.spark.session import spark_session, stop_session

    try:  # the validation, newest first
        from eos_etl.quality import validate_window as validate  # this checkout's
    except ImportError:
        from eos_etl.quality import validate_run as validate  # before GE validated the window's own data

    try:  # where the settings class lives, newest first
        from eos_etl.shop.settings import ShopSettings  # this checkout's
    except ImportError:
        try:
            from eos_etl.shop.pipeline import ShopSettings  # before the DAG parse went light
        except ImportError:
            from eos_etl.shop.job import ShopSettings  # the oldest before columns

    spec = json.loads(spec_json)
    settings = ShopSettings(connection=KafkaConnection(spec["bootstrap_servers"]),
                            topics=ShopTopics(**spec["topics"]), group=spec["group"],
                            transactional_id_prefix=spec["group"])
    spark = spark_session(spec["app_name"], master=spec.get("master"))
    t1 = time.monotonic()
    try:
        result = validate(spark, settings, Window.from_dict(spec["window"]), run_id=spec["run_id"],
                          context_root=Path(spec["gx"]), clock_skew_margin_ms=spec["margin_ms"])
        seconds = time.monotonic() - t0
    finally:
        stop_session(spark)
    hwm = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
    print(json.dumps({"task_s": round(seconds, 3), "session_s": round(t1 - t0, 3), "validate_s": result.seconds,
                      "success": result.success, "failures": result.to_dict()["failures"],
                      "timings": result.timings, "python_peak_rss_mb": round(hwm / 1024, 1)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
