"""Fetch jar bundles from Maven Central with the machine's own ``mvn``.

A bundle is a named set of Maven coordinates copied, with their runtime
dependencies, into ``.cache/jars/<name>/``. A stamp file records the exact
coordinate list so a changed pin refetches and an unchanged one costs nothing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..host.errors import MissingToolError
from ..host.tools import require_tool
from .errors import MavenFetchError

log = logging.getLogger(__name__)

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


@dataclass(frozen=True)
class Artifact:
    group: str
    artifact: str
    version: str
    # True: take the artifact alone, none of its dependencies (used where the
    # dependencies are already on the target classpath, e.g. inside pyspark).
    alone: bool = False

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


@dataclass(frozen=True)
class Bundle:
    name: str
    artifacts: tuple[Artifact, ...]
    description: str = ""
    # "sources": each artifact's sources jar instead of its classes (its dependencies' too, unless alone).
    classifier: str = ""

    @property
    def directory(self) -> Path:
        return paths.cache_dir() / "jars" / self.name

    def fingerprint(self) -> str:
        text = "\n".join(a.coordinate + (" alone" if a.alone else "") for a in self.artifacts)
        text += f"\nclassifier={self.classifier}" if self.classifier else ""
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def is_fetched(self) -> bool:
        stamp = self.directory / ".fingerprint"
        return stamp.is_file() and stamp.read_text().strip() == self.fingerprint()

    def jars(self) -> list[Path]:
        return sorted(self.directory.glob("*.jar"))

    def classpath(self) -> str:
        return ":".join(str(p) for p in self.jars())


def _pom(bundle: Bundle) -> str:
    deps = []
    for a in bundle.artifacts:
        exclusions = (
            "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId>"
            "</exclusion></exclusions>"
            if a.alone
            else ""
        )
        deps.append(
            f"<dependency><groupId>{a.group}</groupId><artifactId>{a.artifact}</artifactId>"
            f"<version>{a.version}</version>{exclusions}</dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">'
        "<modelVersion>4.0.0</modelVersion>"
        f"<groupId>eos-etl.bundles</groupId><artifactId>{bundle.name}</artifactId>"
        "<version>1</version><packaging>pom</packaging>"
        f"<dependencies>{''.join(deps)}</dependencies></project>"
    )


def fetch(bundle: Bundle, *, force: bool = False) -> Path:
    """Make sure the bundle's jars are in its cache folder; return the folder."""
    if bundle.is_fetched() and not force:
        return bundle.directory
    mvn = require_tool("mvn", install_hint="apt-get install maven")
    require_tool("java", install_hint="apt-get install openjdk-17-jre-headless")
    target = bundle.directory
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log.info("fetching %s from Maven Central into %s", bundle.name, target)
    with tempfile.TemporaryDirectory(prefix="eos-etl-mvn-") as work:
        (Path(work) / "pom.xml").write_text(_pom(bundle))
        cmd = [
            mvn,
            "-B",
            "-q",
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ]
        if bundle.classifier:
            cmd.append(f"-Dclassifier={bundle.classifier}")
        # A separate local repository (e.g. a cold cache, or a CI cache directory).
        if os.environ.get("EOS_ETL_MAVEN_REPO"):
            cmd.append(f"-Dmaven.repo.local={os.environ['EOS_ETL_MAVEN_REPO']}")
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "[ERROR]" in ln]
        detail = "\n".join(lines[:6]) or (proc.stdout + proc.stderr)[-2000:]
        raise MavenFetchError(
            f"Maven could not fetch {bundle.name} "
            f"({', '.join(a.coordinate for a in bundle.artifacts)}):\n{detail}"
        )
    (staging / ".fingerprint").write_text(bundle.fingerprint() + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    log.info("fetched %d jars for %s", len(bundle.jars()), bundle.name)
    return target


__all__ = ["Artifact", "Bundle", "fetch", "MavenFetchError", "MissingToolError"]
