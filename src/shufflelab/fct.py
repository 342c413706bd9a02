"""Shuffle flow completion times (FCT) per task, bucketed by data volume.

What "FCT" means in shufflelab (from the Spark event log, one value per task):

- **read FCT** = the task's *Remote Requests Duration*: for every remote shuffle fetch request the
  task issued, the time from sending the request to having the whole response, summed over its
  requests. For a task with a single request this is that flow's completion time; with several
  concurrent requests it is their total time in flight (it can exceed the task's wall time).
  Volume = the task's remote shuffle bytes read.
- **fetch wait** = the time the task was blocked waiting for remote data (Spark's Fetch Wait Time):
  the part of the read FCT that the task could not hide behind computation.
- **write FCT** = the task's Shuffle Write Time (time spent writing shuffle output, ns -> ms);
  volume = its shuffle bytes written. Shuffle writes go to local disk, so they show CPU/disk
  contention, not the network.

Seed 001 measured FCT of shuffle reads and writes per task with a custom listener; the event
log's per-task sums are the same quantities at task granularity. Per-request timing would need a
JVM listener on the fetch path (not provided yet).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

BUCKET_EDGES_MB = (0.0, 0.1, 1.0, 10.0, 100.0, math.inf)


def bucket_label(lo: float, hi: float) -> str:
    if math.isinf(hi):
        return f">= {lo:g} MB"
    return f"{lo:g}-{hi:g} MB"


BUCKET_LABELS = [bucket_label(a, b) for a, b in zip(BUCKET_EDGES_MB, BUCKET_EDGES_MB[1:], strict=False)]


def bucket_of(volume_mb: float) -> str:
    """The volume bucket of ``volume_mb`` (left-closed: 0.1 MB belongs to "0.1-1 MB")."""
    for lo, hi, label in zip(BUCKET_EDGES_MB, BUCKET_EDGES_MB[1:], BUCKET_LABELS, strict=False):
        if lo <= volume_mb < hi:
            return label
    raise ValueError(f"negative volume {volume_mb}")


def flows(tasks: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, direction) with a non-zero volume: kind, volume_mb, fct_ms, bucket.

    ``tasks`` has the columns of the ``tasks`` table (``remote_bytes``, ``remote_reqs_duration_ms``,
    ``fetch_wait_ms``, ``shuffle_write_bytes``, ``shuffle_write_ms``; ``run_id`` if present is kept).
    """
    keep = [c for c in ("run_id", "app_index", "stage_id", "task_id") if c in tasks.columns]
    reads = tasks[tasks["remote_bytes"] > 0]
    r = reads[keep].copy()
    r["kind"] = "read"
    r["volume_mb"] = reads["remote_bytes"] / 1e6
    r["fct_ms"] = reads["remote_reqs_duration_ms"].astype(float)
    r["wait_ms"] = reads["fetch_wait_ms"].astype(float)
    writes = tasks[tasks["shuffle_write_bytes"] > 0]
    w = writes[keep].copy()
    w["kind"] = "write"
    w["volume_mb"] = writes["shuffle_write_bytes"] / 1e6
    w["fct_ms"] = writes["shuffle_write_ms"].astype(float)
    w["wait_ms"] = np.nan
    out = pd.concat([r, w], ignore_index=True)
    out["bucket"] = [bucket_of(v) for v in out["volume_mb"]]
    return out


def summary(fl: pd.DataFrame) -> pd.DataFrame:
    """Per kind and bucket: n, median, p95 and max FCT (ms)."""
    if fl.empty:
        return pd.DataFrame(columns=["kind", "bucket", "n", "median_ms", "p95_ms", "max_ms"])
    g = fl.groupby(["kind", "bucket"], sort=False)["fct_ms"]
    out = g.agg(n="count", median_ms="median", p95_ms=lambda s: float(np.quantile(s, 0.95)), max_ms="max")
    out = out.reset_index()
    order = {b: i for i, b in enumerate(BUCKET_LABELS)}
    return out.sort_values(["kind", "bucket"], key=lambda c: c.map(order) if c.name == "bucket" else c)
