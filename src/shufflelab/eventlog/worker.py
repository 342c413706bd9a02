"""What a worker process of a parallel ingest runs (:func:`shufflelab.eventlog.ingest.ingest` with
several workers): one log parsed, its task rows streamed to a Parquet file. Kept apart from
``ingest`` so a worker imports only the parser and pyarrow, not DuckDB."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import pyarrow as pa

from shufflelab.eventlog.events import TASK_COLUMNS
from shufflelab.eventlog.files import discover
from shufflelab.eventlog.model import EventLog, TaskRow
from shufflelab.eventlog.read import ReadResult, read_source

_ARROW_TYPES = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string()}
ARROW = {f.name: _ARROW_TYPES[str(f.type).split(" ")[0]] for f in fields(TaskRow)}

# What the pool's server process imports once, before forking the workers: this module, and pandas,
# which pyarrow imports at its first conversion of Python values (else each worker would import it).
PRELOAD = [__name__, "pandas"]


def task_table(cols: dict[str, list[Any]]) -> pa.Table:
    """A batch of task rows (columns in :class:`TaskRow` field order) as an Arrow table."""
    return pa.table({name: pa.array(cols[name], type=ARROW[name]) for name in TASK_COLUMNS})


def read_to_parquet(display: str, key: str, path: str, batch: int) -> tuple[ReadResult, str | None] | None:
    """Find the log at ``display`` again (the source whose key is ``key``), parse it with its task
    rows streamed to a Parquet file at ``path``; returns what was read (without task rows) and the
    file (None: no task rows), or None when the log is no longer there as it was found (moved,
    removed, renamed when its application ended: the parent reads it and names what happened)."""
    import pyarrow.parquet as pq

    found, _ = discover([Path(display)])
    src = next((s for s in found if s.key == key), None)
    if src is None:
        return None
    writer: list[Any] = []

    def on_tasks(cols: dict[str, list[Any]], log: EventLog) -> None:
        tbl = task_table(cols)
        if not writer:
            writer.append(pq.ParquetWriter(path, tbl.schema, compression="none"))
        writer[0].write_table(tbl)

    try:
        res = read_source(src, on_tasks=on_tasks, batch=batch)
    finally:
        if writer:
            writer[0].close()
    return res, path if writer else None
