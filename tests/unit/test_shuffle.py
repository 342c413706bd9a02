"""Shuffle share and network efficiency: on a real event log and on hand-made task tables."""

from __future__ import annotations

import gzip

import pandas as pd
import pytest

from conftest import FIXTURES
from shufflelab import eventlog, shuffle


def _fixture_tasks() -> pd.DataFrame:
    with gzip.open(FIXTURES / "eventlog-sort-aggregate-udp75.jsonl.gz", "rt") as fh:
        return pd.DataFrame(eventlog.records(eventlog.parse_lines(fh).tasks))


def _task(stage: int, host: str, launch: int, finish: int, run: float, wait: float, write: float, remote: int) -> dict:
    return {
        "stage_id": stage, "stage_attempt": 0, "host": host, "launch_at_ms": launch, "finish_at_ms": finish,
        "executor_run_ms": run, "fetch_wait_ms": wait, "shuffle_write_ms": write, "remote_bytes": remote,
    }  # fmt: skip


def test_share_on_a_recorded_run() -> None:
    t = _fixture_tasks()
    s = shuffle.share(t).iloc[0]
    assert s["read_share"] == pytest.approx(t["fetch_wait_ms"].sum() / t["executor_run_ms"].sum())
    assert 0.7 < s["share"] < 0.9  # UDP at 75 % of the link: executors mostly waited on fetches
    by_stage = shuffle.share(t, ["stage_id"]).set_index("stage_id")
    assert by_stage["run_ms"].sum() == pytest.approx(t["executor_run_ms"].sum())
    assert by_stage.loc[0, "read_share"] == 0  # the first stage reads no shuffle data


def test_network_efficiency_on_a_recorded_run() -> None:
    # 40 Mbit/s bottleneck with 75 % of it taken by UDP: about a quarter of the ideal
    e = shuffle.network_efficiency(_fixture_tasks(), 40.0, "shared")
    assert 0.15 < e["efficiency"] < 0.35


def test_share_and_efficiency_by_hand() -> None:
    t = pd.DataFrame(
        [
            _task(1, "a", 0, 1000, 1000, 0, 100, 0),
            _task(2, "a", 1000, 3000, 2000, 1500, 0, 1_000_000),
            _task(2, "b", 1500, 4000, 2500, 1000, 0, 3_000_000),
            _task(3, "b", 3500, 5000, 1000, 500, 0, 0),  # overlapping stage, no remote bytes
        ]
    )
    s = shuffle.share(t).iloc[0]
    assert s["read_share"] == pytest.approx(3000 / 6500) and s["write_share"] == pytest.approx(100 / 6500)
    shared = shuffle.network_efficiency(t, 8.0, "shared")  # 4 MB at 8 Mbit/s of payload-equivalent
    assert shared["observed_s"] == pytest.approx(3.0)  # stage 2 spans 1.0 .. 4.0 s
    assert shared["ideal_s"] == pytest.approx(4e6 * 8 / (8e6 * shuffle.WIRE_PAYLOAD))
    star = shuffle.network_efficiency(t, 8.0, "star")  # host b's port carries the most: 3 MB
    assert star["ideal_s"] == pytest.approx(3e6 * 8 / (8e6 * shuffle.WIRE_PAYLOAD))
    none = shuffle.network_efficiency(t[t["remote_bytes"] == 0], 8.0)
    assert none["efficiency"] is None


def test_union_of_spans() -> None:
    assert shuffle._union_s([(0, 2), (1, 3), (5, 6)]) == 4
    assert shuffle._union_s([(0, 10), (2, 3)]) == 10
    assert shuffle._union_s([]) == 0
