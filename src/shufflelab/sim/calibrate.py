"""Same spec, two backends: simulate an emulated experiment and compare job times.

``shufflelab calibrate RESULTS.duckdb`` takes an experiment the emulation backend ran, fits each
workload from **one** real run's event log (the median-job-time run without cross traffic), maps
every scenario's spec to the simulator's platform (cores, slots, bottleneck, queue, delay, RED/ECN,
congestion control incl. the switch's DCTCP/VCC, cross traffic) and reports simulated vs measured
job time per scenario, with the relative error and the median absolute error over the scenarios. The model is
:mod:`shufflelab.sim.sparkjob` (Rust core ``run_spark`` when built, the Python twin otherwise).

Fitting, per task of the fitted run (tables ``tasks``, ``stages``, ``jobs``; ms → s):

- ``latency_s`` = duration − executor run − deserialize (driver-side launch → result time that is
  not the executor working: scheduling and RPCs);
- ``cpu_s`` = (deserialize + executor run − fetch wait) × the mean processor-sharing rate the task
  had in that run, ``min(1, cores / n(t))`` with ``n(t)`` the tasks running at *t*: the measured
  time is wall time on an oversubscribed host, the model needs the work in core-seconds;
- ``fetch_bytes`` = remote bytes read × the wire factor (TCP/IP/Ethernet headers), split evenly
  over the remote executors (the event log has only the total);
- stage ``gap_s`` = submission − previous stage's completion; ``tail_s`` = last job's end − last
  stage's end.
"""

from __future__ import annotations

import contextlib
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shufflelab.results import Store, StoreError
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


# ---------------------------------------------------------------------------------------------
# errors


def relative_error(sim: float, real: float) -> float:
    """(sim − real) / real: positive when the simulator is slower."""
    if real <= 0:
        raise ValueError("real job time must be > 0")
    return (sim - real) / real


def median_abs_error(errors: list[float]) -> float:
    """Median of |relative error| over scenarios (NaN when there is none)."""
    vals = [abs(e) for e in errors if e == e]
    return float(statistics.median(vals)) if vals else float("nan")


# ---------------------------------------------------------------------------------------------
# the whole calibration


@dataclass
class Calibration:
    table: pd.DataFrame  # one row per scenario
    fitted: dict[str, str]  # workload key -> run_id it was fitted from
    median_abs_error: float
    cross_cpu: CrossCpu  # cores per Gbit/s, or measured (UDP wire Gbit/s, cores) points
    cross_cpu_source: str
    iperf_cores_per_gbps: float  # what iperf3 reports for its own processes (a lower bound)
    control_loss_s: float
    host_cores: float
    engine: str


def _workload_key(spec: dict[str, Any]) -> str:
    return json.dumps(spec.get("workload", {}), sort_keys=True)


def _iperf_cpu_cores_per_gbps(run_dirs: list[str]) -> float | None:
    """Median over runs of (iperf3 client + server CPU) / UDP wire Gbit/s, from the runs' reports."""
    vals = []
    for d in run_dirs:
        folder = Path(d) / "traffic"
        client, server = folder / "iperf3-udp-client.json", folder / "iperf3-udp-server.json"
        if not client.exists():
            continue
        try:
            c = json.loads(client.read_text())
            total = c["end"]["cpu_utilization_percent"]["host_total"]
            if server.exists():
                total += json.loads(server.read_text())["end"]["cpu_utilization_percent"]["host_total"]
            payload_bps = float(c["start"]["test_start"]["target_bitrate"])
            blk = float(c["start"]["test_start"].get("blksize", 1400))
        except (KeyError, ValueError, TypeError):
            continue
        wire_gbps = payload_bps * (blk + 42) / blk / 1e9
        if wire_gbps > 0:
            vals.append(total / 100.0 / wire_gbps)
    return float(statistics.median(vals)) if vals else None


def _load(path: Path) -> dict[str, pd.DataFrame]:
    if not path.exists():
        raise CalibrationError(f"{path}: no such results file")
    try:
        with Store(path).connect(read_only=True) as con:
            out = {
                "runs": con.execute("SELECT * FROM runs").df(),
                "scenarios": con.execute("SELECT * FROM scenarios").df(),
            }
            for t in ("tasks", "stages", "jobs"):
                out[t] = con.execute(f"SELECT * FROM {t}").df()
    except StoreError as exc:
        raise CalibrationError(str(exc)) from None
    return out


def choose_fit_run(runs: pd.DataFrame) -> str:
    """The run whose job time is the (lower) median of the given runs: robust to slow outliers."""
    if runs.empty:
        raise CalibrationError("no run without cross traffic to fit the workload from")
    r = runs.sort_values(["job_time_s", "run_id"]).reset_index(drop=True)
    return str(r.loc[(len(r) - 1) // 2, "run_id"])


def calibrate(
    results: str | Path,
    spec_path: str | Path | None = None,
    fit_run: str | None = None,
    host_cores: float | None = None,
    cross_cpu_cores_per_gbps: float | None = None,
    platform_overrides: dict[str, Any] | None = None,
    control_loss_s: float = DEFAULT_CONTROL_LOSS_S,
) -> Calibration:
    """Fit, simulate every scenario of ``results`` and compare with its successful runs.

    ``platform_overrides`` replaces fields of every scenario's platform (sensitivity studies,
    e.g. ``{"min_window_segments": 1.0}``)."""
    data = _load(Path(results))
    runs = data["runs"]
    runs = runs[(runs["status"] == "ok") & runs["job_time_s"].notna()]
    if runs.empty:
        raise CalibrationError(f"{results}: no successful run")
    scen = data["scenarios"].set_index("scenario_id")
    specs: dict[str, dict[str, Any]] = {sid: json.loads(row["spec_json"]) for sid, row in scen.iterrows()}
    labels: dict[str, str] = {sid: str(row["label"]) for sid, row in scen.iterrows()}
    if spec_path is not None:
        from shufflelab import spec as labspec

        expanded = labspec.expand(labspec.load(spec_path), str(spec_path))
        # A stored scenario is the spec's point with the same id, else with the same label (ids
        # change when the spec schema gains fields); the platform then comes from --spec.
        by_id = {s.scenario_id: s for s in expanded}
        by_label = {s.label: s for s in expanded}
        stored_label = dict(labels)
        specs, labels, keep = {}, {}, []
        for sid in runs["scenario_id"].unique():
            point = by_id.get(sid) or by_label.get(stored_label.get(sid, ""))
            if point is None:
                continue
            specs[sid] = json.loads(point.spec.model_dump_json())
            labels[sid] = point.label
            keep.append(sid)
        runs = runs[runs["scenario_id"].isin(keep)]
        if runs.empty:
            raise CalibrationError(f"{results}: no successful run of a scenario of {spec_path}")
    if host_cores is None:
        cpus = []
        for env in runs["environment_json"].dropna():
            with contextlib.suppress(KeyError, ValueError, TypeError):
                cpus.append(int(json.loads(env)["cpus"]))
        if not cpus:
            raise CalibrationError("the runs do not record the host's CPU count: pass --cores")
        host_cores = float(statistics.median(cpus))
    iperf = _iperf_cpu_cores_per_gbps([d for d in runs["run_dir"].dropna()])
    iperf_kappa = iperf if iperf is not None else DEFAULT_CROSS_CPU_CORES_PER_GBPS
    cross_cpu: CrossCpu
    if cross_cpu_cores_per_gbps is not None:
        cross_cpu, source = float(cross_cpu_cores_per_gbps), "given"
    elif all(_datapath(sp) == "kernel" for sp in specs.values()):
        cross_cpu, source = HOST_CROSS_CPU_CORES, HOST_CROSS_CPU_SOURCE
    else:
        # the host profile was measured with the kernel forwarding the cross traffic; the
        # userspace switch forwards it itself, so only iperf3's own figure applies
        cross_cpu = float(iperf_kappa)
        source = "iperf3's report (the host profile is for the kernel datapath, these runs used the switch)"

    # One fitted workload per distinct workload, from the median baseline run.
    fitted: dict[str, str] = {}
    workloads: dict[str, dict[str, Any]] = {}
    by_key: dict[str, list[str]] = {}
    for sid in runs["scenario_id"].unique():
        by_key.setdefault(_workload_key(specs[sid]), []).append(sid)
    for key, sids in by_key.items():
        if fit_run is not None and fit_run in set(runs["run_id"]):
            rid = fit_run
            if runs.set_index("run_id").loc[rid, "scenario_id"] not in sids:
                continue
        else:
            base = [s for s in sids if not _has_cross_traffic(specs[s])]
            rid = choose_fit_run(runs[runs["scenario_id"].isin(base)])
        fitted[key] = rid
        fit_sid = str(runs.set_index("run_id").loc[rid, "scenario_id"])
        workloads[key] = fit_workload(
            data["tasks"][data["tasks"]["run_id"] == rid],
            data["stages"][data["stages"]["run_id"] == rid],
            data["jobs"][data["jobs"]["run_id"] == rid],
            host_cores,
            platform={
                **platform_for(specs[fit_sid], host_cores, cross_cpu, control_loss_s),
                **(platform_overrides or {}),
            },
        )
    if fit_run is not None and fit_run not in set(fitted.values()):
        raise CalibrationError(f"--fit-run {fit_run}: no such successful run in {results}")

    rows = []
    engine = "python"
    for sid, g in runs.groupby("scenario_id", sort=False):
        key = _workload_key(specs[sid])
        if key not in workloads:
            continue
        platform = {**platform_for(specs[sid], host_cores, cross_cpu, control_loss_s), **(platform_overrides or {})}
        w = workloads[key]
        config = {"platform": platform, "stages": w["stages"], "tail_s": w["tail_s"]}
        res = run_model(config)
        engine = res["engine"]
        real = g["job_time_s"].astype(float)
        err = relative_error(res["job_time_s"], float(real.mean()))
        ct = specs[sid].get("cross_traffic", {}) or {}
        # Where the time goes: the shuffle stage (most fetched bytes) vs the other stages vs the
        # driver's gaps, real (mean over runs of first launch -> last finish) and simulated.
        shuffle_id = max(w["stages"], key=lambda st: sum(sum(t["fetch_bytes"]) for t in st["tasks"]))["stage_id"]
        spans = _real_stage_spans(data["tasks"], list(g["run_id"]))
        sim_spans = {int(r["stage_id"]): r["end_s"] - r["start_s"] for r in res["stages"]}
        rows.append(
            {
                "scenario": labels.get(sid, sid),
                "scenario_id": sid,
                "congestion_control": platform["congestion_control"],
                "udp_percent": float(ct.get("udp_percent", 0)),
                "n": int(len(real)),
                "real_mean_s": float(real.mean()),
                "real_sd_s": float(real.std(ddof=1)) if len(real) > 1 else float("nan"),
                "real_min_s": float(real.min()),
                "real_max_s": float(real.max()),
                "sim_s": float(res["job_time_s"]),
                "rel_error": err,
                "within_real_range": bool(real.min() <= res["job_time_s"] <= real.max()),
                "fitted_from": fitted[key],
                "is_fit_scenario": bool(fitted[key] in set(g["run_id"])),
                "real_shuffle_stage_s": spans.get(shuffle_id, float("nan")),
                "sim_shuffle_stage_s": sim_spans.get(shuffle_id, float("nan")),
                "real_other_stages_s": sum(v for k, v in spans.items() if k != shuffle_id),
                "sim_other_stages_s": sum(v for k, v in sim_spans.items() if k != shuffle_id),
                "real_driver_gaps_s": float(real.mean()) - sum(spans.values()),
                "sim_driver_gaps_s": float(res["job_time_s"]) - sum(sim_spans.values()),
            }
        )
    if not rows:
        raise CalibrationError("no scenario to compare")
    table = pd.DataFrame(rows).sort_values(["congestion_control", "udp_percent", "scenario"]).reset_index(drop=True)
    return Calibration(
        table=table,
        fitted=fitted,
        median_abs_error=median_abs_error(list(table["rel_error"])),
        cross_cpu=cross_cpu,
        cross_cpu_source=source,
        iperf_cores_per_gbps=float(iperf_kappa),
        control_loss_s=float(control_loss_s),
        host_cores=float(host_cores),
        engine=engine,
    )


def _real_stage_spans(tasks: pd.DataFrame, run_ids: list[str]) -> dict[int, float]:
    """Mean over the runs of each stage's span (first task launch -> last task finish), s."""
    t = tasks[tasks["run_id"].isin(run_ids)]
    if t.empty:
        return {}
    g = t.groupby(["run_id", "stage_id"]).agg(a=("launch_at_ms", "min"), b=("finish_at_ms", "max"))
    spans = ((g["b"] - g["a"]) / 1000.0).groupby("stage_id").mean()
    return {int(k): float(v) for k, v in spans.items()}


def _datapath(spec: dict[str, Any]) -> str:
    """``kernel`` or ``switch``: who forwards the bottleneck's traffic in the runs of ``spec`` (a
    stored, resolved spec; the rule of ``ExperimentSpec.datapath``: ``auto`` is the switch when the
    bottleneck has delay or RED, or a host runs DCTCP or VCC)."""
    link = spec["topology"]["bottleneck"]
    chosen = link.get("datapath", "auto")
    if chosen != "auto":
        return "switch" if chosen == "switch" else "kernel"
    tcps = [spec.get("tcp") or {}] + [(h.get("tcp") or {}) for h in spec["hosts"].values()]
    needs = (
        float(link.get("delay_ms", 0) or 0) > 0
        or link.get("discipline", "droptail") == "red"
        or any(t.get("congestion_control") == "dctcp" or t.get("vcc") for t in tcps)
    )
    return "switch" if needs else "kernel"


def _has_cross_traffic(spec: dict[str, Any]) -> bool:
    ct = spec.get("cross_traffic", {}) or {}
    return float(ct.get("udp_percent", 0)) > 0 or int(ct.get("tcp_pairs", 0)) > 0


def to_markdown(cal: Calibration, command: str, results: str) -> str:
    """The calibration table as Markdown (simulated numbers marked as such)."""
    t = cal.table
    lines = [
        "| scenario | n | real job time (s), mean ± σ [min–max] | simulated (s) | error | in real range |",
        "|---|---|---|---|---|---|",
    ]
    for _, r in t.iterrows():
        mark = " (fit)" if r["is_fit_scenario"] else ""
        lines.append(
            f"| {r['scenario']}{mark} | {r['n']} | {r['real_mean_s']:.1f} ± {r['real_sd_s']:.1f} "
            f"[{r['real_min_s']:.1f}–{r['real_max_s']:.1f}] | {r['sim_s']:.1f} | {r['rel_error'] * 100:+.1f} % "
            f"| {'yes' if r['within_real_range'] else 'no'} |"
        )
    head = [
        f"Reproduce: `{command}`",
        "",
        f"Real job times: measured on the emulated fabric (`{results}`, successful runs). "
        f"Simulated job times: the `sim` backend's Spark-job model ({cal.engine} engine), "
        "not measured. Error = (simulated − real mean) / real mean.",
        "",
        f"- Workload fitted from run(s): {', '.join(sorted(set(cal.fitted.values())))} "
        "(the median-job-time run without cross traffic; marked (fit) is its scenario).",
        f"- Host: {cal.host_cores:g} physical cores shared by the executors (processor sharing).",
        f"- Cross-traffic CPU: {_cross_cpu_text(cal.cross_cpu)} ({cal.cross_cpu_source}; iperf3 reports "
        f"{cal.iperf_cores_per_gbps:.2f} cores per Gbit/s for its own processes, a lower bound).",
        f"- Control messages at a FIFO the UDP keeps full: {cal.control_loss_s * 1000:.0f} ms of loss recovery "
        "per round trip (benchmarks/control_latency.py).",
        f"- **Median absolute error over {len(t)} scenarios: {cal.median_abs_error * 100:.1f} %** "
        f"(mean {t['rel_error'].abs().mean() * 100:.1f} %, worst {t['rel_error'].abs().max() * 100:.1f} %).",
        "",
    ]
    split = [
        "",
        "Where the time goes (s; real = mean over the runs; stage span = first task launch → last task "
        "finish; gaps = the rest of the job time, driver work between stages):",
        "",
        "| scenario | shuffle stage real / sim | other stages real / sim | driver gaps real / sim |",
        "|---|---|---|---|",
    ]
    for _, r in t.iterrows():
        split.append(
            f"| {r['scenario']} | {r['real_shuffle_stage_s']:.1f} / {r['sim_shuffle_stage_s']:.1f} "
            f"| {r['real_other_stages_s']:.1f} / {r['sim_other_stages_s']:.1f} "
            f"| {r['real_driver_gaps_s']:.1f} / {r['sim_driver_gaps_s']:.1f} |"
        )
    return "\n".join(head + lines + split) + "\n"


def _cross_cpu_text(cross_cpu: CrossCpu) -> str:
    if isinstance(cross_cpu, int | float):
        return f"{cross_cpu:.2f} cores per Gbit/s of UDP"
    pts = ", ".join(f"{y:.2f} at {x * 1000:g} Mbit/s" for x, y in cross_cpu if x > 0)
    return f"cores taken by UDP on the wire: {pts}"


def write(cal: Calibration, out: str | Path, command: str, results: str) -> tuple[Path, Path]:
    """Write ``calibration.md`` and ``calibration.csv`` into ``out``."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    md = folder / "calibration.md"
    csv = folder / "calibration.csv"
    md.write_text("# Calibration: simulated vs emulated job time\n\n" + to_markdown(cal, command, results))
    cal.table.to_csv(csv, index=False, float_format="%.4f")
    return md, csv


def command(
    results: Path,
    spec: Path | None,
    out: Path | None,
    fit_run: str | None,
    cores: float | None,
    cross_cpu: float | None,
    control_loss: float | None = None,
) -> tuple[Calibration, Path]:
    """``shufflelab calibrate``: run, write the table (default: ``<results dir>/calibration/<stem>``)."""
    cal = calibrate(
        results,
        spec,
        fit_run=fit_run,
        host_cores=cores,
        cross_cpu_cores_per_gbps=cross_cpu,
        control_loss_s=DEFAULT_CONTROL_LOSS_S if control_loss is None else control_loss,
    )
    folder = out if out is not None else Path(results).parent / "calibration" / Path(results).stem
    parts = ["shufflelab calibrate", str(results)]
    if spec is not None:
        parts += ["--spec", str(spec)]
    if fit_run is not None:
        parts += ["--fit-run", fit_run]
    if cores is not None:
        parts += ["--cores", f"{cores:g}"]
    if cross_cpu is not None:
        parts += ["--cross-cpu", f"{cross_cpu:g}"]
    if control_loss is not None:
        parts += ["--control-loss", f"{control_loss:g}"]
    parts += ["--out", str(folder)]
    md, _ = write(cal, folder, " ".join(parts), str(results))
    return cal, md
