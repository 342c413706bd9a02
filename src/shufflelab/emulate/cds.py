"""A JVM class-data-sharing (AppCDS) archive for Spark drivers and executors.

Starting a Spark application on this 2-core host is dominated by class loading: the driver and
four executor JVMs each load and verify thousands of Spark, Scala and Netty classes at once.
A dynamic CDS archive (JDK 13+: ``-XX:ArchiveClassesAtExit`` once, then
``-XX:SharedArchiveFile``) maps those classes pre-parsed from one file shared by every JVM.
It changes start-up only: the classes, the JIT and the steady state are the same.

The archive is recorded by a short local-mode training application that runs every shufflelab
workload on tiny data, with the same class path the cluster's JVMs get (shufflelab's listener jar
first, then pyspark's ``conf`` and ``jars/*``). A JVM whose class path or JDK differs from the
archive's simply ignores it (``-Xshare:auto``) and starts as before -- never wrong, only slower.
The JVM takes the archive only where every class-path entry it was recorded with still exists and is
the same file (same inode, size and modification time; the path may differ). The archive is keyed by
JDK, Spark version, listener jar and those very files of Spark's jars, and recorded from a copy of
Spark made of hard links in the cache (``spark-home-<key>``): its class path outlives the checkout
that recorded it, and every checkout whose jars are the same files uses it -- the installer links
them from one package cache, so a fresh clone of the project does not record its own (a minute) or,
as when the archive named the recording checkout's paths, start every JVM without it. The archive
and its Spark copy are cached in ``~/.cache/shufflelab``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from shufflelab import artifacts, jvm, listener, sparkconf


class CdsError(RuntimeError):
    pass


def _jar_files(jars: Path) -> str:
    """Which files Spark's jars are: name, device, inode, size and modification time of each (what
    the JVM checks of a class-path entry, the path aside)."""
    out = []
    for p in sorted(jars.glob("*.jar")):
        st = p.stat()
        out.append(f"{p.name}:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")
    return "\n".join(out)


def _key() -> str:
    jar = listener.jar_path()
    ident = f"{jvm.java_version()}|{jvm.spark_version()}|{jar.name}|{_jar_files(jvm.spark_jars())}"
    return hashlib.sha256(ident.encode()).hexdigest()[:12]


def archive_path() -> Path:
    return artifacts.cache_root() / f"spark-cds-{_key()}.jsa"


def _linked_spark_home(key: str) -> Path | None:
    """A copy of the installed Spark made of hard links, in the cache (None where the cache is on
    another file system than Spark: the archive is then recorded from Spark's own folder)."""
    home = artifacts.cache_root() / f"spark-home-{key}"
    if home.is_dir():
        return home
    tmp = home.with_name(f"{home.name}.tmp{os.getpid()}")
    try:
        shutil.copytree(jvm.spark_home(), tmp, symlinks=True, copy_function=os.link)
        os.replace(tmp, home)  # whole copy or none
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return home if home.is_dir() else None  # (another process may have made it meanwhile)
    return home


def java_options() -> str:
    """JVM options that use the archive if it exists (empty string otherwise)."""
    p = archive_path()
    return f"-XX:SharedArchiveFile={p} -Xshare:auto" if p.exists() else ""


def class_path_conf() -> dict[str, str]:
    """Put the listener jar first on driver and executor class paths, as in the archive."""
    jar = str(listener.ensure_jar())
    return {sparkconf.DRIVER_CLASS_PATH: jar, sparkconf.EXECUTOR_CLASS_PATH: jar}


_TRAIN = r"""
import json, sys
from pyspark.sql import SparkSession
from shufflelab.spec import WORKLOAD_PARAMS
from shufflelab.workloads import REGISTRY
conf = json.loads(sys.argv[1])
b = SparkSession.builder.master("local[2]").appName("shufflelab-cds-training")
for k, v in conf.items():
    b = b.config(k, v)
spark = b.getOrCreate()
tiny = {
    "sort-aggregate": {"rows": 20000, "partitions": 4},
    "groupby-test": {"mappers": 2, "kv_pairs": 500, "value_bytes": 100, "reducers": 2},
    "small-records": {"records": 20000, "partitions": 4, "keys": 100, "rounds": 2},
}
for name, params in tiny.items():
    REGISTRY[name](spark, WORKLOAD_PARAMS[name].model_validate(params))
spark.stop()
"""


def ensure_archive(timeout_s: float = 600.0) -> Path:
    """Record the archive if it is missing (about a minute); return its path."""
    jar = listener.ensure_jar()
    key = _key()
    path = artifacts.cache_root() / f"spark-cds-{key}.jsa"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    home = _linked_spark_home(key)
    if home is not None:  # the training JVM's class path: the linked copy's jars, which outlive any checkout
        env["SPARK_HOME"] = str(home)
    # the temporary folder sits next to the archive so the final rename is atomic
    with tempfile.TemporaryDirectory(prefix="cds-", dir=path.parent) as tmp:
        partial = Path(tmp) / path.name
        conf = {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.local.dir": tmp,
            "spark.driver.extraClassPath": str(jar),
            "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=off -Xlog:cds+dynamic=off",
            "spark.extraListeners": listener.CLASS_NAME,
            listener.PATH_CONF: str(Path(tmp) / "listener.jsonl"),
        }
        r = subprocess.run(
            [sys.executable, "-c", _TRAIN, json.dumps(conf)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=tmp,
            env=env,
        )
        if r.returncode != 0 or not partial.exists():
            raise CdsError(f"recording the class-data archive failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
        os.replace(partial, path)  # whole archive or none: a crash never leaves a torn one
    return path


def main() -> None:  # ``python -m shufflelab.emulate.cds`` records the archive (make setup calls it)
    try:
        print(ensure_archive())
    except (CdsError, listener.ListenerBuildError, subprocess.TimeoutExpired) as exc:
        raise SystemExit(f"shufflelab cds: {exc}") from None


if __name__ == "__main__":
    main()
