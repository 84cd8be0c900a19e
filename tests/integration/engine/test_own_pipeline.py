"""A data engineer's own pipeline on the engine's public surface alone (docs/own-pipeline.md): their topics,
their transform (page views, not purchases), exactly once (real broker and Spark)."""

from __future__ import annotations

import json

from confluent_kafka import Producer
from pyspark.sql import functions as F

from eos_etl.checker import check, read_topic
from eos_etl.engine.checkpoint_topic import topic_spec
from eos_etl.engine.pipeline import PipelineConfig
from eos_etl.engine.planning.planner import plan_window
from eos_etl.engine.slots import DEFAULT_WRITER_SLOTS
from eos_etl.engine.tasks.runner import run_window
from eos_etl.kafka.topics import ensure_topics
from tests.conftest import unique


def views_by_page(df, views: str, rejects: str):
    """A page view ``{"page": ..., "user": ...}`` -> one record in ``views`` keyed by its page; anything
    else -> one record in ``rejects`` with its reason: every input has exactly one output."""
    text = F.col("value").cast("string")
    page, user = F.get_json_object(text, "$.page"), F.get_json_object(text, "$.user")
    view = F.struct(F.lit(views).alias("topic"), page.cast("binary").alias("key"),
                    user.cast("binary").alias("value"),
                    F.array(F.struct(F.lit("kind").alias("key"), F.lit(bytearray(b"view")).alias("value")))
                    .alias("headers"))
    reject = F.struct(F.lit(rejects).alias("topic"), F.col("key"), F.col("value"),
                      F.array(F.struct(F.lit("reason").alias("key"), F.lit(bytearray(b"no page")).alias("value")))
                      .alias("headers"))
    return df.select("partition", "offset", F.array(F.when(page.isNotNull(), view).otherwise(reject)).alias("outputs"))


def _produce(connection, topic: str, start: int, count: int) -> None:
    producer = Producer(connection.client_config())
    for i in range(start, start + count):
        view = {"page": f"/p{i % 7}", "user": f"u{i}"} if i % 10 else {"user": f"u{i}"}  # every 10th has no page
        producer.produce(topic, json.dumps(view).encode(), key=f"u{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0


def test_a_pipeline_of_its_own_topics_and_transform_runs_exactly_once(spark, connection, admin):
    src, views, rejects = unique("views-in"), unique("views-by-page"), unique("views-rejected")
    config = PipelineConfig(connection, input_topic=src, group=unique("views-group"), output_topics=(views, rejects),
                            transactional_id_prefix=unique("views"))
    admin.create_topics({src: 3, views: 3, rejects: 1})
    ensure_topics(admin, [topic_spec(config.checkpoint_topic, 3)])

    def transform(df):
        return views_by_page(df, views, rejects)

    def run_and_check(expected_views: int, expected_rejects: int) -> None:
        window = plan_window(admin, config)
        assert window.writer_slots == DEFAULT_WRITER_SLOTS  # a new pipeline's, then as committed
        run_window(spark, config, window, transform)
        ends = {p: o.last_stable for p, o in admin.offsets(src, [0, 1, 2]).items()}
        result = check(connection, input_topic=src, group=config.group, paired_topics=(),
                       single_topics=(views, rejects), expected_ends=ends, checkpoint_topic=config.checkpoint_topic)
        assert result.ok, result.to_dict()["violations"]
        assert len(read_topic(connection, views)) == expected_views
        assert len(read_topic(connection, rejects)) == expected_rejects

    _produce(connection, src, 0, 300)
    run_and_check(270, 30)
    first = {(r.key, r.value) for r in read_topic(connection, views)}
    assert (b"/p1", b"u1") in first and all(k.startswith(b"/p") for k, _ in first)

    assert plan_window(admin, config).is_empty  # nothing new: the next window is empty
    _produce(connection, src, 300, 100)
    run_and_check(360, 40)  # only the new records, once
