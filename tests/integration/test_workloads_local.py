"""The workloads on Spark in local mode (one JVM, tiny data): they run and check their own counts."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

import sparklocal
from shufflelab.spec import GroupByTestParams, SmallRecordsParams, SortAggregateParams
from shufflelab.workloads import REGISTRY

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(shutil.which("java") is None, reason="needs Java 17 (make setup installs it)"),
]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    s = sparklocal.builder("shufflelab-workload-test", conf={"spark.sql.shuffle.partitions": "4"}).getOrCreate()
    yield s
    sparklocal.stop(s)


def test_sort_aggregate(spark: Any) -> None:
    out = REGISTRY["sort-aggregate"](spark, SortAggregateParams(rows=5000, partitions=4, payload_bytes=20, groups=50))
    assert out["rows"] == 5000 and out["groups"] == 50
    assert set(out["phases"]) >= {"generate_s", "sort_s", "aggregate_s", "total_s"}


def test_groupby_test(spark: Any) -> None:
    p = GroupByTestParams(mappers=3, kv_pairs=400, value_bytes=50, reducers=2)
    out = REGISTRY["groupby-test"](spark, p)
    assert out["pairs"] == 1200
    assert 1 <= out["keys"] <= 1200  # random int keys: nearly all distinct


def test_small_records(spark: Any) -> None:
    out = REGISTRY["small-records"](spark, SmallRecordsParams(records=20_000, partitions=4, keys=300, rounds=3))
    assert out["records"] == 20_000
    assert set(out["phases"]) >= {"shuffle1_s", "shuffle2_s", "shuffle3_s"}
