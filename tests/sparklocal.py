"""The tests' own Spark sessions in local mode (one JVM, driver and executor in it): how they are
built and how they end, the JVM with them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


def builder(app: str, java_options: str = JVM_OPTIONS, conf: Mapping[str, str] | None = None) -> Any:
    """A ``local[2]`` session's builder named ``app``, without the web UI, its JVM started with
    ``java_options``, and Spark's settings ``conf``."""
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", java_options)
    )
    return b.config(map=dict(conf)) if conf else b


def stop(spark: Any) -> None:
    """Stop ``spark`` and end its JVM now, not at the interpreter's exit."""
    spark.stop()
    from pyspark import SparkContext

    if SparkContext._gateway is not None:
        SparkContext._gateway.shutdown()
        SparkContext._gateway = None
        SparkContext._jvm = None
