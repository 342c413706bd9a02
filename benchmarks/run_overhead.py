"""Benchmark: what one run costs besides its Spark job, with and without the JVM class-data archive.

One experiment, side by side in one invocation: the starvation experiment's cluster (master +
4 workers x 1 core, star topology at 20 Mbit/s per port), a small-records job, and the matrix
``spark.cds = [false, true]`` with repetitions interleaved, so both settings see the same
machine state. Reports per setting: SparkSession start (driver JVM up and every executor
registered), run wall time minus job time (the per-run overhead with the cluster reused), job
time and executor CPU time (to check that the archive changes start-up only).

    .venv/bin/python benchmarks/run_overhead.py --reps 4 --out docs/benchmarks-overhead.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shufflelab import spec as S
from shufflelab.emulate import cds
from shufflelab.emulate.runner import EmulateRunner
from shufflelab.results import Store


def _spec(reps: int) -> S.ExperimentSpec:
    return S.parse(
        {
            "experiment": {"name": "overhead", "repetitions": reps, "run_timeout_s": 300},
            "topology": {"kind": "star", "bottleneck": {"rate_mbps": 20, "queue_bytes": 500_000}},
            "hosts": {
                "master": {"roles": ["spark-master"]},
                **{f"w{i}": {"roles": ["spark-worker"]} for i in range(1, 5)},
            },
            "spark": {"worker_cores": 1, "executor_memory": "512m"},
            "workload": {"name": "small-records", "params": {"records": 300_000, "partitions": 12, "keys": 10_000}},
            "matrix": {"spark.cds": [False, True]},
        },
        "run_overhead",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks-overhead.json"))
    a = ap.parse_args()
    t = time.monotonic()
    cds.ensure_archive()
    archive_s = time.monotonic() - t
    with tempfile.TemporaryDirectory() as tmp:
        runner = EmulateRunner(_spec(a.reps), "overhead", Path(tmp))
        t0 = time.monotonic()
        runner.run()
        total = time.monotonic() - t0
        df, _ = Store(Path(tmp) / "overhead.duckdb").runs_with_values()
    df = df[df["status"] == "ok"]
    first = df["started_at"].min()
    rows: dict[str, Any] = {}
    for setting, g in df.groupby("spark.cds"):
        g = g[g["started_at"] > first]  # the very first run also paid for the cluster start
        over = (g["wall_s"] - g["job_time_s"]).tolist()
        rows["cds" if setting else "no_cds"] = {
            "n": len(g),
            "session_start_s": [round(x, 1) for x in g["session_s"]],
            "session_start_mean_s": round(statistics.mean(g["session_s"]), 2),
            "overhead_per_run_s": [round(x, 1) for x in over],
            "overhead_per_run_mean_s": round(statistics.mean(over), 2),
            "job_time_mean_s": round(statistics.mean(g["job_time_s"]), 2),
            "executor_cpu_mean_s": round(statistics.mean(g["executor_cpu_s"]), 2),
        }
    result = {
        "command": " ".join(["benchmarks/run_overhead.py", *sys.argv[1:]]),
        "archive_record_s": round(archive_s, 1),
        "archive_bytes": cds.archive_path().stat().st_size,
        "experiment_total_s": round(total, 1),
        "settings": rows,
    }
    if "cds" in rows and "no_cds" in rows:
        result["session_start_ratio_cds_vs_no"] = round(
            rows["cds"]["session_start_mean_s"] / rows["no_cds"]["session_start_mean_s"], 3
        )
    print(json.dumps(result, indent=1))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
