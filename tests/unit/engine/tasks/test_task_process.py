"""Broker-free: a publishing task's worker carries the task's name while it runs, its own after
(engine/tasks/task_process.py), as ``ps`` and the fault scenarios read it."""

from __future__ import annotations

import json
import subprocess
import sys

from eos_etl.engine.tasks.task_process import TASK_PROCESS_NAME

#: In a process of its own (the name is the process's): its name before, inside and after a task
#: that ends well, and after one that fails.
_PROBE = """
import json, psutil
from eos_etl.engine.tasks.task_process import named_as_task
me = psutil.Process()
names = [me.name()]
with named_as_task():
    names.append(me.name())
names.append(me.name())
try:
    with named_as_task():
        raise RuntimeError("the task failed")
except RuntimeError:
    names.append(me.name())
print(json.dumps(names))
"""


def test_the_task_name_holds_while_the_task_runs_and_the_old_one_comes_back():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True)
    before, inside, after, after_failure = json.loads(out.stdout)
    assert inside == TASK_PROCESS_NAME
    assert after == after_failure == before != TASK_PROCESS_NAME


def test_the_name_fits_what_the_kernel_keeps():
    assert len(TASK_PROCESS_NAME) <= 15
