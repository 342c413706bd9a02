"""An equivalent of Spark's GroupByTest example (not shipped in the pip package).

``mappers`` partitions each produce ``kv_pairs`` random (int key, ``value_bytes`` random bytes)
pairs, cached and counted; then ``groupByKey(reducers)`` and a count. Like the Scala example the
data are generated and grouped on the JVM side (DataFrame API: ``rand`` keys, ``randstr`` values,
``collect_list`` per key), so the cost profile is Spark's, not Python's.
"""

from __future__ import annotations

import time
from typing import Any

from shufflelab.spec import GroupByTestParams


def run(spark: Any, p: GroupByTestParams) -> dict[str, Any]:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    phases: dict[str, float] = {}
    t0 = time.time()
    pairs = (
        spark.range(0, p.mappers, numPartitions=p.mappers)
        .select(F.explode(F.sequence(F.lit(1), F.lit(p.kv_pairs))).alias("i"))
        .select(
            (F.rand(p.seed) * F.lit(2_147_483_647)).cast("int").alias("key"),
            F.expr(f"randstr({p.value_bytes}, {p.seed + 1})").cast("binary").alias("value"),
        )
    )
    pairs.persist(StorageLevel.MEMORY_AND_DISK)
    n_pairs = pairs.count()
    phases["generate_s"] = time.time() - t0
    t1 = time.time()
    grouped = pairs.repartition(p.reducers, "key").groupBy("key").agg(F.collect_list("value").alias("values"))
    # Count keys and grouped values: a bare count() would let the optimizer prune the values out of
    # the shuffle, leaving only keys on the wire.
    row = grouped.agg(F.count("*").alias("keys"), F.sum(F.size("values")).alias("values")).collect()[0]
    n_keys, n_grouped = int(row["keys"]), int(row["values"] or 0)
    phases["group_s"] = time.time() - t1
    pairs.unpersist()
    phases["total_s"] = time.time() - t0
    if n_pairs != p.mappers * p.kv_pairs:
        raise RuntimeError(f"generated {n_pairs} pairs, expected {p.mappers * p.kv_pairs}")
    if n_grouped != n_pairs:
        raise RuntimeError(f"grouped {n_grouped} values, generated {n_pairs}")
    return {"pairs": n_pairs, "keys": n_keys, "phases": phases}
