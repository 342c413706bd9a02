"""Many logs parsed wherever they are read (the executors of ``analyze --engine spark``), written as
a folder of Parquet tables (:mod:`shufflelab.tables`) with the same rows a local ingest writes.

Two halves, neither of which imports Spark:

- :func:`parse_items`, run where the logs are read (a Spark task, or this process): each log is
  found again from its location (a path or an ``hdfs://`` URL) and parsed by
  :func:`shufflelab.eventlog.read.read_source`, the local ingest's parser, its task rows streamed to
  a Parquet file; the local ingest's own writer (``ingest._write_source``) turns the rest of what
  was read into the other tables' rows in an in-memory DuckDB, each table written out as a Parquet
  file, and the outcome is pickled beside them. All of it goes into the folder being built.
- :func:`assemble`, run by the one process that owns the folder (the Spark driver): for each log in
  the order the logs were found, it numbers the application's repetition as a one-process ingest
  does (a later log of the same application replaces an earlier one and keeps its number), moves
  the log's files into their tables' ``app=<run id>`` folders and writes the ``experiments`` and
  ``scenarios`` tables. :func:`publish` puts the folder in place; until then it is hidden beside it.
"""

from __future__ import annotations

import os
import pickle
import shutil
import uuid
from collections import Counter
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
from shufflelab.eventlog.read import read_source
from shufflelab.eventlog.remote import RemotePath, is_remote

INCOMING = "_incoming"  # each log's files as its parser wrote them, before its application's folder is known
META = "_meta"  # each log's outcome, one pickle per log
BY_SOURCE = ("eventlog_sources",)  # rows of a log, not of its application: kept when a later log replaces it


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

    outcome: Outcome  # as the local ingest reports it
    files: dict[str, str]  # table -> its rows of this application (a Parquet file)
    tasks_run_id: str | None  # the run id the task rows were written with (None: no task rows)
    scenario_id: str | None  # the application's scenario (``app:<name>``)
    rep: int | None  # the repetition number written in its runs row
    shared: dict[str, pa.Table]  # its rows of the tables of no one application (experiments, scenarios)


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
    """Parse ``src`` with the local parser and write its rows with the local writer: each table's
    rows to a file under ``staging/_incoming/<i>-<attempt>/``, the outcome to ``staging/_meta/<i>.pkl``
    (written aside and renamed, so a retried or speculative attempt leaves whole files, the pickle
    naming its own attempt's folder)."""
    root = Path(staging)
    folder = root / INCOMING / f"{i}-{uuid.uuid4().hex}"
    folder.mkdir(parents=True)
    (root / META).mkdir(parents=True, exist_ok=True)
    tasks_path = folder / "tasks.parquet"
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
    con = _scratch()
    try:
        outcome = _write_source(con, src, res)
        files = {"tasks": str(tasks_path)} if writer else {}
        scenario_id, rep, shared = None, None, {}
        if outcome.action == "ingested":
            for table in _per_app_tables(con):
                tbl = _arrow(con, f'SELECT * FROM "{table}"')
                if tbl.num_rows:
                    pq.write_table(tbl, folder / f"{table}.parquet")
                    files[table] = str(folder / f"{table}.parquet")
            scenario_id, rep = con.execute("SELECT scenario_id, rep FROM runs").fetchone()  # type: ignore[misc]
            shared = {t: _arrow(con, f'SELECT * FROM "{t}"') for t in tables.GLOBAL_TABLES}
    finally:
        for table in _all_tables(con):
            con.execute(f'DELETE FROM "{table}"')
    parsed = Parsed(outcome, files, run_id[0] if run_id else None, scenario_id, rep, shared)
    meta = root / META / f"{i}.pkl"
    tmp = meta.with_name(f".{meta.name}.{uuid.uuid4().hex}")
    tmp.write_bytes(pickle.dumps(parsed, protocol=pickle.HIGHEST_PROTOCOL))
    os.replace(tmp, meta)


_SCRATCH: list[Any] = []  # one in-memory store per process (a Spark Python worker parses many logs)


def _scratch() -> Any:
    """An empty in-memory DuckDB with a local store's tables, made once per process."""
    if not _SCRATCH:
        import duckdb

        from shufflelab.results import MIGRATIONS, SCHEMA

        con = duckdb.connect()
        for stmt in SCHEMA + MIGRATIONS:
            con.execute(stmt)
        _SCRATCH.append(con)
    return _SCRATCH[0]


def _all_tables(con: Any) -> list[str]:
    return [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]


def _per_app_tables(con: Any) -> list[str]:
    return [t for t in _all_tables(con) if t not in tables.GLOBAL_TABLES and t != "tasks"]


def _arrow(con: Any, sql: str) -> pa.Table:
    tbl = con.execute(sql).arrow()
    return tbl.read_all() if isinstance(tbl, pa.RecordBatchReader) else tbl


def staging_for(dest: Path) -> Path:
    """A hidden folder beside ``dest`` (the same file system, so :func:`publish` renames it)."""
    return dest.parent / f".{dest.name}.{uuid.uuid4().hex[:12]}.tmp"


def assemble(staging: Path, sources: list[LogSource], found: dict[int, bool]) -> list[Outcome]:
    """Put the rows of the logs parsed into ``staging`` (``sources[i]`` parsed as index ``i``;
    ``found[i]`` False: its parser could not find it again) into their tables, taking the logs in
    the order of ``sources`` as a one-process ingest does."""
    outcomes: list[Outcome] = []
    runs: dict[str, tuple[str | None, int]] = {}  # run id -> (scenario, repetition), as the store would hold them
    per_scenario: Counter[str | None] = Counter()  # the runs of each scenario so far
    shared: dict[str, dict[Any, dict[str, Any]]] = {t: {} for t in tables.GLOBAL_TABLES}
    schemas: dict[str, pa.Schema] = {}
    keys = {"experiments": "name", "scenarios": "scenario_id"}  # rows replaced by key (INSERT OR REPLACE)
    for i, src in enumerate(sources):
        meta = staging / META / f"{i}.pkl"
        if not found.get(i, False) or not meta.exists():
            gone = f"{src.display}: no longer there as it was found (removed or renamed while the logs were read)"
            outcomes.append(Outcome(src.display, "unreadable", problems=[gone]))
            continue
        parsed: Parsed = pickle.loads(meta.read_bytes())
        outcome = parsed.outcome
        outcomes.append(outcome)
        run_id = outcome.run_id
        if outcome.action != "ingested" or run_id is None:
            continue
        old = runs.pop(run_id, None)  # a log of the same application read before: replaced, its number kept
        if old is not None:
            per_scenario[old[0]] -= 1
        rep = old[1] if old else per_scenario[parsed.scenario_id] + 1
        runs[run_id] = (parsed.scenario_id, rep)
        per_scenario[parsed.scenario_id] += 1
        _place(staging, i, parsed, run_id, rep, replaced=old is not None)
        for t, tbl in parsed.shared.items():
            schemas[t] = tbl.schema
            for row in tbl.to_pylist():
                shared[t][row[keys[t]]] = row
    written = sorted(t for t in _table_dirs(staging))
    for t, rows_by_key in shared.items():
        if rows_by_key:
            (staging / t).mkdir()
            pq.write_table(pa.Table.from_pylist(list(rows_by_key.values()), schemas[t]), staging / t / "part-0.parquet")
            written.append(t)
    for leftover in (INCOMING, META):
        shutil.rmtree(staging / leftover, ignore_errors=True)
    tables.write_marker(staging, written, source="eventlog")
    return outcomes


def _table_dirs(staging: Path) -> list[str]:
    return [d.name for d in staging.iterdir() if d.is_dir() and not d.name.startswith(("_", "."))]


def _place(staging: Path, i: int, parsed: Parsed, run_id: str, rep: int, replaced: bool) -> None:
    """Move log ``i``'s files into their tables' folders (``part-<i>.parquet``), replacing an
    earlier log's of the same application (``replaced``) as a local ingest replaces its rows."""
    folder = tables.app_dir(run_id)
    for table_dir in _table_dirs(staging) if replaced else []:
        if table_dir not in BY_SOURCE:
            shutil.rmtree(staging / table_dir / folder, ignore_errors=True)
    for table, path in parsed.files.items():
        dest = staging / table / folder / f"part-{i}.parquet"
        dest.parent.mkdir(parents=True, exist_ok=True)
        if table == "tasks" and parsed.tasks_run_id != run_id:
            _rewrite(path, dest, "run_id", run_id)  # the application's id came after its first task rows
        elif table == "runs" and parsed.rep != rep:
            _rewrite(path, dest, "rep", rep)  # an earlier application of its name was read elsewhere
        else:
            os.replace(path, dest)


def _rewrite(src: str, dest: Path, column: str, value: Any) -> None:
    """Copy a Parquet file with ``column`` set to ``value`` in every row."""
    f = pq.ParquetFile(src)
    with pq.ParquetWriter(str(dest), f.schema_arrow) as out:
        for b in f.iter_batches():
            i = b.schema.get_field_index(column)
            out.write_batch(b.set_column(i, column, pa.array([value] * b.num_rows, b.schema.field(i).type)))
    os.unlink(src)


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
