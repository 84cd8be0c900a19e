"""What the shop DAGs publish, as Airflow Assets, and the event each published window emits.

One ``AssetAlias`` per output (``<dag_id>.invoices``, ``.shipments``,
``.dead_letters``), resolved when the window has been published to the concrete
Kafka asset ``kafka://<first bootstrap server>/<topic>`` (the URI convention of
Airflow's Kafka provider). Aliases because the brokers and topic names come from
the Airflow connection and Variable, which the tasks read when they run, not
when the DAG file is parsed; downstream DAGs schedule on the alias.

The event's ``extra`` says exactly which records the window produced, so a
consumer reads a bounded range rather than the topic's history: per output
partition, the offsets [start, end) that the run's transactions were written in
(start: the partition's end when the window was planned; end: its last stable
offset once the run committed), the input window they came from, the run id and
the counts. Only records whose lineage headers point into that window are the
window's (:func:`in_window`).
"""

from __future__ import annotations

from airflow.sdk import Asset, AssetAlias

from ..engine.lineage import H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC

#: The shop outputs published as assets, by their ShopTopics field name.
OUTPUTS = ("invoices", "shipments", "dead_letters")


def output_alias(dag_id: str, output: str) -> AssetAlias:
    return AssetAlias(name=f"{dag_id}.{output}")


def output_aliases(dag_id: str) -> list[AssetAlias]:
    return [output_alias(dag_id, output) for output in OUTPUTS]


def kafka_asset(bootstrap_servers: str, topic: str) -> Asset:
    broker = bootstrap_servers.split(",")[0].strip()
    return Asset(uri=f"kafka://{broker}/{topic}")


def output_starts(admin, topics) -> dict[str, dict]:
    """Each output topic's partitions' ends now (the plan): where this window's records will start."""
    out = {}
    for output in OUTPUTS:
        topic = getattr(topics, output)
        offsets = admin.offsets(topic, admin.partitions(topic))
        out[output] = {"topic": topic, "starts": {str(p): o.high_watermark for p, o in offsets.items()}}
    return out


def window_event_extras(admin, plan: dict, summary: dict, bootstrap_servers: str) -> dict[str, dict]:
    """The event extra per output, once the run committed: its offset ranges, window, run id, counts."""
    counts = {k: summary[k] for k in ("records_read", "invoices", "shipments", "dead_letters", "transactions")}
    extras = {}
    for output, where in plan["outputs"].items():
        topic = where["topic"]
        ends = admin.settled_offsets(topic)
        extras[output] = {
            "bootstrap_servers": bootstrap_servers,
            "topic": topic,
            "ranges": {str(p): [int(where["starts"].get(str(p), 0)), o.last_stable] for p, o in sorted(ends.items())},
            "window": plan["window"],
            "run_id": summary["run_id"],
            "counts": counts,
        }
    return extras


def in_window(extra: dict):
    """A predicate for records read from ``extra["ranges"]``: True for the records the event's input
    window produced (their ``source_partition``/``source_offset`` headers fall inside its ranges)."""
    window = extra["window"]
    topic = window["topic"].encode()
    ranges = {int(p): (start, end) for p, (start, end) in window["partitions"].items()}

    def check(record) -> bool:
        if record.headers.get(H_SOURCE_TOPIC) != topic:
            return False
        start, end = ranges.get(int(record.headers[H_SOURCE_PARTITION]), (0, 0))
        return start <= int(record.headers[H_SOURCE_OFFSET]) < end

    return check
