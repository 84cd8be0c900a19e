"""A transactional producer finds its coordinator without librdkafka's 500 ms retry, on a real broker.

librdkafka drops its bootstrap connection once the first metadata names the brokers, and looks for
the transaction coordinator only through a learned broker that is up. ``init_transactions`` called
before one is up cannot ask ("Unable to query for transaction coordinator") and waits for a retry
timer: 500 ms, or the 50 ms sparse-connection timer when that one happens to be armed.
:meth:`TransactionalProducer.init_transactions` first has a learned broker answer a metadata request,
so its first coordinator query goes out at once. librdkafka's own debug log says which happened.
(What it saves: docs/performance-history.md, "A producer's first 500 ms".)
"""

from __future__ import annotations

import logging

from eos_etl.engine.pipeline import DEFAULT_PRODUCER_CONFIG
from eos_etl.engine.publishing.producer import TransactionalProducer
from tests.conftest import unique

#: librdkafka's debug line when it has no broker up to ask for the coordinator (then a timer retries).
NO_BROKER_FOR_COORDINATOR = "Unable to query for transaction coordinator"
COORDINATOR_FOUND = "FindCoordinator response: Transaction coordinator is broker"


class Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def debug_logged_init(connection, tid: str, *, connect_first: bool) -> list[str]:
    """librdkafka's ``eos`` debug lines of a new producer's ``init_transactions`` and one commit."""
    lines = Lines()
    logger = logging.getLogger(f"rdkafka.{tid}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(lines)
    settings = {**DEFAULT_PRODUCER_CONFIG, **connection.client_config(), "transactional.id": tid,
                "transaction.timeout.ms": 60_000, "debug": "eos", "logger": logger}
    producer = TransactionalProducer(settings, retry_deadline_s=10.0, op_timeout_s=10.0)
    if connect_first:
        producer.init_transactions()
    else:  # librdkafka's call alone, as before the wrapper asked for metadata first
        producer.producer.init_transactions(10.0)
    producer.begin_transaction()
    producer.commit_transaction()
    producer.producer.poll(0)  # serves the queued log lines to the logger
    producer.close()
    return lines.lines


def test_init_transactions_asks_for_the_coordinator_through_a_learned_broker_at_once(connection):
    for n in range(4):  # a new producer each time, as every publishing task has
        lines = debug_logged_init(connection, unique(f"connect-first-{n}"), connect_first=True)
        assert any(COORDINATOR_FOUND in line for line in lines), lines[-20:]
        assert not [line for line in lines if NO_BROKER_FOR_COORDINATOR in line], lines[-40:]


def test_without_the_metadata_request_first_librdkafka_finds_no_broker_to_ask(connection):
    """The control: what the wrapper's metadata request avoids happens with librdkafka's call alone (a race
    against the bootstrap connection, which it lost in every call measured; four producers, one suffices)."""
    waited = []
    for n in range(4):
        lines = debug_logged_init(connection, unique(f"init-alone-{n}"), connect_first=False)
        assert any(COORDINATOR_FOUND in line for line in lines), lines[-20:]
        waited.append(any(NO_BROKER_FOR_COORDINATOR in line for line in lines))
    assert any(waited), waited
