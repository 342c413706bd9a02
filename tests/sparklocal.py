"""The tests' own Spark sessions in local mode (one JVM, driver and executor in it): how they are
built and how they end, the JVM with them.

Their JVM starts as the lab's test runs start theirs (``spark.fast_jvm``: C1 only, the serial
collector) and from the class-data archive where ``make setup`` made one (its class path first, as
the archive recorded it; what a test adds goes after): test_workloads_local.py took 12.6 CPU-s
instead of 23.0, test_userapp_local.py 18.5 instead of 24.4. test_ndp_connector.py's connector jar
goes after Spark's jars (:func:`class_path_after`), so its JVM starts from the archive too (13.3-15.2
CPU-s instead of 16.7-20.2).
Measurements never use these options; the tests' checks do not depend on them."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from shufflelab import artifacts, sparkconf
from shufflelab.emulate import cds
from shufflelab.emulate.spark import FAST_JVM_OPTS


def java_options() -> str:
    return " ".join(o for o in (FAST_JVM_OPTS, cds.java_options()) if o)


@contextlib.contextmanager
def class_path_after(jars: list[str]) -> Any:
    """While a session starts in it, ``jars`` go on its JVM's class path after Spark's own jars (as
    the lab's TPC-H runs put the NDP connector's; ``extraClassPath`` would put them before, and the
    archive's class path would no longer be the start of the JVM's)."""
    key, before = sparkconf.DIST_CLASS_PATH, os.environ.get(sparkconf.DIST_CLASS_PATH)
    os.environ[key] = sparkconf.dist_class_path(before, jars)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def builder(app: str, java: str | None = None, conf: Mapping[str, str] | None = None, more_java: str = "") -> Any:
    """A ``local[2]`` session's builder named ``app``, without the web UI, and Spark's settings
    ``conf``; its JVM started with :func:`java_options` (and ``more_java``) and the archive's class
    path, or with the options ``java`` alone."""
    from pyspark.sql import SparkSession

    settings = dict(conf or {})
    if java is None and cds.java_options():  # the archive's class path first: a JVM it prefixes uses it
        archived = cds.class_path_conf()[sparkconf.DRIVER_CLASS_PATH]
        given = settings.get(sparkconf.DRIVER_CLASS_PATH)
        settings[sparkconf.DRIVER_CLASS_PATH] = f"{archived}:{given}" if given else archived
    b = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", f"{java_options()} {more_java}".strip() if java is None else java)
    )
    return b.config(map=settings) if settings else b


def stop(spark: Any) -> None:
    """Stop ``spark`` and end its JVM now, not at the interpreter's exit."""
    spark.stop()
    from pyspark import SparkContext

    if SparkContext._gateway is not None:
        SparkContext._gateway.shutdown()
        SparkContext._gateway = None
        SparkContext._jvm = None


def built_once(name: str, inputs: bytes, build: Callable[[Path], None]) -> Path:
    """A folder that ``build`` filled from ``inputs`` (a Java source and the Spark version it compiles
    against, say), kept in shufflelab's cache under ``name`` and the inputs' hash: compiled once per
    machine, not on every run (javac with Spark's class path takes about 4 CPU-s)."""
    folder = artifacts.cache_root() / f"{name}-{hashlib.sha256(inputs).hexdigest()[:12]}"
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{name}-") as tmp:
            build(Path(tmp))
            with contextlib.suppress(OSError):  # another run put it there first: the same build
                os.rename(tmp, folder)
    return folder
