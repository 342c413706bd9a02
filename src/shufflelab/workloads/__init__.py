"""Spark applications shufflelab runs: each is ``run(spark, params) -> dict`` (timings, counts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shufflelab.workloads import groupby_test, small_records, sort_aggregate, tpch, userapp
from shufflelab.workloads.failure import WorkloadFailed

__all__ = ["REGISTRY", "WorkloadFailed"]


REGISTRY: dict[str, Callable[..., dict[str, Any]]] = {
    "tpch": tpch.run,
    "sort-aggregate": sort_aggregate.run,
    "groupby-test": groupby_test.run,
    "small-records": small_records.run,
    "app": userapp.run,
}
