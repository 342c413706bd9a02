"""Shared fixtures. Tests marked ``root`` need root and the emulation tools; they are skipped
(with the reason) elsewhere, never silently passed."""

from __future__ import annotations

import copy
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# no per-example deadline for property tests that name none: `make test` runs these tests at nice 19
# beside the root/Spark tests (scripts/gates.sh), where an example may wait for the CPU far longer
# than hypothesis's default 200 ms without anything being wrong
settings.register_profile("shufflelab", deadline=None)
settings.load_profile("shufflelab")

# pytest keeps each test module it rewrites for its assertions (tests/**/__pycache__/*-pytest-*.pyc)
# unless byte code must not be written; where PYTHONDONTWRITEBYTECODE is set (as on this machine) every
# pytest run rewrote all ~150 test modules again: a collection of the whole suite took 12.8 CPU-s,
# 6.7 with the rewritten modules kept, and `make test` collects it five times (its three pytest runs,
# two of them in two processes). Only this process is concerned: the commands the tests start keep
# the environment's setting.
sys.dont_write_bytecode = False

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


# the root/Spark test files that take longest, longest first (their wall times in a fresh-clone pass
# of `make test` at b03b8b7, in its two lanes, module set-up included); every other file after them,
# in collection order. scripts/gates.sh runs the lanes with --dist loadfile --no-loadscope-reorder, so
# pytest-xdist hands out whole files in this order, each lane taking the next when it is almost done:
# longest first, the lanes end close together (by default xdist orders files by their number of
# tests, and a 250 s file of three tests started last left one lane alone for its end)
LONGEST_FIRST = (
    "tests/hosts/test_hosts_quickstart.py",  # 212 s, and the six-host lab it builds
    "tests/integration/test_run_validity_fabric.py",  # 209 s
    "tests/hosts/test_hosts_deploy.py",  # 168 s
    "tests/integration/test_ndp_tpch_fabric.py",  # 151 s
    "tests/integration/test_spark_run.py",  # 95 s
    "tests/hosts/test_hosts_run.py",  # about 90 s
    "tests/hosts/test_hosts_tpch.py",  # 56 s
    "tests/integration/test_analyze_spark_hdfs.py",  # 49 s
    "tests/hosts/test_hosts_starvation.py",  # 47 s
    "tests/integration/test_faults_fabric.py",  # 43 s
)


def longest_first(root: Path, items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: the files of :data:`LONGEST_FIRST` first, in its order, each file's
    tests in their own order; the others after them as collected."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.path)).relative_to(root).as_posix(), len(rank)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _part(config, items)
    longest_first(Path(str(config.rootpath)), items)
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
