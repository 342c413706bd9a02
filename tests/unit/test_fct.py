from __future__ import annotations

import gzip

import pandas as pd
import pytest

from conftest import FIXTURES
from shufflelab import eventlog, fct


@pytest.mark.parametrize(
    ("mb", "label"),
    [
        (0.0, "0-0.1 MB"),
        (0.05, "0-0.1 MB"),
        (0.1, "0.1-1 MB"),
        (9.99, "1-10 MB"),
        (10, "10-100 MB"),
        (5e3, ">= 100 MB"),
    ],
)
def test_buckets_are_left_closed(mb: float, label: str) -> None:
    assert fct.bucket_of(mb) == label


def test_negative_volume_is_an_error() -> None:
    with pytest.raises(ValueError):
        fct.bucket_of(-1)


def test_flows_from_a_task_table() -> None:
    tasks = pd.DataFrame(
        {
            "run_id": ["a", "a", "a"],
            "task_id": [1, 2, 3],
            "remote_bytes": [0, 2_000_000, 50_000],
            "remote_reqs_duration_ms": [0.0, 120.0, 5.0],
            "fetch_wait_ms": [0.0, 80.0, 1.0],
            "shuffle_write_bytes": [3_000_000, 0, 0],
            "shuffle_write_ms": [7.5, 0.0, 0.0],
        }
    )
    fl = fct.flows(tasks)
    reads = fl[fl["kind"] == "read"].set_index("task_id")
    assert list(reads.index) == [2, 3]  # no remote bytes: no read flow
    assert reads.loc[2, "fct_ms"] == 120.0 and reads.loc[2, "wait_ms"] == 80.0
    assert reads.loc[2, "bucket"] == "1-10 MB" and reads.loc[3, "bucket"] == "0-0.1 MB"
    writes = fl[fl["kind"] == "write"]
    assert writes["task_id"].tolist() == [1] and writes["fct_ms"].tolist() == [7.5]
    s = fct.summary(fl)
    assert set(s["kind"]) == {"read", "write"} and s["n"].sum() == 3


def test_flows_of_a_real_run() -> None:
    with gzip.open(FIXTURES / "eventlog-sort-aggregate-udp75.jsonl.gz", "rt") as fh:
        log = eventlog.parse_lines(fh)
    fl = fct.flows(pd.DataFrame(eventlog.records(log.tasks)))
    reads = fl[fl["kind"] == "read"]
    assert reads["volume_mb"].sum() == pytest.approx(93.22592)
    assert (reads["fct_ms"] >= 0).all()
    assert reads["fct_ms"].max() > 1000  # under 75 % UDP, some fetches take seconds
