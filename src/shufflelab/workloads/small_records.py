"""Seed 001's network-heavy application: many small records, many small shuffle blocks.

``records`` rows of two longs spread over ``partitions`` partitions go through ``rounds``
shuffles: first a full repartition by key (every record crosses the network unless its target
partition is local: no map-side combine), then an aggregation by key, then repartitions by a
derived key. Every map task writes a small block for every reduce task, so the shuffle is many
small fetches -- the pattern that suffers most from queueing delay.
"""

from __future__ import annotations

import time
from typing import Any

from shufflelab.spec import SmallRecordsParams


def run(spark: Any, p: SmallRecordsParams) -> dict[str, Any]:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    phases: dict[str, float] = {}
    t0 = time.time()
    rows = spark.range(0, p.records, numPartitions=p.partitions).select(
        F.pmod(F.xxhash64(F.col("id"), F.lit(p.seed)), F.lit(p.keys)).alias("key"),
        F.col("id").alias("value"),
    )
    rows.persist(StorageLevel.MEMORY_AND_DISK)
    n = rows.count()
    phases["generate_s"] = time.time() - t0
    current = rows
    total = n
    for r in range(p.rounds):
        t = time.time()
        if r == 0:
            current = current.repartition(p.partitions, "key")
            moved = current.count()
            if moved != n:
                raise RuntimeError(f"repartition kept {moved} of {n} records")
        elif r == 1:
            current = current.groupBy("key").agg(F.count("*").alias("n"), F.sum("value").alias("value"))
            total = int(current.agg(F.sum("n")).collect()[0][0])
        else:
            current = current.repartition(p.partitions, F.pmod(F.col("value"), F.lit(p.partitions + r)))
            current.count()
        phases[f"shuffle{r + 1}_s"] = time.time() - t
    rows.unpersist()
    phases["total_s"] = time.time() - t0
    if total != n:
        raise RuntimeError(f"aggregated {total} records, generated {n}")
    return {"records": n, "phases": phases}
