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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from shufflelab.results import Store, StoreError
from shufflelab.sim.calibration_model import (
    DEFAULT_CONTROL_LOSS_S,
    DEFAULT_CROSS_CPU_CORES_PER_GBPS,
    HOST_CROSS_CPU_CORES,
    HOST_CROSS_CPU_SOURCE,
    CalibrationError,
    CrossCpu,
    fit_workload,
    platform_for,
    run_model,
)
from shufflelab.spec import stored

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
    fitted: dict[str, str]  # workload key -> run_id it was fitted from (ensemble: comma-separated run_ids)
    median_abs_error: float
    cross_cpu: CrossCpu  # cores per Gbit/s, or measured (UDP wire Gbit/s, cores) points
    cross_cpu_source: str
    iperf_cores_per_gbps: float  # what iperf3 reports for its own processes (a lower bound)
    control_loss_s: float
    host_cores: float
    engine: str
    ensemble: bool = False  # simulated = median over fits from every run without cross traffic


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
    ensemble: bool = False,
    ensemble_runs: Sequence[str] | None = None,
) -> Calibration:
    """Fit, simulate every scenario of ``results`` and compare with its successful runs.

    ``ensemble``: fit the workload from *every* successful run without cross traffic and take, per
    scenario, the median of the simulations (no single fitted run to choose; the spread of the fits
    is reported per scenario). ``ensemble_runs`` restricts the ensemble to these runs (the
    robustness study in ``benchmarks/calibration_fits.py``).

    ``platform_overrides`` replaces fields of every scenario's platform (sensitivity studies,
    e.g. ``{"min_window_segments": 1.0}``)."""
    if ensemble and fit_run is not None:
        raise CalibrationError("--fit-run and --ensemble exclude each other: one run, or every run without UDP")
    data = _load(Path(results))
    runs = data["runs"]
    runs = runs[(runs["status"] == "ok") & runs["job_time_s"].notna()]
    if runs.empty:
        raise CalibrationError(f"{results}: no successful run")
    scen = data["scenarios"].set_index("scenario_id")
    specs: dict[str, dict[str, Any]] = {sid: json.loads(row["spec_json"]) for sid, row in scen.iterrows()}
    labels: dict[str, str] = {sid: str(row["label"]) for sid, row in scen.iterrows()}
    if all(stored(s) is None for s in specs.values()):
        raise CalibrationError(
            f"{results}: holds applications read from event logs (shufflelab analyze), not an emulated "
            "experiment: calibration compares the simulator with runs of a lab spec"
        )
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

    # One fitted workload per distinct workload, from the median baseline run (ensemble: one per
    # baseline run).
    fitted: dict[str, str] = {}
    workloads: dict[str, list[dict[str, Any]]] = {}
    by_key: dict[str, list[str]] = {}
    for sid in runs["scenario_id"].unique():
        by_key.setdefault(_workload_key(specs[sid]), []).append(sid)
    for key, sids in by_key.items():
        if fit_run is not None and fit_run in set(runs["run_id"]):
            rids = [fit_run]
            if runs.set_index("run_id").loc[fit_run, "scenario_id"] not in sids:
                continue
        else:
            base = runs[runs["scenario_id"].isin([s for s in sids if not _has_cross_traffic(specs[s])])]
            if ensemble_runs is not None:
                base = base[base["run_id"].isin(list(ensemble_runs))]
            rids = sorted(base["run_id"]) if ensemble else [choose_fit_run(base)]
            if not rids:
                raise CalibrationError("no run without cross traffic to fit the workload from")
        fitted[key] = ",".join(rids)
        workloads[key] = []
        for rid in rids:
            fit_sid = str(runs.set_index("run_id").loc[rid, "scenario_id"])
            workloads[key].append(
                fit_workload(
                    data["tasks"][data["tasks"]["run_id"] == rid],
                    data["stages"][data["stages"]["run_id"] == rid],
                    data["jobs"][data["jobs"]["run_id"] == rid],
                    host_cores,
                    platform={
                        **platform_for(specs[fit_sid], host_cores, cross_cpu, control_loss_s),
                        **(platform_overrides or {}),
                    },
                )
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
        sims = []
        for w in workloads[key]:
            config = {"platform": platform, "stages": w["stages"], "tail_s": w["tail_s"]}
            sims.append((run_model(config), w))
        # the fit whose simulated job time is the (lower) median stands for the scenario
        sims.sort(key=lambda rw: float(rw[0]["job_time_s"]))
        res, w = sims[(len(sims) - 1) // 2]
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
                "sim_fits": len(sims),
                "sim_min_s": float(sims[0][0]["job_time_s"]),
                "sim_max_s": float(sims[-1][0]["job_time_s"]),
                "rel_error": err,
                "within_real_range": bool(real.min() <= res["job_time_s"] <= real.max()),
                "fitted_from": fitted[key],
                "is_fit_scenario": bool(set(fitted[key].split(",")) & set(g["run_id"])),
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
        ensemble=ensemble,
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
    stored, resolved spec), by the spec's own rule (``ExperimentSpec.datapath``)."""
    s = stored(spec)
    return "kernel" if s is None else s.datapath()


def _has_cross_traffic(spec: dict[str, Any]) -> bool:
    s = stored(spec)
    return s is not None and s.cross_traffic.active


def to_markdown(cal: Calibration, command: str, results: str) -> str:
    """The calibration table as Markdown (simulated numbers marked as such)."""
    t = cal.table
    sim_head = "simulated (s), median [min–max] of the fits" if cal.ensemble else "simulated (s)"
    lines = [
        f"| scenario | n | real job time (s), mean ± σ [min–max] | {sim_head} | error | in real range |",
        "|---|---|---|---|---|---|",
    ]
    for _, r in t.iterrows():
        mark = " (fit)" if r["is_fit_scenario"] and not cal.ensemble else ""
        sim = f"{r['sim_s']:.1f}"
        if cal.ensemble:
            sim += f" [{r['sim_min_s']:.1f}–{r['sim_max_s']:.1f}]"
        lines.append(
            f"| {r['scenario']}{mark} | {r['n']} | {r['real_mean_s']:.1f} ± {r['real_sd_s']:.1f} "
            f"[{r['real_min_s']:.1f}–{r['real_max_s']:.1f}] | {sim} | {r['rel_error'] * 100:+.1f} % "
            f"| {'yes' if r['within_real_range'] else 'no'} |"
        )
    runs_used = sorted({rid for v in cal.fitted.values() for rid in v.split(",")})
    if cal.ensemble:
        fit_line = (
            f"- Workload fitted from each of the {len(runs_used)} runs without cross traffic "
            f"({', '.join(runs_used)}); each scenario's simulated time is the median over these fits."
        )
    else:
        fit_line = (
            f"- Workload fitted from run(s): {', '.join(runs_used)} "
            "(the median-job-time run without cross traffic; marked (fit) is its scenario)."
        )
    head = [
        f"Reproduce: `{command}`",
        "",
        f"Real job times: measured on the emulated fabric (`{results}`, successful runs). "
        f"Simulated job times: the `sim` backend's Spark-job model ({cal.engine} engine), "
        "not measured. Error = (simulated − real mean) / real mean.",
        "",
        fit_line,
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
    ensemble: bool = False,
) -> tuple[Calibration, Path]:
    """``shufflelab calibrate``: run, write the table (default: ``<results dir>/calibration/<stem>``)."""
    cal = calibrate(
        results,
        spec,
        fit_run=fit_run,
        host_cores=cores,
        cross_cpu_cores_per_gbps=cross_cpu,
        control_loss_s=DEFAULT_CONTROL_LOSS_S if control_loss is None else control_loss,
        ensemble=ensemble,
    )
    folder = out if out is not None else Path(results).parent / "calibration" / Path(results).stem
    parts = ["shufflelab calibrate", str(results)]
    if spec is not None:
        parts += ["--spec", str(spec)]
    if fit_run is not None:
        parts += ["--fit-run", fit_run]
    if ensemble:
        parts += ["--ensemble"]
    if cores is not None:
        parts += ["--cores", f"{cores:g}"]
    if cross_cpu is not None:
        parts += ["--cross-cpu", f"{cross_cpu:g}"]
    if control_loss is not None:
        parts += ["--control-loss", f"{control_loss:g}"]
    parts += ["--out", str(folder)]
    md, _ = write(cal, folder, " ".join(parts), str(results))
    return cal, md
