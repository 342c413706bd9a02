"""How the results store opens its file: the reads of one report share a connection
(``results.reading``), and a write connection runs the schema statements only when the file may lack
them. Neither may change what is read or written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from shufflelab import appreport, results
from shufflelab.eventlog.ingest import ingest
from shufflelab.results import Store

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "eventlogs" / "spark-4.3" / "plain"


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files duckdb.connect opens from now on (in-memory databases left out)."""
    seen: list[str] = []
    real = duckdb.connect

    def counting(database: str = ":memory:", *args: object, **kwargs: object) -> duckdb.DuckDBPyConnection:
        if database != ":memory:":
            seen.append(str(database))
        return real(database, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(duckdb, "connect", counting)
    return seen


def _store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "x.duckdb")
    s.init_experiment("x", "", "{}", "x.toml")
    return s


def test_the_reads_of_a_scope_share_one_connection(tmp_path: Path, opened: list[str]) -> None:
    s = _store(tmp_path)
    opened.clear()
    with results.reading(s.path):
        for _ in range(5):
            assert s.query("SELECT name FROM experiments")["name"].tolist() == ["x"]
        assert Store(s.path).query("SELECT count(*) AS n FROM runs")["n"].tolist() == [0]  # another Store of it
        with results.reading(s.path):  # nested: the same connection
            s.query("SELECT 1")
    assert len(opened) == 1
    s.query("SELECT 1")  # outside any scope: a connection of its own, as before
    assert len(opened) == 2


def test_a_write_within_a_scope_is_read_back(tmp_path: Path) -> None:
    s = _store(tmp_path)
    with results.reading(s.path):
        assert len(s.query("SELECT * FROM experiments")) == 1
        s.init_experiment("y", "", "{}", "y.toml")  # closes the shared connection first (else DuckDB refuses)
        assert sorted(s.query("SELECT name FROM experiments")["name"]) == ["x", "y"]


def test_a_missing_or_foreign_file_is_refused_within_a_scope_as_outside(tmp_path: Path) -> None:
    with results.reading(tmp_path / "none.duckdb"), pytest.raises(results.MissingStoreError):
        Store(tmp_path / "none.duckdb").query("SELECT 1")
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    with results.reading(other), pytest.raises(results.StoreError, match="not a shufflelab results file"):
        Store(other).query("SELECT 1")


def test_another_process_writes_once_the_scope_ends(tmp_path: Path) -> None:
    s = _store(tmp_path)
    write = (
        "import sys, duckdb\n"
        "try:\n"
        "    duckdb.connect(sys.argv[1]).close()\n"
        "except duckdb.IOException as e:\n"
        "    sys.exit('lock' in str(e).lower() and 3 or 1)\n"
    )
    with results.reading(s.path):
        s.query("SELECT 1")
        held = subprocess.run([sys.executable, "-c", write, str(s.path)], check=False)
    assert held.returncode == 3  # the scope's reader holds the file: a writer waits (Store._open retries)
    assert subprocess.run([sys.executable, "-c", write, str(s.path)], check=False).returncode == 0


def test_whatif_on_event_logs_opens_its_store_once_not_per_query(tmp_path: Path, opened: list[str]) -> None:
    db = tmp_path / "logs.duckdb"
    ingest([LOGS], db)
    opened.clear()
    rows = appreport.whatif_table(db, 2.0)
    assert len(rows) == 1 and rows["predicted_s"].iloc[0] > 0
    assert opened.count(str(db)) == 1


def test_the_schema_statements_run_only_for_a_file_that_may_lack_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = results._restore_keys
    monkeypatch.setattr(results, "_restore_keys", lambda con: (calls.append(1), real(con)))
    s = _store(tmp_path)
    assert len(calls) == 1  # a new file
    s.init_experiment("y", "", "{}", "y.toml")
    Store(s.path).init_experiment("z", "", "{}", "z.toml")  # another Store of the same file, same process
    assert len(calls) == 1
    con = duckdb.connect(str(s.path))  # written by someone else: the schema is made sure of again
    con.execute("DROP TABLE cross_traffic")
    con.close()
    s.init_experiment("w", "", "{}", "w.toml")
    assert len(calls) == 2
    assert "cross_traffic" in set(s.query("SELECT table_name FROM information_schema.tables")["table_name"])
    s.path.unlink()  # a new file at the same path
    s.init_experiment("v", "", "{}", "v.toml")
    assert len(calls) == 3 and s.query("SELECT name FROM experiments")["name"].tolist() == ["v"]
