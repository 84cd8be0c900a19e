"""The name a Python worker carries while it runs a publishing task.

Spark keeps Python workers between tasks (``spark.python.worker.reuse``): a worker process alive
under an executor is not necessarily running a task. While a publishing task runs, its worker's
process name (``/proc/<pid>/comm``, what ``ps`` and ``top`` show) is :data:`TASK_PROCESS_NAME`, and
its own name again once the task ends. An operator sees which workers publish; the fault scenarios
tell a fault that landed on a running task from one that hit an idle worker
(:func:`eos_etl_lab.faults.landing.python_task_workers`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

#: At most 15 characters: the kernel keeps no more of a process name.
TASK_PROCESS_NAME = "eos-etl-task"
_COMM = "/proc/self/comm"


def _set_name(name: str) -> None:
    with open(_COMM, "w") as f:
        f.write(name)


@contextlib.contextmanager
def named_as_task() -> Iterator[None]:
    """This process is named :data:`TASK_PROCESS_NAME` inside; its earlier name is restored after.
    Where the name cannot be read or set (no procfs), nothing changes."""
    try:
        with open(_COMM) as f:
            before: str | None = f.read().rstrip("\n")
        _set_name(TASK_PROCESS_NAME)
    except OSError:
        before = None
    try:
        yield
    finally:
        if before is not None:
            with contextlib.suppress(OSError):
                _set_name(before)
