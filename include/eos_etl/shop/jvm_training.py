"""The shop's training workload for the Spark JVMs' class-data archive (:mod:`eos_etl.jvm.class_data`).

A window's Spark side without a broker: generated purchases, some invalid, as rows shaped like
the Kafka source's, through the shop's transform and on to Python as Arrow batches. The archive
then holds the classes of the transform's own expressions (its checks, decimals, JSON rendering)
as well as Spark's, which a generic Spark job would not load.
"""

from __future__ import annotations

from datetime import datetime, timezone

#: What ``make setup`` and the test suite build the archive with.
SHOP_JVM_WORKLOAD = f"{__name__}:run"

_ROWS = 4_000


def run(spark) -> None:
    # Deferred on purpose: importing this module for SHOP_JVM_WORKLOAD (the CLI, the bench) loads no Spark code.
    from ..engine.tasks.kafka_source import KAFKA_SOURCE_DDL
    from ..jvm.class_data import ClassDataError
    from ..kafka.connection import KafkaConnection
    from ..spark.class_data_training import arrow_count
    from .generator import purchases
    from .settings import ShopSettings

    now = datetime.now(timezone.utc)
    rows = [(key, value, "purchases", i % 2, i // 2, now, 0, None)
            for i, (key, value, _kind) in enumerate(purchases(_ROWS, invalid_share=0.2))]
    settings = ShopSettings(connection=KafkaConnection(bootstrap_servers="127.0.0.1:9"))
    out = settings.transform()(spark.createDataFrame(rows, KAFKA_SOURCE_DDL).repartition(2, "partition"))
    if arrow_count(out.select("partition", "offset", "outputs")) != _ROWS:
        raise ClassDataError("the shop's training workload lost rows")
