"""Named points in the publishing path where tests can inject failures.

Off unless ``EOS_ETL_FAILPOINTS`` is set, and then a dict lookup per check.
Syntax: ``name=action[:arg][,partition=N][,after=N][,once=PATH]`` joined by
``;``. Actions: ``crash`` (``os._exit``: the process dies without cleanup),
``kill`` (SIGKILL to self), ``stop`` (SIGSTOP to self: a paused zombie),
``raise`` (an exception), ``sleep:SECONDS``, ``await:PATH`` (waits until PATH
exists, at most :data:`AWAIT_S`: a test holds a task until what another task
does has landed), ``throttle:SECONDS`` (sleeps on
every hit from then on and logs only the first: a task slowed down, still
streaming, so that a fault lands on work in progress without a huge window).
``after=N`` fires once the count passed by the caller reaches N; ``once=PATH``
fires in only one process ever (first to create PATH wins), so a retried task
does not fail again (a throttle: only one process is slowed, every hit of it).

Points: after_init, after_committed_read, mid_produce (count = records
produced in this attempt), before_send_offsets, after_send_offsets,
before_commit, after_commit (count = transactions committed), before_report.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time

log = logging.getLogger(__name__)

ENV = "EOS_ETL_FAILPOINTS"


class FailpointError(RuntimeError):
    pass


def _parse(spec: str) -> dict[str, dict]:
    points: dict[str, dict] = {}
    for item in filter(None, (s.strip() for s in spec.split(";"))):
        name, _, rest = item.partition("=")
        fields = rest.split(",")
        action, _, arg = fields[0].partition(":")
        opts = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
        points[name.strip()] = {"action": action, "arg": arg, **opts}
    return points


_POINTS = _parse(os.environ.get(ENV, ""))


def load(spec: str) -> None:
    """Set the points to the environment's plus ``spec`` (carried in a pipeline
    config). Replaces earlier ones: Spark reuses Python workers across runs."""
    global _POINTS
    _throttling.clear()
    _POINTS = {**_parse(os.environ.get(ENV, "")), **_parse(spec)}


def active() -> bool:
    return bool(_POINTS)


_suspended = 0
#: The longest an ``await`` point waits for its file (well below a publishing task's stall timeout).
AWAIT_S = 60.0

_throttling: set[str] = set()  # throttle points that fired in this process (they sleep without a claim or a log)


@contextlib.contextmanager
def suspended():
    """No point fires inside (a step that is not the publishing path, run on the same process)."""
    global _suspended
    _suspended += 1
    try:
        yield
    finally:
        _suspended -= 1


def hit(name: str, partition: int | None = None, count: int | None = None) -> None:
    point = _POINTS.get(name)
    if point is None or _suspended:
        return
    if "partition" in point and partition is not None and int(point["partition"]) != partition:
        return
    if "after" in point and (count is None or count < int(point["after"])):
        return
    if point["action"] == "throttle" and name in _throttling:
        time.sleep(float(point["arg"] or 0.001))
        return
    once = point.get("once")
    if once:
        try:
            fd = os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)
        except FileExistsError:
            return
    action, arg = point["action"], point.get("arg")
    log.warning("failpoint %s fired: %s (partition=%s count=%s pid=%d)", name, action, partition, count, os.getpid())
    if action == "crash":
        os._exit(int(arg or 97))
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    if action == "sleep":
        time.sleep(float(arg or 1))
        return
    if action == "await":
        deadline = time.monotonic() + AWAIT_S
        while not os.path.exists(arg) and time.monotonic() < deadline:
            time.sleep(0.05)
        return
    if action == "throttle":
        _throttling.add(name)
        time.sleep(float(arg or 0.001))
        return
    if action == "raise":
        raise FailpointError(f"failpoint {name}")
    raise ValueError(f"unknown failpoint action {action!r} in {ENV}")
