"""Benchmark: what one run costs besides its Spark job, with and without a start-up saving.

The starvation experiment's cluster (master + 4 workers x 1 core, star topology at 20 Mbit/s per
port) and a small-records job, side by side in one invocation, so both settings see the same
machine state. Reports per setting: SparkSession start (driver JVM up and every executor
registered), run wall time minus job time (the per-run overhead with the cluster reused), job
time and executor CPU time (to check that the setting changes start-up only).

``--compare cds``: one experiment with the matrix ``spark.cds = [false, true]`` (the JVM
class-data archive), repetitions interleaved.

``--compare resolver``: the namespaces' private resolver (no name server inside the fabric) off and
on, in alternating experiments of ``--reps`` runs each, ``--rounds`` times; each experiment's
first run, which also starts the cluster, is excluded.

    .venv/bin/python benchmarks/run_overhead.py --reps 4 --out docs/benchmarks-overhead.json
    .venv/bin/python benchmarks/run_overhead.py --compare resolver --reps 3 --rounds 2 \
        --out docs/benchmarks-overhead-resolver.json
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
from shufflelab.emulate import cds, local, netns
from shufflelab.emulate.runner import EmulateRunner
from shufflelab.switch import Switch


def _spec(reps: int, cds_values: list[bool], datapath: str = "kernel") -> S.ExperimentSpec:
    return S.parse(
        {
            "experiment": {"name": "overhead", "repetitions": reps, "run_timeout_s": 300},
            "topology": {"kind": "star", "bottleneck": {"rate_mbps": 20, "queue_bytes": 500_000, "datapath": datapath}},
            "hosts": {
                "master": {"roles": ["spark-master"]},
                **{f"w{i}": {"roles": ["spark-worker"]} for i in range(1, 5)},
            },
            "spark": {"worker_cores": 1, "executor_memory": "512m"},
            "workload": {"name": "small-records", "params": {"records": 300_000, "partitions": 12, "keys": 10_000}},
            "matrix": {"spark.cds": cds_values},
        },
        "run_overhead",
    )


def _summary(g: Any) -> dict[str, Any]:
    over = (g["wall_s"] - g["job_time_s"]).tolist()
    return {
        "n": len(g),
        "session_start_s": [round(x, 1) for x in g["session_s"]],
        "session_start_mean_s": round(statistics.mean(g["session_s"]), 2),
        "overhead_per_run_s": [round(x, 1) for x in over],
        "overhead_per_run_mean_s": round(statistics.mean(over), 2),
        "job_time_mean_s": round(statistics.mean(g["job_time_s"]), 2),
        "executor_cpu_mean_s": round(statistics.mean(g["executor_cpu_s"]), 2),
    }


def _experiment(spec: S.ExperimentSpec, tmp: Path, name: str) -> Any:
    """Run one experiment; its ok runs after the first (which also started the cluster)."""
    folder = tmp / name
    folder.mkdir()
    runner = EmulateRunner(spec, name, folder, backend=local.backend(switches=Switch))
    runner.run()
    df, _ = runner.store.runs_with_values()
    df = df[df["status"] == "ok"]
    return df[df["started_at"] > df["started_at"].min()]


def _compare_cds(reps: int, tmp: Path) -> dict[str, Any]:
    df = _experiment(_spec(reps, [False, True]), tmp, "overhead")
    rows = {("cds" if setting else "no_cds"): _summary(g) for setting, g in df.groupby("spark.cds")}
    if "cds" in rows and "no_cds" in rows:
        rows["session_start_ratio_cds_vs_no"] = round(
            rows["cds"]["session_start_mean_s"] / rows["no_cds"]["session_start_mean_s"], 3
        )
    return rows


def _compare_resolver(reps: int, rounds: int, datapath: str, tmp: Path) -> dict[str, Any]:
    import pandas as pd

    parts: dict[str, list[Any]] = {"machine_resolver": [], "private_resolver": []}
    for r in range(rounds):
        for key, private in (("machine_resolver", False), ("private_resolver", True)):
            netns.PRIVATE_RESOLVER = private
            try:
                parts[key].append(_experiment(_spec(reps, [True], datapath), tmp, f"overhead_{key}_{r}"))
            finally:
                netns.PRIVATE_RESOLVER = True
    rows: dict[str, Any] = {k: _summary(pd.concat(v)) for k, v in parts.items()}
    rows["session_start_ratio_private_vs_machine"] = round(
        rows["private_resolver"]["session_start_mean_s"] / rows["machine_resolver"]["session_start_mean_s"], 3
    )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", choices=["cds", "resolver"], default="cds")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2, help="alternations (--compare resolver)")
    ap.add_argument(
        "--datapath", choices=["kernel", "switch"], default="kernel", help="the ports' datapath (--compare resolver)"
    )
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks-overhead.json"))
    a = ap.parse_args()
    t = time.monotonic()
    cds.ensure_archive()
    archive_s = time.monotonic() - t
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        if a.compare == "cds":
            rows = _compare_cds(a.reps, Path(tmp))
        else:
            rows = _compare_resolver(a.reps, a.rounds, a.datapath, Path(tmp))
        total = time.monotonic() - t0
    result = {
        "command": " ".join(["benchmarks/run_overhead.py", *sys.argv[1:]]),
        "archive_record_s": round(archive_s, 1),
        "archive_bytes": cds.archive_path().stat().st_size,
        "experiment_total_s": round(total, 1),
        "datapath": a.datapath,
        "settings": rows,
    }
    print(json.dumps(result, indent=1))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
