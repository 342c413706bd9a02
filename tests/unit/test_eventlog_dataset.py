"""analyze --engine spark without Spark: the executors' half (parse_items) run here, the driver's
half (assemble, publish) as the engine runs it; the Parquet folder read back through Store; logs on
a (fake) WebHDFS; the engine's errors before Spark starts, with nothing left behind. The engine on a
real Spark cluster reading a real HDFS: tests/integration/test_analyze_spark_hdfs.py."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from test_eventlog_ingest import _app, _logdir, _write
from typer.testing import CliRunner

from shufflelab import tables
from shufflelab.cli import app
from shufflelab.eventlog import dataset
from shufflelab.eventlog import ingest as ing
from shufflelab.eventlog.files import discover
from shufflelab.results import Store, StoreError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "eventlogs" / "spark-4.3"
TABLES = ("experiments", "scenarios", "runs", "apps", "jobs", "stages", "tasks", "executors", "sql_executions",
          "eventlog_sources")  # fmt: skip
WHEN = ("ingested_at", "created_at")  # when each store was written


def _tables(db: Path, skip: tuple[str, ...] = WHEN) -> dict[str, list[str]]:
    s = Store(db)
    out = {}
    for t in TABLES:
        df = s.query(f"SELECT * FROM {t}")
        cols = sorted(c for c in df.columns if c not in skip)
        out[t] = sorted(map(repr, df[cols].itertuples(index=False)))
    return out


def _engine_without_spark(locations: list[str], dest: Path) -> list[ing.Outcome]:
    """What the Spark engine does, with its executors' function called here."""
    found, _ = discover([dataset.locate(p) for p in locations])
    staging = dataset.staging_for(dest)
    staging.mkdir(parents=True)
    try:
        items = [(i, s.display, s.key) for i, s in enumerate(found)]
        done = dict(dataset.parse_items(str(staging), 10_000, items))
        outcomes = dataset.assemble(staging, found, done)
        dataset.publish(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return outcomes


def test_the_parquet_tables_equal_a_local_ingest_and_store_reads_them(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    for sub in ("failed", "zstd"):  # real applications: SQL executions, executors added and removed, a failure
        shutil.copytree(FIXTURES / sub, logs / "fixtures" / sub)
    d = _logdir(tmp_path / "more")
    shutil.copytree(d, logs / "synthetic")
    _write(logs / "synthetic" / "broken", _app("app-5")[:-40] + b"\n" + _app("app-5"))  # a partial application
    _write(logs / "zz-again" / "app-3", _app("app-3", name="other", tasks=20))  # app-3 again: replaces the first
    local, ds = tmp_path / "local.duckdb", tmp_path / "tables.parquet"
    a = ing.ingest([logs], local, workers=1)
    b = _engine_without_spark([str(logs)], ds)
    assert [(o.source, o.action, o.run_id, o.status, o.counts, o.problems) for o in a.outcomes] == [
        (o.source, o.action, o.run_id, o.status, o.counts, o.problems) for o in b
    ]
    assert _tables(local) == _tables(ds)
    assert Store(ds).query("SELECT count(*) AS n FROM tasks WHERE run_id = 'app-3'")["n"][0] == 20
    # partitioned by application: each file in app=<run id> holds that application's rows only
    for table in ("tasks", "stages", "jobs", "runs", "apps", "eventlog_sources"):
        for f in tables.table_files(ds, table):
            run_id = tables.run_id_of_dir(Path(f).parent.name)
            assert set(pq.read_table(f, columns=["run_id"]).column("run_id").to_pylist()) == {run_id}, f
    assert {p.name for p in ds.iterdir()} == {tables.MARKER, *[t for t in TABLES if t != "sql_executions"],
                                              "sql_executions"}  # fmt: skip
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left
    with pytest.raises(StoreError, match="read, never written"), Store(ds).connect():
        pass


def test_report_and_the_fleet_page_read_the_parquet_tables(tmp_path: Path) -> None:
    ds, logs = tmp_path / "tables.parquet", tmp_path / "logs"
    _write(logs / "app-1", _app("app-1", tasks=40))
    _write(logs / "app-2", _app("app-2", name="other", tasks=20))
    _engine_without_spark([str(logs)], ds)
    r = CliRunner().invoke(app, ["report", str(ds), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "rep" / "report.html").exists() and (tmp_path / "rep" / "fleet.html").exists()
    assert "app-1" in (tmp_path / "rep" / "report.md").read_text()
    r = CliRunner().invoke(app, ["whatif", str(ds), "--speedup", "2"])
    assert r.exit_code == 0 and "demo" in r.output and "other" in r.output, r.output


@pytest.mark.parametrize("run_id", ["app-20240101-0001", "application_1_0001_2", "a/b", "x y%", ".."])
def test_an_application_folder_names_its_run_id_and_nothing_else(run_id: str) -> None:
    name = tables.app_dir(run_id)
    assert "/" not in name and name.startswith("app=") and tables.run_id_of_dir(name) == run_id


# -- logs on WebHDFS (a fake NameNode + DataNode serving a local folder) ----------------------------
class _WebHdfs(BaseHTTPRequestHandler):
    root: Path

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, doc: dict[str, Any]) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    @staticmethod
    def _status(p: Path) -> dict[str, Any]:
        st = p.stat()
        return {"pathSuffix": p.name, "type": "DIRECTORY" if p.is_dir() else "FILE",
                "length": 0 if p.is_dir() else st.st_size, "modificationTime": int(st.st_mtime * 1000)}  # fmt: skip

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urllib.parse.urlsplit(self.path)
        if url.path.startswith("/datanode/"):  # where OPEN redirects: the bytes
            data = (self.root / url.path[len("/datanode/") :]).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        rel = urllib.parse.unquote(url.path[len("/webhdfs/v1/") :])
        p = self.root / rel
        op = urllib.parse.parse_qs(url.query)["op"][0]
        if not p.exists():
            self._json(404, {"RemoteException": {"message": f"File does not exist: /{rel}"}})
        elif op == "GETFILESTATUS":
            self._json(200, {"FileStatus": {**self._status(p), "pathSuffix": ""}})
        elif op == "LISTSTATUS":
            self._json(200, {"FileStatuses": {"FileStatus": [self._status(c) for c in sorted(p.iterdir())]}})
        elif op == "OPEN":
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_address[1]}/datanode/{rel}")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._json(400, {"RemoteException": {"message": f"unknown op {op}"}})


@pytest.fixture
def webhdfs(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    root = tmp_path / "hdfs"
    root.mkdir()
    handler = type("Handler", (_WebHdfs,), {"root": root})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_logs_on_webhdfs_are_found_streamed_and_stored_as_local_ones(tmp_path: Path, webhdfs: tuple[Path, int]) -> None:
    root, port = webhdfs
    for sub in ("plain", "zstd", "rolling", "killed"):
        shutil.copytree(FIXTURES / sub, root / "logs" / sub)
    local, ds = tmp_path / "local.duckdb", tmp_path / "tables.parquet"
    ing.ingest([root / "logs"], local, workers=1)
    outcomes = _engine_without_spark([f"webhdfs://127.0.0.1:{port}/logs"], ds)
    assert [o.status for o in outcomes] == ["incomplete", "ok", "ok", "ok"]
    assert outcomes[1].source == f"webhdfs://127.0.0.1:{port}/logs/plain/app-20261124131230-0000"
    where = ("source", "run_dir", "environment_json", "problems_json", "mtime", *WHEN)  # where, not what was read
    assert _tables(local, where) == _tables(ds, where)


# -- errors before Spark starts: named, exit status, nothing created ----------------------------------
def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--master", "spark:/nope"], 2, "--master: 'spark:/nope' is not a Spark master URL"),
        (["--master", "local[1]", "--spark-conf", "spark.x"], 2, "--spark-conf: 'spark.x' is not spark.KEY=VALUE"),
        ([], 2, "--engine spark needs --master URL"),
        (["--master", "local[1]", "--workers", "2"], 2, "--history-server and --workers are for --engine local"),
        (["--master", "spark://127.0.0.1:{closed}"], 1, "cannot connect to the Spark master at 127.0.0.1:{closed}"),
    ],
)
def test_bad_engine_settings_are_named_and_nothing_is_created(
    tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    closed = _closed_port()
    args = [a.format(closed=closed) for a in args]
    logs = _logdir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    r = CliRunner().invoke(app, ["analyze", str(logs), "--engine", "spark", "--db", str(out / "t.parquet"), *args])
    assert r.exit_code == code, r.output
    assert message.format(closed=closed) in " ".join(r.output.split()), r.output
    assert "Traceback" not in r.output and not list(out.iterdir())


def test_unreachable_hdfs_an_empty_folder_and_a_file_as_db_are_named_and_nothing_is_created(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    empty = tmp_path / "empty"
    empty.mkdir()
    (out / "x.duckdb").write_text("not a folder")
    runs = [
        ([f"webhdfs://127.0.0.1:{_closed_port()}/logs"], "t.parquet", 1, "cannot reach WebHDFS at 127.0.0.1"),
        ([str(empty)], "t.parquet", 1, "no event logs in this directory"),
        ([str(_logdir(tmp_path))], "x.duckdb", 2, "with --engine spark it names the folder of Parquet tables"),
    ]
    for logs, db, code, message in runs:
        r = CliRunner().invoke(
            app, ["analyze", *logs, "--engine", "spark", "--master", "local[1]", "--db", str(out / db)]
        )
        assert r.exit_code == code, r.output
        assert message in " ".join(r.output.split()), r.output
        assert "Traceback" not in r.output and sorted(p.name for p in out.iterdir()) == ["x.duckdb"]


def test_a_log_named_relative_to_the_driver_is_found_by_a_task_in_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path / "driver" / "logs" / "app-1", _app("app-1", tasks=10))
    monkeypatch.chdir(tmp_path / "driver")
    found, _ = discover([dataset.locate("logs")])
    (tmp_path / "executor").mkdir()
    monkeypatch.chdir(tmp_path / "executor")  # a Spark task's working folder
    staging = tmp_path / "staging"
    items = [(i, s.display, s.key) for i, s in enumerate(found)]
    assert list(dataset.parse_items(str(staging), 100, items)) == [(0, True)]


def test_a_failed_spark_job_is_said_by_its_python_error() -> None:
    from shufflelab.eventlog.spark_engine import _error_line

    text = (
        "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 2 times\n"
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "/x/dataset.py", line 80, in parse_items\n'
        "shufflelab.eventlog.remote.RemoteLogError: hdfs://nn:9000/logs/a: cannot reach WebHDFS at nn:9870 (refused)\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:600)\n"
    )
    assert _error_line(RuntimeError(text)) == (
        "shufflelab.eventlog.remote.RemoteLogError: hdfs://nn:9000/logs/a: cannot reach WebHDFS at nn:9870 (refused)"
    )


def test_a_failed_spark_job_leaves_nothing_not_even_the_folders_made_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shufflelab.eventlog import spark_engine

    def failed_job(master: str, conf: dict[str, str], staging: Path, sources: list[Any]) -> dict[int, bool]:
        dataset.parse_items(str(staging), 100, [])  # the executors had begun (their folder exists)
        (staging / dataset.INCOMING).mkdir()
        raise spark_engine.EngineError("the Spark job failed: boom")

    monkeypatch.setattr(spark_engine, "run_job", failed_job)
    logs = _logdir(tmp_path)
    dest = tmp_path / "new" / "sub" / "t.parquet"
    r = CliRunner().invoke(app, ["analyze", str(logs), "--engine", "spark", "--master", "local[1]", "--db", str(dest)])
    assert r.exit_code == 1 and "the Spark job failed: boom" in r.output, r.output
    assert not (tmp_path / "new").exists()


def test_a_query_for_one_application_opens_only_its_files(tmp_path: Path) -> None:
    ds, logs = tmp_path / "tables.parquet", tmp_path / "logs"
    _write(logs / "app-1", _app("app-1", tasks=40))
    _write(logs / "app-2", _app("app-2", tasks=20))
    _engine_without_spark([str(logs)], ds)
    for f in (ds / "tasks" / tables.app_dir("app-2")).iterdir():
        f.write_bytes(b"not parquet")  # damaged
    store = Store(ds)
    assert len(store.query("SELECT * FROM tasks WHERE run_id = ?", ["app-1"])) == 40  # app-2's file not opened
    assert len(store.query("SELECT * FROM tasks WHERE run_id IN ('app-1')")) == 40
    with pytest.raises(Exception, match="not parquet|Parquet|magic"):
        store.query("SELECT * FROM tasks")


def test_a_log_named_twice_is_read_once_as_by_the_local_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from shufflelab.eventlog import spark_engine

    def job_here(master: str, conf: dict[str, str], staging: Path, sources: list[Any]) -> dict[int, bool]:
        items = [(i, s.display, s.key) for i, s in enumerate(sources)]  # the executors' function, run here
        return dict(dataset.parse_items(str(staging), 100, items))

    monkeypatch.setattr(spark_engine, "run_job", job_here)
    logs = _logdir(tmp_path)
    twice = [str(logs), str(logs / "app-1.zstd")]
    local, ds = tmp_path / "local.duckdb", tmp_path / "t.parquet"
    r = CliRunner().invoke(app, ["analyze", *twice, "--db", str(local)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["analyze", *twice, "--engine", "spark", "--master", "local[1]", "--db", str(ds)])
    assert r.exit_code == 0 and "4 application(s) written" in " ".join(r.output.split()), r.output
    assert _tables(local) == _tables(ds)
