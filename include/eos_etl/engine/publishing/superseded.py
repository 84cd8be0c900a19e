"""A fenced task attempt steps aside for the attempt that fenced it, if there is one.

With ``spark.speculation`` on (or a retried task racing its slow original, or a
second run of the same window), two attempts of one publishing task run at
once. The later attempt's ``init_transactions`` fences the earlier one, which
is what keeps the output exact. If the fenced attempt then simply failed, Spark
would queue yet another attempt of the task, whose ``init_transactions`` would
fence the attempt doing the work, and so on until the task's failure limit
aborts the job.

But a fence does not prove that another attempt exists: the transaction
coordinator also bumps the epoch when it aborts a transaction that outlived
``transaction.timeout.ms`` (a partition, a stall), and then nobody else is
publishing. Waiting for a successor that does not exist only delays Spark's
retry by the whole wait. So the fenced attempt looks for evidence first: the
partition's committed offset moving past the position this attempt last knew
(only the holder of the transactional id can commit it). States:

* *completed*: the committed offset reached the window end: the attempt that
  fenced this one finished. Spark usually takes that attempt's result and kills
  this redundant copy (a kill is not counted as a task failure); this one waits
  :data:`REPORT_GRACE_S`, then fails as fenced.
* *no successor*: no commit past the known position within the bound, which is
  zero when the coordinator's timeout explains the fence (the open transaction
  was at least ``transaction.timeout.ms`` old: one read decides) and otherwise
  the time a live successor needs for its first commit
  (:func:`first_commit_bound_s`: ``chunk_seconds`` plus a flush's operation
  timeout and a margin). The attempt fails at once as fenced; Spark's retry
  resumes from the committed offset.
* *progressing*: commits past the known position: another attempt really
  runs, so this one keeps waiting while it keeps committing (each gap at most
  the first-commit bound), until *completed* or *stalled* (it stopped
  committing: fail as fenced, as above).

Exactly-once never depends on this; only how fast a fenced task gets out of the
way does.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ...kafka.errors import KafkaSetupError
from ..errors import ProducerFencedError
from ..pipeline import PipelineConfig
from .checkpoint import PartitionCheckpoint

log = logging.getLogger(__name__)

# After the window end is committed: time for the attempt that did it to report to the driver first.
REPORT_GRACE_S = 5.0
#: A live successor's first commit comes within ``chunk_seconds`` plus a flush that may wait this long
#: without a delivery (the producer's operation timeout, 30 s) and a margin for its start (init, reads).
FIRST_COMMIT_MARGIN_S = 45.0


class Outcome(enum.Enum):
    COMPLETED = "completed"  # the committed offset reached the window end
    NO_SUCCESSOR = "no successor"  # nobody committed past the known position within the bound
    STALLED = "stalled"  # another attempt committed, then stopped committing


@dataclass(frozen=True)
class Fence:
    """What the fenced attempt knew: the committed position it last knew (None: unknown), how long its
    open transaction had been open (None: none was open) and the transaction timeout."""

    position: int | None
    transaction_age_s: float | None
    transaction_timeout_s: float

    @classmethod
    def of(cls, error: ProducerFencedError | None, config: PipelineConfig) -> "Fence":
        timeout_s = config.transaction_timeout_ms / 1000
        if error is None:
            return cls(None, None, timeout_s)
        return cls(error.position, error.transaction_age_s, error.transaction_timeout_s or timeout_s)

    @property
    def timed_out(self) -> bool:
        """The open transaction outlived its timeout: the coordinator's own abort (an epoch bump)
        explains the fence, so it is no evidence of another attempt."""
        return self.transaction_age_s is not None and self.transaction_age_s >= self.transaction_timeout_s


def first_commit_bound_s(config: PipelineConfig) -> float:
    """How long a live attempt that just fenced this one may take to its first commit."""
    return config.chunk_seconds + FIRST_COMMIT_MARGIN_S


def wait_for_successor(read_committed: Callable[[], int | None], end: int, fence: Fence, *,
                       progress_bound_s: float, poll_s: float = 1.0,
                       clock: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], None] = time.sleep) -> Outcome:
    """Watch the committed offset (``read_committed()``: None if unreadable now) for another attempt's
    commits: :class:`Outcome` (see the module's states)."""
    known = fence.position
    progressed = False
    bound = 0.0 if fence.timed_out else progress_bound_s
    since = clock()
    while True:
        committed = read_committed()
        if committed is not None:
            if committed >= end:
                return Outcome.COMPLETED
            if known is None:
                known = committed  # nothing known before: commits from here on are the evidence
            elif committed > known:
                known, progressed, since = committed, True, clock()
                bound = progress_bound_s  # another attempt commits: give it the time a live one needs
        if clock() - since >= bound:
            return Outcome.STALLED if progressed else Outcome.NO_SUCCESSOR
        sleep(min(poll_s, max(0.0, bound - (clock() - since))))


def step_aside(config: PipelineConfig, partition: int, end: int, error: ProducerFencedError | None = None) -> None:
    """Called with a fenced attempt's ``error`` in flight; the caller re-raises it afterwards."""
    fence = Fence.of(error, config)
    tid = config.transactional_id(partition)
    bound = first_commit_bound_s(config)
    if fence.timed_out:
        log.warning("%s was fenced by another attempt or its coordinator (its transaction was open %.0fs, past "
                    "the %.0fs transaction timeout, which the coordinator aborts); checking whether another "
                    "attempt commits %s[%d]", tid, fence.transaction_age_s, fence.transaction_timeout_s,
                    config.input_topic, partition)
    else:
        log.warning("%s was fenced by another attempt; waiting while it commits %s[%d] (up to %.0fs for its first "
                    "commit past %s, then while commits go on) up to %d", tid, config.input_topic, partition,
                    bound, fence.position, end)
    checkpoint = PartitionCheckpoint(config, partition, timeout_s=10.0)

    def read() -> int | None:
        try:
            return checkpoint.committed()
        except KafkaSetupError as exc:  # a broker moving under us: no evidence either way
            log.info("reading the committed offset while stepping aside: %s", exc)
            return None

    try:
        outcome = wait_for_successor(read, end, fence, progress_bound_s=bound)
    finally:
        checkpoint.close()
    if outcome is Outcome.COMPLETED:
        log.warning("%s[%d] was completed by the attempt that fenced this one; this copy stands down",
                    config.input_topic, partition)
        time.sleep(REPORT_GRACE_S)
    elif outcome is Outcome.NO_SUCCESSOR:
        log.warning("%s: no other attempt committed %s[%d] past %s%s: this attempt fails now, and the task's "
                    "retry resumes from the committed offset", tid, config.input_topic, partition, fence.position,
                    "" if fence.timed_out else f" within {bound:.0f}s")
    else:
        log.warning("%s: the attempt that fenced this one stopped committing %s[%d] (nothing for %.0fs): this "
                    "attempt fails now, and the task's retry resumes from the committed offset", tid,
                    config.input_topic, partition, bound)
