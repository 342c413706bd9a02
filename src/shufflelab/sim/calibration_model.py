"""Calibration's model side: a workload fitted from one real run's task table, an experiment spec
mapped to the simulator's platform, and the model run (see :mod:`shufflelab.sim.calibrate` for the
fitting rules). Pure: no store, no files.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from shufflelab.sim import sparkjob

MSS_BYTES = 1448  # TCP payload per segment with timestamps at a 1500 B MTU
MSS_WIRE_BYTES = 1514  # the same segment on the wire (+ TCP 32, IP 20, Ethernet 14)
WIRE_FACTOR = MSS_WIRE_BYTES / MSS_BYTES
# CPU cores used per Gbit/s of UDP cross traffic (iperf3 client + server, as they report it),
# measured on this project's host in the seed-000 runs (median 2.25): a lower bound of what the
# cross traffic takes from the executors, reported next to the host profile below.
DEFAULT_CROSS_CPU_CORES_PER_GBPS = 2.25
# What UDP cross traffic on the seed-000 fabric takes from a Spark job on this host, in cores, by
# UDP wire rate (Gbit/s): ``benchmarks/cross_traffic_cpu.py --method spark`` (local-mode Spark
# jobs of the seed-000 workload, which use no network, timed with and without the UDP; lost share
# of the job rate × the host's cores), docs/benchmarks-cross-cpu-spark.json. Interpolated linearly
# between the points, extrapolated with the last point's cores per Gbit/s.
HOST_CROSS_CPU_CORES: tuple[tuple[float, float], ...] = ((0.0, 0.0), (0.05, 0.074), (0.09, 0.313), (0.1, 0.589))
HOST_CROSS_CPU_SOURCE = "host profile: benchmarks/cross_traffic_cpu.py --method spark"
# Mean loss recovery a control round trip adds while UDP alone keeps the bottleneck FIFO full
# (mean − median of 2 kB request/response exchanges at 100 % UDP on the seed-000 fabric,
# ``benchmarks/control_latency.py``, docs/benchmarks-control-latency.json).
DEFAULT_CONTROL_LOSS_S = 0.057

CrossCpu = float | tuple[tuple[float, float], ...]


def cross_cpu_cores(udp_wire_gbps: float, cross_cpu: CrossCpu) -> float:
    """Cores the cross traffic takes at ``udp_wire_gbps``: ``κ × rate`` for a constant κ (cores per
    Gbit/s), else the measured points interpolated (beyond the last: its cores per Gbit/s)."""
    if udp_wire_gbps <= 0:
        return 0.0
    if isinstance(cross_cpu, int | float):
        return float(cross_cpu) * udp_wire_gbps
    pts = sorted(cross_cpu)
    xs = [x for x, _ in pts]
    ys = [y for _, y in pts]
    if udp_wire_gbps > xs[-1]:
        return ys[-1] / xs[-1] * udp_wire_gbps if xs[-1] > 0 else 0.0
    return float(np.interp(udp_wire_gbps, xs, ys))


class CalibrationError(ValueError):
    """The results file cannot be calibrated (nothing to fit, a spec the model does not cover)."""


# ---------------------------------------------------------------------------------------------
# fitting


def ps_rates(launch_ms: np.ndarray, finish_ms: np.ndarray, cores: float) -> np.ndarray:
    """Mean processor-sharing rate ``min(1, cores / n(t))`` of each task over its lifetime, with
    ``n(t)`` the number of the given tasks running at *t* (a sweep over start/end points)."""
    n = len(launch_ms)
    out = np.ones(n)
    if n == 0:
        return out
    points = np.unique(np.concatenate([launch_ms, finish_ms]))
    if len(points) < 2:
        return out
    mids = (points[:-1] + points[1:]) / 2
    widths = np.diff(points)
    running = ((launch_ms[None, :] <= mids[:, None]) & (finish_ms[None, :] > mids[:, None])).sum(axis=1)
    rate = np.where(running > 0, np.minimum(1.0, cores / np.maximum(running, 1)), 1.0)
    for i in range(n):
        inside = (mids > launch_ms[i]) & (mids < finish_ms[i])
        total = widths[inside].sum()
        if total > 0:
            out[i] = float((rate[inside] * widths[inside]).sum() / total)
    return out


def fit_workload(
    tasks: pd.DataFrame,
    stages: pd.DataFrame,
    jobs: pd.DataFrame,
    host_cores: float,
    platform: dict[str, Any] | None = None,
    wire_factor: float = WIRE_FACTOR,
    iterations: int = 30,
    pin: bool = True,
) -> dict[str, Any]:
    """The stages of one run (one application) as the simulator's workload document.

    ``tasks``/``stages``/``jobs`` are that run's rows (columns as in :mod:`shufflelab.eventlog`).
    Each task's CPU work starts as its measured CPU-phase wall time × its mean processor-sharing
    rate in the run; with ``platform`` (the fitted run's own scenario) the works are then refined
    by replay: simulate the run, scale each task's work by measured / simulated CPU-phase time,
    repeat, so that the model reproduces the run it was fitted from.
    """
    if tasks.empty or stages.empty or jobs.empty:
        raise CalibrationError("the fitted run has no tasks, stages or jobs")
    t = tasks[tasks["successful"].astype(bool)].copy()
    # The last attempt of each stage is the one that completed.
    last_attempt = stages.groupby("stage_id")["stage_attempt"].max()
    st = stages[stages["stage_attempt"] == stages["stage_id"].map(last_attempt)]
    st = st[st["completed_at_ms"].notna()].sort_values(["submitted_at_ms", "stage_id"])
    t = t[t["stage_attempt"] == t["stage_id"].map(last_attempt)]
    executor_ids = sorted(t["executor_id"].astype(str).unique(), key=lambda e: (len(e), e))
    executor_index = {e: i for i, e in enumerate(executor_ids)}
    executors = max(1, len(executor_ids))
    t["rate"] = ps_rates(t["launch_at_ms"].to_numpy(float), t["finish_at_ms"].to_numpy(float), host_cores)
    prev_end = float(jobs["submitted_at_ms"].min())
    out_stages: list[dict[str, Any]] = []
    measured: list[list[tuple[float, float]]] = []  # (CPU-phase wall time, duration) per task, s
    for _, s in st.iterrows():
        # In launch order: each executor's queue then replays the fitted run's order.
        rows = t[t["stage_id"] == s["stage_id"]].sort_values(["launch_at_ms", "task_index"])
        if rows.empty:
            continue
        tasks_out = []
        walls = []
        fetched_binary: set[str] = set()  # executors that already hold this stage's task binary
        for _, r in rows.iterrows():
            run_ms = float(r["executor_run_ms"])
            deser_ms = float(r["deserialize_ms"])
            wall_ms = max(0.0, deser_ms + run_ms - float(r["fetch_wait_ms"]))
            remote = float(r["remote_bytes"])
            local = float(r["local_bytes"]) if "local_bytes" in r and pd.notna(r["local_bytes"]) else 0.0
            sources = max(1, min(int(r["remote_blocks"]), executors - 1)) if remote > 0 else 0
            fetch = [remote * wire_factor / sources] * sources if sources else []
            walls.append((wall_ms / 1000.0, float(r["duration_ms"]) / 1000.0))
            first_on_executor = str(r["executor_id"]) not in fetched_binary
            tasks_out.append(
                {
                    "latency_s": max(0.0, float(r["duration_ms"]) - run_ms - deser_ms) / 1000.0,
                    "cpu_s": wall_ms / 1000.0 * float(r["rate"]),
                    "fetch_bytes": fetch,
                    "local_fraction": local / (local + remote) if remote > 0 else 1.0,
                    # launch + status update; the map-output lookup and fetch request of a reader;
                    # the first task of the stage on an executor fetches the task binary (a
                    # broadcast, from the driver) before it can deserialize
                    "control_round_trips": 1.0 + (1.0 if remote > 0 else 0.0) + (1.0 if first_on_executor else 0.0),
                    # where it ran: cached input keeps a task on its executor (delay scheduling)
                    "executor": executor_index[str(r["executor_id"])] if pin else -1,
                    "task_index": int(r["task_index"]),
                }
            )
            fetched_binary.add(str(r["executor_id"]))
        # Driver time between stages: from the previous stage's last task to this one's first.
        first_launch = float(rows["launch_at_ms"].min())
        out_stages.append(
            {"stage_id": int(s["stage_id"]), "gap_s": max(0.0, first_launch - prev_end) / 1000.0, "tasks": tasks_out}
        )
        measured.append(walls)
        prev_end = float(rows["finish_at_ms"].max())
    tail = max(0.0, float(jobs["completed_at_ms"].max()) - prev_end) / 1000.0
    workload = {"stages": out_stages, "tail_s": tail, "executors": executors}
    if platform is not None:
        refine_by_replay(workload, platform, measured, iterations)
    return workload


def refine_by_replay(
    workload: dict[str, Any], platform: dict[str, Any], measured: list[list[tuple[float, float]]], iterations: int
) -> float:
    """Replay the fitted run until each task's simulated CPU phase and duration match
    ``measured`` (CPU-phase wall time, duration): scale its CPU work by measured / simulated CPU
    phase, and add the duration still missing to its control latency (never below zero; time the
    model already spends fetching is not added twice). Returns the final mean absolute relative
    mismatch of task durations."""
    mismatch = float("nan")
    for _ in range(iterations):
        res = run_model({"platform": platform, "stages": workload["stages"], "tail_s": workload["tail_s"]})
        sim = {(r["stage_id"], r["index"]): r for r in res["tasks"]}
        errs = []
        for stage, walls in zip(workload["stages"], measured, strict=True):
            for i, task in enumerate(stage["tasks"]):
                r = sim[(stage["stage_id"], i)]
                want_cpu, want_dur = walls[i]
                got_cpu = r["end_s"] - r["work_at_s"] - r["blocked_s"]
                if task["cpu_s"] > 0 and got_cpu > 0:
                    task["cpu_s"] = task["cpu_s"] * want_cpu / got_cpu
                got_dur = r["end_s"] - r["start_s"]
                task["latency_s"] = max(0.0, task["latency_s"] + (want_dur - got_dur) * 0.5)
                if want_dur > 0:
                    errs.append(abs(got_dur - want_dur) / want_dur)
        mismatch = float(np.mean(errs)) if errs else 0.0
        if mismatch < 1e-3:
            break
    return mismatch


# ---------------------------------------------------------------------------------------------
# spec -> platform


def platform_for(
    spec: dict[str, Any], host_cores: float, cross_cpu: CrossCpu, control_loss_s: float = 0.0
) -> dict[str, Any]:
    """The simulator's platform for one scenario's resolved spec (a dict, as stored)."""
    topo = spec["topology"]
    if topo.get("kind", "shared") != "shared":
        raise CalibrationError(f"topology {topo.get('kind')!r}: only 'shared' (one bottleneck) is modelled")
    link = topo["bottleneck"]
    cap = link["rate_mbps"] * 1e6 / 8
    if link.get("queue_packets"):
        queue = float(link["queue_packets"]) * MSS_WIRE_BYTES
    elif link.get("queue_bytes"):
        queue = float(link["queue_bytes"])
    else:
        queue = float(max(65_536, int(cap * 1e-3)))
    workers = [h for h, v in spec["hosts"].items() if "spark-worker" in v.get("roles", [])]
    if not workers:
        raise CalibrationError("the spec has no spark-worker host")
    per_executor = int(spec.get("spark", {}).get("worker_cores", 1))
    slots = len(workers) * per_executor
    apps = int(spec.get("workload", {}).get("apps", 1) or 1)
    if apps != 1:
        raise CalibrationError("workload.apps > 1 (simultaneous applications) is not modelled")
    ccs = []
    for h in workers:
        cc = (spec["hosts"][h].get("tcp") or {}).get("congestion_control") or spec.get("tcp", {}).get(
            "congestion_control", "cubic"
        )
        ccs.append(cc)
    cc = max(set(ccs), key=ccs.count)
    vcc = any(bool((spec["hosts"][h].get("tcp") or {}).get("vcc", spec.get("tcp", {}).get("vcc"))) for h in workers)
    red = None
    if link.get("discipline", "droptail") == "red":
        r = link.get("red") or {}
        if not r:
            raise CalibrationError("topology.bottleneck: discipline 'red' without a red table")
        red = {
            "min_bytes": float(r["min_bytes"]),
            "max_bytes": float(r["max_bytes"]),
            "max_p": float(r.get("max_p", 0.1)),
            "ewma_weight": r.get("ewma_weight"),
            "ecn": bool(r.get("ecn", True)),
        }
    # DCTCP in the switch (dctcp hosts) or VCC (legacy hosts the switch runs DCTCP for)
    kind = "dctcp" if cc == "dctcp" or vcc else ("bbr" if cc == "bbr" else "loss")
    ct = spec.get("cross_traffic", {}) or {}
    udp_wire = cap * float(ct.get("udp_percent", 0)) / 100.0
    return {
        "slots": slots,
        "slots_per_executor": per_executor,
        "host_cores": float(host_cores),
        "background_cores": cross_cpu_cores(udp_wire * 8 / 1e9, cross_cpu),
        "control_loss_s": float(control_loss_s),
        "link_bytes_per_s": cap,
        "cross_bytes_per_s": udp_wire,
        "cross_tcp_flows": int(ct.get("tcp_pairs", 0)),
        "queue_bytes": queue,
        "tcp": kind,
        "mss_wire_bytes": float(MSS_WIRE_BYTES),
        # one-armed shared topology: every packet passes the bottleneck port once, data and ACKs
        # alike, so its one-way delay counts twice per round trip
        "base_rtt_s": 2.0 * float(link.get("delay_ms", 0.0)) / 1000.0,
        "red": red,
        "congestion_control": cc,
    }


def run_model(config: dict[str, Any]) -> dict[str, Any]:
    """The Rust core's ``run_spark`` when the installed core has it, else the Python twin."""
    try:
        import shufflelab_simcore as core
    except ImportError:
        core = None
    if core is not None and hasattr(core, "run_spark"):
        result: dict[str, Any] = json.loads(core.run_spark(json.dumps(config)))
        result["engine"] = "rust"
        return result
    result = sparkjob.simulate(config)
    result["engine"] = "python"
    return result
