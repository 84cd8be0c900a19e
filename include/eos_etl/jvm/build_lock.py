"""One builder at a time of what the project builds for its JVMs under the cache (the class-data archive, the
Spark patches' jar): a lock file in the build's directory; a second builder waits, then finds it built."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def build_lock(directory: Path, error: type[Exception], what: str) -> Iterator[None]:
    """Hold ``directory``'s lock (made with the directory); ``error`` when it cannot be written."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock = open(directory / ".lock", "w")
    except OSError as exc:
        raise error(f"cannot write {what} under {directory}: {exc}") from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
