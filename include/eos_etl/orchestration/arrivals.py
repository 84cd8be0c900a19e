"""Event-driven runs: an AssetWatcher on the purchases topic, one run per burst of arrivals.

The watcher (:mod:`.arrivals_watch`) runs the Kafka provider's ``AwaitMessageTrigger``
on the purchases topic, through its own Airflow connection ``kafka_purchases_watch``
(conn type ``kafka``; its extra is the consumer's config, with its own
``group.id``: the pipeline's group plus ``-arrivals``, which the ACL role
``watcher`` of ``eos-etl acl grant`` covers). The trigger fires for a message when its apply function returns
something, commits, and is started again by the triggerer; left to itself it
would make one asset event per message.

Batching, in two halves that together never strand a purchase:

* :func:`first_of_burst` (the apply function, run in the triggerer) fires for the
  first message after a quiet gap of ``quiet_s`` seconds, or once ``max_batch_s``
  seconds of a continuous stream have passed since the last fire: one event per
  burst, whatever the burst's size. The event carries where the burst started
  (topic, partition, offset, timestamp), never the message's payload.
* The run it triggers waits, before planning, until the topic's end offsets have
  not moved for ``quiet_s`` seconds (at most ``max_batch_s``:
  :func:`wait_for_quiet`), then plans its window up to the last stable offset as
  every run does. A message appended after that plan comes at least ``quiet_s``
  after the previous one, or at least ``max_batch_s`` after the fire, so it fires
  a new event itself.

The window is planned from the pipeline's own consumer-group offsets, as for
every run: the watcher's group only paces notifications, so an event lost (say
the triggerer crashed between its commit and the event) delays purchases to the
next burst or the DAG's time-based sweep, never loses or duplicates them.
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger(__name__)

WATCH_CONN_ID = "kafka_purchases_watch"
QUIET_S = 5.0
MAX_BATCH_S = 60.0

# Per topic: (latest message timestamp seen, timestamp of the message that last fired), in
# seconds. Lives in the triggerer process across the trigger's restarts; a restarted triggerer
# starts empty and fires on its first message, which only costs one extra (possibly empty) run.
_seen: dict[str, tuple[float, float]] = {}
_seen_lock = threading.Lock()


def first_of_burst(message, *, quiet_s: float = QUIET_S, max_batch_s: float = MAX_BATCH_S) -> dict | None:
    """The trigger's apply function: an event payload for the first message of a burst, else None."""
    kind, stamp_ms = message.timestamp()
    stamp = stamp_ms / 1000 if kind and stamp_ms > 0 else time.time()
    topic = message.topic()
    with _seen_lock:
        latest, fired = _seen.get(topic, (None, None))
        fire = latest is None or stamp - latest > quiet_s or stamp - fired > max_batch_s
        # max(): partitions are consumed interleaved, so timestamps arrive slightly out of order.
        _seen[topic] = (stamp if latest is None else max(latest, stamp), stamp if fire else fired)
    if not fire:
        return None
    log.info("arrivals on %s: a burst starts at partition %d offset %d", topic, message.partition(),
             message.offset())
    return {"topic": topic, "partition": message.partition(), "offset": message.offset(),
            "timestamp_ms": int(stamp * 1000)}


def wait_for_quiet(admin, topic: str, *, quiet_s: float = QUIET_S, max_s: float = MAX_BATCH_S) -> float:
    """Block until ``topic``'s end offsets have not moved for ``quiet_s`` seconds, or ``max_s`` passed.
    Returns the seconds waited."""
    started = time.monotonic()
    partitions = admin.partitions(topic)

    def ends() -> dict[int, int]:
        return {p: o.high_watermark for p, o in admin.offsets(topic, partitions).items()}

    last, since = ends(), time.monotonic()
    while time.monotonic() - since < quiet_s and time.monotonic() - started < max_s:
        time.sleep(min(1.0, quiet_s / 4))
        now = ends()
        if now != last:
            last, since = now, time.monotonic()
    waited = time.monotonic() - started
    log.info("arrivals on %s: quiet for %.0fs after waiting %.1fs; ends %s", topic, quiet_s, waited, last)
    return waited
