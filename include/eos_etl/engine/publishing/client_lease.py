"""The client lease: on the Spark Connect route a publishing task commits only while its run's client lives.

Under spark-submit (and ``local[*]``) the driver's death takes the executors with it. On a Spark
Connect server the tasks are the server's: a SIGKILLed (or paused) client leaves them running until
the server notices, when the response stream it serves ends and the operation then stays detached
for the detached timeout (:mod:`eos_etl.embedded.spark_connect`: up to 45 s; measured here, the last
commit of a SIGKILLed client's tasks landed 27 s after the kill). Each of those commits is of a
position the task proved, but "a stop is not an end": a killed attempt commits nothing more.

The lease, in order:

1. The client (:class:`LeaseHolder`, started by the run before its tasks) joins a consumer group of
   its own, ``<group>-lease-<run id>-<random>`` (:func:`lease_group`), with one consumer subscribed to
   the pipeline's checkpoint topic and paused at once (it never fetches nor commits). librdkafka's own
   thread renews the lease every :data:`RENEW_S` (its heartbeat); the broker ends the membership
   :data:`LEASE_TTL_S` after the last heartbeat it got (``session.timeout.ms``). The group's name goes
   to the tasks in :attr:`~eos_etl.engine.pipeline.PipelineConfig.client_lease`.
2. A task (:class:`LeaseCheck`) asks the group's coordinator (DescribeGroups) before its
   ``init_transactions`` (an orphan's retry fences nobody) and right before every
   ``commit_transaction`` of its transaction loop (every commit a task makes: each chunk, each window
   end, each refresh of a position, a slot's last one; :mod:`.transaction_loop`). Stable
   with a member: the client lives. No member (Empty: its session expired or it left; Dead: never
   there): the client is gone, the loop aborts its open transaction and the task fails with
   :class:`~eos_etl.engine.errors.ClientLeaseError` (exit code 1), committing nothing more; the next
   run fences what is left and resumes. A rebalance is asked again (one member's lasts milliseconds);
   a lease that cannot be proven within :data:`CHECK_DEADLINE_S` counts as gone: a commit needs proof.
3. The client leaves the group when its tasks ended (a clean end, or a failed job whose other tasks
   Spark is still killing: those commit nothing more either).

So a task's last commit lands at most :data:`LEASE_TTL_S` after its client's last heartbeat, plus
the commit it checked the lease for (measured: a SIGKILLed client's tasks' last commit 27 s after the
kill before the lease, 5.4 to 5.9 s after it: ``tests/integration/embedded/test_connect_supervision.py``).
On spark-submit and ``local[*]`` there is no lease: the config carries none, nothing is checked.

Why group membership, of the media weighed:

* **A consumer group's membership** (this): the broker decides liveness on its own clock (no clocks
  of two machines compared); it works wherever the tasks reach Kafka, which they must to commit at
  all (executors on other machines, docker-compose's ``spark-connect`` service); librdkafka renews it
  from its own thread, whatever the client's Python does (waiting on gRPC); a paused (SIGSTOPped)
  client loses it too. It costs Read on the groups ``<group>-lease-`` (:mod:`eos_etl.kafka.grants`)
  and one round trip to the coordinator per commit (2 in fact: librdkafka asks ConsumerGroupDescribe
  first, which a classic group answers GROUP_ID_NOT_FOUND, then DescribeGroups; measured 1.3 ms a check
  (median; p99 9.5 ms) on a quiet broker, 10 ms on the loaded 2-core test machine, and 60 to 70 ms for a
  task's first, which connects; against a commit every 50,000 records or 20 s). Its TTL is no shorter than
  the brokers' ``group.min.session.timeout.ms`` (6 s by default: a broker with more refuses the join,
  exit code 2), and a first join waits for ``group.initial.rebalance.delay.ms`` (0 on the project's
  brokers, 3 s by Kafka's default), which the holder spends while the run prepares its query.
* A heartbeat record in a topic: a topic more to create and grant, a fetch per commit, and the task
  compares the record's time with its own clock: a skew between machines is an error in the lease.
* A file under the stack's ``var/``: a stat per commit, but only where client and server share a
  filesystem (not docker-compose's service, not executors elsewhere), and a task would have to refuse
  to run wherever it cannot see the file.
* The server's own cancellation made synchronous: a SIGKILLed client sends nothing, and the server
  looks for it only when its response stream ends.

librdkafka: DescribeConsumerGroups is not the path that crashes on NOT_COORDINATOR
(ListConsumerGroupOffsets, librdkafka#5040: its parse calls into the consumer-group handle an admin
client lacks; the DescribeGroups and ConsumerGroupDescribe parses do not). It is a coordinator-bound
admin request, though, so librdkafka#4605 applies (docs/librdkafka-enq-once-abort.md): its request
timeout is never reached (an hour), the wait is bounded by the future, and a client whose wait
timed out is destroyed at once, its request still pending.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from ...errors import ConfigurationError
from ...kafka.errors import AuthorizationError
from ...kafka.grants import LEASE_GROUP_INFIX
from ..errors import ClientLeaseError

log = logging.getLogger(__name__)

#: The broker ends the holder's membership this long after its last heartbeat (``session.timeout.ms``;
#: Kafka's ``group.min.session.timeout.ms`` is 6 s by default, the least a client may ask).
LEASE_TTL_S = 6.0
#: The holder's heartbeat (``heartbeat.interval.ms``): five renewals missed before the lease expires.
RENEW_S = 1.0
#: How long a task tries to prove the lease before a commit (a coordinator moving, loading); past it the
#: lease counts as gone.
CHECK_DEADLINE_S = 10.0
#: One DescribeGroups' wait (the request's own timeout is never reached: see the module).
CHECK_TIMEOUT_S = 5.0
_NEVER_S = 3600.0
#: How long the client waits for its membership before the tasks start.
JOIN_TIMEOUT_S = 30.0
#: The holder's rebalance timeout (``max.poll.interval.ms``): its thread polls every 0.2 s.
_MAX_POLL_MS = 30_000


def lease_group(group: str, run_id: str) -> str:
    """A new lease group for one client of ``run_id`` (two clients of one run never share one)."""
    return f"{group}{LEASE_GROUP_INFIX}{run_id}-{uuid.uuid4().hex[:8]}"


class LeaseHolder:
    """The client's side: a member of its lease group while it lives (see the module)."""

    def __init__(self, config):
        self.config = config
        self.group = lease_group(config.group, config.run_id)
        self._joined = threading.Event()
        self._stopped = threading.Event()
        self._errors: list = []  # KafkaErrors from the consumer (a list, never ``self``, in its callbacks)
        self._consumer = None
        self._thread: threading.Thread | None = None

    def start(self) -> "LeaseHolder":
        errors, joined = self._errors, self._joined

        def on_assign(consumer, partitions) -> None:
            consumer.assign(partitions)
            consumer.pause(partitions)  # a member, never a reader
            joined.set()

        self._consumer = Consumer({
            **self.config.connection.client_config(),
            "group.id": self.group,
            "client.id": f"eos-etl-lease-{self.config.run_id}",
            "session.timeout.ms": int(LEASE_TTL_S * 1000),
            "heartbeat.interval.ms": int(RENEW_S * 1000),
            "max.poll.interval.ms": _MAX_POLL_MS,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "error_cb": errors.append,
            "log_level": 0,
        })
        self._consumer.subscribe([self.config.checkpoint_topic], on_assign=on_assign)
        self._thread = threading.Thread(target=self._poll, name="client-lease", daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        consumer, errors = self._consumer, self._errors
        while not self._stopped.is_set():
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is not None:
                errors.append(msg.error())

    def wait_held(self, timeout_s: float = JOIN_TIMEOUT_S) -> None:
        """Until the client is a member of its lease group (its tasks may then commit)."""
        t0 = time.monotonic()
        while not self._joined.wait(0.05):
            codes = {e.code() for e in self._errors}
            if KafkaError.GROUP_AUTHORIZATION_FAILED in codes:
                raise AuthorizationError(
                    f"the principal may not join the run's client lease group {self.group} (Read on the groups "
                    f"starting {self.config.group + LEASE_GROUP_INFIX!r}): no task started; grant the "
                    "pipeline's ACLs with `python -m eos_etl acl grant`")
            if KafkaError.INVALID_SESSION_TIMEOUT in codes:
                raise ConfigurationError(
                    f"the brokers refuse the client lease's session timeout of {LEASE_TTL_S:.0f}s (their "
                    "group.min.session.timeout.ms is higher): a Spark Connect run needs it at most that")
            if time.monotonic() - t0 > timeout_s:
                last = f" (last: {self._errors[-1].str()})" if self._errors else ""
                raise ClientLeaseError(f"the run's client lease group {self.group} was not joined within "
                                       f"{timeout_s:.0f}s{last}: no task started; run again")
        log.info("run %s: client lease %s held (joined in %.2fs; the tasks commit only while it is)",
                 self.config.run_id, self.group, time.monotonic() - t0)

    def bound(self, config):
        """``config`` for the run's tasks: naming this lease, once it is held."""
        self.wait_held()
        return replace(config, client_lease=self.group)

    def close(self) -> None:
        """Leave the group (the tasks see it Empty at once) and end the thread."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception as exc:  # noqa: BLE001 - a broker gone: the session expires by itself
                log.warning("could not leave the client lease group %s: %s", self.group, exc)
            self._consumer = None


class _NoLease:
    """A classic session (or nothing to publish in Spark): the tasks die with the driver, no lease."""

    def bound(self, config):
        return config


@contextmanager
def held(config, needed: bool):
    """The run's lease, held for the block when ``needed`` (a Spark Connect client session with records to
    publish: a :class:`LeaseHolder`, joining from here on), else a no-op; ``.bound(config)`` is the tasks' config."""
    if not needed:
        yield _NoLease()
        return
    holder = LeaseHolder(config).start()
    try:
        yield holder
    finally:
        holder.close()


class LeaseCheck:
    """A task's side: :meth:`check` before each commit raises :class:`ClientLeaseError` unless the lease
    group has a member (see the module). ``call_bound(seconds)``: the task watchdog's bound on the check."""

    def __init__(self, connection, group: str,
                 call_bound: Callable[[float], AbstractContextManager] | None = None):
        self.group = group
        self._config = {**connection.client_config(), "log_level": 0}
        self._call_bound = call_bound or (lambda _s: nullcontext())
        self._admin = None
        self.checks = 0
        self.seconds = 0.0

    @classmethod
    def of(cls, config, call_bound=None) -> "LeaseCheck | None":
        """The check of ``config``'s lease; None when it names none (not the Connect route)."""
        return cls(config.connection, config.client_lease, call_bound) if config.client_lease else None

    def check(self) -> None:
        t0 = time.monotonic()
        try:
            with self._call_bound(CHECK_DEADLINE_S + CHECK_TIMEOUT_S + 5):
                self._prove(t0 + CHECK_DEADLINE_S)
        finally:
            self.checks += 1
            self.seconds += time.monotonic() - t0

    def _prove(self, deadline: float) -> None:
        while True:
            state, members, failure = self._describe(max(0.1, min(CHECK_TIMEOUT_S, deadline - time.monotonic())))
            if failure is None:
                if state == "STABLE" and members:
                    return
                if not members and state in ("EMPTY", "DEAD"):
                    raise ClientLeaseError(
                        f"the Spark Connect client that started this task's run is gone: its lease group "
                        f"{self.group} has no member ({state.lower()}; a client renews it every {RENEW_S:.0f}s, "
                        f"the broker ends it {LEASE_TTL_S:.0f}s after the last renewal). The task aborted its open "
                        "transaction and committed nothing more; the next run fences what is left and resumes")
                failure = f"the group is {state.lower()} with {members} member(s)"
            if time.monotonic() >= deadline:
                raise ClientLeaseError(
                    f"the lease of the Spark Connect client that started this task's run ({self.group}) could not "
                    f"be proven within {CHECK_DEADLINE_S:.0f}s ({failure}): the task aborted its open transaction "
                    "and committed nothing more; the next run fences what is left and resumes")
            time.sleep(0.1)

    def _describe(self, timeout_s: float) -> tuple[str | None, int, str | None]:
        """(state, members, None), or (None, 0, why) when the coordinator gave no answer."""
        if self._admin is None:
            self._admin = AdminClient(self._config)
        future = self._admin.describe_consumer_groups([self.group], request_timeout=_NEVER_S)[self.group]
        try:
            description = future.result(timeout=timeout_s)
        except TimeoutError:
            self._admin = None  # destroyed with its request pending (librdkafka#4605: never reused)
            return None, 0, f"no answer within {timeout_s:.1f}s"
        except KafkaException as exc:
            return None, 0, str(exc.args[0])
        return description.state.name, len(description.members), None

    def close(self) -> None:
        self._admin = None
        if self.checks:
            log.info("client lease %s: %d checks, %.1f ms each", self.group, self.checks,
                     self.seconds / self.checks * 1000)
