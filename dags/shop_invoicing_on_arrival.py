"""
### Shop invoicing, event-driven: a run when purchases arrive

The same pipeline as `shop_invoicing` (same consumer group, transactional ids
and outputs), started by new purchases instead of the clock: an **AssetWatcher**
with the Kafka provider's message trigger watches the purchases topic.
A burst of purchases makes **one** run, whatever its size: the watcher fires for
the first message after a quiet gap, and the run waits until the topic has been
quiet before planning its window (see `eos_etl.orchestration.arrivals`). An
hourly sweep runs too, so a lost notification only delays purchases.

Before unpausing it, create the Airflow connection `kafka_purchases_watch`
(conn type `kafka`; extra = the watcher consumer's config with its own
`group.id`, the pipeline's group plus `-arrivals` (ACL role `watcher`), e.g.
`{"bootstrap.servers": "...", "group.id": "shop-invoicing-arrivals",
"isolation.level": "read_committed", "auto.offset.reset": "latest", ...}`).
The watcher reads it, and the purchases topic from the `eos_etl_shop` Variable,
in the triggerer, never while this file is parsed.
Created paused: unpause it **instead of** `shop_invoicing` (runs of both at once
stay exactly-once, as the transactional ids fence each other, but the fenced
attempt fails and retries).
"""

# airflow dag file: the DAG processor only parses files containing both words.
from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable

from eos_etl.orchestration.arrivals_watch import arrivals_asset
from eos_etl.orchestration.dag_factory import build_shop_dag

dag = build_shop_dag(
    dag_id="shop_invoicing_on_arrival",
    schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable("@hourly", timezone="UTC"), assets=arrivals_asset()),
    version_param=False,
    doc_md=__doc__,
    tags=["eos-etl", "kafka", "exactly-once", "event-driven"],
    is_paused_upon_creation=True,
)
