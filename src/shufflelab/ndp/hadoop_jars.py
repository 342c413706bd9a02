"""Apache Hadoop's jars for the storage cluster, fetched from Maven Central.

``hadoop/pom.xml`` declares ``hadoop-common``, ``hadoop-hdfs`` and ``hadoop-hdfs-client`` at one
version and :func:`ensure_jars` has Maven copy them and their runtime dependencies into
``~/.cache/shufflelab/hadoop-<hash of the pom>/lib`` (offline first, then online; ``make setup``
does it once). The HTTP servers' ``webapps/`` skeletons ship only in hadoop-hdfs's ``tests`` jar,
so they are unpacked from it into ``<cache>/web`` and that jar is dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import zipfile
from pathlib import Path, PurePath
from typing import TypeVar

from shufflelab import artifacts

P = TypeVar("P", bound=PurePath)

HADOOP_DIR = Path(__file__).parent / "hadoop"
POM = HADOOP_DIR / "pom.xml"


class HadoopFetchError(RuntimeError):
    """Maven could not fetch the Hadoop jars; the message says which step failed and why."""


def jars_dir(pom: Path = POM) -> Path:
    """Where the jars of ``pom`` live (``<dir>/lib``; it may not exist yet)."""
    key = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    return artifacts.cache_root() / f"hadoop-{key}"


def cached() -> artifacts.Cached:
    """Hadoop's jars in the cache, which the storage hosts' daemons read there (``shufflelab deploy``
    brings them)."""
    return artifacts.Cached("hadoop jars", jars_dir(), jars_available(), f"not fetched here ({POM.name}: make setup)")


def hadoop_version(pom: Path = POM) -> str:
    import xml.etree.ElementTree as ET

    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    v = ET.parse(pom).getroot().find("m:properties/m:hadoop.version", ns)
    if v is None or not (v.text or "").strip():
        raise HadoopFetchError(f"{pom}: properties/hadoop.version is missing")
    return (v.text or "").strip()


def ensure_jars(pom: Path = POM, timeout_s: float = 1800) -> Path:
    """The directory holding Hadoop's jars, fetched by Maven on first use (offline first, then from
    Maven Central). Cached by the pom's hash; the directory appears whole or not at all."""
    target = jars_dir(pom)
    lib = target / "lib"
    if (target / "complete").exists() and lib.is_dir() and web_root(lib).is_dir():
        return lib
    if artifacts.mvn() is None:
        raise HadoopFetchError("mvn not found: install Maven (apt-get install maven; make setup does it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)

    def fetched() -> bool:
        return (tmp / "lib").is_dir() and any((tmp / "lib").glob("hadoop-hdfs-*.jar"))

    try:
        artifacts.maven(
            ["dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={tmp / 'lib'}"],
            pom=pom,
            timeout_s=timeout_s,
            succeeded=fetched,
            after_failure=lambda: shutil.rmtree(tmp, ignore_errors=True),
        )
        _extract_webapps(tmp / "lib", tmp / "web")
        (tmp / "complete").write_text(hadoop_version(pom) + "\n")
        shutil.rmtree(target, ignore_errors=True)  # an incomplete earlier attempt
        try:
            tmp.rename(target)  # the directory appears whole or not at all
        except OSError:
            if not (target / "complete").exists():  # not a concurrent fetch that finished first
                raise
        return lib
    except artifacts.MavenError as exc:
        raise HadoopFetchError(f"could not fetch the Hadoop jars of {pom}:\n{exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        # Maven may leave an empty target/ next to the pom; the source tree stays clean
        with contextlib.suppress(OSError):
            (pom.parent / "target").rmdir()


def _extract_webapps(lib: Path, web: Path) -> None:
    """Unpack ``webapps/`` (the HTTP servers' web-application skeletons) from hadoop-hdfs's
    ``tests`` jar into ``web`` and remove that jar from ``lib``."""
    tests = sorted(lib.glob("hadoop-hdfs-*-tests.jar"))
    if not tests:
        raise HadoopFetchError(f"{POM.name} must declare hadoop-hdfs with classifier 'tests' (it holds webapps/)")
    with zipfile.ZipFile(tests[0]) as z:
        members = [m for m in z.namelist() if m.startswith("webapps/") and ".." not in m]
        if not any(m.startswith("webapps/hdfs/") for m in members):
            raise HadoopFetchError(f"{tests[0].name} has no webapps/hdfs")
        z.extractall(web, members)
    for t in tests:
        t.unlink()


def web_root(lib: P) -> P:
    """The class-path directory holding ``webapps/`` next to the jars ``lib`` (here or at a place)."""
    return lib.parent / "web"


def jars_available(pom: Path = POM) -> bool:
    """Whether :func:`ensure_jars` would return without running Maven."""
    target = jars_dir(pom)
    return (target / "complete").exists() and (target / "lib").is_dir()
