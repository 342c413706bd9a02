"""Spark applications shufflelab runs: each is ``run(spark, params) -> dict`` (timings, counts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shufflelab.workloads import groupby_test, small_records, sort_aggregate, tpch, userapp


class WorkloadFailed(RuntimeError):
    """A workload that failed after measuring something: ``output`` is kept with the error."""

    def __init__(self, message: str, output: dict[str, Any]) -> None:
        super().__init__(message)
        self.output = output


REGISTRY: dict[str, Callable[..., dict[str, Any]]] = {
    "tpch": tpch.run,
    "sort-aggregate": sort_aggregate.run,
    "groupby-test": groupby_test.run,
    "small-records": small_records.run,
    "app": userapp.run,
}
