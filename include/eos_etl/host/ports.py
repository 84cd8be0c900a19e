"""Ports the stack listens on: checks, and free ports that stay free until their server binds them.

A port chosen for a server is bound later, by another process (a JVM, Airflow's log
server), after seconds of start-up. Asking the kernel for port 0 and releasing it hands out
a port from its ephemeral range (``net.ipv4.ip_local_port_range``), the same range every
outgoing connection takes its source port from, so under load a client connection can take
the port before the server binds it (seen: Airflow's log server refused its port 40285).

``free_port`` therefore picks from a band outside that range, which outgoing connections
never use, and reserves each port it hands out for the life of the calling process with a
POSIX record lock on one byte of a per-user lock file: other processes using this module
(parallel test workers, a second stack) skip it, and the kernel drops the lock when the
process exits, so nothing is left to clean up. A port is handed out only if nothing is
bound to it on the requested host or on the wildcard address.
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
import threading
from pathlib import Path

from .errors import PortInUseError

# Below Linux's default ephemeral range (32768-60999) and above most registered services.
BAND = (20000, 29999)
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")

_lock = threading.Lock()
_cursor: int | None = None
_reservations_fd: int | None = None


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def require_free_port(port: int, what: str, host: str = "127.0.0.1") -> None:
    if not port_is_free(port, host):
        raise PortInUseError(
            f"port {port} on {host} is already in use, so {what} cannot listen there; "
            f"stop whatever holds it (e.g. `ss -ltnp 'sport = :{port}'`) or choose another port"
        )


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int] | None:
    """The kernel's source-port range for outgoing connections, if this system says."""
    try:
        low, high = (int(v) for v in path.read_text().split())
    except (OSError, ValueError):
        return None
    return low, high


def candidate_ports(band: tuple[int, int] = BAND, ephemeral: tuple[int, int] | None = None) -> list[int]:
    """The band's ports that no outgoing connection can take as its source port."""
    low, high = band
    if ephemeral is None:
        return list(range(low, high + 1))
    return [p for p in range(low, high + 1) if not ephemeral[0] <= p <= ephemeral[1]]


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on, outside the ephemeral range, reserved for this process."""
    global _cursor
    ports = candidate_ports(ephemeral=ephemeral_range())
    if not ports:  # the ephemeral range covers the whole band: the kernel's choice is all there is
        return _kernel_port(host)
    with _lock:
        if _cursor is None:  # processes start apart, so they rarely contend for the same locks
            _cursor = (os.getpid() * 7919) % len(ports)
        for step in range(len(ports)):
            port = ports[(_cursor + step) % len(ports)]
            if _reserve(port) and port_is_free(port, host) and port_is_free(port, "0.0.0.0"):
                _cursor = (_cursor + step + 1) % len(ports)
                return port
    raise PortInUseError(f"no free port left in {BAND[0]}-{BAND[1]} outside the ephemeral range")


def _kernel_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _reserve(port: int) -> bool:
    """Lock byte ``port`` of the per-user reservations file; False if another process holds it."""
    global _reservations_fd
    if _reservations_fd is None:
        path = Path(tempfile.gettempdir()) / f"eos-etl-ports-{os.getuid()}.lock"
        try:
            # Never closed: closing any descriptor of the file would drop all this process's locks.
            _reservations_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return True  # no shared file: the band and the bind checks still apply
    try:
        fcntl.lockf(_reservations_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port, os.SEEK_SET)
    except OSError:
        return False
    return True
