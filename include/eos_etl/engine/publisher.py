"""Publish one input partition's slice of a window exactly once.

For input partition ``p`` with window range ``[start, end)``:

1. ``init_transactions`` with transactional.id ``<prefix>-<topic>-<p>``: fences
   any earlier attempt (a retried task, a second run, a paused zombie) and
   aborts whatever it left open.
2. Read the partition's committed position (the group's offset, stable; where
   Kafka deleted it, the checkpoint topic's record: :mod:`.checkpoint`). Input
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

Steps 3 to 5 are the state machine :class:`~eos_etl.engine.transaction_loop.TransactionLoop`;
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

from ..kafka.reader import RangeDeletedError
from . import failpoints, offsets_retention
from .checkpoint import PartitionCheckpoint
from .errors import ProducerFencedError, PublishError, WindowEndNotReachedError, WindowMismatchError
from .pipeline import PipelineConfig
from .producer import TransactionalProducer
from .transaction_loop import POLL_EVERY, InputRecord, LineageWriter, TransactionLoop
from .window import OffsetRange

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

    def to_dict(self) -> dict:
        return asdict(self)


class PartitionPublisher:
    def __init__(self, config: PipelineConfig, partition: int, offset_range: OffsetRange,
                 on_progress: Callable[[], None] | None = None,
                 call_bound: Callable[[float], AbstractContextManager] | None = None):
        self.config = config
        # Bounds each blocking producer call (the task's watchdog; see TransactionalProducer).
        self._call_bound = call_bound
        # Called after every commit and every POLL_EVERY records (kicks the stall watchdog).
        self._on_progress = on_progress or (lambda: None)
        self.partition = partition
        self.range = offset_range
        self.transactional_id = config.transactional_id(partition)

    def publish(self, records: Iterable[InputRecord]) -> PartitionResult:
        t0 = time.monotonic()
        p = self.partition
        failpoints.load(self.config.failpoints)
        producer = TransactionalProducer(
            self.config.producer_settings(p), retry_deadline_s=self.config.retry_deadline_s,
            call_bound=self._call_bound,
        )
        checkpoint = PartitionCheckpoint(self.config, p)
        self._active_loop: TransactionLoop | None = None
        committed: int | None = None
        try:
            producer.init_transactions()
            failpoints.hit("after_init", p)
            committed = checkpoint.committed()
            failpoints.hit("after_committed_read", p)
            result = PartitionResult(
                partition=p,
                transactional_id=self.transactional_id,
                start=self.range.start,
                end=self.range.end,
                committed_before=committed,
            )
            position = self._validated_position(committed)
            log.info(
                "publishing %s[%d] window [%d,%d) from committed position %d as %s (run %s)",
                self.config.input_topic, p, self.range.start, self.range.end, position,
                self.transactional_id, self.config.run_id,
            )
            if position >= self.range.end:
                # Everything already published (or nothing to publish): drain and count, then
                # commit the position again so the group's offsets never expire while the
                # pipeline runs.
                for _ in records:
                    result.records_read += 1
                    result.records_skipped += 1
                    if not result.records_read % POLL_EVERY:
                        self._on_progress()
                self._loop(producer, checkpoint, position, result).refresh()
            else:
                self._run_transactions(producer, checkpoint, records, position, result)
            result.seconds = round(time.monotonic() - t0, 3)
            log.info(
                "done %s[%d]: read=%d skipped=%d published=%d outputs=%s transactions=%d aborts=%d in %.2fs",
                self.config.input_topic, p, result.records_read, result.records_skipped, result.records_published,
                result.outputs, result.transactions, result.aborts, result.seconds,
            )
            return result
        except ProducerFencedError as exc:
            # The committed position this attempt last knew: whoever commits past it took over (engine.superseded).
            exc.position = self._active_loop.position if self._active_loop is not None else committed
            raise
        finally:
            producer.close()
            checkpoint.close()

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

    def _loop(self, producer, checkpoint, position: int, result: PartitionResult) -> TransactionLoop:
        cfg = self.config
        writer = LineageWriter(producer.produce, cfg.input_topic, self.partition, cfg.run_id,
                               topic_id=cfg.input_topic_id, pipeline=cfg.group)
        self._active_loop = TransactionLoop(
            producer, checkpoint, writer, result, position=position, validated_position=self._validated_position,
            chunk_records=cfg.chunk_records, chunk_seconds=cfg.chunk_seconds, max_abort_retries=cfg.max_abort_retries,
            on_progress=self._on_progress)
        return self._active_loop

    def _run_transactions(self, producer, checkpoint, records, position, result) -> None:
        cfg = self.config
        p = self.partition
        end = self.range.end
        loop = self._loop(producer, checkpoint, position, result)
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
        if (short := self._short_of_end(checkpoint, max(received + 1, loop.position), result)) is not None:
            loop.abandon()
            raise WindowEndNotReachedError(
                f"{cfg.input_topic}[{p}]: the task's records stopped "
                f"{f'after offset {received}' if received >= 0 else 'before its first record'} of its window "
                f"[{self.range.start},{end}) and {short}: Spark interrupted or killed the task, or its stream "
                f"ended early. Nothing more was committed (position {loop.position}); a retry resumes from there"
            )
        loop.finish(end)

    def _short_of_end(self, checkpoint: PartitionCheckpoint, after: int, result: PartitionResult) -> str | None:
        """None when the input reached the window end (nothing visible is left in [after, end)), else
        what is left there."""
        end = self.range.end
        if after >= end:
            return None
        t0 = time.monotonic()
        try:
            first = checkpoint.first_visible(after, end)
        except (TimeoutError, RangeDeletedError) as exc:
            return f"[{after},{end}) could not be read ({exc})"
        finally:
            result.end_proof_s = round(time.monotonic() - t0, 4)
        log.info("%s[%d]: [%d,%d) %s, read in %.3fs", self.config.input_topic, self.partition, after, end,
                 "holds no visible record" if first is None else f"holds visible record {first}",
                 result.end_proof_s)
        return None if first is None else f"offset {first} in [{after},{end}) is a record to publish"


def reset_positions(config: PipelineConfig, positions: dict[int, int]) -> list[PartitionResult]:
    """Commit each partition's position as given, whatever is committed now: an operator's reset
    (the committed position points into a log that is gone). Per partition, like every publish:
    ``init_transactions`` with its transactional.id first (fences any attempt still holding it and
    aborts what it left open), then the group's offset and the checkpoint record in one transaction.
    Nothing else is published."""
    def reset(p: int, position: int) -> PartitionResult:
        producer = TransactionalProducer(config.producer_settings(p), retry_deadline_s=config.retry_deadline_s)
        checkpoint = PartitionCheckpoint(config, p)
        try:
            producer.init_transactions()
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
            log.warning("%s[%d]: group %s position reset from %s to %d (as %s, run %s)", config.input_topic, p,
                        config.group, result.committed_before, position, result.transactional_id, config.run_id)
            return result
        finally:
            producer.close()
            checkpoint.close()

    if not positions:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(positions))) as pool:
        return list(pool.map(lambda item: reset(*item), sorted(positions.items())))


def renew_positions(config: PipelineConfig, window, retention_minutes: int | None = None) -> list[PartitionResult]:
    """A window with nothing new (a :class:`~.window.Window`, empty): the positions that are getting old
    committed again, so the group's offsets never expire while the pipeline runs (a run's and the DAG's
    idle tick alike). Which: :func:`~.offsets_retention.renewal_due` for the brokers'
    ``retention_minutes`` (None: unknown, every partition), and every partition whose start the group
    had no offset for. Bound to the window's topic id: the records it writes name the topic."""
    due = set(offsets_retention.renewal_due(retention_minutes, window.partitions, window.committed_at,
                                            now_ms=int(time.time() * 1000))) | set(window.uncommitted)
    if skipped := len(window.ranges) - len(due):
        log.info("%d of %d positions committed less than %.0f%% of the offsets retention ago: not renewed",
                 skipped, len(window.ranges), offsets_retention.RENEW_SHARE * 100)
    return publish_without_spark(config.bound_to(window), {p: r for p, r in window.ranges.items() if p in due})


def publish_without_spark(config: PipelineConfig, ranges: dict[int, OffsetRange]) -> list[PartitionResult]:
    """Publish ranges that hold no visible record, on this process's threads (no Spark task).

    Each partition commits its window end, or, already past it, its committed position again:
    ranges with only aborted records or markers, empty ranges (a window with nothing new), and
    the planned start of partitions the group had no offset for. A window end is committed only
    when the range is proven to hold no visible record (as after a task's last record): a range
    whose task Spark stopped before its first batch fails with
    :class:`~.errors.WindowEndNotReachedError`.
    """
    if not ranges:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(ranges))) as pool:
        return list(pool.map(lambda item: PartitionPublisher(config, *item).publish(()), sorted(ranges.items())))
