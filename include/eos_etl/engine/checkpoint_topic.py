"""The name and settings of a pipeline's checkpoint topic (its records: :mod:`.checkpoint_log`).

Data only, so a pipeline's configuration can be built where no Kafka client is loaded (a DAG parse).
"""

from __future__ import annotations

from ..kafka.topic_spec import TopicSpec

#: The checkpoint topic's settings: compacted, never deleted by time, rolled (and so compactable) hourly.
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "retention.ms": "-1",
    "segment.ms": "3600000",
    "min.cleanable.dirty.ratio": "0.1",
}
#: What an existing checkpoint topic must have: a ``delete`` policy would let Kafka drop the checkpoint.
REQUIRED_POLICY = "compact"
SUFFIX = ".checkpoints"


def topic_for(group: str) -> str:
    """The checkpoint topic of the pipeline whose consumer group is ``group``."""
    return f"{group}{SUFFIX}"


def topic_spec(topic: str, input_partitions: int):
    """How ``create-topics`` makes the checkpoint topic: one partition per input partition, compacted."""
    return TopicSpec(topic, input_partitions, dict(TOPIC_CONFIG))
