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
                    headers: list | None = None, on_delivery=None, timestamp: int = 0) -> None:
    """``producer.produce(...)``, polling while the local queue is full; other errors propagate.

    Called once per output record: no per-call dict, and ``on_delivery`` is passed only when
    given (the producer's own callback otherwise). ``timestamp``: the record's CreateTime in
    epoch milliseconds; 0 (librdkafka's default) stamps it with the producer's clock at send."""
    while True:
        try:
            if on_delivery is None:
                producer.produce(topic, value, key, headers=headers, timestamp=timestamp)
            else:
                producer.produce(topic, value, key, headers=headers, on_delivery=on_delivery, timestamp=timestamp)
            return
        except BufferError:
            producer.poll(FULL_QUEUE_POLL_S)
