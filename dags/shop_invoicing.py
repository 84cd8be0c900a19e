"""
### Shop invoicing: purchases -> invoices + shipments, exactly once

Every run processes the next **window** of the `purchases` topic: per
partition, from the consumer group's committed offset to the last stable
offset (scheduled runs and backfills: only purchases before the end of their
data interval). Each purchase becomes an invoice and a shipment, or a dead
letter with a reason, published together with the group's offsets in Kafka
transactions of the pipeline's writer slots (a few fixed transactional ids,
each owning some input partitions; every transaction commits its partitions'
outputs, offsets and checkpoint records together).

**Who may commit**: the pipeline's identity (transactional-id prefix, writer
slots, output topics, the input's topic id), recorded once in its checkpoint
topic by `create-topics` or its first plan, and read by every task: a run
whose settings disagree stops before it reads or fences anything, naming
`offsets reslot`, the one command that changes it (docs/pipeline-identity.md).

**Tasks**: `plan_window` (per-partition offsets, shown in its XCom and log) ->
`has_new_records` (a run with nothing new stops here, successfully) ->
`run_window` (spark-submit through the `spark_default` connection; local by
default, a cluster by changing the connection; or, with
`EOS_ETL_SPARK_CONNECT_CONN_ID` set, a client of that long-lived Spark Connect
server, which saves each window a Spark application's start) -> `validate` (Great
Expectations on what a read_committed reader sees; a failed critical
expectation fails the run) -> `report` (HTML + JSON, "Run report" tab).

**Manual runs**: trigger with a record cap per partition, a transaction size
or *Plan only*. **Backfills and clearing tasks never duplicate**: windows are
offset-based, so a backfill over intervals that were already processed plans
empty windows (no-op), and a cleared `run_window` re-runs its planned window,
which the publisher skips because the group's offsets already cover it. To
reprocess published purchases (say after a transform bug) use the separate
`shop_invoicing_replay` DAG, which writes a new output version.

Connections: `kafka_purchases` (bootstrap servers, SASL login), `spark_default`
(or the Spark Connect one: conn type `spark_connect`, the server's token as password).
Variable `eos_etl_shop` (optional JSON) overrides topic names, group and
transactional-id prefix (for a new pipeline; an existing one must match its
recorded identity).
"""

import os

# airflow dag file: the DAG processor only parses files containing both words.
from eos_etl.orchestration.dag_factory import build_shop_dag

dag = build_shop_dag(
    dag_id="shop_invoicing",
    schedule=os.environ.get("EOS_ETL_SCHEDULE", "@hourly"),
    version_param=False,
    doc_md=__doc__,
    tags=["eos-etl", "kafka", "exactly-once"],
)
