"""shufflelab's Spark DataSource V2 connector for the NDP proxy: build it, attach it.

The connector (``connector/``, Java, format ``shufflelab-ndp``) reads the Parquet files of an HDFS
directory through the NDP proxies (:mod:`shufflelab.ndp.proxy`), pushing down as much of Spark's
filters, column pruning and partial aggregates as the ``pushdown`` option allows; see
``connector/src/main/java/org/shufflelab/ndp/NdpOptions.java`` for the options.

It is compiled by Maven against the installed pyspark's own jars (``system``-scoped dependencies
in ``pyspark/jars``): pyspark 4.3.0 is not on Maven Central, and the jars that run the connector
are the only ones it can be sure to match. :func:`ensure_jar` resolves each ``jar.<name>``
property the pom uses to the one ``<name>_<scala>-<version>.jar`` or ``<name>-<version>.jar``
there, runs ``mvn package`` (offline first, then online for Maven's own plugins) in a temporary
build directory and caches the jar under ``~/.cache/shufflelab`` keyed by the sources, the pom and
the Spark version; ``make setup`` builds it once.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from pathlib import Path

from shufflelab import artifacts, jvm

CONNECTOR_DIR = Path(__file__).parent / "connector"
POM = CONNECTOR_DIR / "pom.xml"
FORMAT = "shufflelab-ndp"
BUILT_NAME = "shufflelab-ndp-connector.jar"  # the pom's finalName


class ConnectorBuildError(RuntimeError):
    pass


def _sources() -> list[Path]:
    return sorted(p for p in (CONNECTOR_DIR / "src").rglob("*") if p.is_file())


def jar_path() -> Path:
    """Where the jar for these sources and this Spark lives (it may not exist yet)."""
    h = hashlib.sha256()
    for p in [POM, *_sources()]:
        h.update(str(p.relative_to(CONNECTOR_DIR)).encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(jvm.spark_version().encode())
    return artifacts.cache_root() / f"ndp-connector-{h.hexdigest()[:12]}.jar"


def cached() -> artifacts.Cached:
    """The connector's jar in the cache, on Spark's class path on every Spark host (``shufflelab
    deploy`` brings it)."""
    jar = jar_path()
    return artifacts.Cached("ndp connector jar", jar, jar.exists(), f"{jar} is not built here (make setup builds it)")


def jar_properties(jars: Path, pom: Path = POM) -> dict[str, str]:
    """``jar.<name>`` -> file name in ``jars`` for every such property the pom refers to. Exactly one
    file must match (``<name>_<scala version>-<version>.jar`` or ``<name>-<digit>...jar``)."""
    names = sorted(set(re.findall(r"\$\{jar\.([A-Za-z0-9_.-]+)\}", pom.read_text())))
    if not jars.is_dir():
        raise ConnectorBuildError(f"pyspark's jars directory {jars} does not exist")
    out: dict[str, str] = {}
    for name in names:
        pattern = re.compile(rf"{re.escape(name)}(_\d+\.\d+)?-\d[^/]*\.jar")
        found = sorted(p.name for p in jars.iterdir() if pattern.fullmatch(p.name) and "tests" not in p.name)
        if len(found) != 1:
            what = "no jar" if not found else f"{len(found)} jars ({', '.join(found)})"
            raise ConnectorBuildError(
                f"{pom.name} needs {name}: {jars} has {what} named {name}[_<scala>]-<version>.jar"
            )
        out[f"jar.{name}"] = found[0]
    return out


def ensure_jar(timeout_s: float = 900) -> Path:
    """Build the connector jar if it is missing; return its path. Raises ConnectorBuildError naming
    what failed (Maven's last lines included)."""
    jar = jar_path()
    if jar.exists():
        return jar
    if artifacts.mvn() is None:
        raise ConnectorBuildError("mvn not found: install Maven (apt-get install maven; make setup does it)")
    if shutil.which("javac") is None:
        raise ConnectorBuildError("javac not found: install a JDK 17 (openjdk-17-jdk-headless)")
    jars = jvm.spark_jars()
    props = jar_properties(jars)
    with tempfile.TemporaryDirectory(prefix="shufflelab-ndp-connector-") as tmp:
        build = Path(tmp) / "target"
        built = build / BUILT_NAME
        try:
            artifacts.maven(
                [
                    "package",
                    f"-Dndp.build.dir={build}",
                    f"-Dpyspark.jars={jars}",
                    *(f"-D{k}={v}" for k, v in props.items()),
                ],
                pom=POM,
                timeout_s=timeout_s,
                succeeded=built.is_file,
                after_failure=lambda: shutil.rmtree(build, ignore_errors=True),
                online_for="Maven Central, for Maven's plugins",
                tail_lines=25,
                # the sources are wrong: going online fetches nothing that fixes that
                hopeless="COMPILATION ERROR",
            )
        except artifacts.MavenError as exc:
            raise ConnectorBuildError(f"could not build the NDP connector from {POM}:\n{exc}") from None
        artifacts.publish_file(built, jar)  # the cache only ever holds whole jars
    return jar


def main() -> None:  # ``python -m shufflelab.ndp.connector`` builds the jar (make setup calls it)
    try:
        print(ensure_jar())
    except ConnectorBuildError as exc:
        raise SystemExit(f"shufflelab ndp connector: {exc}") from None


if __name__ == "__main__":
    main()
