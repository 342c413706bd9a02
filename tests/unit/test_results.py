from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from shufflelab.results import RunRecord, Store


def _record(run_id: str, scenario: str, rep: int, status: str = "ok", n_tasks: int = 3) -> RunRecord:
    tasks = pd.DataFrame({"stage_id": [0] * n_tasks, "task_id": list(range(n_tasks)), "remote_bytes": [10] * n_tasks})
    return RunRecord(
        run={
            "run_id": run_id,
            "scenario_id": scenario,
            "rep": rep,
            "attempt": 1,
            "status": status,
            "job_time_s": 1.5,
        },
        tables={
            "tasks": tasks,
            "queue_samples": pd.DataFrame({"t": [1.0, 1.1], "backlog_bytes": [0, 1500]}),
        },
    )


def test_write_and_resume_bookkeeping(tmp_path: Path) -> None:
    st = Store(tmp_path / "x.duckdb")
    assert st.completed() == set()
    st.write_run(_record("a-r1", "a", 1))
    st.write_run(_record("a-r2", "a", 2, status="failed"))
    assert st.completed() == {("a", 1)}
    assert st.attempts("a", 2) == 1
    df = st.query("SELECT run_id, count(*) AS n FROM tasks GROUP BY run_id ORDER BY run_id")
    assert df.to_dict("records") == [{"run_id": "a-r1", "n": 3}, {"run_id": "a-r2", "n": 3}]


def test_rewriting_a_run_replaces_its_rows(tmp_path: Path) -> None:
    st = Store(tmp_path / "x.duckdb")
    st.write_run(_record("a-r1", "a", 1, n_tasks=3))
    st.write_run(_record("a-r1", "a", 1, n_tasks=5))
    assert st.query("SELECT count(*) AS n FROM tasks")["n"][0] == 5
    assert st.query("SELECT count(*) AS n FROM runs")["n"][0] == 1


def test_a_failing_write_leaves_nothing(tmp_path: Path) -> None:
    st = Store(tmp_path / "x.duckdb")
    bad = _record("b-r1", "b", 1)
    bad.tables["tasks"]["no_such_column"] = 1
    with pytest.raises(Exception):  # noqa: B017 - any DuckDB binder error
        st.write_run(bad)
    assert st.query("SELECT count(*) AS n FROM runs")["n"][0] == 0
    assert st.query("SELECT count(*) AS n FROM queue_samples")["n"][0] == 0


def test_read_only_open_of_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such results file"):
        Store(tmp_path / "none.duckdb").query("SELECT 1")


def test_runs_with_values_expands_matrix_values_and_cases(tmp_path: Path) -> None:
    st = Store(tmp_path / "x.duckdb")
    st.add_scenarios(
        [
            {"scenario_id": "a", "label": "cc=reno,case=none", "values": {"tcp.congestion_control": "reno",
             "case": "none"}, "spec_json": "{}", "backend": "emulate"},
            {"scenario_id": "b", "label": "cc=bbr,case=shared", "values": {"tcp.congestion_control": "bbr",
             "case": "shared"}, "spec_json": "{}", "backend": "emulate"},
        ]
    )  # fmt: skip
    st.write_run(_record("b-r1", "b", 1))
    st.write_run(_record("a-r1", "a", 1))
    df, keys = st.runs_with_values()
    assert keys == ["tcp.congestion_control", "case"]
    assert sorted(zip(df["label"], df["case"], strict=True)) == [
        ("cc=bbr,case=shared", "shared"),
        ("cc=reno,case=none", "none"),
    ]


def test_a_writer_waits_for_another_process_holding_the_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    st = Store(tmp_path / "x.duckdb")
    st.write_run(_record("a-r1", "a", 1))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True);"
         " time.sleep(1.5); c.close()", str(st.path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    st.write_run(_record("a-r2", "a", 2))  # would raise a lock error without waiting
    holder.wait()
    assert st.completed() == {("a", 1), ("a", 2)}


def test_queue_samples_marks_column_is_nullable_and_old_files_gain_it(tmp_path: Path) -> None:
    import duckdb

    old = tmp_path / "old.duckdb"
    con = duckdb.connect(str(old))  # a file written before the marks column existed
    con.execute(
        "CREATE TABLE queue_samples (run_id VARCHAR, t DOUBLE, t_rel_s DOUBLE, dev VARCHAR, backlog_bytes BIGINT, "
        "backlog_packets BIGINT, drops BIGINT, sent_bytes BIGINT, sent_packets BIGINT, overlimits BIGINT, "
        "tx_bytes BIGINT, rx_bytes BIGINT)"
    )
    con.execute("INSERT INTO queue_samples (run_id, t, backlog_bytes) VALUES ('old', 1.0, 10)")
    con.close()
    for path in (old, tmp_path / "new.duckdb"):
        st = Store(path)
        st.write_run(_record("kernel-r1", "k", 1))  # the kernel sampler's columns: no marks
        switch = _record("switch-r1", "s", 1)
        switch.tables["queue_samples"] = pd.DataFrame({"t": [1.0, 1.1], "backlog_bytes": [0, 1500], "marks": [0, 7]})
        switch.run.bottleneck_marks = 7
        st.write_run(switch)
        df = st.query("SELECT run_id, marks FROM queue_samples WHERE run_id <> 'old' ORDER BY run_id, t")
        assert df["run_id"].tolist() == ["kernel-r1", "kernel-r1", "switch-r1", "switch-r1"]
        assert df["marks"].isna().tolist() == [True, True, False, False]
        assert df["marks"].tolist()[2:] == [0, 7]
        runs = st.query("SELECT run_id, bottleneck_marks FROM runs ORDER BY run_id")
        assert runs["bottleneck_marks"].isna().tolist() == [True, False]


def test_export_parquet_skips_empty_and_named_tables(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import duckdb

    from shufflelab.results import Store

    st = Store(tmp_path / "x.duckdb")
    with st.connect() as con:
        con.execute("INSERT INTO runs (run_id, status) VALUES ('a', 'ok'), ('b', 'failed')")
        con.execute("INSERT INTO queue_samples (run_id, t) VALUES ('a', 1.0)")
    written = st.export_parquet(tmp_path / "data", skip=("queue_samples",))
    assert written == ["runs"]
    assert duckdb.sql(f"SELECT count(*) FROM '{tmp_path / 'data' / 'runs.parquet'}'").fetchone()[0] == 2
    back = Store(tmp_path / "back.duckdb")
    assert back.import_parquet(tmp_path / "data") == ["runs"]
    assert back.query("SELECT run_id, status FROM runs ORDER BY run_id").values.tolist() == [
        ["a", "ok"],
        ["b", "failed"],
    ]


def test_import_parquet_refuses_what_is_not_a_results_table(tmp_path: Path) -> None:
    import duckdb

    from shufflelab.results import Store

    (tmp_path / "data").mkdir()
    duckdb.sql(f"COPY (SELECT 1 AS run_id, 2 AS nope) TO '{tmp_path / 'data' / 'runs.parquet'}' (FORMAT parquet)")
    with pytest.raises(ValueError, match="runs.parquet: columns not in table runs: nope"):
        Store(tmp_path / "a.duckdb").import_parquet(tmp_path / "data")
    (tmp_path / "data" / "runs.parquet").rename(tmp_path / "data" / "other.parquet")
    with pytest.raises(ValueError, match="other.parquet: not a results table"):
        Store(tmp_path / "b.duckdb").import_parquet(tmp_path / "data")


def test_a_file_whose_tables_lost_their_keys_can_be_resumed(tmp_path: Path) -> None:
    import duckdb

    st = Store(tmp_path / "x.duckdb")
    st.init_experiment("e", "first", "{}", "e.toml")
    st.write_run(_record("a-r1", "a", 1))
    # A copy made with CREATE TABLE ... AS keeps the rows and drops the constraints.
    con = duckdb.connect(str(tmp_path / "x.duckdb"))
    for table in ("experiments", "runs"):
        con.execute(f"CREATE TABLE {table}_copy AS SELECT * FROM {table}")
        con.execute(f"DROP TABLE {table}")
        con.execute(f"ALTER TABLE {table}_copy RENAME TO {table}")
    con.execute("INSERT INTO runs (run_id, scenario_id, rep, status) VALUES ('a-r1', 'a', 1, 'ok')")  # a duplicate
    con.close()
    st.init_experiment("e", "second", "{}", "e.toml")
    st.write_run(_record("a-r2", "a", 2))
    assert st.completed() == {("a", 1), ("a", 2)}
    assert st.query("SELECT count(*) AS n FROM runs")["n"][0] == 2
    assert st.query("SELECT description FROM experiments")["description"].tolist() == ["second"]
    keys = st.query("SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'")
    assert set(keys["table_name"]) >= {"experiments", "scenarios", "runs"}


def _cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from shufflelab.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "1000"})


def _not_a_store(tmp_path: Path, kind: str) -> Path:
    import duckdb

    path = tmp_path / f"{kind}.duckdb"
    if kind == "text":
        path.write_text("run_id,job_time_s\nr1,12.0\n")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "other-duckdb":
        with duckdb.connect(str(path)) as con:
            con.execute("CREATE TABLE runs (run_id VARCHAR)")
    elif kind == "folder":
        path.mkdir()
    return path  # "missing": nothing there


@pytest.mark.parametrize("kind", ["text", "empty", "other-duckdb", "folder", "missing"])
@pytest.mark.parametrize("command", ["diagnose", "report", "whatif", "calibrate"])
def test_a_file_that_is_not_a_results_store(tmp_path: Path, kind: str, command: str) -> None:
    """Regression: a text file, an empty file or a DuckDB file without the lab's tables ended in a
    traceback. Every command that reads a results file names the file and says why (exit 2)."""
    path = _not_a_store(tmp_path, kind)
    r = _cli(command, str(path))
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), (r.output, r.exception)
    why = {
        "text": "not a shufflelab results file (not a DuckDB database)",
        "empty": "not a shufflelab results file (not a DuckDB database)",
        "other-duckdb": "not a shufflelab results file (a DuckDB file without the table(s) experiments, "
        "scenarios, jobs, stages, tasks)",
        "folder": "is a folder, not a results file (.duckdb)",
        "missing": "no such results file",
    }[kind]
    assert f"{path}: {why}" in r.output, r.output
    assert "Traceback" not in r.output


@pytest.mark.parametrize("kind", ["text", "empty", "other-duckdb", "folder", "missing"])
def test_the_store_refuses_what_is_not_a_results_file(tmp_path: Path, kind: str) -> None:
    from shufflelab.results import Store, StoreError

    path = _not_a_store(tmp_path, kind)
    with pytest.raises(StoreError, match=f"^{re.escape(str(path))}: "):
        Store(path).query("SELECT * FROM runs")


def test_the_runs_table_is_the_run_row_and_old_files_gain_its_new_columns(tmp_path: Path) -> None:
    import dataclasses

    import duckdb

    from shufflelab.results import RunRow

    old = tmp_path / "old.duckdb"
    con = duckdb.connect(str(old))  # the first release's runs table: none of the later columns
    con.execute(
        "CREATE TABLE runs (run_id VARCHAR PRIMARY KEY, scenario_id VARCHAR, rep INTEGER, attempt INTEGER, "
        "status VARCHAR, cause VARCHAR, backend VARCHAR, started_at DOUBLE, finished_at DOUBLE, wall_s DOUBLE, "
        "setup_s DOUBLE, session_s DOUBLE, app_id VARCHAR, job_time_s DOUBLE, n_jobs INTEGER, n_tasks INTEGER, "
        "executor_cpu_s DOUBLE, executor_run_s DOUBLE, fetch_wait_s DOUBLE, remote_bytes_read BIGINT, "
        "local_bytes_read BIGINT, shuffle_bytes_written BIGINT, bottleneck_tx_bytes BIGINT, bottleneck_drops BIGINT, "
        "bottleneck_max_backlog_bytes BIGINT, cc_configured VARCHAR, cc_observed VARCHAR, run_dir VARCHAR, "
        "environment_json VARCHAR)"
    )
    con.execute("INSERT INTO runs (run_id, scenario_id, rep, status) VALUES ('old-r1', 'old', 1, 'ok')")
    con.close()
    names = [f.name for f in dataclasses.fields(RunRow)]
    for path in (tmp_path / "new.duckdb", old):
        st = Store(path)
        st.write_run(RunRecord(RunRow(run_id="a-r1", scenario_id="a", rep=1, status="ok", n_tasks=4), {}))
        cols = st.query("DESCRIBE runs")
        have = dict(zip(cols["column_name"], cols["column_type"], strict=True))
        assert set(names) <= set(have)
        assert have["rep"] == "INTEGER" and have["remote_bytes_read"] == "BIGINT" and have["wall_s"] == "DOUBLE"
        rows = st.query("SELECT run_id, n_tasks, n_apps FROM runs ORDER BY run_id")
        assert rows.loc[rows["run_id"] == "a-r1", "n_tasks"].tolist() == [4]
        assert set(rows["n_apps"]) == {1}  # the column's default, old rows too
    # a fresh store has exactly the row's columns, in its order
    assert list(Store(tmp_path / "new.duckdb").query("DESCRIBE runs")["column_name"]) == names


def test_a_run_row_with_an_unknown_column_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown column"):
        RunRecord({"run_id": "a", "scenario_id": "a", "rep": 1, "status": "ok", "job_secs": 1.0}, {})
