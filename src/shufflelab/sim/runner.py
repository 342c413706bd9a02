"""Run simulation experiments and store them: every (matrix point, policy, seed) goes through the
Rust core; rows land in a DuckDB file in tables of their own (``sim_experiments``, ``sim_runs``,
``sim_jobs``, ``sim_planner``). Times are virtual seconds (``*_s``) except ``wall_s``.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from shufflelab import netaware
from shufflelab.sim import spec as simspec
from shufflelab.sim.core import planner_inputs, simulate

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS sim_experiments (
        name VARCHAR PRIMARY KEY, description VARCHAR, figure VARCHAR, x_key VARCHAR,
        spec_json VARCHAR, spec_path VARCHAR, created_at TIMESTAMP DEFAULT current_timestamp)""",
    """CREATE TABLE IF NOT EXISTS sim_runs (
        run_id VARCHAR PRIMARY KEY, experiment VARCHAR, scenario_id VARCHAR, label VARCHAR,
        values_json VARCHAR, x_value DOUBLE, policy VARCHAR, seed INTEGER, network_mode VARCHAR,
        n_jobs INTEGER, mean_job_s DOUBLE, median_job_s DOUBLE, max_job_s DOUBLE,
        makespan_s DOUBLE, mean_pushed_ops DOUBLE, events BIGINT, wall_s DOUBLE,
        storage_busy_core_s DOUBLE, compute_busy_core_s DOUBLE, inter_cluster_bytes DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS sim_jobs (
        run_id VARCHAR, job INTEGER, arrival_s DOUBLE, pushed_ops INTEGER, tasks INTEGER,
        finish_s DOUBLE, duration_s DOUBLE, payload_bytes DOUBLE, wire_bytes DOUBLE,
        storage_cpu_s DOUBLE, compute_cpu_s DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS sim_planner (
        run_id VARCHAR, job INTEGER, op_index INTEGER, name VARCHAR, partitions DOUBLE,
        input_gb DOUBLE, output_gb DOUBLE, compute_queued_partitions DOUBLE,
        compute_drain_partitions_per_s DOUBLE, storage_queued_partitions DOUBLE,
        storage_drain_partitions_per_s DOUBLE, bandwidth_gbps DOUBLE,
        concurrent_transfers DOUBLE, max_concurrent_transfers DOUBLE, backlog_gb DOUBLE,
        benefits BOOLEAN)""",
]


@dataclass
class SimResults:
    """What :func:`run_experiment` wrote: the store's path and its rows as DataFrames."""

    path: Path
    runs: pd.DataFrame
    jobs: pd.DataFrame
    planner: pd.DataFrame


def _x_value(values: dict[str, Any], key: str | None) -> float | None:
    if key is None:
        return None
    v = values.get(key)
    return float(v) if isinstance(v, int | float) else None


def run_one(
    scenario: simspec.Scenario, policy: str, seed: int, experiment: str, x_key: str | None
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """One run: the ``sim_runs`` row, its ``sim_jobs`` rows and ``sim_planner`` rows."""
    config = simspec.core_config(scenario.spec, policy, seed)
    t0 = time.perf_counter()
    result = simulate(config)
    wall = time.perf_counter() - t0
    run_id = f"{scenario.scenario_id}/{policy}/s{seed}"
    durations = [j["duration_s"] for j in result["jobs"]]
    inter = next(lk for lk in result["links"] if lk["name"] == "inter_cluster")
    run = {
        "run_id": run_id,
        "experiment": experiment,
        "scenario_id": scenario.scenario_id,
        "label": scenario.label,
        "values_json": json.dumps(scenario.values, sort_keys=True),
        "x_value": _x_value(scenario.values, x_key),
        "policy": policy,
        "seed": seed,
        "network_mode": scenario.spec.network.mode,
        "n_jobs": len(durations),
        "mean_job_s": statistics.fmean(durations),
        "median_job_s": statistics.median(durations),
        "max_job_s": max(durations),
        "makespan_s": result["makespan_s"],
        "mean_pushed_ops": statistics.fmean(j["pushed_ops"] for j in result["jobs"]),
        "events": result["events"],
        "wall_s": wall,
        "storage_busy_core_s": result["storage_busy_core_s"],
        "compute_busy_core_s": result["compute_busy_core_s"],
        "inter_cluster_bytes": inter["carried_bytes"],
    }
    jobs, planner = [], []
    for j in result["jobs"]:
        rec = j.pop("planner", None)
        jobs.append({"run_id": run_id, **j})
        if rec is not None:
            ops, net = planner_inputs(rec)
            for i, (op, verdict) in enumerate(zip(ops, netaware.decisions(ops, net), strict=True)):
                row = {"run_id": run_id, "job": j["job"], "op_index": i, **vars(op)}
                row.pop("pushable")
                planner.append({**row, **vars(net), "benefits": verdict})
    return run, jobs, planner


def run_experiment(spec_path: str | Path, results_dir: str | Path = "results/sim", progress: Any = None) -> SimResults:
    """Run every matrix point × policy × seed of a spec into ``RESULTS_DIR/<name>.duckdb``
    (replacing that experiment's earlier rows) and return what was written."""
    sp = simspec.load(spec_path)
    name = sp.experiment.name
    x_key = sp.x_key()
    runs, jobs, planner = [], [], []
    for scenario in simspec.expand(sp, str(spec_path)):
        for policy in sp.experiment.policies:
            for seed in range(sp.experiment.seeds):
                r, j, p = run_one(scenario, policy, seed, name, x_key)
                runs.append(r)
                jobs.extend(j)
                planner.extend(p)
                if progress is not None:
                    progress(r)
    path = Path(results_dir) / f"{name}.duckdb"
    frames = {
        "sim_runs": pd.DataFrame(runs),
        "sim_jobs": pd.DataFrame(jobs),
        "sim_planner": pd.DataFrame(planner),
    }
    write(path, sp, str(spec_path), frames)
    return SimResults(path, frames["sim_runs"], frames["sim_jobs"], frames["sim_planner"])


def write(path: Path, sp: simspec.SimSpec, spec_path: str, frames: dict[str, pd.DataFrame]) -> None:
    """Replace one experiment's rows in the store, in one transaction."""
    path.parent.mkdir(parents=True, exist_ok=True)
    name = sp.experiment.name
    con = duckdb.connect(str(path))
    try:
        for stmt in SCHEMA:
            con.execute(stmt)
        con.execute("BEGIN TRANSACTION")
        old = "SELECT run_id FROM sim_runs WHERE experiment = ?"
        for table in ("sim_jobs", "sim_planner"):
            con.execute(f"DELETE FROM {table} WHERE run_id IN ({old})", [name])
        con.execute("DELETE FROM sim_runs WHERE experiment = ?", [name])
        con.execute(
            "INSERT OR REPLACE INTO sim_experiments (name, description, figure, x_key, spec_json,"
            " spec_path) VALUES (?, ?, ?, ?, ?, ?)",
            [
                name,
                sp.experiment.description,
                sp.experiment.figure,
                sp.x_key(),
                simspec.spec_json(sp),
                spec_path,
            ],
        )
        for table, df in frames.items():
            if df.empty:
                continue
            tmp = f"df_{uuid.uuid4().hex[:8]}"
            con.register(tmp, df)
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {tmp}")
            con.unregister(tmp)
        con.execute("COMMIT")
    finally:
        con.close()


SIM_TABLES = ("sim_experiments", "sim_runs", "sim_jobs", "sim_planner")


class NotSimResults(ValueError):
    """The file is not a results file ``shufflelab sim run`` wrote (the message names it and why)."""


def load(path: str | Path) -> dict[str, pd.DataFrame]:
    """Every ``sim_`` table of a results file as DataFrames; :class:`NotSimResults` for a file that
    is not one (not DuckDB, or a store without the simulator's tables, e.g. a lab experiment's)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such results file")
    what = f"{p}: not a simulator results file (written by `shufflelab sim run`)"
    try:
        con = duckdb.connect(str(p), read_only=True)
    except duckdb.Error as exc:
        raise NotSimResults(f"{what}: {str(exc).splitlines()[0]}") from None
    try:
        have = {str(r[0]) for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        missing = [t for t in SIM_TABLES if t not in have]
        if missing:
            raise NotSimResults(f"{what}: it has no table {', '.join(missing)}")
        return {t: con.execute(f"SELECT * FROM {t}").df() for t in SIM_TABLES}
    finally:
        con.close()
