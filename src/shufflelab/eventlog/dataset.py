"""Many logs parsed wherever they are read (the executors of ``analyze --engine spark``), written as
a folder of Parquet tables (:mod:`shufflelab.tables`) with the same rows a local ingest writes.

Two halves, neither of which imports Spark:

- :func:`parse_items`, run where the logs are read (a Spark task, or this process): each log is
  found again from its location (a path or an ``hdfs://`` URL) and parsed by
  :func:`shufflelab.eventlog.read.read_source`, the local ingest's parser, its task rows streamed to
  a Parquet file in the folder being built and what else was read (a :class:`ReadResult` without
  task rows) pickled beside it.
- :func:`assemble`, run by the one process that owns the folder (the Spark driver): for each log in
  the order the logs were found, the local ingest's own writer (``ingest._write_source``) turns what
  was read into the other tables' rows -- repetition numbers, statuses, a later log of the same
  application replacing an earlier one, exactly as in a one-process ingest -- in a scratch DuckDB
  file; then every table goes out as Parquet, one folder per application, and the task files are
  moved into theirs. :func:`publish` puts the folder in place; until then it is hidden beside it.
"""

from __future__ import annotations

import os
import pickle
import shutil
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

from shufflelab import tables
from shufflelab.eventlog.files import LogSource, discover
from shufflelab.eventlog.ingest import Outcome, _write_source, run_id_of
from shufflelab.eventlog.model import EventLog, TaskRow
from shufflelab.eventlog.read import ReadResult, read_source
from shufflelab.eventlog.remote import RemotePath, is_remote

INCOMING = "_incoming"  # task files as the parsers wrote them, before their application's folder is known
META = "_meta"  # what else was read, one pickle per log
ROWS = "_rows.tmp"  # where the scratch store the other tables are built in spills
SCRATCH_MEMORY = "512MB"  # the scratch store's memory before it spills (the other tables: no task rows)
PART_FILE = "part-0.parquet"  # one file per table and application


_ARROW_TYPES = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string()}
# the task table's columns, in TaskRow's field order, with their Arrow types (those the store's DDL maps them to)
TASK_ARROW = {f.name: _ARROW_TYPES[str(f.type).split(" ")[0]] for f in fields(TaskRow)}


def task_table(cols: dict[str, list[Any]], run_id: str) -> pa.Table:
    """A batch of task rows (the parser's columns) with their application's ``run_id`` and ``app_index``."""
    tbl = pa.table({name: pa.array(cols[name], type=t) for name, t in TASK_ARROW.items()})
    tbl = tbl.append_column("run_id", pa.array([run_id] * tbl.num_rows, pa.string()))
    return tbl.append_column("app_index", pa.array([0] * tbl.num_rows, pa.int32()))


@dataclass(frozen=True)
class Parsed:
    """What one log's parse left in the folder being built."""

    result: ReadResult  # without task rows
    tasks_file: str | None  # None: no task rows
    tasks_run_id: str | None  # the run id the task rows were written with


def locate(location: str) -> Path:
    """A log's location as discovery takes it: a local path made absolute (a Spark task runs in
    another working folder), or an ``hdfs://``/``webhdfs://`` URL (a :class:`RemotePath`, which has
    the methods of a :class:`~pathlib.Path` that discovery uses)."""
    if is_remote(location):
        return cast(Path, RemotePath(location))
    return Path(location.removeprefix("file://")).absolute()


def by_location(src: LogSource) -> bool:
    """Whether ``src`` can be found again from its location elsewhere (not a log inside a zip)."""
    return "!" not in src.key


def parse_items(staging: str, batch: int, items: Iterable[tuple[int, str, str]]) -> Iterator[tuple[int, bool]]:
    """For each ``(index, location, key)``: find the log again and parse it into the folder
    ``staging``; yields ``(index, found)`` (False: the log is no longer there as it was found)."""
    for i, location, key in items:
        found, _ = discover([locate(location)])
        src = next((s for s in found if s.key == key), None)
        if src is not None:
            parse_source(staging, batch, i, src)
        yield i, src is not None


def parse_source(staging: str, batch: int, i: int, src: LogSource) -> None:
    """Parse ``src`` with the local parser: task rows (with their ``run_id`` and ``app_index``) to a
    file under ``staging/_incoming``, the rest pickled to ``staging/_meta/<i>.pkl``. Each file is
    written aside and renamed, so a retried or speculative attempt leaves whole files."""
    root = Path(staging)
    (root / INCOMING).mkdir(parents=True, exist_ok=True)
    (root / META).mkdir(parents=True, exist_ok=True)
    tasks_path = root / INCOMING / f"{i}-{uuid.uuid4().hex}.parquet"
    writer: list[pq.ParquetWriter] = []
    run_id: list[str] = []

    def on_tasks(cols: dict[str, list[Any]], log: EventLog) -> None:
        if not run_id:  # the application start comes first in a log: its id is known by the first batch
            run_id.append(run_id_of(log, src.app_hint))
        tbl = task_table(cols, run_id[0])
        if not writer:
            writer.append(pq.ParquetWriter(str(tasks_path), tbl.schema))
        writer[0].write_table(tbl)

    try:
        res = read_source(src, on_tasks=on_tasks, batch=batch)
    finally:
        if writer:
            writer[0].close()
    parsed = Parsed(res, str(tasks_path) if writer else None, run_id[0] if run_id else None)
    meta = root / META / f"{i}.pkl"
    tmp = meta.with_name(f".{meta.name}.{uuid.uuid4().hex}")
    tmp.write_bytes(pickle.dumps(parsed, protocol=pickle.HIGHEST_PROTOCOL))
    os.replace(tmp, meta)


def staging_for(dest: Path) -> Path:
    """A hidden folder beside ``dest`` (the same file system, so :func:`publish` renames it)."""
    return dest.parent / f".{dest.name}.{uuid.uuid4().hex[:12]}.tmp"


def assemble(staging: Path, sources: list[LogSource], found: dict[int, bool]) -> list[Outcome]:
    """Write every table of the logs parsed into ``staging`` (``sources[i]`` parsed as index ``i``;
    ``found[i]`` False: its parser could not find it again), in the order of ``sources``."""
    import duckdb

    from shufflelab.results import MIGRATIONS, SCHEMA

    outcomes: list[Outcome] = []
    con = duckdb.connect()  # in memory (a file's commit per application costs a sync each), spilling beside
    try:
        con.execute("SET temp_directory = '" + str(staging / ROWS).replace("'", "''") + "'")
        con.execute(f"SET memory_limit = '{SCRATCH_MEMORY}'")
        for stmt in SCHEMA + MIGRATIONS:  # the tables of a local store
            con.execute(stmt)
        for i, src in enumerate(sources):
            meta = staging / META / f"{i}.pkl"
            if not found.get(i, False) or not meta.exists():
                gone = f"{src.display}: no longer there as it was found (removed or renamed while the logs were read)"
                outcomes.append(Outcome(src.display, "unreadable", problems=[gone]))
                continue
            parsed: Parsed = pickle.loads(meta.read_bytes())
            outcome = _write_source(con, src, parsed.result)
            outcomes.append(outcome)
            if outcome.action == "ingested" and outcome.run_id is not None:
                _place_tasks(staging, parsed, outcome.run_id)
        written = _export(con, staging)
    finally:
        con.close()
    for leftover in (INCOMING, META, ROWS):
        shutil.rmtree(staging / leftover, ignore_errors=True)
    tables.write_marker(staging, written, source="eventlog")
    return outcomes


def _place_tasks(staging: Path, parsed: Parsed, run_id: str) -> None:
    """Move the application's task file into its folder, replacing an earlier log's of the same
    application (as a local ingest replaces its rows)."""
    folder = staging / "tasks" / tables.app_dir(run_id)
    shutil.rmtree(folder, ignore_errors=True)
    if parsed.tasks_file is None:
        return
    folder.mkdir(parents=True)
    if parsed.tasks_run_id == run_id:
        os.replace(parsed.tasks_file, folder / PART_FILE)
        return
    # the application's id came after its first task rows (a log whose start is elsewhere): rewrite them
    src = pq.ParquetFile(parsed.tasks_file)
    with pq.ParquetWriter(str(folder / PART_FILE), src.schema_arrow) as out:
        for b in src.iter_batches():
            i = b.schema.get_field_index("run_id")
            out.write_batch(b.set_column(i, "run_id", pa.array([run_id] * b.num_rows, pa.string())))
    os.unlink(parsed.tasks_file)


def _export(con: Any, staging: Path) -> list[str]:
    """Every non-empty table of the scratch store as Parquet: one file per application in the tables
    of applications' rows, one file in the others. Returns the tables written (with ``tasks``)."""
    written = ["tasks"] if (staging / "tasks").is_dir() and any((staging / "tasks").iterdir()) else []
    names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
    for table in names:
        if table == "tasks" or con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] == 0:
            continue
        tbl = con.execute(f'SELECT * FROM "{table}"').arrow()
        if isinstance(tbl, pa.RecordBatchReader):
            tbl = tbl.read_all()
        if table in tables.GLOBAL_TABLES:
            (staging / table).mkdir()
            pq.write_table(tbl, staging / table / PART_FILE)
        else:
            tbl = tbl.sort_by("run_id")
            ids = tbl.column("run_id").to_pylist()
            start = 0
            while start < len(ids):
                end = start
                while end < len(ids) and ids[end] == ids[start]:
                    end += 1
                folder = staging / table / tables.app_dir(str(ids[start]))
                folder.mkdir(parents=True)
                pq.write_table(tbl.slice(start, end - start), folder / PART_FILE)
                start = end
        written.append(table)
    return written


def publish(staging: Path, dest: Path) -> None:
    """Put the finished folder at ``dest``, replacing the dataset there (renamed aside first, then
    removed), so ``dest`` is at every moment either the old dataset or the new one, never a mix."""
    old = None
    if dest.exists():
        old = dest.parent / f".{dest.name}.{uuid.uuid4().hex[:12]}.old"
        os.replace(dest, old)
    os.replace(staging, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
