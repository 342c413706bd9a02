"""Shared fixtures. Tests marked ``root`` need root and the emulation tools; they are skipped
(with the reason) elsewhere, never silently passed."""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# no per-example deadline for property tests that name none: `make test` runs these tests at nice 19
# beside the root/Spark tests (scripts/gates.sh), where an example may wait for the CPU far longer
# than hypothesis's default 200 ms without anything being wrong
settings.register_profile("shufflelab", deadline=None)
settings.load_profile("shufflelab")

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


# scripts/gates.sh runs the tests that need neither root nor Spark in two parts side by side (one
# beside the Rust gates): part "a" is every test file whose path sorts before PART_BOUNDARY, part
# "b" every other, so each test runs in exactly one of them
# (at test_e, part b took 244 s alone, 23 s of it test_e*.py, and part a with the Rust gates 215 s
# at load average 2: test_e*.py moved to part a; cargo test 49 -> 7 CPU-s at opt-level 1, so
# test_f*.py, 19 s of part b's 133 s of tests, moved to part a)
PART_BOUNDARY = "tests/unit/test_g"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--part",
        choices=["a", "b"],
        default=None,
        help=f"only the tests in files sorting before {PART_BOUNDARY!r} (a) or the others (b)",
    )


def _part(config: pytest.Config, items: list[pytest.Item]) -> None:
    part = config.getoption("--part")
    if part is None:
        return
    root = Path(str(config.rootpath))
    keep, drop = [], []
    for item in items:
        first = Path(str(item.path)).relative_to(root).as_posix() < PART_BOUNDARY
        (keep if first == (part == "a") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _part(config, items)
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
