"""A downstream DAG on the shop's invoices Asset: revenue per currency of each published window.

It is the example of what the asset events make possible: the run starts when
``shop_invoicing`` has published a window (data-aware scheduling on the
``shop_invoicing.invoices`` alias, no sensor, no schedule) and reads exactly that
window's invoices, read_committed, from the offset ranges the event carries, so
its cost does not grow with the topic's history. It aggregates while reading;
nothing per record is kept.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from decimal import Decimal

from airflow.sdk import dag, task
from airflow.sdk.exceptions import AirflowSkipException

from .assets import in_window, output_alias

log = logging.getLogger(__name__)


def revenue_of_events(connection, events) -> dict:
    """Sum the invoices' ``total`` per ``currency`` over the windows the asset events describe."""
    from ..kafka.reader import iter_ranges  # deferred: confluent_kafka at task time, not when the DAG is parsed

    totals: dict[str, Decimal] = {}
    windows = []
    for event in events:
        extra = event.extra
        belongs = in_window(extra)
        invoices = 0
        ranges = {int(p): (start, end) for p, (start, end) in extra["ranges"].items()}
        for record in iter_ranges(connection, extra["topic"], ranges):
            if not belongs(record):
                continue
            invoice = json.loads(record.value)
            totals[invoice["currency"]] = totals.get(invoice["currency"], Decimal(0)) + Decimal(invoice["total"])
            invoices += 1
        windows.append({"run_id": extra["run_id"], "topic": extra["topic"], "invoices": invoices,
                        "published": extra["counts"]["invoices"]})
        log.info("window of run %s: %d invoices read from %s %s", extra["run_id"], invoices, extra["topic"],
                 extra["ranges"])
    return {"windows": windows, "revenue": {c: str(v) for c, v in sorted(totals.items())}}


def unique_events(triggering_asset_events) -> list:
    """The triggering events, each once: an event added through an alias is listed under the alias
    and under the asset it resolved to."""
    seen, out = set(), []
    for events in triggering_asset_events.values():
        for event in events:
            key = (event.source_dag_id, event.source_run_id, event.source_task_id, event.asset.uri,
                   str(event.timestamp))
            if key not in seen:
                seen.add(key)
                out.append(event)
    return out


def build_revenue_dag(*, dag_id: str, upstream_dag_id: str, doc_md: str, tags: list[str]):
    @dag(
        dag_id=dag_id,
        schedule=[output_alias(upstream_dag_id, "invoices")],
        start_date=datetime(2026, 11, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        tags=tags,
        doc_md=doc_md,
    )
    def revenue_dag():
        @task
        def revenue_per_currency(**context) -> dict:
            from .settings import get_kafka_connection  # deferred: task-time only, it loads the Kafka client

            events = unique_events(context["triggering_asset_events"])
            if not events:
                raise AirflowSkipException("no invoices asset event: this DAG runs when a window was published")
            result = revenue_of_events(get_kafka_connection(), events)
            log.info("revenue per currency: %s", result["revenue"])
            return result

        revenue_per_currency()

    return revenue_dag()
