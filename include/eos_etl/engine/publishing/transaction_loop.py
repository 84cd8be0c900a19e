"""The transaction loop of a transactional id: the publisher's state machine.

The loop publishes the records of the input partitions that :meth:`TransactionLoop.join`
them, one partition after another (the *current* one takes the records). Each partition
has its *share*: its committed position, the open transaction's records of it (for
replay) and its *target*, the position the next commit stages for it (``None``: none).
Without ``span_partitions`` a partition's transactions are its own: it commits its window
end (:meth:`finish`) before the next one joins. With it (a writer slot's partitions,
:mod:`.slots`), a transaction holds the records of any of them, ``chunk_records`` in all,
and its commit stages the target of every partition it touched, so a slot's small
partitions share a transaction instead of paying one each; their window ends wait for the
next commit, at the latest :meth:`close`.

States: *closed* (no transaction open) and *open* (a transaction holds the
records in :attr:`TransactionLoop.buffered`). Transitions:

* :meth:`add` (closed -> open, or open): begin if needed, produce the record's
  outputs, buffer it; commit when the transaction holds ``chunk_records``
  records or has been open ``chunk_seconds`` (open -> closed).
* :meth:`commit` (-> closed): stage every share's target with its checkpoint
  (its record in the checkpoint topic; then ``send_offsets_to_transaction``, one
  call for all of them), wait for every delivery, commit. Outputs, offsets and
  the checkpoint records become visible together or not at all. The current share's
  result then holds the last offset per topic partition of everything the producer
  committed (the run waits for a read_committed reader to see it: :mod:`.visibility`).
* an abortable error anywhere above (librdkafka's ``txn_requires_abort()``):
  abort; for every share the transaction held, re-read the group's committed
  offset (the checkpoint) and keep the buffered records at or after it; begin
  and produce them again (-> open). Targets stay (a window end stays proven).
  Each abort counts; past ``max_abort_retries`` the attempt fails.
* a commit or abort whose outcome stays unknown after its retries
  (:class:`~eos_etl.engine.publishing.producer.TransactionOutcomeUnknown`: no answer from
  the coordinator): never retried further, never followed by an abort. The
  producer is ended and a new one initialised with the same transactional.id
  (a new epoch: the coordinator completes or aborts what the old one left open
  and fences anything of it that arrives late); then, as after an abort,
  re-read the committed offset, which says whether the commit landed, and
  replay the buffered records at or after it (-> open). Counts as an abort.
* a fatal error (fenced, unauthorised, anything else): propagates; the caller
  closes the producer and the attempt fails. Nothing it left open is visible:
  the next ``init_transactions`` aborts it.
* :meth:`finish`: the current partition's window end becomes its target, even
  with nothing left to produce (aborted records or markers after the last
  record); committed now, or with ``span_partitions`` at the next commit. Only
  for an end the caller proved the input reached: the end of a stream that Spark
  cut (a task interrupted or killed) is not the end of the input.
* :meth:`abandon` (-> closed): the input stopped short of a proven end: abort
  the open transaction, drop every target and commit nothing more; each committed
  position stays the last one this attempt proved (with ``span_partitions`` the
  other partitions' records in the open transaction are published again by the
  retry, as the input's).
* :meth:`refresh`: the current partition's committed position becomes its
  target again with nothing produced: a partition with nothing new still renews
  its commit, so the group's offsets never reach the broker's offsets retention
  while the pipeline runs.
* :meth:`close` (-> closed): commit what is staged (the targets of
  ``span_partitions``' deferred ends and refreshes), recovering as above.
* the ``lease`` (if any), asked right before every ``commit_transaction`` above,
  refuses (it raises: on the Spark Connect route the run's client is gone,
  :mod:`.client_lease`): as :meth:`abandon` (-> closed), then the error
  propagates; nothing more is committed.

Generic: it knows input records as ``(offset, outputs)`` and nothing of what
the outputs mean. :class:`LineageWriter` produces a record's outputs with the
lineage headers (:mod:`.lineage`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from .. import failpoints
from ..errors import PublishError, TransactionAbortable, TransactionOutcomeUnknown
from ..lineage import H_PIPELINE, H_RUN_ID, H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC, H_SOURCE_TOPIC_ID
from .checkpoint import stage_together

log = logging.getLogger(__name__)

# One input record and what it turns into: (offset, ((topic, key, value, headers), ...)).
# ``headers``: (name, bytes) pairs added to the lineage headers. Tuples, as the Arrow decoder makes them
# (arrow_codec.arrow_records: buffered for replay, lists would cost the garbage collector); lists work too.
Output = tuple[str, bytes | None, bytes | None, Sequence[tuple[str, bytes]]]
InputRecord = tuple[int, Sequence[Output]]

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
            produce(topic, key, value, [*lineage, *extra] if extra else lineage)  # the client takes a list
            counts[topic] = counts.get(topic, 0) + 1
        self.records_written += 1
        if self._failpoints:
            failpoints.hit("mid_produce", self._partition_number, self.records_written)


class _Share:
    """One input partition's share of a loop (see the module's docstring)."""

    __slots__ = ("checkpoint", "writer", "result", "position", "validated_position", "buffered", "target", "renewing")

    def __init__(self, checkpoint, writer: LineageWriter, result, position: int,
                 validated_position: Callable[[int | None], int]):
        self.checkpoint = checkpoint
        self.writer = writer
        self.result = result
        self.position = position  # the committed position: every record below it is published
        self.validated_position = validated_position
        self.buffered: list[InputRecord] = []  # the open transaction's records of it, for replay after an abort
        self.target: int | None = None  # the position the next commit stages (None: nothing to commit)
        self.renewing = False  # the target is the committed position again (a refresh): committed even if it landed


class TransactionLoop:
    """Begin / produce / send offsets / commit for one transactional id; abort and replay on abortable errors.

    ``producer``: a :class:`~eos_etl.engine.publishing.producer.TransactionalProducer` (or anything with its
    transactional methods). Each partition joins with (:meth:`join`; the constructor's arguments join the
    first): ``checkpoint``, its :class:`PartitionCheckpoint`; ``writer``, its :class:`LineageWriter`;
    ``result``, the :class:`PartitionResult` the loop keeps its counts in; ``position``, its committed
    position; ``validated_position(committed)``, the position to resume from (raises if the committed
    offset is outside the window). ``span_partitions``: transactions may hold several partitions.
    ``lease()``: asked right before each ``commit_transaction``; what it raises abandons the open
    transaction (:meth:`abandon`) and propagates.
    """

    def __init__(self, producer, checkpoint=None, writer: LineageWriter | None = None, result=None, *,
                 position: int | None = None, validated_position: Callable[[int | None], int] | None = None,
                 chunk_records: int, chunk_seconds: float, max_abort_retries: int,
                 on_progress: Callable[[], None] = lambda: None, clock: Callable[[], float] = time.monotonic,
                 span_partitions: bool = False, lease: Callable[[], None] | None = None):
        self.producer = producer
        self._chunk_records = chunk_records
        self._chunk_seconds = chunk_seconds
        self._max_abort_retries = max_abort_retries
        self._on_progress = on_progress
        self._clock = clock
        self._span = span_partitions
        self._lease = lease
        self._shares: dict[int, _Share] = {}
        self._current: _Share | None = None
        self._held = 0  # records in the open transaction, every share's
        self.aborts = 0
        self.is_open = False
        self._opened_at = 0.0
        if checkpoint is not None:
            self.join(checkpoint, writer, result, position=position, validated_position=validated_position)

    def join(self, checkpoint, writer: LineageWriter, result, *, position: int,
             validated_position: Callable[[int | None], int]) -> None:
        """Make ``result.partition`` the current partition, the one :meth:`add` takes records of."""
        last = self._current
        if not self._span and last is not None and (last.buffered or last.target is not None):
            raise ValueError("a loop without span_partitions takes the next partition once the last one committed")
        share = _Share(checkpoint, writer, result, position, validated_position)
        self._shares[result.partition] = share
        self._current = share

    # The current partition's share.
    @property
    def position(self) -> int:
        return self._current.position

    @property
    def buffered(self) -> list[InputRecord]:
        return self._current.buffered

    def position_of(self, partition: int) -> int | None:
        share = self._shares.get(partition)
        return share.position if share is not None else None

    @property
    def _transactional_id(self) -> str:
        return self._current.result.transactional_id

    # -- transitions ----------------------------------------------------------------------------
    def add(self, record: InputRecord) -> None:
        """Publish one record of the current partition (in input order, at or after :attr:`position`)
        in the open transaction."""
        share = self._current
        offset = record[0]
        while True:
            try:
                if not self.is_open:
                    self._begin()
                share.writer.write(record)
                share.buffered.append(record)
                share.target = offset + 1
                self._held += 1
                if (self._held >= self._chunk_records
                        or self._clock() - self._opened_at >= self._chunk_seconds):
                    self._commit()
                elif not self._held % POLL_EVERY:
                    # Serves (error-only) delivery reports and librdkafka's other callbacks;
                    # a full local queue is served in produce() itself.
                    self.producer.poll()
                return
            except (TransactionAbortable, TransactionOutcomeUnknown) as exc:
                self._recover(exc)
                # The replay produced the record again if it was buffered before the error
                # (a failed commit); a record below the committed position is published.
                if (share.buffered and share.buffered[-1][0] == offset) or offset < share.position:
                    return

    def commit(self, next_offset: int) -> None:
        """Commit the open transaction (opening one if none is) with the current partition's offset ``next_offset``."""
        self._current.target = next_offset
        self._commit()

    def finish(self, end: int) -> None:
        """The current partition's last commit: its window end becomes its committed position, even when
        nothing is left to produce (a tail of aborted records or markers); with ``span_partitions`` at the
        next commit."""
        share = self._current
        if share.buffered or share.position < end:
            share.target = end
        if not self._span:
            self.close()

    def refresh(self) -> None:
        """Commit the current partition's :attr:`position` again (nothing of it is open or buffered); with
        ``span_partitions`` at the next commit."""
        self._current.target = self._current.position
        self._current.renewing = True
        if not self._span:
            self.close()

    def close(self) -> None:
        """Commit every staged target and buffered record (-> closed)."""
        while any(s.target is not None or s.buffered for s in self._shares.values()):
            try:
                self._commit()
            except (TransactionAbortable, TransactionOutcomeUnknown) as exc:
                self._recover(exc)

    def abandon(self) -> None:
        """Abort the open transaction, if any, and commit nothing more (the input ended short)."""
        for share in self._shares.values():
            share.buffered.clear()
            share.target, share.renewing = None, False
        self._held = 0
        if not self.is_open:
            return
        self.is_open = False
        try:
            self.producer.abort_transaction(settle=False)  # nothing is replayed: its queued records go unsent
        except (TransactionAbortable, PublishError) as exc:
            # Left open, it is aborted by the next attempt's init_transactions or at its timeout;
            # either way nothing of it becomes visible.
            log.warning("could not abort the transaction of %s: %s", self._transactional_id, exc)

    # -- internals ------------------------------------------------------------------------------
    def _commit(self) -> None:
        if not self.is_open:
            self._begin()
        staged = {p: s for p, s in self._shares.items() if s.target is not None}
        for p in staged:
            failpoints.hit("before_send_offsets", p)
        if len(staged) == 1:
            [share] = staged.values()
            share.checkpoint.stage(self.producer, share.target)
        else:
            stage_together(self.producer, [(s.checkpoint, s.target) for s in staged.values()])
        for p in staged:
            failpoints.hit("after_send_offsets", p)
        self.producer.flush()
        for p in staged:
            failpoints.hit("before_commit", p)  # all outputs acked by the broker, not yet committed
        if self._lease is not None:
            try:
                self._lease()
            except BaseException:
                self.abandon()
                raise
        self.producer.commit_transaction()
        self.is_open = False
        records = self._held
        for share in staged.values():
            share.position, share.target, share.renewing = share.target, None, False
            result = share.result
            result.transactions += 1
            result.records_published += len(share.buffered)
            for topic, n in share.writer.outputs.items():
                result.outputs[topic] = result.outputs.get(topic, 0) + n
            share.buffered.clear()
        self._held = 0
        self._note_written()
        if len(staged) == 1:
            [(p, share)] = staged.items()
            log.info("committed %s txn #%d: %d records, offsets -> %d",
                     share.result.transactional_id, share.result.transactions, records, share.position)
        else:
            log.info("committed %s: %d records of %d partitions in one transaction, offsets -> %s",
                     self._transactional_id, records, len(staged), {p: s.position for p, s in staged.items()})
        self._on_progress()
        for p, share in staged.items():
            failpoints.hit("after_commit", p, share.result.transactions)

    def _note_written(self) -> None:
        """What the producer's committed transactions wrote (the last offset per topic partition,
        :attr:`~.producer.TransactionalProducer.written`) into the current partition's result: the run's
        end waits until a read_committed reader sees it (:mod:`.visibility`)."""
        self._current.result.last_written = [[t, p, o] for (t, p), o in sorted(self.producer.written.items())]

    def _begin(self) -> None:
        self.producer.begin_transaction()
        for share in self._shares.values():
            share.writer.outputs.clear()
        self.is_open = True
        self._opened_at = self._clock()

    def _reinitialise(self, reason: str) -> None:
        log.warning("%s; ending the producer of %s and initialising a new one before any new transaction",
                    reason, self._transactional_id)
        self.producer.reinitialise()
        self._current.result.reinitialisations += 1

    def _recover(self, exc: TransactionAbortable | TransactionOutcomeUnknown) -> None:
        """Abort (or, after an unknown outcome, re-initialise), rewind every share the transaction held to
        its committed position and produce the open transaction's records again."""
        held = [s for s in self._shares.values() if s.buffered or s.target is not None] or [self._current]
        self.aborts += 1
        for share in held:
            share.result.aborts += 1
        reason = exc.reason if isinstance(exc, TransactionAbortable) else str(exc)
        if self.aborts > self._max_abort_retries:
            raise PublishError(f"{self._transactional_id}: giving up after {self.aborts - 1} aborted "
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
        self._note_written()  # after an unknown outcome: the transaction may have landed
        for share in held:
            share.position = share.validated_position(share.checkpoint.committed())
            landed = [r for r in share.buffered if r[0] < share.position]
            if landed and isinstance(exc, TransactionOutcomeUnknown):
                # The commit whose answer was lost had taken effect: its records are published (by this attempt).
                result = share.result
                result.transactions += 1
                result.records_published += len(landed)
                for topic, n in share.writer.outputs.items():
                    result.outputs[topic] = result.outputs.get(topic, 0) + n
                log.warning("the commit of unknown outcome of %s had landed: offsets -> %d",
                            result.transactional_id, share.position)
            share.buffered[:] = [r for r in share.buffered if r[0] >= share.position]
            if share.target is not None and (share.target < share.position or (
                    share.target == share.position and not share.buffered and not share.renewing)):
                share.target = None  # never a position below the committed one; a landed end is done
        self._begin()
        self._held = 0
        for share in self._shares.values():
            for record in share.buffered:
                share.writer.write(record)
            self._held += len(share.buffered)
