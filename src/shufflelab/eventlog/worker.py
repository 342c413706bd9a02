"""What a worker process of a parallel ingest runs (:func:`shufflelab.eventlog.ingest.ingest` with
several workers): one log parsed, its task rows streamed to CSV files (one a batch, as a
one-process ingest inserts them) that the parent hands to DuckDB (:mod:`~shufflelab.eventlog.batch`).
Kept apart from ``ingest`` so a worker imports only the parser, not DuckDB (nor pyarrow, but for a
batch with a row too long for a CSV line)."""

from __future__ import annotations

from pathlib import Path

from shufflelab.eventlog.batch import TaskBatch
from shufflelab.eventlog.files import discover
from shufflelab.eventlog.model import EventLog
from shufflelab.eventlog.read import ReadResult, read_source

# What the pool's server process imports once, before forking the workers.
PRELOAD = [__name__]


def read_to_csv(display: str, key: str, path: str, batch: int) -> tuple[ReadResult, list[str]] | None:
    """Find the log at ``display`` again (the source whose key is ``key``), parse it with its task
    rows streamed to files ``<path>.<n>.csv`` (:meth:`TaskBatch.write`), one a batch; returns what
    was read (without task rows) and the files in order, or None when the log is no longer there as
    it was found (moved, removed, renamed when its application ended: the parent reads it and names
    what happened)."""
    found, _ = discover([Path(display)])
    src = next((s for s in found if s.key == key), None)
    if src is None:
        return None
    written: list[str] = []

    def on_batch(tasks: TaskBatch, log: EventLog) -> None:
        written.append(tasks.write(f"{path}.{len(written)}"))

    res = read_source(src, batch=batch, on_batch=on_batch)  # (a failure: the parent removes the folder)
    return res, written
