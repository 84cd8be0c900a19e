"""Publish one input partition's slice of a window exactly once.

For input partition ``p`` with window range ``[start, end)``:

1. ``init_transactions`` with transactional.id ``<prefix>-<topic>-<p>``: fences
   any earlier attempt (a retried task, a second run, a paused zombie) and
   aborts whatever it left open.
2. Read the group's committed offset for ``p`` (stable). Input records below it
   were published by an earlier attempt and are skipped, so a retry or a rerun
   of the same window publishes nothing twice.
3. Produce each remaining record's outputs, in input order, in a transaction;
   every ``chunk_records`` records or ``chunk_seconds`` seconds, add the offset
   after the last record with ``send_offsets_to_transaction`` and commit. The
   last transaction commits ``end`` itself (the window end is the committed
   position even when aborted records or markers follow the last record).
4. An abortable error aborts, re-reads the committed offset and replays the
   buffered records of the open transaction from there. Fatal errors (fenced)
   end the attempt.

All outputs of one input record always go into the same transaction, so an
invoice is never visible without its shipment.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field

from . import failpoints
from .checkpoint import PartitionCheckpoint
from .errors import PublishError, WindowMismatchError
from .pipeline import PipelineConfig
from .producer import TransactionAbortable, TransactionalProducer
from .window import OffsetRange

log = logging.getLogger(__name__)

# One input record and what it turns into: (offset, [(topic, key, value, headers), ...]).
# ``headers`` is a list of (name, bytes) pairs added to the lineage headers.
Output = tuple[str, bytes | None, bytes | None, list]
InputRecord = tuple[int, list[Output]]

# Lineage header names (a public contract: external tools select outputs by them).
H_SOURCE_TOPIC = "source_topic"
H_SOURCE_PARTITION = "source_partition"
H_SOURCE_OFFSET = "source_offset"
H_RUN_ID = "run_id"

# Input records between two producer.poll(0) calls while a transaction is open.
POLL_EVERY = 1000


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
    seconds: float = 0.0
    read_seconds: float = 0.0  # of the task's time, waiting for Spark's records (Kafka read + transform)

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
        self._topic_header = config.input_topic.encode()
        self._partition_header = str(partition).encode()
        self._run_header = config.run_id.encode()

    def publish(self, records: Iterable[InputRecord]) -> PartitionResult:
        t0 = time.monotonic()
        p = self.partition
        failpoints.load(self.config.failpoints)
        producer = TransactionalProducer(
            self.config.producer_settings(p), retry_deadline_s=self.config.retry_deadline_s,
            call_bound=self._call_bound,
        )
        checkpoint = PartitionCheckpoint(self.config.consumer_settings(), self.config.input_topic, p)
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
                # Everything already published: drain and count, touch nothing.
                for _ in records:
                    result.records_read += 1
                    result.records_skipped += 1
                    if not result.records_read % POLL_EVERY:
                        self._on_progress()
            else:
                self._run_transactions(producer, checkpoint, records, position, result)
            result.seconds = round(time.monotonic() - t0, 3)
            log.info(
                "done %s[%d]: read=%d skipped=%d published=%d outputs=%s transactions=%d aborts=%d in %.2fs",
                self.config.input_topic, p, result.records_read, result.records_skipped, result.records_published,
                result.outputs, result.transactions, result.aborts, result.seconds,
            )
            return result
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

    def _run_transactions(self, producer, checkpoint, records, position, result) -> None:
        cfg = self.config
        p = self.partition
        end = self.range.end
        group_metadata = checkpoint.group_metadata()
        buffered: list[InputRecord] = []  # records of the open transaction, for replay after an abort
        produced_in_txn: dict[str, int] = {}
        produced_total = 0
        last_offset = -1
        aborts = 0

        # Hot path (runs per input record): constant headers built once, bound methods.
        topic_header = (H_SOURCE_TOPIC, self._topic_header)
        partition_header = (H_SOURCE_PARTITION, self._partition_header)
        run_header = (H_RUN_ID, self._run_header)
        produce = producer.produce
        failpoints_on = failpoints.active()  # fixed for this publish (loaded above)

        def produce_record(rec: InputRecord) -> None:
            nonlocal produced_total
            offset, outputs = rec
            lineage = [topic_header, partition_header, (H_SOURCE_OFFSET, str(offset).encode()), run_header]
            for topic, key, value, extra in outputs:
                produce(topic, key, value, lineage + extra if extra else lineage)
                produced_in_txn[topic] = produced_in_txn.get(topic, 0) + 1
            produced_total += 1
            if failpoints_on:
                failpoints.hit("mid_produce", p, produced_total)

        in_txn = False
        txn_started = 0.0

        def begin() -> None:
            nonlocal in_txn, txn_started
            producer.begin_transaction()
            produced_in_txn.clear()
            in_txn = True
            txn_started = time.monotonic()

        def commit(next_offset: int) -> None:
            nonlocal in_txn
            if not in_txn:
                begin()
            failpoints.hit("before_send_offsets", p)
            producer.send_offsets_to_transaction(checkpoint.offsets(next_offset), group_metadata)
            failpoints.hit("after_send_offsets", p)
            producer.flush()
            failpoints.hit("before_commit", p)  # all outputs acked by the broker, not yet committed
            producer.commit_transaction()
            in_txn = False
            result.transactions += 1
            result.records_published += len(buffered)
            for topic, n in produced_in_txn.items():
                result.outputs[topic] = result.outputs.get(topic, 0) + n
            log.info(
                "committed %s txn #%d: %d records, offsets -> %d",
                self.transactional_id, result.transactions, len(buffered), next_offset,
            )
            buffered.clear()
            self._on_progress()
            failpoints.hit("after_commit", p, result.transactions)

        def recover(exc: TransactionAbortable) -> int:
            """Abort, re-read the committed position and replay the open transaction's records."""
            nonlocal aborts
            aborts += 1
            result.aborts = aborts
            if aborts > cfg.max_abort_retries:
                raise PublishError(
                    f"{self.transactional_id}: giving up after {aborts - 1} aborted transactions; last: {exc.reason}"
                ) from exc
            log.warning("aborting transaction of %s: %s", self.transactional_id, exc.reason)
            producer.abort_transaction()
            committed = checkpoint.committed()
            pos = self._validated_position(committed)
            replay = [r for r in buffered if r[0] >= pos]
            buffered[:] = replay
            begin()
            for rec in replay:
                produce_record(rec)
            return pos

        for rec in records:
            offset = rec[0]
            result.records_read += 1
            if not result.records_read % POLL_EVERY:
                self._on_progress()
            if offset < position:
                result.records_skipped += 1
                continue
            if offset <= last_offset:
                raise PublishError(
                    f"{cfg.input_topic}[{p}]: offset {offset} after {last_offset}; the transform must keep input order"
                )
            if offset >= end:
                raise PublishError(f"{cfg.input_topic}[{p}]: offset {offset} is outside the window [..,{end})")
            last_offset = offset
            while True:
                try:
                    if not in_txn:
                        begin()
                    produce_record(rec)
                    buffered.append(rec)
                    if len(buffered) >= cfg.chunk_records or time.monotonic() - txn_started >= cfg.chunk_seconds:
                        commit(offset + 1)
                        position = offset + 1
                    elif not len(buffered) % POLL_EVERY:
                        # Serves (error-only) delivery reports and librdkafka's other callbacks;
                        # a full local queue is served in produce() itself.
                        producer.poll()
                    break
                except TransactionAbortable as exc:
                    # After replay the record is either in the buffer already
                    # (it was appended before the failing commit) or not yet.
                    position = recover(exc)
                    if buffered and buffered[-1][0] == offset:
                        break
        # Final transaction: the window end is the committed position, even when
        # nothing is left to produce (a tail of aborted records or markers).
        while buffered or position < end:
            try:
                commit(end)
                position = end
            except TransactionAbortable as exc:
                position = recover(exc)
