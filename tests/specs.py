"""Spec dictionaries that several unit tests parse (each test states only what it varies)."""

from __future__ import annotations

from typing import Any


def tpch_on_a_dumbbell(params: dict[str, Any], matrix: dict[str, list[Any]] | None = None) -> dict[str, Any]:
    """TPC-H/NDP on a dumbbell: the Spark master and a worker in rack 1, one storage host in rack 2;
    ``params`` the workload's (``storage_cores``, ``core_scale``), ``matrix`` the spec's, if any."""
    spec: dict[str, Any] = {
        "experiment": {"name": "tpch"},
        "topology": {"kind": "dumbbell", "bottleneck": {"rate_mbps": 100, "queue_bytes": 250_000}},
        "hosts": {
            "master": {"roles": ["spark-master"], "rack": 1},
            "w1": {"roles": ["spark-worker"], "rack": 1},
            "s1": {"roles": ["storage"], "rack": 2},
        },
        "workload": {"name": "tpch", "params": params},
    }
    if matrix is not None:
        spec["matrix"] = matrix
    return spec
