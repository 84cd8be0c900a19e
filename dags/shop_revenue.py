"""
### Shop revenue: what each published window invoiced, per currency

Runs whenever `shop_invoicing` has published a window: it is scheduled on the
`shop_invoicing.invoices` Asset alias, which each successful `run_window`
resolves to `kafka://<broker>/<invoices topic>` with an event whose extra holds
the window's exact output offset ranges, input window, run id and counts.

**Task**: `revenue_per_currency` reads those ranges read_committed (only the
records this window produced, by their lineage headers), sums `total` per
`currency` while reading, and returns the totals (XCom). Its cost follows the
window, not the topic's history.

Connection: `kafka_purchases` (its principal needs Read on the invoices topic:
`python -m eos_etl acl grant --role validator`).
"""

# airflow dag file: the DAG processor only parses files containing both words.
from eos_etl.orchestration.revenue import build_revenue_dag

dag = build_revenue_dag(
    dag_id="shop_revenue",
    upstream_dag_id="shop_invoicing",
    doc_md=__doc__,
    tags=["eos-etl", "kafka", "assets"],
)
