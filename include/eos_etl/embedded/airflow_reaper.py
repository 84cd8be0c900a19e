"""supervisord event listener: kill what a dead Airflow component left behind in its process group.

A SIGKILLed scheduler leaves its LocalExecutor workers (which ignore SIGTERM: the
scheduler's handler returns early in a forked child) and its log server (which
holds the port its successor wants). supervisord starts every program in a
process group of its own (pgid = pid), so the group of the pid that exited is
exactly those leftovers. The tasks a dead scheduler's workers ran are in
groups of their own: they get SIGTERM (their ``on_kill`` runs), since the next
scheduler resets them for another try anyway (LocalExecutor cannot adopt
them), and a try nobody supervises must not run on beside its successor.

The protocol (supervisor's ``events.rst``): write ``READY``, read one header
line and its ``len`` bytes of payload, act, answer ``RESULT 2\\nOK``. stdout
belongs to the protocol; anything said goes to stderr.
"""

from __future__ import annotations

import os
import signal
import sys

from ..host.process import ProcStat, all_pids
from .airflow_supervisor import GROUP


def fields(line: str) -> dict[str, str]:
    """``key:value key:value`` (a header or a payload's first line) as a dict."""
    return dict(token.split(":", 1) for token in line.split() if ":" in token)


def reap(payload: dict[str, str]) -> int | None:
    """SIGKILL the process group of a component that exited; the group killed, or None."""
    if payload.get("groupname") != GROUP or not payload.get("pid", "").isdigit():
        return None
    group = int(payload["pid"])
    stats = {pid: stat for pid in all_pids() if (stat := ProcStat.read(pid)) is not None}
    members = {pid for pid, stat in stats.items() if stat.pgrp == group}
    tasks = {stat.pgrp for stat in stats.values() if stat.ppid in members and stat.pgrp != group}
    for task_group in tasks:
        _signal_group(task_group, signal.SIGTERM)
    return group if _signal_group(group, signal.SIGKILL) else None


def _signal_group(group: int, sig: int) -> bool:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        return False  # nothing left there
    return True


def main() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout
    while True:
        stdout.write("READY\n")
        stdout.flush()
        line = stdin.readline()
        if not line:
            return  # supervisord is gone
        header = fields(line.decode())
        payload = stdin.read(int(header.get("len", 0))).decode()
        if header.get("eventname") == "PROCESS_STATE_EXITED":
            event = fields(payload.split("\n", 1)[0])
            if (group := reap(event)) is not None:
                print(f"killed what {event.get('processname')} (pid {group}) left in its process group",
                      file=sys.stderr, flush=True)
        stdout.write("RESULT 2\nOK")
        stdout.flush()


if __name__ == "__main__":
    main()
