"""One produce call that waits for room in the producer's local queue instead of failing.

confluent-kafka raises ``BufferError`` when its local queue is full
(``queue.buffering.max.messages`` / ``.kbytes``); the cure is to serve delivery
reports (``poll``) until the queue drains. Every producer in the project goes
through this helper, so that loop exists once.
"""

from __future__ import annotations

#: How long one poll waits for delivery reports while the queue is full.
FULL_QUEUE_POLL_S = 0.05


def produce_waiting(producer, topic: str, value: bytes | str | None, key: bytes | str | None = None, *,
                    headers: list | None = None, on_delivery=None, partition: int | None = None,
                    timestamp: int = 0) -> None:
    """``producer.produce(...)``, polling while the local queue is full; other errors propagate.

    Called once per output record: the common call builds no per-call dict; ``on_delivery``,
    ``partition`` and ``timestamp`` are passed only when given (else the producer's own callback,
    the partitioner's choice, and the producer's clock at send). ``timestamp``: the record's
    CreateTime in epoch milliseconds."""
    while True:
        try:
            if on_delivery is None and partition is None and not timestamp:
                producer.produce(topic, value, key, headers=headers)
            else:
                options: dict = {}
                if on_delivery is not None:
                    options["on_delivery"] = on_delivery
                if partition is not None:
                    options["partition"] = partition
                if timestamp:
                    options["timestamp"] = timestamp
                producer.produce(topic, value, key, headers=headers, **options)
            return
        except BufferError:
            producer.poll(FULL_QUEUE_POLL_S)
