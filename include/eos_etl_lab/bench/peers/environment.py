"""A peer's own Python environment: a virtual environment under the cache, made once per requirements file
(its digest names it), with every package of the file pinned and nothing else resolved.

A peer whose pins clash with the project's (quixstreams and confluent-kafka) runs there, in a process of its
own; the bench measures that process tree as it measures any case.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

from eos_etl.paths import cache_dir

HERE = Path(__file__).resolve().parent


def write_private(path: Path, text: str) -> None:
    """``text`` to ``path``, readable by this user only from its creation (a peer's spec may hold a password)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def peer_python(name: str) -> Path:
    """The Python of peer ``name``'s environment (``<name>-requirements.txt`` beside this module), made on
    first use (a minute); raises RuntimeError naming the pip error when it cannot be made."""
    requirements = HERE / f"{name}-requirements.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:12]
    home = cache_dir() / "peers" / f"{name}-{digest}"
    python = home / "bin" / "python"
    done = home / ".installed"
    if done.is_file():
        return python
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two benches making one environment
        if done.is_file():
            return python
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(home)], check=True)
        proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                               "--disable-pip-version-check", "-r", str(requirements)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"the {name} peer's environment could not be made: {proc.stderr.strip()[-2000:]}")
        done.write_text(digest)
    return python
