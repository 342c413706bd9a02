"""Small synthetic results stores for report and CLI tests: the quickstart's shape (sort-aggregate
on 3 one-core workers behind a 40 Mbit/s bottleneck, 0 % vs 75 % UDP), every table a report reads
(runs, tasks, stages, jobs, queue samples), job times drawn around a chosen slowdown."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shufflelab.results import RunRecord, Store

T0 = 1_800_000_000_000  # epoch ms of the first run


def spec(udp: float, cc: str = "cubic") -> dict[str, Any]:
    return {
        "experiment": {"name": "synthetic", "repetitions": 1},
        "topology": {"kind": "shared", "bottleneck": {"rate_mbps": 40, "queue_bytes": 100_000}},
        "hosts": {
            "master": {"roles": ["spark-master"]},
            **{f"w{i}": {"roles": ["spark-worker"]} for i in (1, 2, 3)},
            "tgen": {"roles": ["traffic-source"]},
            "tsink": {"roles": ["traffic-sink"]},
        },
        "tcp": {"congestion_control": cc},
        "spark": {"worker_cores": 1},
        "workload": {"name": "sort-aggregate", "params": {"rows": 200_000, "partitions": 12}},
        "cross_traffic": {"udp_percent": udp},
        "telemetry": {"queue_period_ms": 100},
    }


def _tables(start_ms: int, job_s: float, fetch_share: float, cpu_factor: float) -> dict[str, pd.DataFrame]:
    """One job of two stages on three executors: 3 map tasks, then 3 reducers that wait on fetches;
    the tasks' CPU time does not depend on the job time (a job that waits on the network)."""
    total = int(job_s * 1000)
    map_end = int(total * 0.4)
    tasks = []
    for ex in range(3):
        tasks.append((0, ex, 50, map_end - 20, 0.0, 0, 3_000_000))
    for ex in range(3):
        dur = total - map_end - 60
        tasks.append((1, 3 + ex, map_end + 20, map_end + 20 + dur, dur * fetch_share, 5_000_000, 0))
    rows = []
    for stage, tid, launch, finish, wait, remote, written in tasks:
        run_ms = finish - launch - 5
        rows.append(
            {
                "stage_id": stage, "stage_attempt": 0, "task_id": tid, "task_index": tid % 3, "attempt": 0,
                "executor_id": str(tid % 3), "host": f"w{tid % 3 + 1}", "launch_at_ms": start_ms + launch,
                "finish_at_ms": start_ms + finish, "duration_ms": float(finish - launch), "successful": True,
                "end_reason": "Success", "executor_run_ms": float(run_ms),
                "executor_cpu_ms": (3000.0 if stage == 0 else 1500.0) * cpu_factor, "deserialize_ms": 5.0,
                "deserialize_cpu_ms": 4.0,
                "gc_ms": 0.0, "result_serialization_ms": 0.0, "result_bytes": 1000, "memory_spilled_bytes": 0,
                "disk_spilled_bytes": 0, "input_bytes": 0, "input_records": 0, "fetch_wait_ms": float(wait),
                "remote_blocks": 8 if remote else 0, "local_blocks": 4 if remote else 0, "remote_bytes": remote,
                "remote_bytes_to_disk": 0, "local_bytes": remote // 2, "shuffle_records_read": 1000 if remote else 0,
                "remote_reqs_duration_ms": float(wait) * 1.2, "shuffle_write_bytes": written,
                "shuffle_write_records": 1000 if written else 0, "shuffle_write_ms": 20.0 if written else 0.0,
            }
        )  # fmt: skip
    stages = pd.DataFrame(
        [
            {"stage_id": 0, "stage_attempt": 0, "name": "map", "num_tasks": 3, "submitted_at_ms": start_ms + 40,
             "completed_at_ms": start_ms + map_end, "duration_ms": float(map_end - 40), "failure_reason": None},
            {"stage_id": 1, "stage_attempt": 0, "name": "reduce", "num_tasks": 3,
             "submitted_at_ms": start_ms + map_end + 10, "completed_at_ms": start_ms + total - 30,
             "duration_ms": float(total - map_end - 40), "failure_reason": None},
        ]
    )  # fmt: skip
    jobs = pd.DataFrame(
        [{"job_id": 0, "submitted_at_ms": start_ms, "completed_at_ms": start_ms + total, "duration_ms": float(total),
          "result": "JobSucceeded", "stage_ids": "0,1"}]
    )  # fmt: skip
    t = np.arange(0.0, job_s, 0.1)
    backlog = (60_000 * fetch_share * (1 + np.sin(t))).astype(int)
    samples = pd.DataFrame(
        {"t": start_ms / 1000 + t, "t_rel_s": t, "dev": "sw-w1", "backlog_bytes": backlog,
         "backlog_packets": backlog // 1500, "drops": 0, "sent_bytes": 0, "sent_packets": 0, "overlimits": 0}
    )  # fmt: skip
    return {"tasks": pd.DataFrame(rows), "stages": stages, "jobs": jobs, "queue_samples": samples}


# the stores built in this process, by build()'s arguments: each is made once (a run costs about 0.1 s
# to write, a report test's store up to 3 s) and copied to every path asked for -- the same file, as
# the seeded draws make it the same, and each test still gets a store of its own to write to
_BUILT: dict[tuple[Any, ...], Path] = {}
_CACHE: list[Path] = []


def _cached() -> Path:
    if not _CACHE:
        _CACHE.append(Path(tempfile.mkdtemp(prefix="shufflelab-synthetic-")))
        atexit.register(shutil.rmtree, _CACHE[0], True)
    return _CACHE[0] / f"{len(_BUILT)}.duckdb"


def build(
    path: Path,
    reps: int,
    *,
    udps: tuple[float, ...] = (0, 75),
    ccs: tuple[str, ...] = ("cubic",),
    slowdown: float = 1.9,
    seed: int = 1,
    null_job_time: int = 0,
) -> Path:
    """A store with ``reps`` successful runs per scenario (matrix: congestion control x UDP percent);
    ``null_job_time`` more runs of the first scenario with traffic have no job time (NULL).
    A copy of the one made earlier in this process with the same arguments, when there is one."""
    if path.exists():  # runs added to a store that is there: built into it
        return _build(path, reps, udps, ccs, slowdown, seed, null_job_time)
    key = (reps, tuple(udps), tuple(ccs), slowdown, seed, null_job_time)
    made = _BUILT.get(key)
    if made is None:
        made = _build(_cached(), reps, udps, ccs, slowdown, seed, null_job_time)
        _BUILT[key] = made
    assert not Path(f"{made}.wal").exists(), "the store was not checkpointed when its last connection closed"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(made, path)
    return path


def _build(
    path: Path,
    reps: int,
    udps: tuple[float, ...],
    ccs: tuple[str, ...],
    slowdown: float,
    seed: int,
    null_job_time: int,
) -> Path:
    rng = np.random.default_rng(seed)
    store = Store(path)
    matrix = {"cross_traffic.udp_percent": list(udps)}
    if len(ccs) > 1:
        matrix = {"tcp.congestion_control": list(ccs), **matrix}
    base = {**spec(0), "matrix": matrix}
    store.init_experiment("synthetic", "synthetic store for tests", json.dumps(base), "synthetic.toml")
    scenarios = []
    for cc in ccs:
        for udp in udps:
            values: dict[str, Any] = {"cross_traffic.udp_percent": udp}
            label = f"udp={udp:g}"
            if len(ccs) > 1:
                values = {"tcp.congestion_control": cc, **values}
                label = f"cc={cc},{label}"
            scenarios.append({"scenario_id": label, "label": label, "values": values,
                              "spec_json": json.dumps(spec(udp, cc)), "backend": "emulate"})  # fmt: skip
    store.add_scenarios(scenarios)
    start = T0
    traffic = [s["label"] for s in scenarios if s["values"]["cross_traffic.udp_percent"] > 0]
    for rep in range(1, reps + 1 + null_job_time):
        for sc in scenarios:
            udp = sc["values"]["cross_traffic.udp_percent"]
            if rep > reps and sc["label"] != traffic[0]:
                continue
            factor = 1 + (slowdown - 1) * udp / max(udps)
            job_s = float(12.0 * factor * (1 + rng.normal(0, 0.06)))
            fetch_share = 0.1 + 0.5 * udp / 100
            tables = _tables(start, job_s, fetch_share, float(1 + rng.normal(0, 0.01)))
            cpu = float(sum(tables["tasks"]["executor_cpu_ms"]) / 1000)
            env = {"cpus": 2, "kernel": "6.1", "pyspark": "4.3.0",
                   "capabilities": {"qdiscs": ["htb", "bfifo"], "congestion_controls": ["cubic", "reno"]}}  # fmt: skip
            store.write_run(
                RunRecord(
                    run={
                        "run_id": f"{sc['label']}-r{rep}", "scenario_id": sc["scenario_id"], "rep": rep,
                        "attempt": 1, "status": "ok", "backend": "emulate", "started_at": start / 1000,
                        "job_time_s": None if rep > reps else job_s, "n_jobs": 1, "n_tasks": 6,
                        "executor_cpu_s": cpu, "executor_run_s": cpu * 1.2,
                        "fetch_wait_s": float(sum(tables["tasks"]["fetch_wait_ms"]) / 1000),
                        "remote_bytes_read": 15_000_000, "shuffle_bytes_written": 9_000_000,
                        "bottleneck_tx_bytes": int(18e6 + udp / 100 * 40e6 / 8 * job_s),
                        "bottleneck_max_backlog_bytes": 90_000, "total_cores": 3, "n_apps": 1,
                        "task_user_cpu_s": cpu * 0.95, "environment_json": json.dumps(env),
                    },
                    tables=tables,
                )
            )  # fmt: skip
            start += int(job_s * 1000) + 20_000
    return path
