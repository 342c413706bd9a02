"""An example user application: orders joined with customers on a skewed key, then aggregated.

Run it in the lab with ``shufflelab run experiments/user-app.toml`` (the experiment names this
script), or anywhere with ``spark-submit skewed_join.py --orders 200000``. It uses one
SparkSession from ``getOrCreate()``, as any PySpark application does, and prints its result.
"""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--orders", type=int, default=200_000)
    ap.add_argument("--customers", type=int, default=5_000)
    ap.add_argument("--hot-share", type=float, default=0.2, help="share of orders from one customer")
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--note-bytes", type=int, default=200, help="payload per order (shuffled with it)")
    a = ap.parse_args()

    spark = SparkSession.builder.appName("skewed-join").getOrCreate()
    spark.conf.set("spark.sql.shuffle.partitions", str(a.partitions))
    orders = (
        spark.range(a.orders, numPartitions=a.partitions)
        .withColumn("r", F.rand(seed=7))
        .withColumn(
            "customer",
            F.when(F.col("r") < a.hot_share, F.lit(0)).otherwise((F.rand(seed=11) * a.customers).cast("long")),
        )
        .withColumn("amount", (F.rand(seed=13) * 100).cast("double"))
        .withColumn("note", F.concat(F.col("id").cast("string"), F.repeat(F.lit("x"), a.note_bytes)))
    )
    customers = (
        spark.range(a.customers)
        .withColumnRenamed("id", "customer")
        .withColumn("region", (F.col("customer") % 7).cast("int"))
    )
    joined = orders.join(customers, "customer")
    per_region = joined.groupBy("region").agg(
        F.count("*").alias("orders"), F.sum("amount").alias("amount"), F.max("note").alias("last_note")
    )
    rows = per_region.orderBy("region").collect()
    total = sum(r["orders"] for r in rows)
    print(f"skewed-join: {total} orders in {len(rows)} regions")
    if total != a.orders:
        raise SystemExit(f"lost orders: {total} != {a.orders}")


if __name__ == "__main__":
    main()
