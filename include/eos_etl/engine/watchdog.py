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

Only for Spark tasks: in the driver it would take the driver down.
"""

from __future__ import annotations

import faulthandler
import logging
import sys

log = logging.getLogger(__name__)


class StallWatchdog:
    def __init__(self, seconds: float, what: str = "task"):
        self.seconds = seconds
        self.what = what
        self._file = None

    def __enter__(self) -> "StallWatchdog":
        if self.seconds > 0:
            for stream in (sys.stderr, sys.__stderr__):
                try:
                    stream.fileno()
                    self._file = stream
                    break
                except (AttributeError, OSError, ValueError):
                    continue
            self.kick()
        return self

    def kick(self) -> None:
        """Progress was made: restart the countdown."""
        if self._file is not None:
            faulthandler.dump_traceback_later(self.seconds, exit=True, file=self._file)

    def __exit__(self, *exc) -> None:
        if self._file is not None:
            faulthandler.cancel_dump_traceback_later()
