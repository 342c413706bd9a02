"""The Spark conf entries the lab owns: set on every application and relied on afterwards.

:meth:`shufflelab.emulate.spark.SparkCluster.app_conf` builds each application's conf from the
lab's entries and the spec's ``spark.conf`` with :func:`application_conf`, and spec validation
refuses a ``spark.conf`` key that is in :data:`RESERVED` (:func:`reserved_reason`): a spec that
changed one would run a job the lab cannot record (no event log, no listener lines) or one that
is not what the run says it was (another master, other cores). Every other key stays the spec's
to set, and wins over the lab's defaults: shuffle tuning (``spark.shuffle.*``,
``spark.reducer.*``), memory, adaptive query execution, the heartbeat interval, ...

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from shufflelab.names import whole

KEY = whole(r"spark\.\S+")
"""A Spark conf key a spec may give: ``spark.`` and no whitespace (a key with a newline or a space is
one Spark never reads, so the setting would silently not apply)."""

MASTER = "spark.master"
DRIVER_HOST = "spark.driver.host"
DRIVER_BIND_ADDRESS = "spark.driver.bindAddress"
LOCAL_DIR = "spark.local.dir"
CORES_MAX = "spark.cores.max"
EXECUTOR_CORES = "spark.executor.cores"
EVENT_LOG_ENABLED = "spark.eventLog.enabled"
EVENT_LOG_DIR = "spark.eventLog.dir"
EVENT_LOG_COMPRESS = "spark.eventLog.compress"
EVENT_LOG_ROLLING = "spark.eventLog.rolling.enabled"
EXTRA_LISTENERS = "spark.extraListeners"
PLUGINS = "spark.plugins"
DRIVER_CLASS_PATH = "spark.driver.extraClassPath"
EXECUTOR_CLASS_PATH = "spark.executor.extraClassPath"
LISTENER_PATH = "spark.shufflelab.listener.path"
DIST_CLASS_PATH = "SPARK_DIST_CLASSPATH"
"""Spark's launcher puts this environment variable's entries after Spark's own jars (the driver's from
its environment, an executor's from ``spark.executorEnv.``)."""
EXECUTOR_DIST_CLASS_PATH = f"spark.executorEnv.{DIST_CLASS_PATH}"


def dist_class_path(current: str | None, jars: Sequence[str]) -> str:
    """:data:`DIST_CLASS_PATH`'s value with ``jars`` after what it holds (``current``, may be None)."""
    return ":".join(c for c in [current, *jars] if c)


_CLASS_PATH = "shufflelab's listener and executor-plugin jar are on this class path"

RESERVED: dict[str, str] = {
    MASTER: "the application runs on the lab's standalone cluster, whose URL the lab sets",
    DRIVER_HOST: "the driver runs in the master host's namespace and executors reach it at that host's address",
    DRIVER_BIND_ADDRESS: "the driver binds to the master host's address inside the emulated network",
    LOCAL_DIR: "scratch files stay in the run's scratch folder, which the lab (and `shufflelab clean`) removes",
    CORES_MAX: "set from spark.worker_cores, the workers and workload.apps; runs record these cores and the "
    "diagnosis divides CPU time by them",
    EXECUTOR_CORES: "set from spark.worker_cores (an executor asking for more cores than a worker has never starts)",
    EVENT_LOG_ENABLED: "every run's jobs, stages and tasks are read from its event log",
    EVENT_LOG_DIR: "the event log is written into the run's folder, where the lab reads it",
    EVENT_LOG_COMPRESS: "the lab reads an uncompressed event log",
    EVENT_LOG_ROLLING: "the lab reads one event log file per application, not rolled files",
    EXTRA_LISTENERS: "shufflelab's task listener is attached here (spark.listener)",
    PLUGINS: "shufflelab's executor plugin (task user CPU) is attached here",
    DRIVER_CLASS_PATH: _CLASS_PATH,
    EXECUTOR_CLASS_PATH: _CLASS_PATH,
    LISTENER_PATH: "where the task listener writes; the lab reads it from the run's folder",
}
"""Keys the lab sets and relies on, with the reason (shown when a spec sets one)."""

APPENDED = frozenset({"spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"})
"""Keys where a spec's value is appended to the lab's (JVM options: spark.fast_jvm, the class-data
archive); the JVM takes the last of repeated options, so the spec's win where they overlap."""


def reserved_reason(key: str) -> str | None:
    """Why a spec may not set ``key`` (``None``: it may)."""
    return RESERVED.get(key)


class ReservedConfError(ValueError):
    pass


def application_conf(lab: dict[str, str], spec_conf: dict[str, str]) -> dict[str, str]:
    """An application's conf: the lab's entries, then the spec's (which win, except on reserved keys,
    which a spec cannot set; JVM options are appended). Raises :class:`ReservedConfError` for a
    reserved key (spec validation refuses those before any run)."""
    refused = [k for k in spec_conf if k in RESERVED]
    if refused:
        raise ReservedConfError("; ".join(f"spark.conf.{k!r} is reserved: {RESERVED[k]}" for k in refused))
    conf = dict(lab)
    for key, value in spec_conf.items():
        if key in APPENDED and conf.get(key):
            conf[key] = f"{conf[key]} {value}"
        else:
            conf[key] = value
    return conf
