"""``shufflelab analyze --history-server URL --app ID`` against a real Spark History Server started
from pyspark's own jars on 127.0.0.1 (always stopped): the same rows as analysing the file."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from test_eventlog_fixtures import _variant
from typer.testing import CliRunner

from shufflelab.cli import app
from shufflelab.emulate.spark import FAST_JVM_OPTS
from shufflelab.eventlog.history import HistoryServerError, LocalHistoryServer, fetch_logs
from shufflelab.results import Store

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not shutil.which("java"), reason="needs java to run the Spark History Server"),
]

LOGS = [("spark-4.3", "zstd"), ("spark-4.3", "rolling"), ("spark-3.5", "lz4")]
TABLES = {
    "tasks": "stage_id, stage_attempt, task_id",
    "stages": "stage_id, stage_attempt",
    "jobs": "job_id",
    "executors": "executor_id",
    "sql_executions": "execution_id",
    "apps": "app_id",
}


def _app_id(path: Path) -> str:
    name = path.name
    return name[len("eventlog_v2_") :] if path.is_dir() else name.split(".")[0]


@pytest.fixture(scope="module")
def history_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalHistoryServer]:
    logs = tmp_path_factory.mktemp("hs-logs")
    for line, variant in LOGS:
        src = _variant(line, variant)
        if src.is_dir():
            shutil.copytree(src, logs / src.name)
        else:
            shutil.copy2(src, logs / src.name)
    # the tests' quicker JVM (spark.fast_jvm's options): the file took 14.1-15.8 CPU-s, 18.7-18.8 without
    with LocalHistoryServer(logs, tmp_path_factory.mktemp("hs-work"), java_options=FAST_JVM_OPTS.split()) as hs:
        want = {_app_id(_variant(line, v)) for line, v in LOGS}
        hs.wait(lambda: want <= {a["id"] for a in hs.get("/api/v1/applications") or []}, 180.0, "list the logs")
        yield hs


def _table(db: Path, table: str) -> pd.DataFrame:
    df = Store(db).query(f"SELECT * EXCLUDE (run_id) FROM {table} ORDER BY {TABLES[table]}")
    return df.reset_index(drop=True)


@pytest.mark.parametrize(("line", "variant"), LOGS)
def test_history_server_equals_the_file(
    history_server: LocalHistoryServer, tmp_path: Path, line: str, variant: str
) -> None:
    path = _variant(line, variant)
    app_id = _app_id(path)
    runner = CliRunner()
    via_hs, via_file = tmp_path / "hs.duckdb", tmp_path / "file.duckdb"
    r = runner.invoke(app, ["analyze", "--history-server", history_server.url, "--app", app_id, "--db", str(via_hs)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["analyze", str(path), "--db", str(via_file)])
    assert r.exit_code == 0, r.output
    for table in TABLES:
        a, b = _table(via_hs, table), _table(via_file, table)
        assert len(a) > 0
        pd.testing.assert_frame_equal(a, b)
    cols = "run_id, scenario_id, status, n_tasks, n_jobs, job_time_s, total_cores, failed_tasks, stage_reattempts"
    pd.testing.assert_frame_equal(
        Store(via_hs).query(f"SELECT {cols} FROM runs"), Store(via_file).query(f"SELECT {cols} FROM runs")
    )
    # fetching again: unchanged, skipped
    r = runner.invoke(app, ["analyze", "--history-server", history_server.url, "--app", app_id, "--db", str(via_hs)])
    assert r.exit_code == 0 and "1 unchanged since the last run (skipped)" in r.output


def test_missing_application_and_server_down_are_named(history_server: LocalHistoryServer, tmp_path: Path) -> None:
    url = f"{history_server.url}/api/v1/applications/app-nope/logs"
    with pytest.raises(HistoryServerError, match=f"^{url}: the History Server has no application 'app-nope'"):
        fetch_logs(history_server.url, "app-nope", tmp_path)
    r = CliRunner().invoke(
        app, ["analyze", "--history-server", history_server.url, "--app", "app-nope", "--db", str(tmp_path / "x.db")]
    )
    assert r.exit_code == 1 and f"error: {url}: the History Server has no application" in r.output
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(
        HistoryServerError, match=f"^{down}/api/v1/applications/a/logs: the History Server cannot be reached"
    ):
        fetch_logs(down, "a", tmp_path)


def test_analyze_from_the_history_server_writes_the_report(history_server: LocalHistoryServer, tmp_path: Path) -> None:
    line, variant = LOGS[0]
    app_id = _app_id(_variant(line, variant))
    out = tmp_path / "rep"
    args = ["analyze", "--history-server", history_server.url, "--app", app_id, "--db", str(tmp_path / "hs.duckdb")]
    r = CliRunner().invoke(app, [*args, "--out", str(out), "--link-gbps", "1"])
    assert r.exit_code == 0, r.output
    md = (out / "report.md").read_text()
    assert f"| {app_id} |" in md and "### What pays off" in md and "network efficiency at 1 Gbit/s" in md
    # the server gone: the URL is named, nothing was read, no report
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
    r = CliRunner().invoke(
        app,
        [
            "analyze",
            "--history-server",
            down,
            "--app",
            app_id,
            "--db",
            str(tmp_path / "x.duckdb"),
            "--out",
            str(tmp_path / "none"),
        ],  # fmt: skip
    )
    assert r.exit_code == 1 and "the History Server cannot be reached" in " ".join(r.output.split())
    assert not (tmp_path / "none").exists()
