"""Fixes of Spark's own bugs, loaded by every Spark JVM here ahead of Spark's jars until a Spark release has them.

Each fix is a unified diff against the pinned Spark's source (``patches/*.diff``, upstream-ready; the bugs,
their reproductions and the write-up: docs/spark-python-task-kill.md). Both stop a Spark Connect server,
shared by every window, from dying of its clients' kills:

* ``direct-buffer-close-under-write.diff`` (spark-core ``DirectByteBufferOutputStream``): a Python
  runner's task thread writes its Arrow batches into that stream through an interruptible NIO channel; a
  cancelled job's kill interrupts the task thread, the interrupting thread closes the channel and with it
  the stream, which freed its direct buffer under the task thread's copy: the JVM's SIGSEGV. Its methods
  now hold the stream's lock, so the free waits for the copy.
* ``arrow-input-freed-at-task-end.diff`` (spark-sql ``PythonArrowInput``): the Arrow vectors of a Python
  task's input were freed only at the end of its input; every task attempt that failed or was killed before
  (a fenced or lease-refused attempt, a cancelled job) left its last batch's buffers allocated for the JVM's
  life, and a few client kills (each one's tasks retried and refused) ran Arrow's direct memory out: the
  executor died of OutOfDirectMemoryError, and the server's SparkContext with it. Freed at task completion.

How: once per machine (about 10 s), the pinned Spark's sources jars (Maven Central,
:data:`~eos_etl.jars.versions.SPARK_SOURCES`) give each patched file, checked against the SHA-256 it was
written for; the diff is applied exactly (a context line that differs is an error); the pyspark wheel's own
Scala compiler compiles the result against the wheel's jars (a JRE is enough); every class it makes must
replace one of the same name in the wheel's jar (nothing new on Spark's class path). The classes go into
``<cache>/spark-patches/eos-etl-spark-patches-<hash of the diffs and the Spark version>.jar``, first on the
class path of the driver and the executors (``spark.driver.extraClassPath``, ``spark.executor.extraClassPath``:
the application class loader finds them before Spark's jars). A pyspark other than the one the patches were
written for (another version, or a class file that differs) refuses to build them
(:class:`SparkPatchError`, exit code 2) until they are checked against its source or dropped because Spark
fixed the bug. An executor on another machine finds no jar at that path and runs Spark's own classes
unless the same jar is there (the docker-compose images build it: docker/Dockerfile).

``EOS_ETL_SPARK_PATCHES=off`` starts every Spark JVM without them (to reproduce the bugs).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..arguments import switch_on
from ..errors import StackError
from ..jars import maven
from ..jars.versions import SPARK_SOURCES, SPARK_VERSION
from .build_lock import build_lock
from .java_binary import java_binary

SWITCH_ENV = "EOS_ETL_SPARK_PATCHES"
DIFFS = Path(__file__).parent / "patches"
COMPILE_TIMEOUT_S = 300.0


class SparkPatchError(StackError):
    """The patches cannot be built, or were written for another Spark than the one installed."""


@dataclass(frozen=True)
class Patch:
    """One Spark source file patched: its diff under :data:`DIFFS`, the file in the sources jar of
    ``artifact`` and its SHA-256, and the SHA-256 of its main class file in the wheel's jar of ``artifact``
    (that the wheel is the Spark the diff was written against)."""

    diff: str
    artifact: str
    source: str
    source_sha256: str
    class_sha256: str

    @property
    def main_class(self) -> str:
        return self.source.removesuffix(".scala") + ".class"


PATCHES = (
    Patch("direct-buffer-close-under-write.diff", "spark-core_2.13",
          "org/apache/spark/util/DirectByteBufferOutputStream.scala",
          "c3fa9aafc6b1ed68cbad176f5ff434e32f2a53a0bd88c3074156a06acab84023",
          "c2c53b98a334264b1dc9257b12a93ab62937e9c04b5db45507d64e6193f01587"),
    Patch("arrow-input-freed-at-task-end.diff", "spark-sql_2.13",
          "org/apache/spark/sql/execution/python/PythonArrowInput.scala",
          "c7ccfe43f5081d7a3387717979d1b4072e4e8c731880f62c955b500b0369c3d8",
          "c55bd5f703d128c488a08c0892341da648fbee6801e9ce3de7431e0e130ce138"),
)

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@.*$")


def enabled() -> bool:
    return switch_on(SWITCH_ENV)


def _wheel() -> tuple[str, Path]:
    import pyspark  # deferred: every JVM start imports this module; only the jar's build needs pyspark

    return pyspark.__version__, Path(pyspark.__file__).parent / "jars"


def _wheel_jar(artifact: str) -> Path:
    version, jars = _wheel()
    return jars / f"{artifact}-{version}.jar"


def check_wheel() -> None:
    """Refuse a pyspark other than the one the patches were written for."""
    version, _ = _wheel()
    for patch in PATCHES:
        found = None
        jar = _wheel_jar(patch.artifact)
        if version == SPARK_VERSION and jar.is_file():
            with zipfile.ZipFile(jar) as z:
                if patch.main_class in z.namelist():
                    found = hashlib.sha256(z.read(patch.main_class)).hexdigest()
        if found != patch.class_sha256:
            raise SparkPatchError(
                f"the Spark patch {patch.diff} was written for Spark {SPARK_VERSION}, and pyspark {version} carries "
                f"another {patch.main_class.rsplit('/', 1)[-1]}: check it against that version's source "
                f"(docs/spark-python-task-kill.md), or run without the patches: {SWITCH_ENV}=off")


def apply_diff(text: str, diff: str, name: str = "") -> str:
    """``text`` with the unified ``diff`` applied; every context and removed line must match exactly."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    hunk = False
    for line in diff.splitlines(keepends=True):
        if m := _HUNK.match(line):
            start = int(m.group(1)) - 1
            if start < i:
                raise SparkPatchError(f"{name}: overlapping hunks")
            out += lines[i:start]
            i, hunk = start, True
        elif hunk and line[:1] in (" ", "-"):
            body = line[1:] if line != " \n" else "\n"
            if i >= len(lines) or lines[i] != body:
                raise SparkPatchError(f"{name}: line {i + 1} is not the one the diff was written against")
            if line[:1] == " ":
                out.append(body)
            i += 1
        elif hunk and line[:1] == "+":
            out.append(line[1:])
        elif hunk and not line.startswith("\\"):
            raise SparkPatchError(f"{name}: unexpected diff line {line!r}")
    return "".join(out + lines[i:])


def _key() -> str:
    version, _ = _wheel()
    digest = hashlib.sha256(version.encode())
    for patch in PATCHES:
        digest.update(f"\0{patch}\0".encode() + (DIFFS / patch.diff).read_bytes())
    return digest.hexdigest()[:16]


def jar_path() -> Path | None:
    """Where the patches' jar is (or will be once built), or None when switched off."""
    return paths.cache_dir() / "spark-patches" / f"eos-etl-spark-patches-{_key()}.jar" if enabled() else None


def jar() -> Path | None:
    """The patches' jar (built on first use), or None when switched off."""
    path = jar_path()
    return path if path is None or path.is_file() else _build(path)


def _java() -> str:
    java = java_binary()
    if java is None:
        raise SparkPatchError("no java found (JAVA_HOME or PATH): cannot build the Spark patches")
    return str(java)


def _patched_sources(src: Path) -> list[Path]:
    sources = maven.fetch(SPARK_SOURCES)
    files = []
    for patch in PATCHES:
        with zipfile.ZipFile(sources / f"{patch.artifact}-{SPARK_VERSION}-sources.jar") as z:
            original = z.read(patch.source)
        if hashlib.sha256(original).hexdigest() != patch.source_sha256:
            raise SparkPatchError(f"{patch.source} in the sources of Spark {SPARK_VERSION} is not the file "
                                  f"{patch.diff} was written against")
        target = src / patch.source
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(apply_diff(original.decode(), (DIFFS / patch.diff).read_text(), patch.diff))
        files.append(target)
    return files


def _compile(files: list[Path], classes: Path) -> list[Path]:
    _, jars = _wheel()
    classes.mkdir(parents=True)
    command = [_java(), "-Xss4m", "-cp", str(jars / "*"), "scala.tools.nsc.Main", "-usejavacp", "-nowarn",
               "-release", "17", "-d", str(classes), *map(str, files)]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise SparkPatchError(f"compiling the Spark patches took over {COMPILE_TIMEOUT_S:.0f}s") from exc
    if proc.returncode != 0:
        raise SparkPatchError(f"scalac failed on the Spark patches: {(proc.stdout + proc.stderr).strip()[-800:]}")
    made = sorted(classes.rglob("*.class"))
    replaced: set[str] = set()
    for artifact in {p.artifact for p in PATCHES}:
        with zipfile.ZipFile(_wheel_jar(artifact)) as z:
            replaced |= set(z.namelist())
    new = [c.relative_to(classes).as_posix() for c in made if c.relative_to(classes).as_posix() not in replaced]
    if new:
        raise SparkPatchError(f"the Spark patches made classes Spark {SPARK_VERSION} does not have: {new}")
    return made


def _build(path: Path) -> Path:
    check_wheel()
    with build_lock(path.parent, SparkPatchError, "the Spark patches"):
        if path.is_file():  # another process built it while this one waited
            return path
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            classes = Path(tmp) / "classes"
            made = _compile(_patched_sources(Path(tmp) / "src"), classes)
            partial = Path(tmp) / path.name
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
                for f in made:
                    z.write(f, f.relative_to(classes).as_posix())
            partial.replace(path)  # atomic: a JVM finds the whole jar or none
        for stale in path.parent.glob("eos-etl-spark-patches-*.jar"):
            if stale != path:
                stale.unlink(missing_ok=True)
    return path


def class_path_conf() -> dict[str, str]:
    """``spark.driver.extraClassPath`` and ``spark.executor.extraClassPath``: the patches' jar, or nothing."""
    found = jar()
    return {"spark.driver.extraClassPath": str(found), "spark.executor.extraClassPath": str(found)} if found else {}
