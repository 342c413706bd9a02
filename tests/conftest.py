"""Shared fixtures. Tests marked ``root`` need root and the emulation tools; they are skipped
(with the reason) elsewhere, never silently passed."""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

BASE_SPEC: dict[str, Any] = {
    "experiment": {"name": "t", "repetitions": 2},
    "topology": {"kind": "shared", "bottleneck": {"rate_mbps": 50, "queue_bytes": 100_000}},
    "hosts": {
        "master": {"roles": ["spark-master"]},
        "w1": {"roles": ["spark-worker"]},
        "w2": {"roles": ["spark-worker"]},
        "tgen": {"roles": ["traffic-source"]},
        "tsink": {"roles": ["traffic-sink"]},
    },
    "workload": {"name": "sort-aggregate", "params": {"rows": 1000, "partitions": 4}},
}


@pytest.fixture
def spec_dict() -> dict[str, Any]:
    return copy.deepcopy(BASE_SPEC)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    for tool in ("ip", "tc", "iperf3", "java", "ethtool"):
        if shutil.which(tool) is None:
            missing.append(tool)
    if not missing:
        return
    skip = pytest.mark.skip(reason=f"needs {', '.join(missing)} (run `make test` as root)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)
