"""The user's own application as a lab workload: a PySpark script or a jar's main class.

It runs inside the lab's driver process (``shufflelab.workloads.driver``), after the lab has
created the SparkSession with the conf the lab relies on (master, event log, listener, plugin,
local dirs). The application's own ``SparkSession.builder...getOrCreate()`` therefore returns
that session: its runtime settings apply, while the lab's static settings stay in force. A jar
is put on the session's class path by the runner (``spark.jars``) and its ``main`` is called
through the JVM gateway.

The application must use one SparkContext: one that stops it and starts another would leave the
lab's conf behind, so that is reported as a failure naming the cause.
"""

from __future__ import annotations

import contextlib
import functools
import runpy
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol


class AppFailed(RuntimeError):
    """The user application failed; the message names the script or class and the cause."""


class AppLike(Protocol):
    script: str | None
    jar: str | None
    main_class: str | None
    args: list[str]
    py_files: list[str]


@contextlib.contextmanager
def _argv_and_path(argv: Sequence[str], paths: Sequence[str]) -> Iterator[None]:
    old_argv, old_path = sys.argv[:], sys.path[:]
    sys.argv = list(argv)
    sys.path[:0] = list(paths)
    try:
        yield
    finally:
        sys.argv, sys.path[:] = old_argv, old_path


def _run_script(script: str, args: Sequence[str], py_files: Sequence[str]) -> None:
    where = [str(Path(script).resolve().parent), *py_files]
    with _argv_and_path([script, *args], where):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:  # sys.exit(0) / exit() is a normal end of a script
            if exc.code not in (0, None):
                raise AppFailed(f"{Path(script).name} exited with status {exc.code}") from None


def _run_jar(spark: Any, main_class: str, args: Sequence[str]) -> None:
    sc = spark.sparkContext
    jvm, gateway = sc._jvm, sc._gateway
    array = gateway.new_array(jvm.java.lang.String, len(args))
    for i, a in enumerate(args):
        array[i] = a
    try:
        cls = functools.reduce(getattr, main_class.split("."), jvm)
        cls.main(array)
    except Exception as exc:  # noqa: BLE001 - a Py4J error carries the Java exception's text
        text = str(exc).strip().splitlines()
        raise AppFailed(f"{main_class}.main failed: {text[0] if text else type(exc).__name__}") from exc


def run(spark: Any, params: AppLike, **_context: Any) -> dict[str, Any]:
    """Run the application on ``spark``; return its wall time and what it was."""
    sc = spark.sparkContext
    app_id = sc.applicationId
    for f in params.py_files:
        sc.addPyFile(f)  # the executors import it too
    t0 = time.time()
    if params.script:
        kind, name = "pyspark", Path(params.script).name
        _run_script(params.script, params.args, params.py_files)
    elif params.jar and params.main_class:
        kind, name = "jar", params.main_class
        _run_jar(spark, params.main_class, params.args)
    else:
        raise AppFailed("the application names neither a script nor a jar with its main class")
    total = time.time() - t0
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if active is not None and active.applicationId != app_id:
        raise AppFailed(
            f"{name} stopped the lab's SparkContext ({app_id}) and started another ({active.applicationId}); "
            "a lab run measures one application: use SparkSession.builder.getOrCreate() once"
        )
    return {"kind": kind, "app": name, "args": list(params.args), "phases": {"total_s": round(total, 3)}}
