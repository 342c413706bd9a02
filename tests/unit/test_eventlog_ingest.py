"""Event logs into the results store: incremental and idempotent, one application atomically, bad
input named, the CLI's exit status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_eventlog_read import APP, TEXT, _lz4_stream, _write, _zstd_stream
from typer.testing import CliRunner

from shufflelab.cli import app
from shufflelab.eventlog import ingest as ing
from shufflelab.results import Store

COUNTED = ("runs", "apps", "jobs", "stages", "tasks", "executors", "sql_executions", "eventlog_sources")


def _app(app_id: str, name: str = "demo", tasks: int = 300, end: bool = True) -> bytes:
    out = []
    for e in APP:
        e = json.loads(json.dumps(e))
        if e["Event"] == "SparkListenerApplicationStart":
            e["App ID"], e["App Name"] = app_id, name
        if e["Event"] == "SparkListenerTaskEnd" and e["Task Info"]["Task ID"] >= tasks:
            continue
        if e["Event"] == "SparkListenerApplicationEnd" and not end:
            continue
        out.append(json.dumps(e).encode() + b"\n")
    return b"".join(out)


def _counts(db: Path) -> dict[str, int]:
    s = Store(db)
    return {t: int(s.query(f"SELECT count(*) AS n FROM {t}")["n"][0]) for t in COUNTED}


def _logdir(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    _write(d / "app-1.zstd", _zstd_stream(_app("app-1")))
    _write(d / "app-2.lz4", _lz4_stream(_app("app-2", tasks=120)))
    _write(d / "app-3", _app("app-3", name="other", tasks=50))
    rolling = d / "eventlog_v2_app-4"
    _write(rolling / "events_1_app-4.zstd", _zstd_stream(_app("app-4", tasks=10)))
    _write(rolling / "appstatus_app-4", b"")
    return d


def test_a_directory_is_ingested_once_and_rerunning_changes_nothing(tmp_path: Path) -> None:
    d, db = _logdir(tmp_path), tmp_path / "e.duckdb"
    first = ing.ingest([d], db)
    assert [o.action for o in first.outcomes] == ["ingested"] * 4
    assert [o.counts["tasks"] for o in first.outcomes] == [300, 120, 50, 10]
    before = _counts(db)
    assert before == {"runs": 4, "apps": 4, "jobs": 4, "stages": 4, "tasks": 480, "executors": 4,
                      "sql_executions": 0, "eventlog_sources": 4}  # fmt: skip
    again = ing.ingest([d], db)
    assert [o.action for o in again.outcomes] == ["skipped"] * 4
    assert _counts(db) == before
    runs = Store(db).query("SELECT run_id, scenario_id, rep, status, backend, n_tasks FROM runs ORDER BY run_id")
    assert list(runs["run_id"]) == ["app-1", "app-2", "app-3", "app-4"]
    assert list(runs["scenario_id"]) == ["app:demo", "app:demo", "app:other", "app:demo"]
    assert list(runs["rep"]) == [1, 2, 1, 3] and set(runs["status"]) == {"ok"} and set(runs["backend"]) == {"eventlog"}


def test_new_and_grown_logs_are_picked_up_and_replace_their_rows(tmp_path: Path) -> None:
    d, db = tmp_path / "logs", tmp_path / "e.duckdb"
    running = _write(d / "app-5.inprogress", _app("app-5", tasks=100, end=False))
    ing.ingest([d], db)
    row = Store(db).query("SELECT status, n_tasks, rep FROM runs WHERE run_id = 'app-5'")
    assert (row["status"][0], row["n_tasks"][0]) == ("incomplete", 100)
    # the application finished: Spark renames the file; a new application appeared
    running.unlink()
    _write(d / "app-5", _app("app-5", tasks=300))
    _write(d / "app-6.zstd", _zstd_stream(_app("app-6")))
    out = ing.ingest([d], db)
    assert sorted((o.source.rsplit("/", 1)[1], o.action) for o in out.outcomes) == [
        ("app-5", "ingested"), ("app-6.zstd", "ingested")]  # fmt: skip
    row = Store(db).query("SELECT status, n_tasks, rep FROM runs WHERE run_id = 'app-5'")
    assert (row["status"][0], row["n_tasks"][0], row["rep"][0]) == ("ok", 300, 1)
    assert _counts(db)["tasks"] == 600 and _counts(db)["eventlog_sources"] == 2
    # a rolling log that rolled to a new file
    r = d / "eventlog_v2_app-7"
    _write(r / "events_1_app-7.zstd", _zstd_stream(_app("app-7", tasks=10, end=False)))
    _write(r / "appstatus_app-7.inprogress", b"")
    ing.ingest([d], db)
    lines = TEXT.split(b"\n")[:-1]
    _write(r / "events_2_app-7.zstd", _zstd_stream(b"\n".join(lines[-2:]) + b"\n"))  # JobEnd .. ApplicationEnd
    (r / "appstatus_app-7.inprogress").rename(r / "appstatus_app-7")
    out = ing.ingest([d], db)
    assert [o.action for o in out.outcomes if "app-7" in o.source] == ["ingested"]
    src = Store(db).query("SELECT last_index, n_files, in_progress FROM eventlog_sources WHERE run_id = 'app-7'")
    assert (src["last_index"][0], src["n_files"][0], bool(src["in_progress"][0])) == (2, 2, False)


def test_one_application_is_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d, db = tmp_path / "logs", tmp_path / "e.duckdb"
    _write(d / "app-1", _app("app-1"))
    ing.ingest([d], db)
    before = _counts(db)
    _write(d / "app-1", _app("app-1", tasks=250))  # changed: it will be re-read
    real = ing._write_rest

    def crash(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        raise KeyboardInterrupt  # after every row of the application was inserted, before commit

    monkeypatch.setattr(ing, "_write_rest", crash)
    with pytest.raises(KeyboardInterrupt):
        ing.ingest([d], db, batch=100)  # three batches of task rows, then the interruption
    assert _counts(db) == before  # the old copy intact, nothing of the new one


def test_bad_inputs_are_named_and_what_was_read_is_kept(tmp_path: Path) -> None:
    d, db = tmp_path / "logs", tmp_path / "e.duckdb"
    _write(d / "notes.json", b'{"hello": "world"}\n')
    blob = _zstd_stream(_app("app-8"))
    cut = _write(d / "app-8.zstd", blob[: len(blob) // 2])
    out = {o.source: o for o in ing.ingest([d], db).outcomes}
    assert out[str(d / "notes.json")].action == "unreadable"
    assert out[str(d / "notes.json")].problems == [
        f"{d / 'notes.json'}: not a Spark event log (no line is a Spark listener event)"
    ]
    part = out[str(cut)]
    assert part.action == "ingested" and part.status == "partial" and 0 < part.counts["tasks"] < 300
    assert part.cause is not None and part.cause.startswith(f"{cut}: zstd stream ends inside a frame")
    src = Store(db).query("SELECT partial, problems_json FROM eventlog_sources")
    assert bool(src["partial"][0]) and str(cut) in src["problems_json"][0]


def test_cli_exit_status_is_nonzero_only_when_nothing_was_read(tmp_path: Path) -> None:
    runner = CliRunner()
    db = tmp_path / "e.duckdb"
    bad = _write(tmp_path / "bad" / "x.json", b"[1, 2, 3]\n")
    r = runner.invoke(app, ["analyze", str(bad), str(tmp_path / "nothing-here"), "--db", str(db)])
    assert r.exit_code == 1
    assert f"{bad}: not a Spark event log" in r.output and f"{tmp_path / 'nothing-here'}: no such file" in r.output
    good = _write(tmp_path / "ok" / "app-9.lz4", _lz4_stream(_app("app-9")))
    r = runner.invoke(app, ["analyze", str(bad), str(good), "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert "1 application(s) written" in r.output and f"{bad}: not a Spark event log" in r.output
    r = runner.invoke(app, ["analyze", str(good), "--db", str(db)])
    assert r.exit_code == 0 and "1 unchanged since the last run (skipped)" in r.output
    newer = _write(tmp_path / "new" / "app-10", _app("app-10") + b'{"Event":"SparkListenerNew","a":1}\n')
    r = runner.invoke(app, ["analyze", str(newer), "--db", str(db)])
    assert r.exit_code == 0 and "app-10: events this version does not know, ignored: SparkListenerNew x1" in r.output
    r = runner.invoke(app, ["analyze", "--db", str(db), "--history-server", "http://127.0.0.1:9"])
    assert r.exit_code == 2 and "--history-server and --app go together" in r.output


def test_an_interrupted_read_leaves_nothing_and_stale_staged_rows_are_removed(tmp_path: Path) -> None:
    d, db = tmp_path / "logs", tmp_path / "e.duckdb"
    _write(d / "app-1", _app("app-1"))
    ing.ingest([d], db)
    before = _counts(db)
    _write(d / "app-2", _app("app-2") * 20)  # 6000 task rows: staged in batches while read
    seen = [0]

    def interrupt(n: int) -> None:
        seen[0] += n
        if seen[0] > 1_500_000:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ing.ingest([d], db, batch=500, on_bytes=interrupt)
    assert _counts(db) == before
    # a killed ingest (no cleanup ran) leaves staged rows under a run id no run has
    with Store(db).connect() as con:
        con.execute("INSERT INTO tasks (run_id, task_id) VALUES ('ingesting:dead', 1)")
    ing.ingest([d], db)
    assert Store(db).query("SELECT count(*) AS n FROM tasks WHERE run_id LIKE 'ingesting:%'")["n"][0] == 0
    assert _counts(db)["runs"] == 2


def _tables(db: Path) -> dict[str, list[Any]]:
    s = Store(db)
    out = {}
    for t in COUNTED:
        df = s.query(f"SELECT * FROM {t}")
        cols = sorted(c for c in df.columns if c != "ingested_at")
        out[t] = sorted(map(repr, df[cols].itertuples(index=False)))
    return out


def test_logs_parsed_in_worker_processes_are_stored_as_when_read_in_one(tmp_path: Path) -> None:
    d = _logdir(tmp_path)
    _write(d / "broken", _app("app-5")[:-40] + b"\n" + _app("app-5"))  # damage inside: a partial application
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    a = ing.ingest([d], one, workers=1)
    b = ing.ingest([d], two, workers=2)
    assert [(o.source, o.action, o.run_id, o.status, o.counts, o.problems) for o in a.outcomes] == [
        (o.source, o.action, o.run_id, o.status, o.counts, o.problems) for o in b.outcomes
    ]
    assert [o.status for o in b.outcomes].count("partial") == 1
    assert _tables(one) == _tables(two)


def test_a_log_gone_before_its_worker_reads_it_is_named_as_in_one_process(tmp_path: Path) -> None:
    from shufflelab.eventlog import worker
    from shufflelab.eventlog.files import discover

    d = _logdir(tmp_path)
    found, _ = discover([d])
    gone = found[0]
    Path(gone.display).unlink()  # after discovery: the worker cannot find it again
    assert worker.read_to_csv(gone.display, gone.key, str(tmp_path / "t.csv"), 100) is None
    a = ing.ingest([], tmp_path / "one.duckdb", sources=found, workers=1)
    b = ing.ingest([], tmp_path / "two.duckdb", sources=found, workers=2)
    assert [(o.action, o.problems) for o in a.outcomes] == [(o.action, o.problems) for o in b.outcomes]
    assert b.outcomes[0].action == "unreadable" and "app-1.zstd" in b.outcomes[0].problems[0]


def test_analyze_reads_logs_without_pandas_pyarrow_or_matplotlib(tmp_path: Path) -> None:
    """Their imports were most of the command's CPU time on a big log (docs/benchmarks.md)."""
    import subprocess
    import sys

    logs = _logdir(tmp_path)
    code = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print('HEAVY', sorted(m for m in ('pandas', 'pyarrow', 'numpy', 'matplotlib')"
        " if m in sys.modules)))\n"
        f"sys.argv = ['shufflelab', 'analyze', {str(logs)!r}, '--db', {str(tmp_path / 's.duckdb')!r}]\n"
        "runpy.run_module('shufflelab.cli', run_name='__main__')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "application(s) written" in out.stdout, out.stdout + out.stderr
    assert "HEAVY []" in out.stdout


@pytest.mark.parametrize(("cores", "pool"), [(2, False), (4, True)])
def test_the_pool_is_the_default_from_three_cores_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cores: int, pool: bool
) -> None:
    """On two cores one process already keeps both busy (its parser and DuckDB's inserting thread):
    workers would add their start-up and memory for no time saved (docs/benchmarks.md)."""
    started: list[int] = []
    monkeypatch.setattr(ing.os, "cpu_count", lambda: cores)
    monkeypatch.setattr(ing, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(ing, "_parallel", lambda con, todo, workers, *a: started.append(workers) or [])
    ing.ingest([_logdir(tmp_path)], tmp_path / "s.duckdb")
    assert started == ([min(cores, 4)] if pool else [])
    started.clear()
    ing.ingest([_logdir(tmp_path)], tmp_path / "t.duckdb", workers=2)  # asked for: always
    assert started == [2]
