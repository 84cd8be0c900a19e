"""The README's demo: the whole product on the embedded defaults, end to end.

Starts the local broker (and Airflow), creates the shop topics, writes demo
purchases (a share of them invalid, some in aborted transactions), runs the
next window exactly once and prints what happened and where to look.
"""

from __future__ import annotations

import json
import time

from . import paths
from .kafka.admin import ClusterAdmin
from .kafka.connection import KafkaConnection
from .shop.generator import generate
from .shop.job import ShopSettings, run_shop_window, summary_dict
from .stack.broker import KafkaBroker
from .stack.spark import spark_session


def run_demo(args) -> int:
    t0 = time.monotonic()
    broker = KafkaBroker.local().start()
    print(broker.status().describe(), flush=True)
    airflow = None
    if not args.no_airflow:
        from .stack.airflow import AirflowStandalone

        airflow = AirflowStandalone.local().start()
    conn = KafkaConnection(broker.bootstrap_servers)
    settings = ShopSettings(conn)
    t = settings.topics
    admin = ClusterAdmin(conn)
    admin.create_topics({t.purchases: args.partitions, t.invoices: args.partitions, t.shipments: args.partitions})
    admin.create_topics({t.dead_letters: 1}, config={"max.message.bytes": "10485760"})
    stats = generate(conn, t.purchases, args.count, invalid_share=args.invalid_share,
                     transaction_size=500, abort_share=0.05, progress=True, seed=int(time.time()))
    print(f"generated: {json.dumps(stats.to_dict())}", flush=True)
    window = settings.plan()
    print(f"window: {window}", flush=True)
    spark = spark_session("eos-etl-demo")
    try:
        summary = run_shop_window(spark, settings, window)
    finally:
        spark.stop()
    data = summary_dict(settings, summary)
    report = paths.var_dir() / "reports" / f"run-{summary.run_id}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps({k: v for k, v in data.items() if k != "partitions"}, indent=2))
    print(f"\nrun summary: {report}")
    print(f"broker log: {broker.log_file}")
    if airflow is not None:
        print(airflow.describe())
    print(f"demo finished in {time.monotonic() - t0:.0f}s; stop everything with: make down")
    return 0
