"""A Spark job that failed because its tasks raised one of the project's errors ends with that error.

Spark gives up on a job once one task failed ``spark.task.maxFailures`` times, and hands
the driver the last attempt's Python traceback as text inside its own exception. When
that traceback ends in an error the engine diagnosed (a transaction that would not
complete, fenced, a transform breaking its contract: an
:class:`~eos_etl.errors.EosEtlError`), the run fails with that error, its one ``error:``
line and its exit code, instead of a driver traceback. Anything else (a worker that
crashed, a bug) stays as Spark raised it.
"""

from __future__ import annotations

import re
import sys

from ..errors import EosEtlError

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
    return None
