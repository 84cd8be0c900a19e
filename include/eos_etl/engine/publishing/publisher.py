"""Publish one writer slot's slices of a window exactly once, partition by partition.

A writer slot (:mod:`.slots`) is one transactional id and the input partitions it
publishes: without slots, one partition's own id, ``<prefix>-<topic>-<p>``.
:class:`SlotPublisher` initialises the slot's producer once (step 1) and runs steps 2 to
4 for each of its partitions in turn on it. With writer slots the slot's transactions
span its partitions (``chunk_records`` records of any of them; each commit stages the
position of every partition it holds, a partition's window end at the first commit after
its proof); without, a partition's transactions are its own. For input partition ``p``
with window range ``[start, end)``:

1. ``init_transactions`` with the slot's transactional.id: fences any earlier
   attempt (a retried task, a second run, a paused zombie) and aborts whatever
   it left open. Then the pipeline's identity record (:mod:`..identity`) must still
   be the version the window was planned with: a change (another grouping, another
   prefix) records its version before it fences the old ids, so an attempt that
   initialised after it stops here (:class:`~.errors.IdentityChangedError`) and one
   that initialised before is fenced.
2. Read the partition's committed position (the group's offset, stable; where
   Kafka deleted it, the checkpoint topic's record: :mod:`.checkpoint`). Whoever
   wrote the group's offset (a run, an operator's reset with Kafka's tools), it is
   the position. Input
   records below it were published by an earlier attempt and are skipped, so a
   retry or a rerun of the same window publishes nothing twice.
3. Produce each remaining record's outputs, in input order, in a transaction;
   every ``chunk_records`` records or ``chunk_seconds`` seconds, add the offset
   after the last record with ``send_offsets_to_transaction`` and commit. With
   nothing left to publish the position is committed again (a refresh), so the
   group's offsets never expire while the pipeline runs.
4. The end of the records is not the end of the window: Spark ends a task's
   stream the same way when it interrupts or kills the task (its client died
   or stopped, a job cancelled, speculation). The last transaction commits
   ``end`` itself only when the task proved its input reached it: the last
   record it received is ``end - 1``, or a read_committed read of the rest of
   the range with the checkpoint's consumer finds no visible record (aborted
   records and markers only; one fetch). Otherwise the open transaction is
   aborted, nothing more is committed and the attempt fails
   (:class:`~.errors.WindowEndNotReachedError`, exit code 1): the committed
   position stays the last one the attempt proved, and a retry resumes there.
5. An abortable error aborts, re-reads the committed offset and replays the
   buffered records of the open transaction from there. Fatal errors (fenced)
   end the attempt.

On the Spark Connect route the run's client must still hold its lease before step 1 and before
every commit (:mod:`.client_lease`): a task whose client is gone aborts and commits nothing more.

Steps 3 to 5 are the state machine :class:`~eos_etl.engine.publishing.transaction_loop.TransactionLoop`;
this module checks the window and the input order around it and owns the
producer's and checkpoint's lifetimes.

All outputs of one input record always go into the same transaction, so an
invoice is never visible without its shipment.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field

from ...kafka.reader import RangeDeletedError
from .. import checkpoint_log, failpoints, identity, offsets_retention
from ..errors import (
    ProducerFencedError,
    PublishError,
    TransformContractError,
    WindowEndNotReachedError,
    WindowMismatchError,
)
from ..pipeline import PipelineConfig
from ..window import OffsetRange
from .checkpoint import PartitionCheckpoint, SlotCheckpoints
from .client_lease import LeaseCheck
from .producer import TransactionalProducer
from .transaction_loop import POLL_EVERY, InputRecord, LineageWriter, TransactionLoop

log = logging.getLogger(__name__)


@dataclass
class PartitionResult:
    partition: int
    transactional_id: str
    start: int
    end: int
    committed_before: int | None
    records_read: int = 0  # input records the task saw
    records_skipped: int = 0  # already committed by an earlier attempt
    records_published: int = 0  # input records whose outputs this attempt committed
    outputs: dict[str, int] = field(default_factory=dict)  # committed outputs per topic
    transactions: int = 0
    aborts: int = 0
    reinitialisations: int = 0  # producers ended and replaced after a commit or abort of unknown outcome
    seconds: float = 0.0
    read_seconds: float = 0.0  # of the task's time, waiting for Spark's records (Kafka read + transform)
    decode_seconds: float = 0.0  # of the task's time, turning Spark's Arrow batches into records
    worker_cpu_seconds: float = 0.0  # CPU of the task's Python worker process (0: committed by the driver)
    spark_partition: int | None = None  # the Spark task's partition (None: committed by the driver, no task)
    end_proof_s: float = 0.0  # reading [last record + 1, end) to prove the window end (0: no tail to read)
    # [topic, partition, offset] of the last record the slot's committed transactions wrote to each partition
    # (outputs, checkpoint records), as of this partition's last commit: the run ends once a read_committed
    # reader sees them (engine.publishing.visibility; the largest per partition of every result counts).
    last_written: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


class _Lane:
    """One input partition's steps inside its slot's publish (steps 2 to 4 of the module's docstring),
    on the slot's producer, one lane at a time. Without writer slots every transaction it opens it also
    commits or aborts before the next lane begins; with them it joins the slot's loop, whose open
    transaction may still hold earlier lanes' records and proven ends."""

    def __init__(self, config: PipelineConfig, partition: int, offset_range: OffsetRange,
                 checkpoint: PartitionCheckpoint, on_progress: Callable[[], None],
                 slot_loop: TransactionLoop | None = None, lease: Callable[[], None] | None = None):
        self.config = config
        self.partition = partition
        self.range = offset_range
        self.checkpoint = checkpoint
        self._on_progress = on_progress
        self._slot_loop = slot_loop  # the slot's loop this lane joins (None: a loop of its own)
        self._lease = lease  # asked before each commit of a loop of its own (Spark Connect: the client's lease)
        self.loop: TransactionLoop | None = None
        self.committed: int | None = None

    def publish(self, producer, records: Iterable[InputRecord]) -> PartitionResult:
        t0 = time.monotonic()
        result, position = self._start()
        if position >= self.range.end:
            # Everything already published (or nothing to publish): drain and count, then commit the
            # position again so the group's offsets never expire while the pipeline runs.
            for _ in records:
                result.records_read += 1
                result.records_skipped += 1
                if not result.records_read % POLL_EVERY:
                    self._on_progress()
            self._loop(producer, position, result).refresh()
        else:
            self._run_transactions(producer, records, position, result)
        result.seconds = round(time.monotonic() - t0, 3)
        if self._slot_loop is None:
            log_done(self.config, result)
        return result

    def _start(self) -> tuple[PartitionResult, int]:
        """Step 2: the committed position read (and its grouping checked), validated against the window."""
        p = self.partition
        self.committed = committed = self.checkpoint.committed()
        failpoints.hit("after_committed_read", p)
        result = PartitionResult(partition=p, transactional_id=self.config.transactional_id(p),
                                 start=self.range.start, end=self.range.end, committed_before=committed)
        position = self._validated_position(committed)
        log.info("publishing %s[%d] window [%d,%d) from committed position %d as %s (run %s)",
                 self.config.input_topic, p, self.range.start, self.range.end, position,
                 result.transactional_id, self.config.run_id)
        return result, position

    def _not_reached(self, received: int, position: int, short: str) -> WindowEndNotReachedError:
        return WindowEndNotReachedError(
            f"{self.config.input_topic}[{self.partition}]: the task's records stopped "
            f"{f'after offset {received}' if received >= 0 else 'before its first record'} of its window "
            f"[{self.range.start},{self.range.end}) and {short}: Spark interrupted or killed the task, or its "
            f"stream ended early. Nothing more was committed (position {position}); a retry resumes from there"
        )

    @property
    def position(self) -> int | None:
        """The committed position this lane last knew (None: not read yet, or none)."""
        return self.loop.position_of(self.partition) if self.loop is not None else self.committed

    def _validated_position(self, committed: int | None) -> int:
        if committed is None:
            return self.range.start
        if committed < self.range.start:
            raise WindowMismatchError(
                f"{self.config.input_topic}[{self.partition}]: group {self.config.group} committed offset {committed} "
                f"is below the window start {self.range.start}; offsets [{committed},{self.range.start}) would "
                "be skipped. Was the group reset, or is another pipeline using it? Re-plan the window."
            )
        return committed

    def _loop(self, producer, position: int, result: PartitionResult) -> TransactionLoop:
        cfg = self.config
        writer = LineageWriter(producer.produce, cfg.input_topic, self.partition, cfg.run_id,
                               topic_id=cfg.input_topic_id, pipeline=cfg.group)
        if self._slot_loop is not None:
            self._slot_loop.join(self.checkpoint, writer, result, position=position,
                                 validated_position=self._validated_position)
            self.loop = self._slot_loop
            return self.loop
        self.loop = TransactionLoop(
            producer, self.checkpoint, writer, result, position=position, validated_position=self._validated_position,
            chunk_records=cfg.chunk_records, chunk_seconds=cfg.chunk_seconds, max_abort_retries=cfg.max_abort_retries,
            on_progress=self._on_progress, lease=self._lease)
        return self.loop

    def _run_transactions(self, producer, records, position, result) -> None:
        cfg = self.config
        p = self.partition
        end = self.range.end
        loop = self._loop(producer, position, result)
        last_offset = -1  # of the last record published
        received = -1  # of the last record received, published or skipped
        for rec in records:
            offset = received = rec[0]
            result.records_read += 1
            if not result.records_read % POLL_EVERY:
                self._on_progress()
            if offset < loop.position:
                result.records_skipped += 1
                continue
            if offset <= last_offset:
                raise PublishError(
                    f"{cfg.input_topic}[{p}]: offset {offset} after {last_offset}; the transform must keep input order"
                )
            if offset >= end:
                raise PublishError(f"{cfg.input_topic}[{p}]: offset {offset} is outside the window [..,{end})")
            last_offset = offset
            loop.add(rec)
        if (short := self._short_of_end(max(received + 1, loop.position), result)) is not None:
            loop.abandon()
            raise self._not_reached(received, loop.position, short)
        loop.finish(end)

    def _short_of_end(self, after: int, result: PartitionResult) -> str | None:
        """None when the input reached the window end (nothing visible is left in [after, end)), else
        what is left there."""
        end = self.range.end
        if after >= end:
            return None
        t0 = time.monotonic()
        try:
            first = self.checkpoint.first_visible(after, end)
        except (TimeoutError, RangeDeletedError) as exc:
            return f"[{after},{end}) could not be read ({exc})"
        finally:
            result.end_proof_s = round(time.monotonic() - t0, 4)
        log.info("%s[%d]: [%d,%d) %s, read in %.3fs", self.config.input_topic, self.partition, after, end,
                 "holds no visible record" if first is None else f"holds visible record {first}",
                 result.end_proof_s)
        return None if first is None else f"offset {first} in [{after},{end}) is a record to publish"


class SlotPublisher:
    """Publish one writer slot's ranges of a window (:mod:`.slots`): one producer with the slot's
    transactional id, initialised once (step 1), then each input partition's steps 2 to 4 in the
    order its records arrive, and the slot's partitions that got none after them, in order; with
    writer slots on one :class:`TransactionLoop` whose transactions span the slot's partitions, the
    targets still staged committed last (:meth:`TransactionLoop.close`).

    ``streams``: ``(partition, records)`` pairs, each partition at most once, each of ``ranges``.
    Returns one :class:`PartitionResult` per partition of ``ranges``; on failure raises the first
    error, with nothing more committed for the partition it was publishing (a
    :class:`~.errors.ProducerFencedError` carries that partition and its last known position).
    """

    def __init__(self, config: PipelineConfig, ranges: dict[int, OffsetRange],
                 on_progress: Callable[[], None] | None = None,
                 call_bound: Callable[[float], AbstractContextManager] | None = None):
        slots = {config.slot_of(p) for p in ranges}
        if len(slots) != 1:
            raise ValueError(f"a slot publisher takes the partitions of one writer slot, not of {sorted(slots)}")
        self.config = config
        self.ranges = dict(sorted(ranges.items()))
        self.slot = slots.pop()
        self.transactional_id = config.slot_transactional_id(self.slot)
        # Bounds each blocking producer call (the task's watchdog; see TransactionalProducer).
        self._call_bound = call_bound
        # Called after every commit and every POLL_EVERY records (kicks the stall watchdog).
        self._on_progress = on_progress or (lambda: None)

    def publish(self, streams: Iterable[tuple[int, Iterable[InputRecord]]]) -> list[PartitionResult]:
        first = next(iter(self.ranges))
        failpoints.load(self.config.failpoints)
        checkpoints = SlotCheckpoints(self.config)
        # After every init (a reinitialisation's too): a newer identity's change fenced this id before it was made.
        producer = TransactionalProducer(
            self.config.producer_settings(first), retry_deadline_s=self.config.retry_deadline_s,
            call_bound=self._call_bound, after_init=lambda: require_identity(self.config, checkpoints.consumer),
        )
        lane: _Lane | None = None
        results: dict[int, PartitionResult] = {}
        # On the Spark Connect route: proof that the run's client lives, before every commit (None: no lease).
        lease = LeaseCheck.of(self.config, self._call_bound)
        may_commit = lease.check if lease is not None else None
        # Writer slots: one loop for the slot, whose transactions hold any of its partitions' records.
        loop = None if self.config.grouping is None else _slot_loop(self.config, producer, self._on_progress,
                                                                    may_commit)
        try:
            if lease is not None:
                lease.check()  # an orphan's retry stops here, before its init_transactions fences anyone
            producer.init_transactions()
            initialised = False

            def run(p: int, records: Iterable[InputRecord]) -> None:
                nonlocal lane, initialised
                if p not in self.ranges:
                    raise TransformContractError(f"a Spark partition of writer slot {self.slot} holds records of "
                                                 f"{self.config.input_topic}[{p}], not one of its partitions: "
                                                 "no shuffle allowed")
                if p in results:
                    raise TransformContractError(f"the records of {self.config.input_topic}[{p}] came in two runs "
                                                 "in one Spark partition: no shuffle allowed")
                if not initialised:
                    initialised = True
                    failpoints.hit("after_init", p)
                    checkpoints.read_ahead(list(self.ranges))  # after init: no older attempt commits them now
                lane = _Lane(self.config, p, self.ranges[p], checkpoints.of(p), self._on_progress, loop, may_commit)
                results[p] = lane.publish(producer, records)

            for p, records in streams:
                run(p, records)
            for p in self.ranges:
                if p not in results:
                    run(p, ())
            if loop is not None:
                loop.close()  # the targets still staged: the last partitions' ends, the refreshes
                for p in self.ranges:
                    log_done(self.config, results[p])
            return [results[p] for p in self.ranges]
        except ProducerFencedError as exc:
            # The committed position this attempt last knew: whoever commits past it took over
            # (engine.publishing.superseded).
            if lane is not None:
                exc.partition, exc.position = lane.partition, lane.position
            raise
        finally:
            producer.close()
            checkpoints.close()
            if lease is not None:
                lease.close()


class PartitionPublisher:
    """One input partition's range on its slot's producer: a :class:`SlotPublisher` over that range alone."""

    def __init__(self, config: PipelineConfig, partition: int, offset_range: OffsetRange,
                 on_progress: Callable[[], None] | None = None,
                 call_bound: Callable[[float], AbstractContextManager] | None = None):
        self.partition = partition
        self._slot = SlotPublisher(config, {partition: offset_range}, on_progress, call_bound)
        self.transactional_id = self._slot.transactional_id

    def publish(self, records: Iterable[InputRecord]) -> PartitionResult:
        return self._slot.publish([(self.partition, records)])[0]


def require_identity(config: PipelineConfig, consumer=None) -> None:
    """Right after an ``init_transactions`` of one of ``config``'s ids: the pipeline's identity record is still
    the version ``config`` was planned with (:func:`~..identity.require_current`). A change records its new
    version before it fences the old ids, so a process that initialised after the change reads it here and
    stops; one that initialised before is fenced by the change."""
    identity.require_current(config, checkpoint_log.read_identity(config.connection, config.checkpoint_topic,
                                                                  config.group, config.input_topic,
                                                                  consumer=consumer))


def log_done(config: PipelineConfig, result: PartitionResult) -> None:
    log.info("done %s[%d]: read=%d skipped=%d published=%d outputs=%s transactions=%d aborts=%d in %.2fs",
             config.input_topic, result.partition, result.records_read, result.records_skipped,
             result.records_published, result.outputs, result.transactions, result.aborts, result.seconds)


def _slot_loop(config: PipelineConfig, producer, on_progress: Callable[[], None],
               lease: Callable[[], None] | None = None) -> TransactionLoop:
    """A writer slot's loop: its transactions span the slot's partitions (chunk_records records in all)."""
    return TransactionLoop(producer, chunk_records=config.chunk_records, chunk_seconds=config.chunk_seconds,
                           max_abort_retries=config.max_abort_retries, on_progress=on_progress, span_partitions=True,
                           lease=lease)


def _per_slot(config: PipelineConfig, items: dict[int, object], publish: Callable[[dict], list]) -> list:
    """``publish(slot_items)`` for each writer slot's share of ``items`` (partition -> anything): the
    slots side by side on this process's threads, each slot's partitions one after another on its own
    producer (two producers of one transactional id would fence each other)."""
    slots: dict[int, dict] = {}
    for p, item in sorted(items.items()):
        slots.setdefault(config.slot_of(p), {})[p] = item
    if not slots:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(slots))) as pool:
        return [r for results in pool.map(publish, slots.values()) for r in results]


def reset_positions(config: PipelineConfig, positions: dict[int, int]) -> list[PartitionResult]:
    """Commit each partition's position as given, whatever is committed now: an operator's reset
    (the committed position points into a log that is gone). Per writer slot, like every publish:
    ``init_transactions`` with its transactional.id first (fences any attempt still holding it and
    aborts what it left open), then per partition the group's offset and the checkpoint record in
    one transaction. Nothing else is published."""

    def reset(slot_positions: dict[int, int]) -> list[PartitionResult]:
        first = next(iter(slot_positions))
        checkpoints = SlotCheckpoints(config)
        producer = TransactionalProducer(config.producer_settings(first), retry_deadline_s=config.retry_deadline_s,
                                         after_init=lambda: require_identity(config, checkpoints.consumer))
        try:
            producer.init_transactions()
            return [_reset_one(config, producer, checkpoints.of(p), p, position)
                    for p, position in slot_positions.items()]
        finally:
            producer.close()
            checkpoints.close()

    return _per_slot(config, positions, reset)


def _reset_one(config: PipelineConfig, producer, checkpoint: PartitionCheckpoint, p: int,
               position: int) -> PartitionResult:
    result = PartitionResult(partition=p, transactional_id=config.transactional_id(p), start=position,
                             end=position, committed_before=checkpoint.committed())
    loop = TransactionLoop(
        producer, checkpoint, LineageWriter(producer.produce, config.input_topic, p, config.run_id,
                                            topic_id=config.input_topic_id, pipeline=config.group), result,
        # After an abort the loop resumes at the position validated here: the reset's, never the old one.
        position=position, validated_position=lambda _committed: position,
        chunk_records=config.chunk_records, chunk_seconds=config.chunk_seconds,
        max_abort_retries=config.max_abort_retries)
    loop.refresh()
    if result.committed_before != position:
        log.warning("%s[%d]: group %s position reset from %s to %d (as %s, run %s)", config.input_topic, p,
                    config.group, result.committed_before, position, result.transactional_id, config.run_id)
    return result


def renew_positions(config: PipelineConfig, window, retention_minutes: int | None = None) -> list[PartitionResult]:
    """A window with nothing new (a :class:`~.window.Window`, empty): the positions that are getting old
    committed again, so the group's offsets never expire while the pipeline runs (a run's and the DAG's
    idle tick alike). Which: :func:`renewal_due`. Bound to the window's topic id: the records it writes
    name the topic."""
    due = renewal_due(window, retention_minutes)
    if skipped := len(window.ranges) - len(due):
        log.info("%d of %d positions committed less than %.0f%% of the offsets retention ago: not renewed",
                 skipped, len(window.ranges), offsets_retention.RENEW_SHARE * 100)
    return publish_without_spark(config.bound_to(window), {p: r for p, r in window.ranges.items() if p in due})


def renewal_due(window, retention_minutes: int | None) -> set[int]:
    """The window's partitions whose position to commit again when they have nothing new:
    :func:`~.offsets_retention.renewal_due` for the brokers' ``retention_minutes`` (None: unknown,
    every partition), and every partition whose start the group had no offset for."""
    return set(offsets_retention.renewal_due(retention_minutes, window.partitions, window.committed_at,
                                             now_ms=int(time.time() * 1000))) | set(window.uncommitted)


def publish_without_spark(config: PipelineConfig, ranges: dict[int, OffsetRange]) -> list[PartitionResult]:
    """Publish ranges that hold no visible record, on this process's threads (no Spark task), one
    :class:`SlotPublisher` per writer slot.

    Each partition commits its window end, or, already past it, its committed position again:
    ranges with only aborted records or markers, empty ranges (a window with nothing new), and
    the planned start of partitions the group had no offset for. A window end is committed only
    when the range is proven to hold no visible record (as after a task's last record): a range
    whose task Spark stopped before its first batch fails with
    :class:`~.errors.WindowEndNotReachedError`.
    """
    return _per_slot(config, ranges, lambda slot_ranges: SlotPublisher(config, slot_ranges).publish(()))
