"""The transaction loop of one input partition: the publisher's state machine.

States: *closed* (no transaction open) and *open* (a transaction holds the
records in :attr:`TransactionLoop.buffered`). Transitions:

* :meth:`add` (closed -> open, or open): begin if needed, produce the record's
  outputs, buffer it; commit when the transaction holds ``chunk_records``
  records or has been open ``chunk_seconds`` (open -> closed).
* :meth:`commit` (-> closed): stage the offset after the last record with the
  checkpoint (its record in the checkpoint topic, then
  ``send_offsets_to_transaction``), wait for every delivery, commit. Outputs,
  offsets and the checkpoint record become visible together or not at all.
* an abortable error anywhere above (librdkafka's ``txn_requires_abort()``):
  abort, re-read the group's committed offset (the checkpoint), keep the
  buffered records at or after it, begin and produce them again (-> open). Each
  abort counts; past ``max_abort_retries`` the attempt fails.
* a commit or abort whose outcome stays unknown after its retries
  (:class:`~eos_etl.engine.producer.TransactionOutcomeUnknown`: no answer from
  the coordinator): never retried further, never followed by an abort. The
  producer is ended and a new one initialised with the same transactional.id
  (a new epoch: the coordinator completes or aborts what the old one left open
  and fences anything of it that arrives late); then, as after an abort,
  re-read the committed offset, which says whether the commit landed, and
  replay the buffered records at or after it (-> open). Counts as an abort.
* a fatal error (fenced, unauthorised, anything else): propagates; the caller
  closes the producer and the attempt fails. Nothing it left open is visible:
  the next ``init_transactions`` aborts it.
* :meth:`finish`: the last commit, of the window end itself, even with nothing
  left to produce (aborted records or markers after the last record). Only for
  an end the caller proved the input reached: the end of a stream that Spark
  cut (a task interrupted or killed) is not the end of the input.
* :meth:`abandon` (-> closed): the input stopped short of a proven end: abort
  the open transaction and commit nothing more; the committed position stays
  the last one this attempt proved.
* :meth:`refresh` (closed -> closed): commit the committed position again with
  nothing produced: a partition with nothing new still renews its commit, so
  the group's offsets never reach the broker's offsets retention while the
  pipeline runs.

Generic: it knows input records as ``(offset, outputs)`` and nothing of what
the outputs mean. :class:`LineageWriter` produces a record's outputs with the
lineage headers (:mod:`.lineage`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from . import failpoints
from .errors import PublishError
from .lineage import H_PIPELINE, H_RUN_ID, H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC, H_SOURCE_TOPIC_ID
from .producer import TransactionAbortable, TransactionOutcomeUnknown

log = logging.getLogger(__name__)

# One input record and what it turns into: (offset, [(topic, key, value, headers), ...]).
# ``headers`` is a list of (name, bytes) pairs added to the lineage headers.
Output = tuple[str, bytes | None, bytes | None, list]
InputRecord = tuple[int, list[Output]]

# Input records between two producer.poll(0) calls while a transaction is open.
POLL_EVERY = 1000


class LineageWriter:
    """Produces one input record's outputs, each with the lineage headers (source topic, partition,
    offset, run id, topic id, pipeline); the constant headers are built once. Counts what it produced
    per topic. ``topic_id`` and ``pipeline`` are required: an output that names neither could be taken
    for another topic's of the same name, or another pipeline's (:mod:`.position`)."""

    def __init__(self, produce: Callable, input_topic: str, partition: int, run_id: str, *, topic_id: str,
                 pipeline: str):
        if not topic_id or not pipeline:
            raise ValueError("lineage needs the input topic's id and the pipeline's name")
        self._produce = produce
        self._topic = (H_SOURCE_TOPIC, input_topic.encode())
        self._partition = (H_SOURCE_PARTITION, str(partition).encode())
        self._run = (H_RUN_ID, run_id.encode())
        self._tail = [(H_SOURCE_TOPIC_ID, topic_id.encode()), (H_PIPELINE, pipeline.encode())]
        self._partition_number = partition
        self._failpoints = failpoints.active()  # fixed for this publish (loaded before)
        self.records_written = 0
        self.outputs: dict[str, int] = {}  # per topic, since the last reset (the open transaction's)

    def write(self, record: InputRecord) -> None:
        offset, outputs = record
        lineage = [self._topic, self._partition, (H_SOURCE_OFFSET, str(offset).encode()), self._run, *self._tail]
        produce, counts = self._produce, self.outputs
        for topic, key, value, extra in outputs:
            produce(topic, key, value, lineage + extra if extra else lineage)
            counts[topic] = counts.get(topic, 0) + 1
        self.records_written += 1
        if self._failpoints:
            failpoints.hit("mid_produce", self._partition_number, self.records_written)


class TransactionLoop:
    """Begin / produce / send offsets / commit for one partition; abort and replay on abortable errors.

    ``producer``: a :class:`~eos_etl.engine.producer.TransactionalProducer` (or anything with its
    transactional methods); ``checkpoint``: the partition's :class:`PartitionCheckpoint`;
    ``validated_position(committed)``: the position to resume from (raises if the committed offset is
    outside the window); ``result``: the :class:`PartitionResult` the loop keeps counts in.
    """

    def __init__(self, producer, checkpoint, writer: LineageWriter, result, *, position: int,
                 validated_position: Callable[[int | None], int], chunk_records: int, chunk_seconds: float,
                 max_abort_retries: int, on_progress: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.monotonic):
        self.producer = producer
        self.checkpoint = checkpoint
        self.writer = writer
        self.result = result
        self.position = position  # the committed position: every record below it is published
        self._validated_position = validated_position
        self._chunk_records = chunk_records
        self._chunk_seconds = chunk_seconds
        self._max_abort_retries = max_abort_retries
        self._on_progress = on_progress
        self._clock = clock
        self.buffered: list[InputRecord] = []  # the open transaction's records, for replay after an abort
        self.is_open = False
        self._opened_at = 0.0

    @property
    def _partition(self) -> int:
        return self.result.partition

    @property
    def _transactional_id(self) -> str:
        return self.result.transactional_id

    # -- transitions ----------------------------------------------------------------------------
    def add(self, record: InputRecord) -> None:
        """Publish one record (in input order, at or after :attr:`position`) in the open transaction."""
        offset = record[0]
        while True:
            try:
                if not self.is_open:
                    self._begin()
                self.writer.write(record)
                self.buffered.append(record)
                if (len(self.buffered) >= self._chunk_records
                        or self._clock() - self._opened_at >= self._chunk_seconds):
                    self.commit(offset + 1)
                elif not len(self.buffered) % POLL_EVERY:
                    # Serves (error-only) delivery reports and librdkafka's other callbacks;
                    # a full local queue is served in produce() itself.
                    self.producer.poll()
                return
            except (TransactionAbortable, TransactionOutcomeUnknown) as exc:
                self._recover(exc)
                # The replay produced the record again if it was buffered before the error
                # (a failed commit); a record below the committed position is published.
                if (self.buffered and self.buffered[-1][0] == offset) or offset < self.position:
                    return

    def commit(self, next_offset: int) -> None:
        """Commit the open transaction (opening one if none is) with the group's offset ``next_offset``."""
        p = self._partition
        if not self.is_open:
            self._begin()
        failpoints.hit("before_send_offsets", p)
        self.checkpoint.stage(self.producer, next_offset)
        failpoints.hit("after_send_offsets", p)
        self.producer.flush()
        failpoints.hit("before_commit", p)  # all outputs acked by the broker, not yet committed
        self.producer.commit_transaction()
        self.is_open = False
        self.position = next_offset
        result = self.result
        result.transactions += 1
        result.records_published += len(self.buffered)
        for topic, n in self.writer.outputs.items():
            result.outputs[topic] = result.outputs.get(topic, 0) + n
        log.info("committed %s txn #%d: %d records, offsets -> %d",
                 self._transactional_id, result.transactions, len(self.buffered), next_offset)
        self.buffered.clear()
        self._on_progress()
        failpoints.hit("after_commit", p, result.transactions)

    def finish(self, end: int) -> None:
        """The last commit: the window end becomes the committed position, even when nothing is left
        to produce (a tail of aborted records or markers)."""
        while self.buffered or self.position < end:
            try:
                self.commit(end)
            except (TransactionAbortable, TransactionOutcomeUnknown) as exc:
                self._recover(exc)

    def abandon(self) -> None:
        """Abort the open transaction, if any, and commit nothing more (the input ended short)."""
        if not self.is_open:
            return
        self.is_open = False
        self.buffered.clear()
        try:
            self.producer.abort_transaction()
        except (TransactionAbortable, PublishError) as exc:
            # Left open, it is aborted by the next attempt's init_transactions or at its timeout;
            # either way nothing of it becomes visible.
            log.warning("could not abort the transaction of %s: %s", self._transactional_id, exc)

    def refresh(self) -> None:
        """Commit :attr:`position` again in a transaction of its own (nothing is open or buffered)."""
        while True:
            try:
                self.commit(self.position)
                return
            except (TransactionAbortable, TransactionOutcomeUnknown) as exc:
                self._recover(exc)

    # -- internals ------------------------------------------------------------------------------
    def _begin(self) -> None:
        self.producer.begin_transaction()
        self.writer.outputs.clear()
        self.is_open = True
        self._opened_at = self._clock()

    def _reinitialise(self, reason: str) -> None:
        log.warning("%s; ending the producer of %s and initialising a new one before any new transaction",
                    reason, self._transactional_id)
        self.producer.reinitialise()
        self.result.reinitialisations += 1

    def _recover(self, exc: TransactionAbortable | TransactionOutcomeUnknown) -> None:
        """Abort (or, after an unknown outcome, re-initialise), rewind to the committed position and
        produce the open transaction's records again."""
        result = self.result
        result.aborts += 1
        reason = exc.reason if isinstance(exc, TransactionAbortable) else str(exc)
        if result.aborts > self._max_abort_retries:
            raise PublishError(f"{self._transactional_id}: giving up after {result.aborts - 1} aborted "
                               f"transactions; last: {reason}") from exc
        if isinstance(exc, TransactionOutcomeUnknown):
            self._reinitialise(reason)
        else:
            log.warning("aborting transaction of %s: %s", self._transactional_id, reason)
            try:
                self.producer.abort_transaction()
            except TransactionOutcomeUnknown as unknown:
                self._reinitialise(str(unknown))
        self.is_open = False
        self.position = self._validated_position(self.checkpoint.committed())
        landed = [r for r in self.buffered if r[0] < self.position]
        if landed and isinstance(exc, TransactionOutcomeUnknown):
            # The commit whose answer was lost had taken effect: its records are published (by this attempt).
            result.transactions += 1
            result.records_published += len(landed)
            for topic, n in self.writer.outputs.items():
                result.outputs[topic] = result.outputs.get(topic, 0) + n
            log.warning("the commit of unknown outcome of %s had landed: offsets -> %d", self._transactional_id,
                        self.position)
        self.buffered[:] = [r for r in self.buffered if r[0] >= self.position]
        self._begin()
        for record in self.buffered:
            self.writer.write(record)
