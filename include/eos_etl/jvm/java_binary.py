"""The java binary the project's own JVM tools run (the class-data archive's training, the Spark patches'
compiler): ``$JAVA_HOME/bin/java``, else the one on ``PATH``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def java_binary() -> Path | None:
    """The java binary, resolved; None when there is none."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None
