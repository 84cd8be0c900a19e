"""Checks for the external programs the stack needs."""

from __future__ import annotations

import shutil
import socket

from .errors import MissingToolError, PortInUseError


def require_tool(name: str, *, install_hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MissingToolError(f"'{name}' is not installed or not on PATH. Install it with: {install_hint}")
    return path


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


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
