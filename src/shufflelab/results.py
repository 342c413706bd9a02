"""The results store: one DuckDB file per experiment, one schema for every backend.

Tables: ``experiments``, ``scenarios``, ``runs``, ``jobs``, ``stages``, ``tasks``,
``queue_samples``, ``cross_traffic``. A run's rows are written in one transaction together with
its ``runs`` row, so a run is either wholly in the store or absent (interrupting the runner loses
at most the run in progress). Units follow :mod:`shufflelab.eventlog`: ``*_ms`` milliseconds,
``*_at_ms`` epoch milliseconds, ``t`` epoch seconds, ``*_s`` seconds, ``*_bytes`` bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import Field, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from shufflelab import tables
from shufflelab.eventlog import ExecutorRow, JobRow, SqlExecutionRow, StageRow, TaskRow

if TYPE_CHECKING:
    import pandas as pd

    from shufflelab.spec import ExperimentSpec

_SQL_TYPES = {int: "BIGINT", float: "DOUBLE", str: "VARCHAR", bool: "BOOLEAN"}


def _sql_type(f: Field[Any]) -> str:
    """A dataclass field's column type: its ``sql`` metadata if given, else from its Python type."""
    if "sql" in f.metadata:
        return str(f.metadata["sql"])
    t = str(f.type)
    for py, sql in _SQL_TYPES.items():
        if t.startswith(py.__name__):
            return sql
    return "VARCHAR"


def _ddl_from(row_type: type) -> str:
    return ", ".join(f"{f.name} {_sql_type(f)}" for f in fields(row_type))


def _column(sql: str | None = None) -> Any:
    """A nullable column (None unless set); ``sql`` overrides the type derived from the annotation."""
    return field(default=None, metadata={"sql": sql} if sql else {})


_INT = "INTEGER"  # counts and indices: 32-bit in the store, as since the first release


@dataclass(kw_only=True)
class RunRow:
    """One row of ``runs``: a run of a scenario on some backend. The table's DDL and its migrations
    are generated from these fields (their order is the column order of a new store)."""

    run_id: str = field(metadata={"sql": "VARCHAR PRIMARY KEY"})
    scenario_id: str
    rep: int = field(metadata={"sql": _INT})
    attempt: int | None = _column(_INT)
    status: str
    cause: str | None = None
    backend: str | None = None
    started_at: float | None = None  # epoch seconds
    finished_at: float | None = None
    wall_s: float | None = None
    setup_s: float | None = None  # building what the run needed (fabric, cluster, storage), charged to it
    session_s: float | None = None  # the slowest application's Spark session start
    app_id: str | None = None  # the applications' ids, comma-separated
    job_time_s: float | None = None  # with several applications: the mean of their job times
    n_jobs: int | None = _column(_INT)
    n_tasks: int | None = _column(_INT)
    executor_cpu_s: float | None = None
    executor_run_s: float | None = None
    fetch_wait_s: float | None = None
    remote_bytes_read: int | None = None
    local_bytes_read: int | None = None
    shuffle_bytes_written: int | None = None
    bottleneck_tx_bytes: int | None = None
    bottleneck_drops: int | None = None
    bottleneck_max_backlog_bytes: int | None = None
    cc_configured: str | None = None
    cc_observed: str | None = None  # "cubic:12,reno:1": congestion controls seen on the job's connections
    run_dir: str | None = None
    environment_json: str | None = None
    bottleneck_marks: int | None = None  # ECN marks (the userspace switch; None on the kernel path)
    n_apps: int | None = field(default=None, metadata={"sql": f"{_INT} DEFAULT 1"})
    total_cores: int | None = _column(_INT)
    # executor JVMs' user and system CPU from the OS (reaped by the worker daemons): unlike the event
    # log's executorCpuTime it separates interrupt work charged as system time
    executor_user_s: float | None = None
    executor_sys_s: float | None = None
    # the task threads' user-mode CPU (executor plugin): the event log's executorCpuTime without the
    # interrupt work this kernel charges to whatever thread runs
    task_user_cpu_s: float | None = None
    task_thread_cpu_s: float | None = None
    failed_tasks: int | None = _column(_INT)
    fetch_failures: int | None = _column(_INT)
    stage_reattempts: int | None = _column(_INT)
    # the fidelity of the box (shufflelab.emulate.boxload): was the emulation host itself the bottleneck?
    box_runq_per_core: float | None = None  # mean runnable threads per core during the run (recorded, not judged)
    box_softirq_share: float | None = None  # share of all CPU time in softirq (packet processing)
    box_switch_lag_ms: float | None = None  # the userspace switch's mean lag behind its schedule
    box_switch_lag_p99_ms: float | None = None  # ... the 99th percentile of its per-sample maxima
    box_bottleneck: bool | None = None  # a judged sign (or the link self-test) over its threshold
    box_reasons: str | None = None  # which, with the values
    # share of the box's CPU time used by processes outside the lab (judged), at positive nice and by
    # the sampler itself (recorded); NULL in runs recorded before them
    box_foreign_share: float | None = None
    box_nice_share: float | None = None
    box_sampler_share: float | None = None

    @staticmethod
    def of(values: Mapping[str, Any]) -> RunRow:
        """A row from a mapping of its columns; a key that is not a column is refused, named."""
        known = {f.name for f in fields(RunRow)}
        unknown = sorted(k for k in values if k not in known)
        if unknown:
            raise ValueError(f"runs row: unknown column(s) {', '.join(unknown)}")
        return RunRow(**values)

    def columns(self) -> dict[str, Any]:
        """The row's set columns (None left out: the store's NULL or the column's default)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


# the first of the columns ``runs`` gained after the first release (those after it are newer too)
_RUNS_ADDED_FROM = "bottleneck_marks"


SCHEMA = [
    """CREATE TABLE IF NOT EXISTS experiments (
        name VARCHAR PRIMARY KEY, description VARCHAR, spec_json VARCHAR, spec_path VARCHAR,
        created_at TIMESTAMP DEFAULT current_timestamp)""",
    """CREATE TABLE IF NOT EXISTS scenarios (
        scenario_id VARCHAR PRIMARY KEY, label VARCHAR, values_json VARCHAR, spec_json VARCHAR,
        backend VARCHAR)""",
    f"CREATE TABLE IF NOT EXISTS runs ({_ddl_from(RunRow)})",
    f"CREATE TABLE IF NOT EXISTS jobs (run_id VARCHAR, app_index INTEGER DEFAULT 0, {_ddl_from(JobRow)})",
    f"CREATE TABLE IF NOT EXISTS stages (run_id VARCHAR, app_index INTEGER DEFAULT 0, {_ddl_from(StageRow)})",
    f"CREATE TABLE IF NOT EXISTS tasks (run_id VARCHAR, app_index INTEGER DEFAULT 0, {_ddl_from(TaskRow)})",
    """CREATE TABLE IF NOT EXISTS apps (
        run_id VARCHAR, app_index INTEGER, app_id VARCHAR, status VARCHAR, cause VARCHAR,
        cores INTEGER, job_time_s DOUBLE, session_s DOUBLE, first_job_at_ms BIGINT, last_job_end_at_ms BIGINT,
        n_tasks INTEGER, executor_cpu_s DOUBLE, executor_run_s DOUBLE, fetch_wait_s DOUBLE,
        remote_bytes_read BIGINT, shuffle_bytes_written BIGINT)""",
    """CREATE TABLE IF NOT EXISTS queue_samples (
        run_id VARCHAR, t DOUBLE, t_rel_s DOUBLE, dev VARCHAR, backlog_bytes BIGINT,
        backlog_packets BIGINT, drops BIGINT, sent_bytes BIGINT, sent_packets BIGINT,
        overlimits BIGINT, tx_bytes BIGINT, rx_bytes BIGINT, marks BIGINT)""",
    """CREATE TABLE IF NOT EXISTS cross_traffic (
        run_id VARCHAR, kind VARCHAR, result_file VARCHAR, seconds DOUBLE, bytes BIGINT,
        bits_per_second DOUBLE, lost_packets BIGINT, packets BIGINT, lost_percent DOUBLE,
        retransmits BIGINT, error VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS mr_fetches (
        run_id VARCHAR, map INTEGER, reduce INTEGER, src VARCHAR, dst VARCHAR, bytes BIGINT,
        t_request DOUBLE, t_first_byte DOUBLE, t_end DOUBLE, fct_s DOUBLE, start_s DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS faults (
        run_id VARCHAR, "index" INTEGER, kind VARCHAR, host VARCHAR, planned_at_s DOUBLE,
        started_at DOUBLE, ended_at DOUBLE, detail VARCHAR, error VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS ndp_queries (
        run_id VARCHAR, i INTEGER, query VARCHAR, policy_asked VARCHAR, policy VARCHAR, arrival_s DOUBLE,
        time_s DOUBLE, rows INTEGER, correct BOOLEAN, ok BOOLEAN, error VARCHAR, estimate_json VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS ndp_reads (
        run_id VARCHAR, path VARCHAR, proxy VARCHAR, policy VARCHAR, operators VARCHAR, rows BIGINT,
        body_bytes BIGINT, input_bytes BIGINT, exec_s DOUBLE, read_s DOUBLE, queue_s DOUBLE,
        datanode VARCHAR, elapsed_s DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS task_progress (
        run_id VARCHAR, app_index INTEGER, t_ms BIGINT, task BIGINT, stage INTEGER, executor VARCHAR,
        remote_bytes BIGINT, fetch_wait_ms BIGINT, remote_reqs_ms BIGINT)""",
    # the group-sequential design of `run --until-decided` (shufflelab.sequential; empty otherwise)
    "CREATE TABLE IF NOT EXISTS sequential_design (spending VARCHAR, alpha DOUBLE, first_n INTEGER, max_n INTEGER)",
    # event logs read by `shufflelab analyze` (shufflelab.eventlog.ingest)
    f"CREATE TABLE IF NOT EXISTS executors (run_id VARCHAR, app_index INTEGER DEFAULT 0, {_ddl_from(ExecutorRow)})",
    f"CREATE TABLE IF NOT EXISTS sql_executions (run_id VARCHAR, app_index INTEGER DEFAULT 0, "
    f"{_ddl_from(SqlExecutionRow)})",
    """CREATE TABLE IF NOT EXISTS eventlog_sources (
        source VARCHAR, run_id VARCHAR, kind VARCHAR, codecs VARCHAR, size_bytes BIGINT, mtime DOUBLE,
        last_index INTEGER, n_files INTEGER, in_progress BOOLEAN, partial BOOLEAN, bytes_read BIGINT,
        n_events BIGINT, spark_version VARCHAR, problems_json VARCHAR, unknown_json VARCHAR,
        ingested_at TIMESTAMP DEFAULT current_timestamp)""",
]

LOCK_WAIT_S = 120.0

RUN_TABLES = (
    "apps", "jobs", "stages", "tasks", "queue_samples", "cross_traffic", "task_progress", "mr_fetches", "faults",
    "ndp_queries", "ndp_reads", "executors", "sql_executions",
)  # fmt: skip

# Columns added after the first release; applied to older files when they are opened for writing.
MIGRATIONS = [
    "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS app_index INTEGER DEFAULT 0",
    "ALTER TABLE stages ADD COLUMN IF NOT EXISTS app_index INTEGER DEFAULT 0",
    "ALTER TABLE tasks ADD COLUMN IF NOT EXISTS app_index INTEGER DEFAULT 0",
    "ALTER TABLE apps ADD COLUMN IF NOT EXISTS listener_tasks INTEGER",
    "ALTER TABLE apps ADD COLUMN IF NOT EXISTS plugin_tasks INTEGER",
    "ALTER TABLE apps ADD COLUMN IF NOT EXISTS task_user_cpu_s DOUBLE",
    "ALTER TABLE apps ADD COLUMN IF NOT EXISTS task_thread_cpu_s DOUBLE",
    # ECN marks: the userspace switch's telemetry has them, the kernel sampler's does not (NULL)
    "ALTER TABLE queue_samples ADD COLUMN IF NOT EXISTS marks BIGINT",
    # cross traffic as delivered: the rate asked of iperf3, whether its client survived the run, when its
    # test started, what the server received, and what the client sent during the job (run validity)
    "ALTER TABLE cross_traffic ADD COLUMN IF NOT EXISTS configured_bps DOUBLE",
    "ALTER TABLE cross_traffic ADD COLUMN IF NOT EXISTS alive_at_end BOOLEAN",
    "ALTER TABLE cross_traffic ADD COLUMN IF NOT EXISTS started_at DOUBLE",
    "ALTER TABLE cross_traffic ADD COLUMN IF NOT EXISTS received_bytes BIGINT",
    "ALTER TABLE cross_traffic ADD COLUMN IF NOT EXISTS job_bytes BIGINT",
    "ALTER TABLE cross_traffic ADD COLUMN IF NOT EXISTS job_seconds DOUBLE",
    "ALTER TABLE cross_traffic ADD COLUMN IF NOT EXISTS job_bits_per_second DOUBLE",
    # who made it: iperf3 (NULL in older files) or the switch's own source (frame bytes offered to the queue)
    "ALTER TABLE cross_traffic ADD COLUMN IF NOT EXISTS generator VARCHAR",
    # event logs of any application (shufflelab analyze): speculation, the stage DAG, SQL executions
    "ALTER TABLE tasks ADD COLUMN IF NOT EXISTS speculative BOOLEAN DEFAULT false",
    "ALTER TABLE stages ADD COLUMN IF NOT EXISTS parent_ids VARCHAR",
    "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS sql_execution_id BIGINT",
]
_run_fields = [f.name for f in fields(RunRow)]
MIGRATIONS += [
    f"ALTER TABLE runs ADD COLUMN IF NOT EXISTS {f.name} {_sql_type(f)}"
    for f in fields(RunRow)[_run_fields.index(_RUNS_ADDED_FROM) :]
]


# Tables whose rows are replaced by key (INSERT OR REPLACE needs the key constraint).
KEYED_TABLES = {"experiments": "name", "scenarios": "scenario_id", "runs": "run_id"}


def _restore_keys(con: duckdb.DuckDBPyConnection) -> None:
    """Give a keyed table back its primary key when the file lost it (a copy made with
    ``CREATE TABLE ... AS`` or an export/import keeps rows but drops constraints), so a resumed
    experiment can still replace rows by key. Duplicate keys keep the last row written."""
    for table, key in KEYED_TABLES.items():
        row = con.execute(  # (no bound parameter: DuckDB would import pandas for it, see eventlog.ingest)
            "SELECT count(*) FROM duckdb_constraints() "
            f"WHERE table_name = '{table}' AND constraint_type = 'PRIMARY KEY'"
        ).fetchone()
        has_key = row[0] if row else 0
        if has_key:
            continue
        old = f"{table}_without_key"
        con.execute(f"ALTER TABLE {table} RENAME TO {old}")
        for stmt in SCHEMA + MIGRATIONS:
            if f"EXISTS {table} (" in stmt or f"ALTER TABLE {table} " in stmt:
                con.execute(stmt)
        con.execute(
            f"INSERT INTO {table} BY NAME SELECT * EXCLUDE (_rank) FROM (SELECT *, row_number() OVER "
            f"(PARTITION BY {key} ORDER BY rowid DESC) AS _rank FROM {old}) WHERE _rank = 1"
        )
        con.execute(f"DROP TABLE {old}")


class StoreError(ValueError):
    """The file is not a shufflelab results store; the message names the file and why."""


class MissingStoreError(StoreError, FileNotFoundError):
    """No results file at that path."""


# Every results file has these since the first release (the runner creates them before the first
# run) and every analysis reads them; a file without them is not a results store.
REQUIRED_TABLES = ("experiments", "scenarios", "runs", "jobs", "stages", "tasks")


@dataclass
class RunRecord:
    """Everything one run contributes to the store: its ``runs`` row (a mapping of the row's
    columns is accepted too, for fixtures) and its rows of the other tables."""

    run: RunRow
    tables: dict[str, pd.DataFrame]

    def __post_init__(self) -> None:
        if not isinstance(self.run, RunRow):
            self.run = RunRow.of(self.run)


def _table_names() -> list[str]:
    """The tables :data:`SCHEMA` creates."""
    return [stmt.split("EXISTS", 1)[1].split("(", 1)[0].strip() for stmt in SCHEMA]


class _Held:
    """The read-only connection that the reads of a :func:`reading` scope share (opened at the first
    read, closed when a write to the file needs it gone or the outermost scope ends)."""

    def __init__(self) -> None:
        self.depth = 0
        self.con: duckdb.DuckDBPyConnection | None = None
        self.lock = threading.RLock()  # one cursor at a time; a writer waits for the reader's query

    def close(self) -> None:
        with self.lock:
            if self.con is not None:
                self.con.close()
                self.con = None


_HELD: dict[Path, _Held] = {}
_HELD_LOCK = threading.Lock()


def _file_key(path: Path) -> Path:
    return path.resolve()


@contextlib.contextmanager
def reading(path: str | Path) -> Iterator[None]:
    """Within it, every read of the results file at ``path`` in this process -- by any
    :class:`Store` of it -- goes through one read-only connection instead of opening the file
    per query (opening costs about 10 ms, most of a small query; a report makes hundreds).

    The reads see the file as it was when the first of them opened it, so a report reads one
    consistent state. While the scope holds the connection, another process's writer waits for it
    (:data:`LOCK_WAIT_S`, as for any reader); a write from this process closes it first and the
    next read opens the file again, so it sees the write. Scopes nest; the connection is closed
    when the outermost one ends."""
    key = _file_key(Path(path))
    with _HELD_LOCK:
        held = _HELD.setdefault(key, _Held())
        held.depth += 1
    try:
        yield
    finally:
        with _HELD_LOCK:
            held.depth -= 1
            if held.depth == 0:
                del _HELD[key]
                held.close()


def _held(path: Path) -> _Held | None:
    if not _HELD:
        return None
    with _HELD_LOCK:
        return _HELD.get(_file_key(path))


def _identity(path: Path) -> tuple[int, int, int, int] | None:
    """What says that a file was not written since: device, inode, size, modification time."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


# file -> its identity when this process's last write connection to it closed: the file has every
# table and column of the schema as long as nothing else wrote it since
_SCHEMA_KNOWN: dict[Path, tuple[int, int, int, int]] = {}


class Store:
    """A DuckDB results file. Connections are short-lived so the file stays readable between runs
    (within :func:`reading`, the reads of one task share a connection)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._checked = False
        self._views: duckdb.DuckDBPyConnection | None = None  # a folder of Parquet tables, read through views

    @contextlib.contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to the file (created with the schema when writing). Reading a path that
        is missing, a folder, not a DuckDB file, or a DuckDB file without the lab's tables raises
        :class:`StoreError` naming the file."""
        if read_only and not self.path.exists():
            raise MissingStoreError(f"{self.path}: no such results file")
        if tables.is_dataset(self.path):  # Parquet tables (analyze --engine spark): read through views
            if not read_only:
                raise StoreError(f"{self.path}: a folder of Parquet tables is read, never written, by this command")
            with self._dataset() as con:
                yield con
            return
        if self.path.is_dir():
            raise StoreError(f"{self.path}: is a folder, not a results file (.duckdb)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        held = _held(self.path)
        if read_only and held is not None:
            with self._shared(held) as cur:
                yield cur
            return
        if held is not None:  # this process writes the file: the shared reader must go first
            held.close()
        key = _file_key(self.path) if not read_only else None
        con = self._open(read_only)
        schema = False
        try:
            if key is not None:
                # the schema statements cost more than most writes: skipped for a file this process
                # made complete and nothing has written since (it holds the write lock now)
                if _SCHEMA_KNOWN.get(key) != _identity(self.path):
                    for stmt in SCHEMA + MIGRATIONS:
                        con.execute(stmt)
                    _restore_keys(con)
                schema = True
            elif not self._checked:
                self._check_tables(con)
            yield con
        finally:
            con.close()
            if key is not None:
                ident = _identity(self.path) if schema else None
                if ident is not None:
                    _SCHEMA_KNOWN[key] = ident
                else:
                    _SCHEMA_KNOWN.pop(key, None)

    @contextlib.contextmanager
    def _shared(self, held: _Held) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of the connection a :func:`reading` scope holds (opened by the first read)."""
        with held.lock:
            if held.con is None:
                held.con = self._open(True)
            cur = held.con.cursor()
            try:
                if not self._checked:
                    self._check_tables(cur)
                yield cur
            finally:
                cur.close()

    @contextlib.contextmanager
    def _dataset(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of an in-memory database whose tables are views over the folder's Parquet files
        (:mod:`shufflelab.tables`; the schema's other tables are there, empty). The database is
        made once per store object, so its views and the files' metadata (cached) serve every query."""
        if self._views is None:
            con = duckdb.connect()
            try:
                con.execute("SET parquet_metadata_cache = true")
                for stmt in SCHEMA + MIGRATIONS:
                    con.execute(stmt)
                tables.create_views(con, self.path)
            except (tables.DatasetError, duckdb.Error) as exc:
                con.close()
                raise StoreError(f"{self.path}: cannot read its Parquet tables ({str(exc).splitlines()[0]})") from None
            self._views = con
        cur = self._views.cursor()
        try:
            yield cur
        finally:
            cur.close()

    def _check_tables(self, con: duckdb.DuckDBPyConnection) -> None:
        names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        missing = [t for t in REQUIRED_TABLES if t not in names]
        if missing:
            raise StoreError(
                f"{self.path}: not a shufflelab results file (a DuckDB file without the table(s) {', '.join(missing)})"
            )
        self._checked = True

    def _open(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        """Open the file, waiting (up to ``LOCK_WAIT_S``) while another process holds its lock:
        a report or query opened during a run must delay the runner's write, not crash it."""
        deadline = time.monotonic() + LOCK_WAIT_S
        delay = 0.05
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.IOException as exc:
                text = str(exc)
                if "lock" not in text.lower():
                    raise self._not_a_store(exc) from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(1.0, delay * 2)
            except duckdb.Error as exc:  # e.g. a file written by an incompatible DuckDB version
                raise self._not_a_store(exc) from None

    def _not_a_store(self, exc: Exception) -> StoreError:
        text = str(exc)
        if "not a valid duckdb database file" in text.lower():
            return StoreError(f"{self.path}: not a shufflelab results file (not a DuckDB database)")
        return StoreError(f"{self.path}: cannot open as a results file ({text.splitlines()[0] if text else exc})")

    def init_experiment(self, name: str, description: str, spec_json: str, spec_path: str) -> None:
        with self.connect() as con:
            con.execute(
                "INSERT OR REPLACE INTO experiments (name, description, spec_json, spec_path) VALUES (?,?,?,?)",
                [name, description, spec_json, spec_path],
            )

    def add_scenarios(self, rows: Sequence[dict[str, Any]]) -> None:
        with self.connect() as con:
            for r in rows:
                con.execute(
                    "INSERT OR REPLACE INTO scenarios VALUES (?,?,?,?,?)",
                    [
                        r["scenario_id"],
                        r["label"],
                        json.dumps(r["values"]),
                        r["spec_json"],
                        r["backend"],
                    ],
                )

    def completed(self) -> set[tuple[str, int]]:
        """(scenario_id, rep) pairs that already have a successful run."""
        if not self.path.exists():
            return set()
        with self.connect() as con:
            rows = con.execute("SELECT scenario_id, rep FROM runs WHERE status = 'ok'").fetchall()
        return {(s, int(r)) for s, r in rows}

    def attempts(self, scenario_id: str, rep: int) -> int:
        if not self.path.exists():
            return 0
        with self.connect() as con:
            row = con.execute(
                "SELECT count(*) FROM runs WHERE scenario_id = ? AND rep = ?", [scenario_id, rep]
            ).fetchone()
        return int(row[0]) if row else 0

    def write_run(self, record: RunRecord) -> None:
        """Insert one run and all its rows atomically (replacing a previous copy of the same run)."""
        run_id = record.run.run_id
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])
                for t in RUN_TABLES:
                    con.execute(f"DELETE FROM {t} WHERE run_id = ?", [run_id])
                import pandas as pd  # (not at import: `analyze` reads logs without it)

                run_df = pd.DataFrame([record.run.columns()])
                con.register("run_df", run_df)
                con.execute("INSERT INTO runs BY NAME SELECT * FROM run_df")
                con.unregister("run_df")
                for table, df in record.tables.items():
                    if table not in RUN_TABLES:
                        raise ValueError(f"unknown table {table!r}")
                    if df is None or df.empty:
                        continue
                    df = df.copy()
                    df["run_id"] = run_id
                    con.register("rows_df", df)
                    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM rows_df")
                    con.unregister("rows_df")
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def runs_with_values(self) -> tuple[pd.DataFrame, list[str]]:
        """Runs joined with their scenario's label, one column per varied value (matrix keys and
        ``case``), in start order; also the list of those value columns."""
        df = self.query(
            "SELECT r.*, s.label, s.values_json FROM runs r JOIN scenarios s USING (scenario_id) ORDER BY r.started_at"
        )
        keys: list[str] = []
        for v in df.get("values_json", []):
            keys += [k for k in json.loads(v) if k not in keys]
        for k in keys:
            df[k] = [json.loads(v).get(k) for v in df["values_json"]]
        return df, keys

    def experiment_spec(self) -> ExperimentSpec | None:
        """The experiment's spec validated again (:func:`shufflelab.spec.stored`), so analyses use its
        rules rather than re-derive them from JSON; None for a store of imported event logs (no lab
        spec). :class:`StoreError` when no experiment is recorded or its spec does not validate."""
        exp = self.query("SELECT spec_json FROM experiments LIMIT 1")
        if exp.empty:
            raise StoreError(f"{self.path}: a results file with no experiment recorded")
        return self._validated(str(exp.iloc[0, 0]), "the experiment")

    def scenario_specs(self) -> dict[str, ExperimentSpec | None]:
        """Scenario label -> its spec validated again (None where it is not a lab spec: imported
        event logs), in the store's order."""
        rows = self.query("SELECT label, spec_json FROM scenarios").itertuples(index=False, name=None)
        return {str(label): self._validated(str(sj), f"scenario {label!r}") for label, sj in rows}

    def _validated(self, spec_json: str, what: str) -> ExperimentSpec | None:
        from pydantic import ValidationError

        from shufflelab.spec import stored
        from shufflelab.spec.loader import describe_error

        try:
            return stored(spec_json)
        except ValidationError as exc:
            bad = "; ".join(describe_error(e) for e in exc.errors())
            msg = f"{self.path}: {what}: its stored spec does not validate with this version: {bad}"
            raise StoreError(msg) from None
        except ValueError as exc:  # not JSON
            raise StoreError(f"{self.path}: {what}: its stored spec is not JSON: {exc}") from None

    def export_parquet(self, dest: Path, skip: Sequence[str] = ()) -> list[str]:
        """Every non-empty table as ``dest/<table>.parquet`` (for re-analysis without DuckDB files)."""
        dest.mkdir(parents=True, exist_ok=True)
        written = []
        with self.connect(read_only=True) as con:
            names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
            for name in sorted(names):
                if name in skip or con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] == 0:  # type: ignore[index]
                    continue
                con.execute(f"COPY \"{name}\" TO '{dest / (name + '.parquet')}' (FORMAT parquet)")
                written.append(name)
        return written

    def import_parquet(self, src: Path) -> list[str]:
        """Load ``src/<table>.parquet`` files written by :meth:`export_parquet` into this store (the
        inverse, for re-analysing committed results); columns the schema does not know are refused."""
        files = sorted(Path(src).glob("*.parquet"))
        known = {name for name in _table_names()}
        loaded = []
        with self.connect() as con:
            for f in files:
                name = f.stem
                if name not in known:
                    raise ValueError(f"{f}: not a results table (known: {', '.join(sorted(known))})")
                cols = [r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(f)]).fetchall()]
                have = {r[0] for r in con.execute(f'DESCRIBE "{name}"').fetchall()}
                extra = [c for c in cols if c not in have]
                if extra:
                    raise ValueError(f"{f}: columns not in table {name}: {', '.join(extra)}")
                sel = ", ".join(f'"{c}"' for c in cols)
                con.execute(f'INSERT INTO "{name}" ({sel}) SELECT {sel} FROM read_parquet(?)', [str(f)])
                loaded.append(name)
        return loaded

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        with self.connect(read_only=True) as con:
            return con.execute(sql, params or []).df()
