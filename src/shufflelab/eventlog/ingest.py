"""Event logs -> the results store, incrementally and one application at a time, atomically.

Each application attempt becomes one ``runs`` row (``backend = 'eventlog'``, ``run_id`` = its
application id, plus ``_<attempt>`` for an attempt) with its ``apps``, ``jobs``, ``stages``,
``tasks``, ``executors`` and ``sql_executions`` rows, and one ``eventlog_sources`` row recording
where it came from (path, size, modification time, last rolling index). All of an application is
written in one transaction: an error or an interruption leaves the store as it was. Tasks are
inserted in batches while the log is read, so memory does not grow with the log.

Re-running over the same logs skips every source whose size, time and files are unchanged, and
re-reads one that grew (an in-progress log, a new rolling file) or changed, replacing its rows.
Applications with the same name are grouped as one scenario (``app:<name>``): repeated runs of
one job are repetitions of it, so baselines can be compared like lab runs.

Everything reaches DuckDB as SQL text or as a CSV file it reads itself (task batches,
:mod:`~shufflelab.eventlog.batch`), never as bound parameters or registered Python objects: DuckDB
imports pandas for those, which would be a third of the whole command's CPU time on a big log.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shufflelab.eventlog import worker
from shufflelab.eventlog.batch import TaskBatch, read_sql
from shufflelab.eventlog.files import LogSource, discover
from shufflelab.eventlog.model import EventLog, records
from shufflelab.eventlog.read import ReadResult, read_source
from shufflelab.eventlog.summary import app_row, app_status, peak_cores
from shufflelab.results import RUN_TABLES, Store

if TYPE_CHECKING:
    from concurrent.futures import Future

EXPERIMENT = "eventlogs"
MEMORY_LIMIT = "64MB"
STAGING = "ingesting:"  # the run id of task rows staged while their log is read
BACKEND = "eventlog"
POOL_MIN_BYTES = 64_000_000  # by default, logs are parsed in worker processes from this many bytes on
POOL_MIN_CORES = 3  # ... and this many cores: on two, one process already keeps both busy (docs/benchmarks.md)


@dataclass
class Outcome:
    """What happened to one source."""

    source: str
    action: str  # "ingested" | "skipped" (unchanged) | "unreadable"
    run_id: str | None = None
    status: str | None = None  # the application's: ok | failed | incomplete | partial
    cause: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    bytes_read: int = 0
    seconds: float = 0.0
    unknown: dict[str, dict[str, int]] = field(default_factory=dict)  # events/fields this version ignores


@dataclass
class IngestReport:
    outcomes: list[Outcome]
    problems: list[str]  # paths that held no log

    @property
    def anything_read(self) -> bool:
        return any(o.action in ("ingested", "skipped") for o in self.outcomes)


def run_id_of(log: EventLog, hint: str) -> str:
    if log.app_id:
        return f"{log.app_id}_{log.app_attempt_id}" if log.app_attempt_id else str(log.app_id)
    return hint


def _unchanged(src: LogSource, stored: tuple[Any, ...] | None) -> bool:
    """The source is as it was when it was ingested (same size, time, files and state)."""
    if stored is None:
        return False
    size, mtime, last_index, n_files, in_progress = stored
    return (
        size == src.size
        and abs((mtime or 0.0) - src.mtime) < 1e-3
        and last_index == src.last_index
        and n_files == len(src.parts)
        and bool(in_progress) == src.in_progress
    )


def _stored(store: Store) -> dict[str, tuple[Any, ...]]:
    if not store.path.exists():
        return {}
    with store.connect() as con:
        rows = con.execute(
            "SELECT source, size_bytes, mtime, last_index, n_files, in_progress FROM eventlog_sources"
        ).fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


def ingest(
    paths: list[Path],
    db: Path,
    *,
    sources: list[LogSource] | None = None,
    force: bool = False,
    on_source: Callable[[LogSource], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
    batch: int = 10_000,
    workers: int | None = None,
) -> IngestReport:
    """Ingest every log under ``paths`` (and any ``sources`` given directly) into ``db``.

    With several logs to read, ``workers`` processes parse them in parallel (:func:`_parallel`);
    this process writes each one to the store in the order found. By default one per core, when
    the logs to read hold at least ``POOL_MIN_BYTES`` and there are ``POOL_MIN_CORES`` cores;
    else one process reads them all."""
    found, problems = discover(paths) if paths else ([], [])
    found += sources or []
    store = Store(db)
    known = {} if force else _stored(store)
    outcomes = []
    seen: set[str] = set()
    todo = []
    for src in found:
        if src.key in seen:  # named twice (a directory and a file in it)
            continue
        seen.add(src.key)
        if _unchanged(src, known.get(src.key)):
            outcomes.append(Outcome(src.display, "skipped"))
            if on_bytes:
                on_bytes(src.size)
            continue
        todo.append(src)
    if todo:
        with store.connect() as con:  # one connection, one transaction per application
            con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")  # DuckDB's cache, not Python's
            con.execute("SET enable_progress_bar = false")
            con.execute(f"DELETE FROM tasks WHERE starts_with(run_id, {sql(STAGING)})")  # an interrupted ingest's
            cores = os.cpu_count() or 1
            n_workers = min(workers or cores, sum(_by_path(s) for s in todo))
            if workers is None and (sum(s.size for s in todo) < POOL_MIN_BYTES or cores < POOL_MIN_CORES):
                n_workers = 1  # the pool would cost more than it saves (its start-up; on 2 cores, the
                # one process's parser and DuckDB's inserting thread already use both)
            if n_workers > 1:
                outcomes += _parallel(con, todo, n_workers, on_source, on_bytes, batch)
            else:
                for src in todo:
                    if on_source:
                        on_source(src)
                    outcomes.append(ingest_source(con, src, on_bytes=on_bytes, batch=batch))
    return IngestReport(outcomes, problems)


def _by_path(src: LogSource) -> bool:
    """Whether a worker process can find ``src`` again from its path (a file or a rolling
    directory on disk; not a log inside a zip)."""
    return "!" not in src.key and Path(src.display).exists()


def _parallel(
    con: Any,
    todo: list[LogSource],
    workers: int,
    on_source: Callable[[LogSource], None] | None,
    on_bytes: Callable[[int], None] | None,
    batch: int,
) -> list[Outcome]:
    """Parse the logs in ``workers`` processes, each writing its task rows to a CSV file,
    while this process writes the finished ones to the store in order. At most two logs per worker
    are parsed or waiting to be written at any time, so memory (and temporary disk) is bounded by
    the logs in flight, not by how many there are; each worker streams its log in batches."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    outcomes: list[Outcome] = []
    ctx = multiprocessing.get_context("forkserver")  # not fork: this process holds DuckDB's threads
    ctx.set_forkserver_preload(worker.PRELOAD)  # imported once, by the server the workers fork from
    with tempfile.TemporaryDirectory(prefix="shufflelab-ingest-") as tmp, ProcessPoolExecutor(workers, ctx) as pool:
        window: deque[tuple[LogSource, Future[tuple[ReadResult, list[str]] | None] | None]] = deque()
        pending = iter(enumerate(todo))

        def submit() -> bool:
            for i, src in pending:
                path = os.path.join(tmp, f"{i}.csv")
                window.append((src, pool.submit(worker.read_to_csv, src.display, src.key, path, batch)
                               if _by_path(src) else None))  # fmt: skip
                return True
            return False

        while len(window) < 2 * workers and submit():
            pass
        while window:
            src, fut = window.popleft()
            if on_source:
                on_source(src)
            done = fut.result() if fut is not None else None
            if done is None:  # read here (in a zip, or not found again by the worker)
                outcomes.append(ingest_source(con, src, on_bytes=on_bytes, batch=batch))
            else:
                res, task_files = done
                try:
                    outcomes.append(_write_source(con, src, res, staged_csv=task_files))
                finally:
                    for f in task_files:
                        Path(f).unlink(missing_ok=True)
                if on_bytes:
                    on_bytes(src.size)
            submit()
    return outcomes


def ingest_source(
    con: Any, src: LogSource, *, on_bytes: Callable[[int], None] | None = None, batch: int = 10_000
) -> Outcome:
    """Read one application's log and write it atomically on ``con`` (a connection from
    :meth:`Store.connect`); nothing when nothing could be read.

    Task rows go into ``tasks`` while the log is read, each batch committed under a staging run id
    (``ingesting:...``) that no ``runs`` row has; one final transaction deletes the application's
    previous rows, renames the staged ones to its run id and writes everything else. So the
    application appears whole or not at all, and DuckDB can write each batch out instead of holding
    a transaction of the whole log in memory. Staged rows of an interrupted ingest are removed by
    the next one."""
    t0 = time.monotonic()
    staging = f"{STAGING}{uuid.uuid4().hex}"
    staged: list[bool] = []

    writer = _BatchWriter(con, staging)

    def on_batch(tasks: TaskBatch, log: EventLog) -> None:
        writer.put(tasks)
        staged[:] = [True]

    try:
        try:
            res = read_source(src, batch=batch, on_bytes=on_bytes, on_batch=on_batch)
        finally:
            writer.close()  # every batch inserted (or the writer's error raised) before going on
    except BaseException:
        if staged:
            con.execute(f"DELETE FROM tasks WHERE run_id = {sql(staging)}")
        raise
    return _write_source(con, src, res, staging=staging if staged else None, t0=t0)


def _write_source(
    con: Any,
    src: LogSource,
    res: ReadResult,
    *,
    staging: str | None = None,
    staged_csv: list[str] | None = None,
    t0: float | None = None,
) -> Outcome:
    """Write what was read of ``src`` in one transaction: its task rows already staged under the
    run id ``staging``, or in the CSV files ``staged_csv`` (staged here first, the same way, a
    batch at a time: one insert of a big log's rows would need more than DuckDB's memory limit)."""
    t0 = time.monotonic() if t0 is None else t0
    staged = staging is not None or bool(staged_csv)
    if staging is None:
        staging = f"{STAGING}{uuid.uuid4().hex}"
    try:
        for path in staged_csv or []:
            _insert_tasks(con, path, staging)
        log = res.log
        if res.nothing_read:
            return Outcome(src.display, "unreadable", problems=log.problems, seconds=time.monotonic() - t0)
        run_id = run_id_of(log, src.app_hint)
        status, cause = app_status(log, res.partial)
        con.execute("BEGIN TRANSACTION")
        try:
            rid = sql(run_id)
            old_rep = con.execute(f"SELECT rep FROM runs WHERE run_id = {rid}").fetchone()
            con.execute(f"DELETE FROM runs WHERE run_id = {rid}")
            for t in RUN_TABLES:
                con.execute(f"DELETE FROM {t} WHERE run_id = {rid}")
            con.execute(f"DELETE FROM eventlog_sources WHERE source = {sql(src.key)}")
            if staged:
                con.execute(f"UPDATE tasks SET run_id = {rid} WHERE run_id = {sql(staging)}")
            _write_rest(con, src, res.codecs, log, run_id, status, cause, old_rep, res.partial)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    finally:
        if staged:  # whatever is still staged (nothing after a commit)
            con.execute(f"DELETE FROM tasks WHERE run_id = {sql(staging)}")
    counts = {
        "tasks": log.totals.n_tasks,
        "stages": len(log.stages),
        "jobs": len(log.jobs),
        "executors": len(log.executor_rows),
        "sql_executions": len(log.sql_executions),
    }
    unknown = {"events": dict(log.unknown_events), "fields": dict(log.unknown_fields)}
    return Outcome(src.display, "ingested", run_id, status, cause, counts, log.problems, log.bytes_read,
                   time.monotonic() - t0, unknown)  # fmt: skip


def _insert_tasks(con: Any, path: str, run_id: str) -> None:
    """The task rows of a file written by :meth:`TaskBatch.write`, under ``run_id``."""
    con.execute(f"INSERT INTO tasks BY NAME SELECT *, {sql(run_id)} AS run_id, 0 AS app_index FROM {read_sql(path)}")


class _BatchWriter:
    """Inserts task batches in a thread while the parser goes on (DuckDB releases the GIL while it
    inserts; the Rust core, while it writes a batch's CSV file): reading and writing overlap on two
    cores. At most two batches wait, each in a temporary file removed once inserted."""

    def __init__(self, con: Any, run_id: str) -> None:
        self.con, self.run_id = con, run_id
        self.queue: queue.Queue[str | None] = queue.Queue(maxsize=2)
        self.error: BaseException | None = None
        self.dir = tempfile.mkdtemp(prefix="shufflelab-ingest-")
        self.n = 0
        self.thread = threading.Thread(target=self._run, name="eventlog-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (path := self.queue.get()) is not None:
            try:
                if self.error is None:  # (after a failure: drained)
                    _insert_tasks(self.con, path, self.run_id)
            except BaseException as exc:  # raised in the reading thread by put/close
                self.error = exc
            finally:
                os.unlink(path)

    def put(self, tasks: TaskBatch) -> None:
        if self.error is not None:
            raise self.error
        self.n += 1
        self.queue.put(tasks.write(os.path.join(self.dir, str(self.n))))  # (a failed write: removed with the folder)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()
        shutil.rmtree(self.dir, ignore_errors=True)  # (empty, unless interrupted between a write and its insert)
        if self.error is not None:
            raise self.error


def sql(v: Any) -> str:
    """A Python value as a DuckDB literal (str, int, float, bool or None): exact, with no bound
    parameter (see the module)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"'{v!r}'::DOUBLE"
    if isinstance(v, str):
        text = "'" + v.replace("'", "''") + "'"
        return text.replace("\x00", "' || chr(0) || '") if "\x00" in v else text  # (SQL text ends at a NUL)
    raise TypeError(f"no SQL literal for {type(v).__name__}")


def _insert(con: Any, table: str, rows: list[dict[str, Any]], run_id: str) -> None:
    if not rows:
        return
    names, extra = list(rows[0]), []
    if table != "runs" and "app_index" not in rows[0]:
        names.append("app_index")
        extra.append("0")
    names.append("run_id")
    extra.append(sql(run_id))
    columns = ", ".join(f'"{n}"' for n in names)
    for i in range(0, len(rows), 1000):
        values = ",\n".join("(" + ", ".join([*(sql(v) for v in r.values()), *extra]) + ")" for r in rows[i : i + 1000])
        con.execute(f"INSERT INTO {table} ({columns}) VALUES {values}")


def _write_rest(
    con: Any,
    src: LogSource,
    codecs: list[str],
    log: EventLog,
    run_id: str,
    status: str,
    cause: str | None,
    old_rep: tuple[Any, ...] | None,
    partial: bool,
) -> None:
    name = log.app_name or src.app_hint
    scenario = f"app:{name}"
    values: list[Any] = [
        EXPERIMENT,
        "Spark event logs read by shufflelab analyze",
        json.dumps({"source": BACKEND}),
        None,
    ]
    con.execute(
        "INSERT OR REPLACE INTO experiments (name, description, spec_json, spec_path) "
        f"VALUES ({', '.join(map(sql, values))})"
    )
    values = [scenario, name, json.dumps({"app": name}), json.dumps({"source": BACKEND, "app_name": name}), BACKEND]
    con.execute(f"INSERT OR REPLACE INTO scenarios VALUES ({', '.join(map(sql, values))})")
    if old_rep is not None:
        rep = int(old_rep[0])
    else:
        rep = int(con.execute(f"SELECT count(*) FROM runs WHERE scenario_id = {sql(scenario)}").fetchone()[0]) + 1
    for table, rows in (
        ("stages", log.stages),
        ("jobs", log.jobs),
        ("executors", log.executor_rows),
        ("sql_executions", log.sql_executions),
    ):
        _insert(con, table, records(rows), run_id)
    _insert(con, "apps", [app_row(log, status, cause)], run_id)
    t = log.totals
    span = log.workload_span_ms()
    attempt = log.app_attempt_id
    start, end = log.app_start_ms, log.app_end_ms
    run = {
        "scenario_id": scenario,
        "rep": rep,
        "attempt": int(attempt) if attempt and attempt.isdigit() else 1,
        "status": status,
        "cause": cause[:500] if cause else None,
        "backend": BACKEND,
        "started_at": start / 1000.0 if start is not None else None,
        "finished_at": end / 1000.0 if end is not None else None,
        "wall_s": (end - start) / 1000.0 if start is not None and end is not None else None,
        "app_id": log.app_id,
        "job_time_s": span / 1000.0 if span is not None else None,
        "n_jobs": len(log.jobs),
        "n_tasks": t.n_tasks,
        "n_apps": 1,
        "total_cores": peak_cores(log),
        "executor_cpu_s": t.executor_cpu_ms / 1000.0,
        "executor_run_s": t.executor_run_ms / 1000.0,
        "fetch_wait_s": t.fetch_wait_ms / 1000.0,
        "remote_bytes_read": t.remote_bytes,
        "local_bytes_read": t.local_bytes,
        "shuffle_bytes_written": t.shuffle_write_bytes,
        "failed_tasks": t.failed_tasks,
        "fetch_failures": t.fetch_failures,
        "stage_reattempts": sum(1 for s in log.stages if s.stage_attempt > 0),
        "run_dir": src.display,
        "environment_json": json.dumps(
            {
                "source": BACKEND,
                "log": src.display,
                "spark_version": log.spark_version,
                "app_name": log.app_name,
                "user": log.user,
                "spark_conf": log.spark_conf,
                "codecs": sorted(set(codecs)),
                "speculative_tasks": t.speculative_tasks,
                "running_tasks": log.running_tasks,
                "problems": log.problems,
            }
        ),
    }
    _insert(con, "runs", [run], run_id)
    unknown = {"events": dict(log.unknown_events), "fields": dict(log.unknown_fields)}
    source = [
        src.key,
        run_id,
        src.kind,
        ",".join(sorted(set(codecs))),
        src.size,
        src.mtime,
        src.last_index,
        len(src.parts),
        src.in_progress,
        partial,
        log.bytes_read,
        log.events,
        log.spark_version,
        json.dumps(log.problems),
        json.dumps(unknown),
    ]
    con.execute(
        "INSERT INTO eventlog_sources (source, run_id, kind, codecs, size_bytes, mtime, last_index, n_files, "
        f"in_progress, partial, bytes_read, n_events, spark_version, problems_json, unknown_json) "
        f"VALUES ({', '.join(map(sql, source))})"
    )
