"""Spark applications shufflelab runs: each is ``run(spark, params) -> dict`` (timings, counts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shufflelab.workloads import groupby_test, small_records, sort_aggregate

REGISTRY: dict[str, Callable[[Any, Any], dict[str, Any]]] = {
    "sort-aggregate": sort_aggregate.run,
    "groupby-test": groupby_test.run,
    "small-records": small_records.run,
}
