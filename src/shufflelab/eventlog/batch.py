"""Task rows leaving the parser in batches, as lists or as a CSV file DuckDB reads natively.

A batch is a sequence of segments, each either columns decoded by the Rust core
(``shufflelab_eventlogcore.TaskColumns``) or a dictionary of lists from the Python path, in the
order the rows were read. :meth:`TaskBatch.write` writes both kinds the same way (every string
quoted, floats in a form that reads back to the same double), so the store holds the same values
whichever path decoded a row; :func:`read_sql` is the DuckDB table function that reads such a
file with the task table's types (no Python objects, no pandas, no pyarrow). A batch with a row
longer than DuckDB's CSV reader takes (2 MiB: a log with absurdly long host names) is written as
Parquet through pyarrow instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from shufflelab.eventlog.model import TaskRow

TASK_COLUMNS = tuple(f.name for f in fields(TaskRow))
_KINDS = {f.name: str(f.type).split(" ")[0] for f in fields(TaskRow)}  # int | float | bool | str
_SQL_TYPES = {"int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN", "str": "VARCHAR"}
CSV_COLUMNS = "{" + ", ".join(f"'{c}': '{_SQL_TYPES[_KINDS[c]]}'" for c in TASK_COLUMNS) + "}"
MAX_CSV_LINE = 2_000_000  # bytes; DuckDB's read_csv takes lines up to max_line_size = 2 MiB by default


def _quote(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def _bool(b: Any) -> str:
    return "true" if b else "false"


_FORMAT: dict[str, Callable[[Any], str]] = {"int": str, "float": repr, "bool": _bool, "str": _quote}


class TaskBatch:
    """Task rows in :class:`TaskRow` field order, as segments (see the module)."""

    def __init__(self, segments: list[Any], n: int) -> None:
        self.segments = segments
        self.n = n

    def __len__(self) -> int:
        return self.n

    def columns(self) -> dict[str, list[Any]]:
        """Column name -> values (lists), every segment in order."""
        if len(self.segments) == 1:
            seg = self.segments[0]
            return dict(seg) if isinstance(seg, dict) else seg.to_dict()  # type: ignore[no-any-return]
        out: dict[str, list[Any]] = {c: [] for c in TASK_COLUMNS}
        for seg in self.segments:
            cols = seg if isinstance(seg, dict) else seg.to_dict()
            for c in TASK_COLUMNS:
                out[c].extend(cols[c])
        return out

    def write(self, stem: str) -> str:
        """Write the rows to a new file, ``<stem>.csv`` (or ``<stem>.parquet``, see the module);
        returns its path, for :func:`read_sql`."""
        path = stem + ".csv"
        longest = 0
        for seg in self.segments:
            longest = max(longest, _write_py(seg, path) if isinstance(seg, dict) else seg.write_csv(path))
        if longest <= MAX_CSV_LINE:
            return path
        os.unlink(path)
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols = self.columns()
        types = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string()}
        table = pa.table({c: pa.array(cols[c], type=types[_KINDS[c]]) for c in TASK_COLUMNS})
        pq.write_table(table, stem + ".parquet", compression="none")
        return stem + ".parquet"


def _write_py(cols: dict[str, list[Any]], path: str) -> int:
    """Append rows to a CSV file as the Rust core does; the longest line's length in bytes."""
    text = [[_FORMAT[_KINDS[c]](v) for v in cols[c]] for c in TASK_COLUMNS]
    rows = [(",".join(row) + "\n").encode() for row in zip(*text, strict=True)]
    with open(path, "ab") as f:
        f.writelines(rows)
    return max(map(len, rows), default=0)


def _literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def read_sql(path: str) -> str:
    """DuckDB's table function reading a file written by :meth:`TaskBatch.write`."""
    if path.endswith(".parquet"):
        return f"read_parquet({_literal(path)})"
    return (
        f"read_csv({_literal(path)}, columns = {CSV_COLUMNS}, header = false, auto_detect = false, "
        "delim = ',', quote = '\"', escape = '\"', new_line = '\\n', allow_quoted_nulls = false)"
    )
