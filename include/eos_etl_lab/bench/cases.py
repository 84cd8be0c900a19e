"""The benchmark cases. Each runs in its own process:

    python -m eos_etl_lab.bench.cases SPEC.json RESULT.json

and writes ``{"job_s": ..., "purchases": ..., "outputs": ..., ...}`` to
RESULT.json. ``job_s`` is the case's own timing of its work only: for the
Spark cases it starts after the SparkSession exists (``startup_s``) and ends
when the action returns; for the producer cases it starts after the
pre-built payloads are loaded and ends when the last delivery (or commit) is
confirmed.

* ``B1`` raw confluent-kafka idempotent producer, pre-built output records;
* ``B2`` the same with transactions of ``txn_size`` purchases each, committing
  the input offsets with ``send_offsets_to_transaction``;
* ``B3`` Spark's Kafka writer (``df.write.format("kafka")``, at-least-once) of
  the same transform over the same window, with the same lineage headers;
* ``S``  our exactly-once job (``run_shop_window``);
* ``SC`` the same job as a client of a long-lived Spark Connect server (the
  bench sets ``SPARK_REMOTE`` for it; ``startup_s`` is then the client session's);
* ``Q``  quixstreams with ``processing_guarantee="exactly-once"``, the same transform in Python
  (:mod:`.peers.quix_app`), in its own environment;
* ``KS`` Kafka Streams with ``exactly_once_v2``, the same transform in Java (:mod:`.peers.kafka_streams`);
* ``N``  the one-transaction-per-record consume-produce-commit loop;
* ``R``  Spark's Kafka read (read_committed) + ``count()``;
* ``SC-stage`` one stage of the per-purchase breakdown on the Connect server (:mod:`.breakdown`);
* ``check`` the independent exactly-once checker over an ``S`` run;
* ``payloads`` collects an ``S`` run's outputs (in input order) to a file.
"""

from __future__ import annotations

import json
import logging
import pickle
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from eos_etl.checker import check_shop, read_topic
from eos_etl.engine.lineage import H_RUN_ID, H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC
from eos_etl.engine.pipeline import DEFAULT_PRODUCER_CONFIG
from eos_etl.engine.slots import AS_COMMITTED
from eos_etl.engine.tasks.kafka_source import read_window
from eos_etl.engine.window import Window
from eos_etl.kafka.connection import KafkaConnection
from eos_etl.kafka.produce import produce_waiting
from eos_etl.logging_setup import configure
from eos_etl.shop.schema import ShopTopics
from eos_etl.shop.settings import ShopSettings
from eos_etl.spark.session import spark_session

from .peers.cases import case_ks, case_q

log = logging.getLogger("eos_etl_lab.bench.cases")

# Output topic index in payload records: invoices, shipments, dead letters.
TOPIC_KEYS = ("invoices", "shipments", "dead_letters")


# -- shared helpers ---------------------------------------------------------------------
def _connection(spec):
    return KafkaConnection.from_json(spec["connection"])


def _window(spec):
    return Window.from_json(spec["window"])


def _settings(spec):
    t = spec["topics"]
    return ShopSettings(
        connection=_connection(spec),
        topics=ShopTopics(purchases=spec["input_topic"], invoices=t["invoices"], shipments=t["shipments"],
                          dead_letters=t["dead_letters"]),
        group=spec["group"],
        transactional_id_prefix=spec["prefix"],
        writer_slots=spec.get("writer_slots", AS_COMMITTED),
    )


def _producer_conf(spec, **extra) -> dict:
    conf = dict(DEFAULT_PRODUCER_CONFIG)
    conf.update(spec.get("producer_config") or {})
    conf.update(_connection(spec).client_config())
    conf["log_level"] = 3
    conf.update(extra)
    return conf


def _load_payloads(spec) -> list:
    """[(input partition, input offset, [(topic index, key, value, headers), ...]), ...] in input order."""
    with open(spec["payloads"], "rb") as f:
        records = pickle.load(f)
    limit = spec.get("limit")
    if limit:
        records = _sample(records, limit)
    return records


def _sample(records: list, limit: int) -> list:
    """The first ``limit`` records, taken evenly from every input partition (each partition's prefix)."""
    by_part: dict[int, list] = {}
    for r in records:
        by_part.setdefault(r[0], []).append(r)
    parts = sorted(by_part)
    per = -(-limit // len(parts))
    out = [r for p in parts for r in by_part[p][:per]]
    return out[:limit]


class _Deliveries:
    def __init__(self):
        self.ok = 0
        self.failed = 0
        self.first_error = None

    def __call__(self, err, _msg):
        if err is None:
            self.ok += 1
        else:
            self.failed += 1
            self.first_error = self.first_error or err.str()


def _spark(app: str):
    t0 = time.monotonic()
    spark = spark_session(app)
    return spark, time.monotonic() - t0


# -- cases ---------------------------------------------------------------------------------
def case_b1(spec) -> dict:
    records = _load_payloads(spec)
    topics = [spec["topics"][k] for k in TOPIC_KEYS]
    deliveries = _Deliveries()
    producer = Producer(_producer_conf(spec, **{"enable.idempotence": True, "on_delivery": deliveries}))
    outputs = 0
    t0 = time.monotonic()
    for _p, _off, outs in records:
        for ti, key, value, headers in outs:
            produce_waiting(producer, topics[ti], value, key, headers=headers)
            outputs += 1
        producer.poll(0)
    left = producer.flush(120)
    job = time.monotonic() - t0
    if left or deliveries.failed:
        raise RuntimeError(f"B1: {left} undelivered, {deliveries.failed} failed ({deliveries.first_error})")
    return {"job_s": job, "purchases": len(records), "outputs": outputs, "delivered": deliveries.ok}


def case_b2(spec) -> dict:
    records = _load_payloads(spec)
    k = int(spec["txn_size"])
    topics = [spec["topics"][k_] for k_ in TOPIC_KEYS]
    input_topic = spec["input_topic"]
    deliveries = _Deliveries()
    producer = Producer(_producer_conf(spec, **{
        "transactional.id": f"{spec['prefix']}-b2", "transaction.timeout.ms": 120_000, "on_delivery": deliveries,
    }))
    consumer = Consumer({**_connection(spec).client_config(), "group.id": spec["group"], "log_level": 3,
                         "enable.auto.commit": False})
    group_metadata = consumer.consumer_group_metadata()
    outputs = transactions = 0
    send_offsets_s = commit_s = 0.0
    t0 = time.monotonic()
    producer.init_transactions(30)
    init_s = time.monotonic() - t0
    for i in range(0, len(records), k):
        chunk = records[i:i + k]
        producer.begin_transaction()
        next_offsets: dict[int, int] = {}
        for p, off, outs in chunk:
            for ti, key, value, headers in outs:
                produce_waiting(producer, topics[ti], value, key, headers=headers)
                outputs += 1
            next_offsets[p] = off + 1
            producer.poll(0)
        t1 = time.monotonic()
        producer.send_offsets_to_transaction(
            [TopicPartition(input_topic, p, o) for p, o in sorted(next_offsets.items())], group_metadata, 30)
        t2 = time.monotonic()
        producer.commit_transaction(60)  # flushes: waits for every delivery of the transaction
        commit_s += time.monotonic() - t2
        send_offsets_s += t2 - t1
        transactions += 1
    job = time.monotonic() - t0
    consumer.close()
    if deliveries.failed:
        raise RuntimeError(f"B2: {deliveries.failed} deliveries failed ({deliveries.first_error})")
    return {"job_s": job, "purchases": len(records), "outputs": outputs, "transactions": transactions,
            "delivered": deliveries.ok, "txn_size": k, "init_s": round(init_s, 4),
            "send_offsets_s": round(send_offsets_s, 4), "commit_s": round(commit_s, 4)}


def case_n(spec) -> dict:
    """Consume one purchase, produce its outputs, send its offset, commit: once per record."""
    records = _load_payloads(spec)
    wanted = {(p, off): outs for p, off, outs in records}
    ends: dict[int, int] = {}
    for p, off, _ in records:
        ends[p] = max(ends.get(p, -1), off + 1)
    window = _window(spec)
    topics = [spec["topics"][k_] for k_ in TOPIC_KEYS]
    input_topic = spec["input_topic"]
    deliveries = _Deliveries()
    producer = Producer(_producer_conf(spec, **{
        "transactional.id": f"{spec['prefix']}-n", "transaction.timeout.ms": 120_000, "on_delivery": deliveries,
        "linger.ms": 0,
    }))
    consumer = Consumer({**_connection(spec).client_config(), "group.id": spec["group"], "log_level": 3,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    group_metadata = consumer.consumer_group_metadata()
    outputs = transactions = done = 0
    send_offsets_s = commit_s = 0.0
    t0 = time.monotonic()
    producer.init_transactions(30)
    consumer.assign([TopicPartition(input_topic, p, window.ranges[p].start) for p in sorted(ends)])
    remaining = set(ends)
    while remaining:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        p, off = msg.partition(), msg.offset()
        if p not in remaining:
            continue
        if off >= ends[p]:
            remaining.discard(p)
            consumer.pause([TopicPartition(input_topic, p)])
            continue
        producer.begin_transaction()
        for ti, key, value, headers in wanted[(p, off)]:
            produce_waiting(producer, topics[ti], value, key, headers=headers)
            outputs += 1
        t1 = time.monotonic()
        producer.send_offsets_to_transaction([TopicPartition(input_topic, p, off + 1)], group_metadata, 30)
        t2 = time.monotonic()
        producer.commit_transaction(60)
        commit_s += time.monotonic() - t2
        send_offsets_s += t2 - t1
        transactions += 1
        done += 1
        if off + 1 >= ends[p]:
            remaining.discard(p)
            consumer.pause([TopicPartition(input_topic, p)])
    job = time.monotonic() - t0
    consumer.close()
    if deliveries.failed:
        raise RuntimeError(f"N: {deliveries.failed} deliveries failed ({deliveries.first_error})")
    return {"job_s": job, "purchases": done, "outputs": outputs, "transactions": transactions,
            "ends": {str(p): e for p, e in ends.items()},
            "send_offsets_s": round(send_offsets_s, 4), "commit_s": round(commit_s, 4)}


def case_s(spec) -> dict:
    from eos_etl.shop.pipeline import run_shop_window  # deferred: pyspark, as in _settings

    settings = _settings(spec)
    window = _window(spec)
    spark, startup = _spark("eos-etl-bench-S")
    t0 = time.monotonic()
    summary = run_shop_window(spark, settings, window, run_id=spec["run_id"], **(spec.get("pipeline") or {}))
    job = time.monotonic() - t0
    spark.stop()
    return {"job_s": job, "startup_s": startup, "purchases": summary.records_published,
            "outputs": sum(summary.outputs().values()), "transactions": summary.transactions,
            "aborts": sum(r.aborts for r in summary.partitions), "skipped": summary.records_skipped,
            # The window-end proof each task reads after its last record (its share of the window's time).
            "end_proof_s": [r.end_proof_s for r in summary.partitions],
            # Each task's own clocks, for the per-purchase breakdown (bench.breakdown).
            "partitions": [{k: getattr(r, k) for k in ("seconds", "read_seconds", "decode_seconds", "end_proof_s",
                                                       "worker_cpu_seconds")} for r in summary.partitions]}


def case_stage(spec) -> dict:
    """One stage of the per-purchase breakdown below publishing (bench.breakdown), as a Connect client."""
    from .breakdown import run_stage  # deferred: pyspark, as in _settings

    spark, startup = _spark(f"eos-etl-bench-stage-{spec['stage']}")
    job, rows = run_stage(spark, _settings(spec), _window(spec), spec["stage"])
    spark.stop()
    return {"job_s": job, "startup_s": startup, "purchases": rows, "outputs": 0, "stage": spec["stage"]}


def case_b3(spec) -> dict:
    from pyspark.sql import functions as F  # deferred: pyspark, as in _settings

    settings = _settings(spec)
    window = _window(spec)
    config = settings.pipeline()
    spark, startup = _spark("eos-etl-bench-B3")
    t0 = time.monotonic()
    out = settings.transform()(read_window(spark, config, window))

    def header(name, value):
        return F.struct(F.lit(name).alias("key"), value.cast("binary").alias("value"))

    lineage = F.array(
        header(H_SOURCE_TOPIC, F.lit(window.topic)),
        header(H_SOURCE_PARTITION, F.col("partition").cast("string")),
        header(H_SOURCE_OFFSET, F.col("offset").cast("string")),
        header(H_RUN_ID, F.lit(spec["run_id"])),
    )
    # explode_outer, not explode: for explode Spark infers a filter (size(outputs) > 0) and pushes it below
    # the projection that makes `outputs`, so every purchase's transform ran twice, once interpreted in
    # the filter: about 5x B3's CPU (107-116 CPU-s vs 22-26 at 100,000). Every purchase has an output (an
    # invoice and a shipment, or a dead letter), so the outer form yields the same rows.
    rows = out.select("partition", "offset", F.explode_outer("outputs").alias("o")).select(
        F.col("o.topic").alias("topic"),
        F.col("o.key").alias("key"),
        F.col("o.value").alias("value"),
        F.concat(lineage, F.col("o.headers")).alias("headers"),
    )
    writer = rows.write.format("kafka")
    for key, value in _connection(spec).spark_options().items():
        writer = writer.option(key, value)
    for key, value in (spec.get("spark_producer") or {}).items():
        writer = writer.option(f"kafka.{key}", str(value))
    writer.save()
    job = time.monotonic() - t0
    spark.stop()
    return {"job_s": job, "startup_s": startup, "purchases": spec["expected_purchases"],
            "outputs": 2 * spec["expected_purchases"]}


def case_r(spec) -> dict:
    settings = _settings(spec)
    window = _window(spec)
    spark, startup = _spark("eos-etl-bench-R")
    t0 = time.monotonic()
    n = read_window(spark, settings.pipeline(), window).count()
    job = time.monotonic() - t0
    spark.stop()
    return {"job_s": job, "startup_s": startup, "purchases": n, "outputs": 0}


def case_check(spec) -> dict:
    settings = _settings(spec)
    window = _window(spec)
    t0 = time.monotonic()
    ends = {p: r.end for p, r in window.ranges.items()} if spec.get("window_ends", True) else None
    report = check_shop(settings, expected_ends=ends)
    return {"job_s": time.monotonic() - t0, "ok": report.ok, "violations": dict(report.violations),
            "outputs": report.outputs, "purchases": sum(p.committed_inputs for p in report.partitions.values())}


def case_payloads(spec) -> dict:
    """Read an S run's committed outputs back, group them by source record, write them in input order."""
    conn = _connection(spec)
    t0 = time.monotonic()
    by_source: dict[tuple[int, int], list] = {}
    for ti, k in enumerate(TOPIC_KEYS):
        for r in read_topic(conn, spec["topics"][k]):
            src = (int(r.headers[H_SOURCE_PARTITION]), int(r.headers[H_SOURCE_OFFSET]))
            by_source.setdefault(src, []).append((ti, r.key, r.value, list(r.headers.items())))
    records = [(p, off, sorted(outs, key=lambda o: o[0])) for (p, off), outs in sorted(by_source.items())]
    with open(spec["payloads"], "wb") as f:
        pickle.dump(records, f, protocol=pickle.HIGHEST_PROTOCOL)
    outputs = sum(len(r[2]) for r in records)
    log.info("collected %d purchases / %d outputs to %s", len(records), outputs, spec["payloads"])
    return {"job_s": time.monotonic() - t0, "purchases": len(records), "outputs": outputs}


CASES = {"B1": case_b1, "B2": case_b2, "B3": case_b3, "Q": case_q, "KS": case_ks, "S": case_s, "N": case_n, "R": case_r,
         "check": case_check, "payloads": case_payloads,
         "SC": case_s, "SC-stage": case_stage}  # the session is the server's because of SPARK_REMOTE
                                                # (spark.config.spark_session)


def main(argv: list[str]) -> int:
    configure()
    spec_path, result_path = Path(argv[0]), Path(argv[1])
    spec = json.loads(spec_path.read_text())
    log.info("bench case %s starting", spec["case"])
    result = CASES[spec["case"]](spec)
    result["job_s"] = round(result["job_s"], 4)
    if "startup_s" in result:
        result["startup_s"] = round(result["startup_s"], 3)
    result_path.write_text(json.dumps(result))
    log.info("bench case %s done: %s", spec["case"], {k: v for k, v in result.items() if k != "ends"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
