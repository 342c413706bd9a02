"""Parsing the task listener's JSON lines (no Spark needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shufflelab import listener


def _end(task: int, remote: int, wait: int) -> dict:
    return {
        "kind": "end", "t_ms": 1000 + task, "task": task, "stage": 1, "attempt": 0, "index": task,
        "executor": "0", "host": "10.77.2.1", "launch_ms": 100, "finish_ms": 900, "successful": True,
        "run_ms": 700, "cpu_ns": 5_000_000, "deserialize_ms": 3, "gc_ms": 0, "remote_bytes": remote,
        "local_bytes": 10, "remote_blocks": 3, "local_blocks": 1, "fetch_wait_ms": wait,
        "remote_reqs_ms": 40, "records_read": 7, "write_bytes": 0, "write_ns": 0, "records_written": 0,
    }  # fmt: skip


def _progress(task: int, t: int, remote: int, wait: int) -> dict:
    return {"kind": "progress", "t_ms": t, "task": task, "stage": 1, "executor": "0",
            "remote_bytes": remote, "fetch_wait_ms": wait, "remote_reqs_ms": 0}  # fmt: skip


def _write(path: Path, recs: list[dict], torn: str | None = None) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in recs)
    if torn:
        text += torn
    path.write_text(text)
    return path


def test_parse_kinds_and_torn_last_line(tmp_path: Path) -> None:
    recs = [
        {"kind": "start", "t_ms": 1, "task": 1, "stage": 1, "attempt": 0, "index": 1, "executor": "0",
         "host": "h", "launch_ms": 1},
        _progress(1, 1000, 0, 0),
        _progress(1, 2000, 4096, 500),
        _end(1, 8192, 900),
    ]  # fmt: skip
    log = listener.parse(_write(tmp_path / "a.jsonl", recs, torn='{"kind":"end","task":2,"sta'))
    assert log.bad_lines == 1
    assert len(log.ends) == 1 and log.ends.loc[0, "remote_bytes"] == 8192
    assert log.ends.loc[0, "fetch_wait_ms"] == 900
    assert list(log.progress["remote_bytes"]) == [0, 4096]
    assert set(listener.END_COLUMNS) <= set(log.ends.columns)


def test_fetch_rates_per_interval() -> None:
    import pandas as pd

    prog = pd.DataFrame(
        [
            _progress(1, 1000, 0, 0),
            _progress(1, 3000, 2_000_000, 1500),
            _progress(2, 1000, 0, 0),
            _progress(1, 2000, 1_000_000, 500),
            _progress(2, 2000, 0, 1000),
        ]  # fmt: skip
    ).drop(columns=["kind"])
    rates = listener.fetch_rates(prog)
    one = rates[rates.task == 1].sort_values("t_ms")
    assert list(one["bytes"]) == [1_000_000, 1_000_000]
    assert list(one["rate_Bps"]) == pytest.approx([1e6, 1e6])
    assert list(one["wait_ms"]) == [500, 1000]
    two = rates[rates.task == 2]
    # a task that waited the whole second and received nothing: the starvation signature
    assert list(two["rate_Bps"]) == [0] and list(two["wait_ms"]) == [1000]


def test_fetch_rates_empty() -> None:
    import pandas as pd

    assert listener.fetch_rates(pd.DataFrame(columns=listener.PROGRESS_COLUMNS)).empty


def test_spark_conf_names_the_class_and_path(tmp_path: Path) -> None:
    conf = listener.spark_conf(tmp_path / "l.jar", tmp_path / "out.jsonl", heartbeat_s=0.5)
    assert conf["spark.extraListeners"] == "shufflelab.TaskFlowListener"
    assert conf[listener.PATH_CONF] == str(tmp_path / "out.jsonl")
    assert conf["spark.executor.heartbeatInterval"] == "500ms"
    assert conf["spark.driver.extraClassPath"].endswith("l.jar")


def test_task_cpu_lines_from_several_executors(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text('{"task":1,"stage":0,"user_ns":8000000,"cpu_ns":9000000,"ok":true}\n{"task":2,"st')
    b.write_text('{"task":3,"stage":1,"user_ns":1000000,"cpu_ns":1500000,"ok":false}\n')
    tc = listener.task_cpu([a, b])
    assert list(tc["task"]) == [1, 3] and tc["user_ns"].sum() == 9_000_000 and tc["cpu_ns"].sum() == 10_500_000
    assert listener.task_cpu([]).empty
