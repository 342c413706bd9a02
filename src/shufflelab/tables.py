"""The results tables as a folder of Parquet files (what ``analyze --engine spark`` writes): one
sub-folder per table, and in a table of applications' rows one sub-folder per application,
``<table>/app=<run id, escaped>/part-<log>.parquet``, each file holding its rows' ``run_id`` too.
A marker file says which tables the folder holds. :class:`shufflelab.results.Store` reads such a
folder as it reads a DuckDB file, through DuckDB views over the files (:func:`create_views`), so
``report``, the fleet page, ``whatif`` and ``diagnose`` read it directly.

Pure layout and DuckDB over local files: nothing here starts Spark.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MARKER = "_shufflelab_tables.json"  # a leading underscore: Spark's and Hive's readers skip it
FORMAT = "shufflelab-tables"
VERSION = 1
APP_DIR = "app="
GLOBAL_TABLES = ("experiments", "scenarios")  # rows of no one application: one file per table


class DatasetError(ValueError):
    """The folder is not a table dataset this version reads; the message names the folder."""


def app_dir(run_id: str) -> str:
    """The folder of one application's rows: ``app=`` and its run id with every character outside
    ``[A-Za-z0-9._-]`` percent-escaped (a run id holds no ``/`` then, and never starts a hidden name)."""
    return APP_DIR + urllib.parse.quote(run_id, safe="-_.")


def run_id_of_dir(name: str) -> str:
    """The run id of an ``app=...`` folder (the inverse of :func:`app_dir`)."""
    if not name.startswith(APP_DIR):
        raise ValueError(f"{name!r} is not an application folder ({APP_DIR}...)")
    return urllib.parse.unquote(name[len(APP_DIR) :])


def is_dataset(path: Path) -> bool:
    """``path`` is a folder with the marker of a table dataset."""
    return path.is_dir() and (path / MARKER).is_file()


def write_marker(path: Path, tables: Iterable[str], **about: Any) -> None:
    """The marker, written last: a folder without it is not (yet) a dataset."""
    doc = {"format": FORMAT, "version": VERSION, "tables": sorted(tables), **about}
    (path / MARKER).write_text(json.dumps(doc, indent=1) + "\n")


def read_marker(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads((path / MARKER).read_text())
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: its {MARKER} cannot be read ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DatasetError(f"{path}: {MARKER} does not describe a {FORMAT} dataset")
    if doc.get("version") != VERSION:
        raise DatasetError(
            f"{path}: a {FORMAT} dataset of version {doc.get('version')!r}; this version reads {VERSION}"
        )
    return doc


def table_files(path: Path, table: str) -> list[str]:
    """The Parquet files of ``table`` in the dataset at ``path``, in a stable order."""
    d = path / table
    if not d.is_dir():
        return []
    return sorted(str(f) for f in d.rglob("*.parquet") if not any(p.startswith((".", "_")) for p in f.parts[-2:]))


def _literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def create_views(con: Any, path: Path) -> None:
    """On ``con`` (an in-memory DuckDB connection holding the results schema as empty tables),
    replace every table the dataset has files of with a view over those files, its columns cast to
    the schema's types in the schema's order (a column no file has is NULL). Tables without files
    stay empty tables, so every query of the schema runs. The files of one table have the same
    columns (one writer wrote them), read as the first one's.

    In a table of applications' rows the view's ``run_id`` is the folder's (``app=``, a Hive
    partition DuckDB decodes), so a query for some applications (``WHERE run_id = ?`` or ``IN``)
    opens only their files, not one per application of the fleet."""
    read_marker(path)
    tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
    for table in tables:
        files = table_files(path, table)
        if not files:
            continue
        schema = con.execute(f'DESCRIBE "{table}"').fetchall()
        have = {r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [files[0]]).fetchall()}
        by_app = table not in GLOBAL_TABLES
        cols = ", ".join(
            '"app" AS "run_id"' if by_app and name == "run_id"
            else f'CAST("{name}" AS {typ}) AS "{name}"' if name in have
            else f'CAST(NULL AS {typ}) AS "{name}"'
            for name, typ, *_ in schema
        )  # fmt: skip
        if any(c in str(path) for c in "*?[{"):  # a folder name DuckDB would read as a pattern: each file named
            glob = "[" + ", ".join(_literal(f) for f in files) + "]"
        else:
            glob = _literal(str(path / table / ("*/*.parquet" if by_app else "*.parquet")))
        hive = "hive_partitioning = true, hive_types = {'app': VARCHAR}" if by_app else "hive_partitioning = false"
        con.execute(f'DROP TABLE "{table}"')
        con.execute(f'CREATE VIEW "{table}" AS SELECT {cols} FROM read_parquet({glob}, {hive})')
