"""``shufflelab analyze --engine spark``: the same ingest as a Spark application, for log directories
bigger than one machine should read. This process is the driver: it finds the logs (a local path or
``hdfs://``), checks the master, runs one Spark task per log (``mapPartitions`` over the list of logs,
each parsed by :func:`shufflelab.eventlog.dataset.parse_items` -- the local parser, in the executors'
Python), then writes the tables as Parquet (:func:`~shufflelab.eventlog.dataset.assemble`) and puts
the folder in place. Executors write into a hidden folder beside the destination, so the destination
must be on a file system the driver and every executor see (one machine, or a shared mount); their
Python (``spark.pyspark.python``, default this interpreter) must have shufflelab installed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import socket
import sys
from pathlib import Path

from rich.console import Console

from shufflelab.eventlog import dataset
from shufflelab.eventlog.files import LogSource, discover
from shufflelab.eventlog.ingest import IngestReport
from shufflelab.eventlog.remote import RemoteLogError
from shufflelab.names import whole

CONNECT_TIMEOUT_S = 5.0
BATCH = 10_000
MAX_TASKS = 100_000  # Spark tasks at most (beyond, several logs per task)
_LOCAL = whole(r"local(\[(\d+|\*)(,\d+)?\])?")
_STANDALONE = whole(r"spark://([^\s/:,]+:\d+)(,[^\s/:,]+:\d+)*")
_OTHER = whole(r"yarn|k8s://\S+|local-cluster\[\d+,\d+,\d+\]")
_CONF_KEY = whole(r"spark\.[A-Za-z0-9_.\-]+")


class EngineError(RuntimeError):
    """The Spark engine could not run; the message says why, naming the master, the URL or the folder."""


class UsageError(ValueError):
    """A flag's value cannot be used; the message names the flag."""


def check_master(master: str) -> None:
    """Raise :class:`UsageError` unless ``master`` is a Spark master URL."""
    if not (_LOCAL.match(master) or _STANDALONE.match(master) or _OTHER.match(master)):
        raise UsageError(
            f"--master: {master!r} is not a Spark master URL (local[N], spark://host:port, yarn or k8s://...)"
        )


def parse_conf(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` settings (``spark.*`` keys) as a dict; :class:`UsageError` naming a bad one."""
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not _CONF_KEY.match(key):
            raise UsageError(f"--spark-conf: {item!r} is not spark.KEY=VALUE")
        out[key] = value
    return out


def check_dest(dest: Path) -> None:
    """The Parquet folder can be written at ``dest``: nothing there, or a dataset (replaced)."""
    from shufflelab import tables

    if dest.exists() and not tables.is_dataset(dest):
        what = "a file" if not dest.is_dir() else "a folder that is not a table dataset"
        if dest.is_dir() and not any(dest.iterdir()):
            return
        raise UsageError(
            f"--db: {dest} is {what}; with --engine spark it names the folder of Parquet tables to write "
            "(new, or one written before: replaced)"
        )


def reachable(master: str) -> None:
    """Raise :class:`EngineError` unless some master of a ``spark://`` URL accepts a connection (a
    wrong address fails here at once, not after Spark's registration retries)."""
    m = _STANDALONE.match(master)
    if not m:
        return
    errors = []
    for hostport in master[len("spark://") :].split(","):
        host, _, port = hostport.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
            return
        except OSError as exc:
            errors.append(f"{hostport} ({exc.strerror or exc})")
    raise EngineError(f"{master}: cannot connect to the Spark master at {', '.join(errors)}")


def spark_conf(master: str, user: dict[str, str]) -> dict[str, str]:
    """The application's settings: the user's over ours."""
    ours = {
        "spark.master": master,
        "spark.app.name": "shufflelab analyze",
        # the executors' Python: shufflelab's parser is imported there
        "spark.pyspark.python": os.environ.get("PYSPARK_PYTHON") or sys.executable,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "ERROR",
        "spark.task.maxFailures": "2",  # an error in a log repeats on retry; one retry for a lost executor
    }
    return {**ours, **user}


def _error_line(exc: BaseException) -> str:
    """The line of a Spark failure that says what went wrong (the Python error of a task, if any)."""
    text = str(exc)
    py = [ln.strip() for ln in text.splitlines() if re.match(r"\s*[A-Za-z_.]*(Error|Exception): ", ln)]
    if py:
        return py[-1][:500]
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return first[:500]


def run_job(master: str, conf: dict[str, str], staging: Path, sources: list[LogSource]) -> dict[int, bool]:
    """Parse ``sources`` on the cluster (one task per log, up to ``MAX_TASKS``), logs in zips here;
    the index of each log -> whether its parser found it."""
    found: dict[int, bool] = {}
    items = [(i, s.display, s.key) for i, s in enumerate(sources) if dataset.by_location(s)]
    for i, s in enumerate(sources):
        if not dataset.by_location(s):  # inside a zip: read by the driver
            dataset.parse_source(str(staging), BATCH, i, s)
            found[i] = True
    if not items:
        return found
    from pyspark import SparkConf, SparkContext  # a plain context: the RDD API, never Spark Connect

    settings = spark_conf(master, conf)
    # PySpark takes the executors' Python from the driver's environment, not from the setting
    os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]
    try:
        sc = SparkContext(conf=SparkConf().setAll(list(settings.items())))
    except Exception as exc:  # noqa: BLE001 - the JVM or the master refused: said in one line
        raise EngineError(f"{master}: Spark did not start ({_error_line(exc)})") from None
    try:
        rdd = sc.parallelize(items, min(len(items), MAX_TASKS))
        done = rdd.mapPartitions(functools.partial(dataset.parse_items, str(staging), BATCH)).collect()
    except Exception as exc:  # noqa: BLE001 - a failed job: its reason in one line, no JVM stack
        raise EngineError(f"the Spark job failed: {_error_line(exc)}") from None
    finally:
        sc.stop()
    found.update(dict(done))
    return found


def ingest(paths: list[str], dest: Path, master: str, conf: dict[str, str], err: Console) -> IngestReport:
    """Find the logs under ``paths``, parse them on ``master`` and write the Parquet tables at
    ``dest``. Nothing is created when no log is found, the master cannot be reached, or the job
    fails (:class:`EngineError`); nothing is written when no log could be read."""
    try:
        listed, problems = discover([dataset.locate(p) for p in paths])
    except (RemoteLogError, ValueError) as exc:
        raise EngineError(str(exc)) from None
    first: dict[str, LogSource] = {}
    for src in listed:  # a log named twice (a folder and a file in it) is read once, where first found
        first.setdefault(src.key, src)
    found = list(first.values())
    if not found:
        return IngestReport([], problems)
    reachable(master)
    staging = dataset.staging_for(dest.absolute())  # the executors' working folder is not ours
    made = [p for p in staging.parents if not p.exists()]  # folders made for it: removed again on failure
    staging.mkdir(parents=True)
    published = False
    try:
        err.print(
            f"parsing {len(found)} event log(s), {sum(s.size for s in found) / 1e6:.1f} MB, on {master}",
            highlight=False,
            soft_wrap=True,
        )
        parsed = run_job(master, conf, staging, found)
        outcomes = dataset.assemble(staging, found, parsed)
        report = IngestReport(outcomes, problems)
        if report.anything_read:
            dataset.publish(staging, dest)
            published = True
        return report
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not published:
            for folder in made:  # innermost first
                with contextlib.suppress(OSError):
                    folder.rmdir()


def run(paths: list[str], dest: Path, master: str, conf_items: list[str], console: Console, err: Console) -> int:
    """``analyze --engine spark``: the exit status as the local ingest's (0 something read, 1
    nothing, 2 a usage error)."""
    from shufflelab.eventlog.command import _print

    try:
        if not paths:
            raise UsageError("name event logs or directories (local paths or hdfs:// URLs) for --engine spark")
        check_master(master)
        conf = parse_conf(conf_items)
        check_dest(dest)
    except UsageError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        return 2
    try:
        report = ingest(paths, dest, master, conf, err)
    except EngineError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        err.print("nothing was written", highlight=False)
        return 1
    _print(report, dest, console, err)
    return 0 if report.anything_read else 1
