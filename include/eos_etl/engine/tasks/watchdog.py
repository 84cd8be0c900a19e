"""Turn a stuck publishing task into a crashed one, which Spark retries.

A task that stops making progress (say a client call that never returns after
the broker was restarted under it) would otherwise hold its input partition,
and the whole job, until somebody kills it. The watchdog is faulthandler's
timer thread, which runs without the GIL: if the task is not kicked for
``seconds``, it writes every thread's stack to stderr (the post-mortem) and
``_exit``s the worker. Spark reruns the task; the new attempt's
``init_transactions`` fences the stuck producer and aborts its open
transaction, and publishing resumes from the committed offset. Exactly-once
does not depend on it, only liveness does.

A blocking client call gets a tighter bound of its own (:meth:`StallWatchdog.bounded`):
its timeout plus a margin. librdkafka does not always honour the timeout it is
given (``send_offsets_to_transaction`` blocked for minutes after a broker
restart, librdkafka#5456 / #5511, still open in 2.16), and waiting out the
whole stall timeout for a call that is known to be overdue wastes minutes.

Only for Spark tasks: in the driver it would take the driver down.
"""

from __future__ import annotations

import faulthandler
import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


class StallWatchdog:
    #: A kick this soon after the countdown was last restarted is skipped (at most a tenth of the
    #: stall timeout): each restart ends faulthandler's timer thread and starts a new one, and the
    #: publisher kicks every 1,000 records. So a stall ends the task after between 0.9 and 1 times
    #: the stall timeout without progress.
    MIN_REARM_S = 1.0

    def __init__(self, seconds: float, what: str = "task"):
        self.seconds = seconds
        self.what = what
        self._file = None
        self._armed_at = float("-inf")
        self._min_rearm_s = min(self.MIN_REARM_S, seconds / 10)

    def __enter__(self) -> "StallWatchdog":
        if self.seconds > 0:
            for stream in (sys.stderr, sys.__stderr__):
                try:
                    stream.fileno()
                    self._file = stream
                    break
                except (AttributeError, OSError, ValueError):
                    continue
            self._arm(self.seconds)
        return self

    def _arm(self, seconds: float) -> None:
        faulthandler.dump_traceback_later(seconds, exit=True, file=self._file)
        self._armed_at = time.monotonic()

    def kick(self) -> None:
        """Progress was made: restart the countdown (unless it was restarted just now)."""
        if self._file is not None and time.monotonic() - self._armed_at >= self._min_rearm_s:
            self._arm(self.seconds)

    @contextmanager
    def bounded(self, seconds: float) -> Iterator[None]:
        """Within the block, crash after ``seconds`` (if sooner than the stall timeout); restart the stall
        countdown on the way out."""
        tighter = self._file is not None and 0 < seconds < self.seconds
        if tighter:
            faulthandler.dump_traceback_later(seconds, exit=True, file=self._file)
        try:
            yield
        finally:
            if tighter:
                self._arm(self.seconds)
            else:
                self.kick()

    def __exit__(self, *exc) -> None:
        if self._file is not None:
            faulthandler.cancel_dump_traceback_later()
