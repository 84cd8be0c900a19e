"""A Spark job that failed because its tasks raised one of the project's errors ends with that error.

Spark gives up on a job once one task failed ``spark.task.maxFailures`` times, and hands
the driver the last attempt's Python traceback as text inside its own exception. When
that traceback ends in an error the engine diagnosed (a transaction that would not
complete, fenced, a transform breaking its contract: an
:class:`~eos_etl.errors.EosEtlError`), the run fails with that error, its one ``error:``
line and its exit code, instead of a driver traceback. A job that Spark gave up on because
a task's process died (an executor or a Python worker lost) ends with
:class:`~.errors.TaskProcessLostError` (exit 1: the world failed, a retry resumes). Anything
else (a bug) stays as Spark raised it.
"""

from __future__ import annotations

import re
import sys

from ...errors import EosEtlError
from ..errors import TaskProcessLostError
from .task_attempts import DIED_MARKERS

# A traceback's last line: "<module>.<Class>: <message>", the module one of this package's.
_ERROR_LINE = re.compile(r"^(eos_etl(?:\.\w+)+)\.(\w+): (.+)$", re.MULTILINE)


def diagnosed(exc: BaseException) -> EosEtlError | None:
    """The project's error a failed Spark job's tasks ended with (the last one named), or None.

    Only classes of modules this process already imported are considered: nothing is imported
    or built from the text but an :class:`EosEtlError` subclass taking its message."""
    for module, name, message in reversed(_ERROR_LINE.findall(str(exc))):
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and issubclass(cls, EosEtlError):
            try:
                return cls(f"a publishing task failed, and Spark gave up after its retries: {message.strip()}")
            except TypeError:  # a class that needs more than a message
                continue
    return _process_lost(str(exc))


def _process_lost(text: str) -> TaskProcessLostError | None:
    """A job Spark aborted because a task's process died: its one line from Spark's own words."""
    for line in text.splitlines():
        if any(marker in line for marker in DIED_MARKERS):
            reason = line.strip()
            if "most recent failure:" in reason:
                reason = reason.split("most recent failure:", 1)[1].strip()
            return TaskProcessLostError(
                f"a publishing task's process died and Spark gave up on the job ({reason[:300]}); each partition "
                "committed only what it had published, a retry resumes from there")
    return None
