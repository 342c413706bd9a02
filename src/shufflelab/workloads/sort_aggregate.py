"""Seed 000's application: a synthetic dataset sorted (orderBy) then aggregated (groupBy + count).

The dataset is generated on the executors (``range`` + hash columns, no Python UDF, so the work
is Spark's own); ``persist`` + ``count`` materialise each step as in the seed. Rows carry a key
(pseudo-random 64-bit), a group id in ``[0, groups)`` and ``payload_bytes`` of payload, so the
shuffle volume is set by rows x (payload_bytes + ~24 B).
"""

from __future__ import annotations

import time
from typing import Any

from shufflelab.spec import SortAggregateParams


def run(spark: Any, params: SortAggregateParams) -> dict[str, Any]:
    """Run the workload on ``spark``; return phase timings (s, driver clock) and result counts."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    p = params
    phases: dict[str, float] = {}
    t0 = time.time()
    pad = F.lpad(F.hex(F.col("id")), p.payload_bytes, "x") if p.payload_bytes else F.lit("")
    data = spark.range(0, p.rows, numPartitions=p.partitions).select(
        F.xxhash64(F.col("id"), F.lit(p.seed)).alias("key"),
        F.pmod(F.xxhash64(F.col("id"), F.lit(p.seed + 1)), F.lit(p.groups)).alias("grp"),
        pad.alias("payload"),
    )
    data.persist(StorageLevel.MEMORY_AND_DISK)
    n_rows = data.count()
    phases["generate_s"] = time.time() - t0

    t1 = time.time()
    ordered = data.orderBy("key")
    ordered.persist(StorageLevel.MEMORY_AND_DISK)
    n_sorted = ordered.count()
    phases["sort_s"] = time.time() - t1

    t2 = time.time()
    groups = ordered.groupBy("grp").count()
    n_groups = groups.count()
    total = groups.agg(F.sum("count")).collect()[0][0]
    phases["aggregate_s"] = time.time() - t2

    ordered.unpersist()
    data.unpersist()
    phases["total_s"] = time.time() - t0
    if n_rows != p.rows or n_sorted != p.rows or total != p.rows:
        raise RuntimeError(f"row count mismatch: generated {n_rows}, sorted {n_sorted}, aggregated {total}")
    return {"rows": n_rows, "groups": n_groups, "phases": phases}
