"""A pipeline's producer settings without a broker: the linger kept under the transaction timeout, as
librdkafka requires of a transactional producer (it builds one from them here; building connects nothing)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer

from eos_etl.engine.pipeline import DEFAULT_PRODUCER_CONFIG, PipelineConfig
from eos_etl.kafka.connection import KafkaConnection


def config(**kwargs) -> PipelineConfig:
    return PipelineConfig(connection=KafkaConnection("localhost:1"), input_topic="purchases", group="g",
                          output_topics=("out",), transactional_id_prefix="shop", **kwargs)


@pytest.mark.parametrize("timeout_ms", [120_000, 10_000, 3_000, 1_000])
def test_the_linger_stays_under_the_transaction_timeout_and_librdkafka_takes_it(timeout_ms):
    settings = config(transaction_timeout_ms=timeout_ms, chunk_seconds=0.5).producer_settings_as("shop-purchases-0")
    assert settings["linger.ms"] == min(DEFAULT_PRODUCER_CONFIG["linger.ms"], timeout_ms // 2)
    Producer(settings)  # raises KafkaException when librdkafka refuses the configuration


def test_a_linger_of_the_users_own_is_kept_and_librdkafka_says_when_it_cannot_be():
    settings = config(transaction_timeout_ms=3_000, chunk_seconds=0.5,
                      producer_config={"linger.ms": 5_000}).producer_settings_as("shop-purchases-0")
    assert settings["linger.ms"] == 5_000
    with pytest.raises(KafkaException, match="linger.ms"):
        Producer(settings)
