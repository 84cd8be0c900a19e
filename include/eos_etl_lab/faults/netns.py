"""Linux network namespaces as test hosts: ``ip netns``, veth pairs, a bridge, iptables.

A :class:`Netns` is one namespace the project created (root only, iproute2 and
iptables installed). Everything it sends stays inside namespaces of the same
lab: the lab (:mod:`eos_etl_lab.faults.network_lab`) wires them to a bridge that
lives in a namespace of its own, never in the machine's, so nothing reaches
the machine's own network and a Docker daemon's host rules (FORWARD policy
DROP, ``br_netfilter``) never see the lab's traffic.

Names carry a prefix and the pid of the process that made them
(``<prefix>-<pid>-<host>``): :func:`remove_leftovers` deletes the namespaces
of labs whose process is gone (a killed test or soak) before a new one starts.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from eos_etl.errors import StackError
from eos_etl.host.ports import port_is_free
from eos_etl.host.tools import require_tool

log = logging.getLogger(__name__)

T = TypeVar("T")

NETNS_DIR = Path("/run/netns")
_CLONE_NEWNET = 0x40000000
_LIBC = None


class NetnsError(StackError):
    """A namespace, link or filter rule could not be set up (not root, iproute2 or iptables missing)."""


def require_netns_support() -> None:
    """Root with ``ip`` and ``iptables``: else one :class:`NetnsError` saying what is missing."""
    if os.geteuid() != 0:
        raise NetnsError("network namespaces need root (ip netns, veth, iptables inside namespaces)")
    require_tool("ip", install_hint="apt-get install iproute2")
    require_tool("iptables", install_hint="apt-get install iptables")


def run(argv: list[str], *, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess:
    """Run a network tool; a failure is one :class:`NetnsError` with the tool's own message."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise NetnsError(f"{' '.join(argv)} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
    return proc


def _setns(fd: int) -> None:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    if _LIBC.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise NetnsError(f"setns failed: {os.strerror(err)}")


class Netns:
    """One network namespace (``/run/netns/<name>``)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Netns({self.name})"

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def exists(self) -> bool:
        return self.path.exists()

    def create(self) -> "Netns":
        run(["ip", "netns", "add", self.name])
        self.ip("link", "set", "lo", "up")
        return self

    # -- running things inside ---------------------------------------------------------------
    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the namespace (``ip netns exec`` execs it: the pid stays the same)."""
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return run(self.command(list(argv)), check=check)

    def ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return run(["ip", "-n", self.name, *args], check=check)

    def iptables(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.run("iptables", "-w", "5", *args, check=check)

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """``fn()`` on a thread that joined this namespace (its sockets live there), not a process."""
        box: dict = {}

        def target() -> None:
            try:
                with open(self.path) as f:
                    _setns(f.fileno())
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                box["error"] = exc

        # A thread of its own: setns changes only the calling thread, and this one ends with it.
        t = threading.Thread(target=target, name=f"netns-{self.name}", daemon=True)
        t.start()
        t.join(timeout)
        if t.is_alive():
            raise NetnsError(f"a call inside {self.name} did not return within {timeout:.0f}s")
        if "error" in box:
            raise box["error"]
        return box["value"]

    def port_is_free(self, host: str, port: int) -> bool:
        return self.call(lambda: port_is_free(port, host))

    def pids(self) -> list[int]:
        proc = run(["ip", "netns", "pids", self.name], check=False)
        return [int(p) for p in proc.stdout.split() if p.isdigit()]

    def delete(self) -> None:
        """SIGKILL what still runs inside (processes the lab started there), then remove the namespace."""
        if not self.exists():
            return
        for _ in range(50):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        run(["ip", "netns", "delete", self.name], check=False)


def namespace_names() -> list[str]:
    proc = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def owner_pid(name: str, prefix: str) -> int | None:
    """The pid a lab namespace's name records (``<prefix>-<pid>-...``)."""
    m = re.match(rf"{re.escape(prefix)}-(\d+)-", name)
    return int(m.group(1)) if m else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers(prefix: str) -> list[str]:
    """Delete the namespaces named ``<prefix>-<pid>-*`` whose pid is no longer running; returns them.

    A veth pair goes with either of its ends' namespaces, so this removes the links too.
    """
    removed = []
    for name in namespace_names():
        pid = owner_pid(name, prefix)
        if pid is not None and not _alive(pid):
            Netns(name).delete()
            removed.append(name)
    if removed:
        log.warning("removed network namespaces left by labs that are gone: %s", ", ".join(removed))
    return removed
