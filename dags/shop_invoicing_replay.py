"""
### Shop invoicing replay: reprocess purchases into a new output version

For when already-published purchases must be processed again (a transform
bug was fixed, a new field added). A replay never duplicates silently: it
does not touch the live `invoices` / `shipments` / `purchases.dlq` topics.
It writes `invoices.<version>`, `shipments.<version>` and
`purchases.dlq.<version>` (created like the originals), under its own
consumer group `<group>-replay-<version>` and transactional-id prefix
`<prefix>-replay-<version>`, with the same exactly-once machinery. Every
output keeps the lineage headers (`source_topic`, `source_partition`,
`source_offset`, `run_id`) pointing at the original purchase, so a consumer
can map each replayed invoice to the one it supersedes.

Each version starts from the earliest retained purchase and advances like the
main pipeline: re-running a replay of the same version publishes nothing
twice, and a *new* version is a deliberate, visible choice. Consumers switch
to the new topics when they are ready.
"""

# airflow dag file: the DAG processor only parses files containing both words.
from eos_etl.orchestration.dag_factory import build_shop_dag

dag = build_shop_dag(
    dag_id="shop_invoicing_replay",
    schedule=None,
    version_param=True,
    doc_md=__doc__,
    tags=["eos-etl", "kafka", "exactly-once", "replay"],
)
