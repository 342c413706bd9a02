"""The Rust core (crates/eventlogcore) and the Python path read logs into the same tables.

Every fixture log (Spark 3.5 and 4.3, every codec, rolling, killed, failed) and a few damaged
ones are parsed and ingested twice, once with the task ends decoded by the Rust core and once by
the Python path (``events.RUST = None``); the parsed logs and every table of the two stores must be
equal, value for value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from shufflelab import eventlog
from shufflelab.eventlog import events
from shufflelab.eventlog.files import discover
from shufflelab.eventlog.ingest import ingest
from shufflelab.eventlog.read import read_source
from shufflelab.results import RUN_TABLES

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "eventlogs"
FIXTURES = [
    m.parent / v["path"]
    for m in sorted(HERE.glob("spark-*/manifest.json"))
    for v in json.loads(m.read_text())["variants"].values()
]
PLAIN = HERE / "spark-4.3" / "plain" / "app-20261124131230-0000"


@pytest.fixture(autouse=True)
def _core() -> None:
    if events.RUST is None:
        pytest.fail("shufflelab_eventlogcore is not installed: build crates/eventlogcore (scripts/setup.sh)")


def _python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "RUST", None)


def _tables(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = [*RUN_TABLES, "runs", "scenarios", "experiments", "eventlog_sources"]
        out = {}
        for t in dict.fromkeys(names):
            cols = [c for c, typ, *_ in con.execute(f"DESCRIBE {t}").fetchall() if not typ.startswith("TIMESTAMP")]
            out[t] = con.execute(f"SELECT {', '.join(cols)} FROM {t} ORDER BY ALL").fetchall()  # (not when written)
        return out
    finally:
        con.close()


def _both(monkeypatch: pytest.MonkeyPatch, fn: Any) -> tuple[Any, Any]:
    rust = fn("rust")
    with monkeypatch.context() as m:
        _python(m)
        python = fn("python")
    return rust, python


@pytest.mark.parametrize("path", FIXTURES, ids=[f"{p.parent.parent.name}-{p.parent.name}" for p in FIXTURES])
def test_rust_and_python_parse_every_fixture_alike(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rust, python = _both(monkeypatch, lambda _: eventlog.parse(path))
    assert rust.tasks and rust == python  # every row, total and counter (fields checked, lines, problems)


def test_rust_and_python_give_the_same_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    def batches(_: str) -> list[dict[str, list[Any]]]:
        out: list[dict[str, list[Any]]] = []
        read_source(discover([PLAIN])[0][0], on_tasks=lambda cols, log: out.append(cols), batch=7)
        return out

    rust, python = _both(monkeypatch, batches)
    assert rust and rust == python


def _damaged(tmp: Path) -> Path:
    """The plain fixture with its task ends altered: a float and a null where integers go, strings
    that CSV must quote (quotes, commas, a newline, a NUL), a torn task end inside the log, an
    unknown field, and a torn last line."""
    lines = PLAIN.read_bytes().split(b"\n")
    ends = [i for i, x in enumerate(lines) if x.startswith(b'{"Event":"SparkListenerTaskEnd"')]
    ev = json.loads(lines[ends[0]])
    ev["Task Info"]["Host"] = 'a "quoted", host\nwith a NUL \x00 and é'
    ev["Task Info"]["Executor ID"] = ""
    ev["Task Info"]["New Field"] = 1
    lines[ends[0]] = json.dumps(ev, separators=(",", ":")).encode()
    ev = json.loads(lines[ends[1]])
    ev["Task Metrics"]["Executor Run Time"] = 12.0  # not an integer: the Python path's dictionary reading
    lines[ends[1]] = json.dumps(ev, separators=(",", ":")).encode()
    ev = json.loads(lines[ends[2]])
    ev["Task Metrics"]["Executor CPU Time"] = None
    lines[ends[2]] = json.dumps(ev, separators=(",", ":")).encode()
    lines[ends[3]] = lines[ends[3]][:200]  # torn inside the log
    start = next(i for i, x in enumerate(lines) if x.startswith(b'{"Event":"SparkListenerApplicationStart"'))
    ev = json.loads(lines[start])
    ev["App ID"] += "-damaged"  # (stored beside the plain fixture)
    lines[start] = json.dumps(ev, separators=(",", ":")).encode()
    out = tmp / "app-damaged"
    out.write_bytes(b"\n".join(lines).rstrip(b"\n") + b'\n{"Event":"SparkListenerTaskEnd","Stage ID":')
    return out


def test_rust_and_python_parse_a_damaged_log_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _damaged(tmp_path)
    rust, python = _both(monkeypatch, lambda _: eventlog.parse(log))
    assert rust == python
    assert rust.damaged_lines == 1 and rust.truncated_last_line
    assert rust.unknown_fields["SparkListenerTaskEnd.Task Info.New Field"] == 1
    assert 'a "quoted", host\nwith a NUL \x00 and é' in {t.host for t in rust.tasks}


def test_rust_and_python_ingest_into_the_same_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = [*FIXTURES, _damaged(tmp_path)]

    def store(name: str) -> dict[str, list[tuple[Any, ...]]]:
        db = tmp_path / f"{name}.duckdb"
        report = ingest([], db, sources=[s for p in logs for s in discover([p])[0]], batch=50, workers=1)
        assert all(o.action == "ingested" for o in report.outcomes)
        return _tables(db)

    rust, python = _both(monkeypatch, store)
    assert rust["tasks"] and rust == python
    con = duckdb.connect(str(tmp_path / "rust.duckdb"), read_only=True)
    hosts = {r[0] for r in con.execute("SELECT host FROM tasks").fetchall()}
    assert 'a "quoted", host\nwith a NUL \x00 and é' in hosts
    empty, null = con.execute(
        "SELECT count(*) FILTER (executor_id = ''), count(*) FILTER (executor_id IS NULL) FROM tasks"
    ).fetchone()  # type: ignore[misc]
    assert (empty, null) == (1, 0)  # an empty string stays one (not a missing value)
    con.close()


def test_a_row_longer_than_a_csv_line_is_stored_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB's CSV reader refuses lines over 2 MiB: such a batch goes to the store as Parquet."""
    lines = PLAIN.read_bytes().split(b"\n")
    at = next(i for i, x in enumerate(lines) if x.startswith(b'{"Event":"SparkListenerTaskEnd"'))
    ev = json.loads(lines[at])
    ev["Task Info"]["Host"] = "h" * 2_500_000
    lines[at] = json.dumps(ev, separators=(",", ":")).encode()
    log = tmp_path / "app-long"
    log.write_bytes(b"\n".join(lines))

    def store(name: str) -> dict[str, list[tuple[Any, ...]]]:
        db = tmp_path / f"{name}.duckdb"
        assert [o.action for o in ingest([log], db, workers=1).outcomes] == ["ingested"]
        return _tables(db)

    rust, python = _both(monkeypatch, store)
    assert rust == python
    assert (
        max(
            len(r[0])
            for r in duckdb.connect(str(tmp_path / "rust.duckdb")).execute("SELECT host FROM tasks").fetchall()
        )
        == 2_500_000
    )
