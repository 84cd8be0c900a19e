"""The cluster comparison: S and B3 on a 3-node Kafka cluster and on the single node, in one run.

Production Kafka replicates: every write with acks=all waits until
min.insync.replicas copies have it, and a transaction's markers and offsets
go through replicated internal topics. This phase measures what that costs
this project's exactly-once publish (S) and Spark's own at-least-once Kafka
writer (B3), like for like:

* a second Kafka, ``size`` KRaft nodes (replication factor 3, min.insync.replicas 2:
  :func:`~eos_etl.embedded.kafka_cluster.replication_defaults`), next to the
  bench's single node, both on this machine;
* the same input on both (same generator, seed and count, in a fresh topic
  created by ``ensure_topics``, which gives the cluster's durability);
* both producers with ``acks=all`` set explicitly (S's transactional producer
  requires it anyway; B3's Java producer gets it as ``kafka.acks``);
* the four cases interleaved per repetition (S single, B3 single, S cluster,
  B3 cluster), each in its own process, so all four see the same machine
  load (the machine is shared: every row keeps its load average);
* the independent exactly-once checker over one S run on each target.

Rows and checks carry ``kafka_target`` ("single" / "cluster"); the report
keeps them out of the single-node tables and gives them their own section.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from .machine import load_average
from .targets import KafkaTarget

log = logging.getLogger(__name__)

TARGET_FIELD = "kafka_target"  # the row / check field naming the Kafka a figure was measured on
CASES = ("S", "B3")
ACKS_ALL = {"acks": "all"}


def case_extra(case: str, spark_producer: dict) -> dict:
    """The spec additions that pin acks=all on the case's producer (S: librdkafka, B3: Spark's Java producer)."""
    if case == "S":
        return {"pipeline": {"producer_config": dict(ACKS_ALL)}}
    return {"spark_producer": {**spark_producer, **ACKS_ALL}}


class ComparedBench(Protocol):
    """What the comparison uses of the bench that runs it (the bench's ``Bench``)."""

    opts: Any  # the bench's Options: records, partitions, repeats, cluster_size
    work: Path
    target: KafkaTarget
    cluster_compare_meta: dict

    def save(self) -> None: ...

    def run_case(self, case: str, **kwargs: Any) -> tuple[dict, Any]: ...

    def check_s(self, settings: Any, size: int, pc: int, **kwargs: Any) -> dict: ...

    def drop_outputs(self, settings: Any, target: KafkaTarget | None = None) -> None: ...


class ClusterComparison:
    def __init__(self, bench: ComparedBench, spark_producer: dict):
        self.bench = bench
        self.spark_producer = spark_producer  # B3's Java-producer settings (the bench's SPARK_PRODUCER)
        self.meta: dict = {}

    def input_topic(self) -> str:
        return f"bench-compare-purchases-p{self.bench.opts.partitions}"

    def run(self) -> dict:
        b, o = self.bench, self.bench.opts
        t0 = time.monotonic()
        self.meta = b.cluster_compare_meta = {
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "records": o.records, "partitions": o.partitions, "repeats": o.repeats,
            "producer_acks": {case: "all" for case in CASES}, "load_start": load_average(), "targets": {},
        }
        cluster = KafkaTarget.start("cluster", b.work / "kafka-cluster", size=o.cluster_size)
        try:
            targets = [b.target, cluster]
            for target in targets:
                # The single node's inputs[partitions] now names this topic: the comparison is the last phase.
                entry = target.prepare_input(self.input_topic(), o.partitions, o.records, o.input_transaction_size)
                self.meta["targets"][target.name] = {**target.describe(), "input": entry}
            cluster.cluster.wait_in_sync(topics=[self.input_topic()])
            b.save()
            for rep in range(1, o.repeats + 1):
                for target in targets:
                    for case in CASES:
                        self._run_one(case, target, rep)
        finally:
            cluster.stop()
            self.meta["load_end"] = load_average()
            self.meta["elapsed_s"] = round(time.monotonic() - t0, 1)
            b.save()
        return self.meta

    def _run_one(self, case: str, target: KafkaTarget, rep: int) -> None:
        b, o = self.bench, self.bench.opts
        tags = {TARGET_FIELD: target.name}
        judged = case == "S" and rep == 1  # the checker reads one S run per target back
        _row, settings = b.run_case(case, size=o.records, pc=o.partitions, rep=rep, target=target, row_tags=tags,
                                    extra=case_extra(case, self.spark_producer), keep_topics=judged)
        if judged:
            t = settings.topics
            states = target.topic_durability([t.purchases, t.invoices, t.shipments, t.dead_letters])
            self.meta["targets"][target.name]["topics"] = {name: st.to_dict() for name, st in states.items()}
            b.check_s(settings, o.records, o.partitions, target=target, tags=tags)
            b.drop_outputs(settings, target)


def merge_into(previous: dict, comparison: dict) -> dict:
    """``previous`` results (a full run) with their cluster comparison replaced by ``comparison``'s.

    For a comparison run on its own (``--only cluster-compare``): the full run's figures stay as they
    were measured, the comparison's rows, checks and set-up come from the new run.
    """
    def own(items: list[dict]) -> list[dict]:
        return [x for x in items if TARGET_FIELD not in x]

    def compared(items: list[dict]) -> list[dict]:
        return [x for x in items if TARGET_FIELD in x]

    merged = dict(previous)
    merged["rows"] = own(previous.get("rows", [])) + compared(comparison.get("rows", []))
    merged["checks"] = own(previous.get("checks", [])) + compared(comparison.get("checks", []))
    merged["cluster_compare"] = comparison.get("cluster_compare", {})
    return merged
