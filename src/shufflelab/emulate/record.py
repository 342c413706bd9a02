"""A run's record (its ``runs`` row and its tables), assembled from what the run left.

Everything a run observed is in its :class:`RunContext` (and the workload's output dataclass);
the functions here only read the run's folder (event logs, samples, traffic results) and compute:
no process is started or stopped, nothing is written, the clock is not read.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from shufflelab import capabilities, eventlog, listener
from shufflelab.emulate import boxload, faults, traffic, validity
from shufflelab.emulate.telemetry import Telemetry, load_samples
from shufflelab.netplan import NetPlan, PortCounters
from shufflelab.results import RunRecord, RunRow
from shufflelab.spec import ExperimentSpec, Scenario


@dataclass
class RunContext:
    """One run of one scenario, filled as it goes: who it is, when it started, how it ended so far
    (``status``/``cause``) and what the fabric saw (``telemetry``)."""

    experiment: str  # its name
    scenario: Scenario
    rep: int
    attempt: int
    run_id: str
    run_dir: Path
    env: dict[str, Any]  # the host (runner.environment)
    setup_s: float  # building what the run needed (fabric, cluster, storage), charged to this run
    started: float  # wall clock
    t_mono: float  # the runner's monotonic clock at the start
    plan: NetPlan  # the network the run was given (its scenario's, on its fabric)
    status: str = "ok"
    cause: str | None = None
    telemetry: Telemetry = field(default_factory=Telemetry)
    finished_at: float | None = None  # stamped by the runner before the record is assembled
    wall_s: float | None = None

    @property
    def spec(self) -> ExperimentSpec:
        return self.scenario.spec

    @property
    def timeout_cause(self) -> str:
        return f"job exceeded run_timeout_s={self.spec.experiment.run_timeout_s:g}"

    def fail(self, status: str, cause: str | None) -> None:
        """The run ended ``status`` (unless it already failed: the first cause is kept)."""
        if self.status == "ok" and status != "ok":
            self.status, self.cause = status, cause


@dataclass
class SparkOutput:
    """What a Spark run's drivers and cluster reported."""

    total_cores: int
    driver_results: list[dict[str, Any]] = field(default_factory=list)
    cc_seen: dict[str, int] = field(default_factory=dict)  # congestion control -> connections seen
    executor_os_cpu: tuple[float, float] | None = None  # executors' user and system CPU (s), from the OS
    fault_events: list[faults.FaultEvent] = field(default_factory=list)


@dataclass
class ReplayOutput:
    """What a MapReduce shuffle replay reported."""

    n_tasks: int | None = None
    result: Any = None  # mapreduce.replay.JobResult
    window: validity.Window | None = None  # the job's span on the wall clock


# -- common to every kind -------------------------------------------------------------------------------
def _base(ctx: RunContext) -> dict[str, Any]:
    return {
        "run_id": ctx.run_id, "scenario_id": ctx.scenario.scenario_id, "rep": ctx.rep, "attempt": ctx.attempt,
        "backend": "emulate", "started_at": ctx.started, "finished_at": ctx.finished_at, "wall_s": ctx.wall_s,
        "setup_s": ctx.setup_s, "run_dir": str(ctx.run_dir),
    }  # fmt: skip


def _environment(ctx: RunContext) -> str:
    return json.dumps(
        {**ctx.env, "emulation": capabilities.emulation(ctx.spec), "selftest": selftest_rows(ctx.run_dir)}
    )


def bottleneck_deltas(before: dict[str, PortCounters], after: dict[str, PortCounters]) -> tuple[int | None, int | None]:
    """Bytes sent and packets dropped by the bottleneck ports during a run (None without counters)."""
    if not before:
        return None, None
    keys = [k for k in after if k in before]
    return (
        sum(after[k].tx_bytes - before[k].tx_bytes for k in keys),
        sum(after[k].drops - before[k].drops for k in keys),
    )


def _ecn_marks(before: dict[str, PortCounters], after: dict[str, PortCounters]) -> int | None:
    """ECN marks at the bottleneck ports during a run (None where the datapath counts none)."""
    pairs = [(after[k].marks, before[k].marks) for k in after if k in before]
    known = [(a, b) for a, b in pairs if a is not None and b is not None]
    return sum(a - b for a, b in known) if known else None


def job_window(apps: pd.DataFrame | None) -> validity.Window | None:
    """The span of a Spark run's jobs on the wall clock: first submission to last completion over
    its applications (None unless every application has both)."""
    if apps is None or apps.empty or not {"first_job_at_ms", "last_job_end_at_ms"} <= set(apps.columns):
        return None
    if apps["first_job_at_ms"].isna().any() or apps["last_job_end_at_ms"].isna().any():
        return None
    return validity.Window(float(apps["first_job_at_ms"].min()) / 1000, float(apps["last_job_end_at_ms"].max()) / 1000)


def traffic_during(rows: list[dict[str, Any]], traffic_dir: Path, window: validity.Window | None) -> None:
    """Add to each iperf3 cross-traffic row what its client sent during the job (``job_*``)."""
    for row in rows:
        if window is None or row.get("started_at") is None or row.get("generator") == "switch":
            continue
        ivs = traffic.sent_intervals(traffic_dir / row["result_file"], row["started_at"])
        if not ivs:  # no JSON result (a killed client): what it sent is unknown
            continue
        sent, covered = traffic.sent_between(ivs, window.start, window.end)
        row["job_bytes"], row["job_seconds"] = sent, covered
        row["job_bits_per_second"] = sent * 8 / window.seconds if window.seconds > 0 else None


def switch_traffic_row(plan: NetPlan, status_csv: Path, window: validity.Window | None) -> dict[str, Any]:
    """The in-switch UDP source's ``cross_traffic`` row, from the switch's status samples (cumulative
    counters every telemetry period): what it offered to the queue (``bytes``/``packets``, frame
    bytes), dropped and delivered, whether it still ran at the end, and what it offered during
    ``window`` (``job_*``; the window's edges interpolated linearly between samples)."""
    ct = plan.spec.cross_traffic
    row: dict[str, Any] = {
        "kind": "udp", "generator": "switch",
        "configured_bps": validity.switch_rate_bps(plan.link.rate_mbps, ct.udp_percent),
    }  # fmt: skip
    try:
        st = pd.read_csv(status_csv)
    except (OSError, ValueError):
        st = pd.DataFrame()
    if st.empty or "cross_offered_bytes" not in st.columns:
        row["error"] = f"no status samples from the switch ({status_csv.name})"
        return row
    sending = st[st["cross_offered_packets"] > 0]
    last = st.iloc[-1]
    t0, t1 = float(st["t"].iloc[0]), float(last["t"])
    row.update(
        started_at=float(sending["t"].iloc[0]) if not sending.empty else None,
        alive_at_end=bool(last["cross_running"] > 0),
        seconds=t1 - t0,
        bytes=int(last["cross_offered_bytes"]),
        packets=int(last["cross_offered_packets"]),
        lost_packets=int(last["cross_drops"]),
        lost_percent=100.0 * float(last["cross_drops"]) / max(1.0, float(last["cross_offered_packets"])),
        received_bytes=int(last["cross_delivered_bytes"]),
        bits_per_second=float(last["cross_offered_bytes"]) * 8 / (t1 - t0) if t1 > t0 else None,
    )
    if window is not None and window.seconds > 0 and t1 > t0:
        lo, hi = max(window.start, t0), min(window.end, t1)
        if hi > lo:
            at = np.interp([lo, hi], st["t"], st["cross_offered_bytes"])
            row["job_bytes"], row["job_seconds"] = int(at[1] - at[0]), hi - lo
            row["job_bits_per_second"] = (at[1] - at[0]) * 8 / window.seconds
    return row


def promises(
    plan: NetPlan,
    run_dir: Path,
    rows: list[dict[str, Any]],
    window: validity.Window | None,
    events: list[faults.FaultEvent],
) -> list[str]:
    """What the scenario promised and the run did not deliver (empty: the run is what it claims);
    ``rows`` gain what the cross traffic sent during ``window`` (and the in-switch source's row)."""
    spec = plan.spec
    ct = spec.cross_traffic
    for r in rows:
        r.setdefault("generator", "iperf3")
    if ct.generator == "switch" and ct.udp_percent > 0:
        rows.append(switch_traffic_row(plan, run_dir / "switch_status.csv", window))
    traffic_during(rows, run_dir / "traffic", window)
    return (
        validity.traffic_problems(spec.cross_traffic, plan.link.rate_mbps, rows, window)
        + validity.fault_problems(spec.faults, events)
        + validity.selftest_problems(spec.telemetry.selftest, selftest_rows(run_dir))
    )


def box_columns(ctx: RunContext) -> dict[str, Any]:
    """Whether the emulation host itself was the bottleneck of the run (:mod:`~shufflelab.emulate.boxload`)."""
    ncpu = int(ctx.env.get("cpus") or 1)
    return boxload.columns(boxload.assess(ctx.run_dir, ncpu, selftest_rows(ctx.run_dir)))


def selftest_rows(run_dir: Path) -> list[dict[str, Any]]:
    """The link self-test the run was preceded by (``selftest.json``; empty if none ran)."""
    try:
        return json.loads((run_dir / "selftest.json").read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return []


def cc_observed(seen: dict[str, int]) -> str | None:
    """``{"cubic": 12, "reno": 1}`` -> ``"cubic:12,reno:1"`` (None if nothing was seen)."""
    return ",".join(f"{k}:{v}" for k, v in sorted(seen.items())) or None


def parse_cc_observed(value: str | None) -> dict[str, int]:
    """``"cubic:12,reno:1"`` -> ``{"cubic": 12, "reno": 1}``."""
    if not value:
        return {}
    return {k: int(v) for k, v in (item.split(":") for item in value.split(",")) if re.fullmatch(r"\d+", v)}


def _cc_configured(spec: ExperimentSpec, role: Literal["spark-worker", "mapreduce"]) -> str:
    return ",".join(sorted({spec.tcp_for(h).congestion_control for h in spec.hosts_with(role)}))


def failed_start(ctx: RunContext) -> RunRecord:
    """A run that never began because its cluster did not start: failed, with the cause."""
    run = RunRow.of(
        {
            **_base(ctx),
            "status": "failed",
            "cause": ctx.cause,
            "n_apps": ctx.spec.workload.apps,
            "environment_json": json.dumps({**ctx.env, "emulation": capabilities.emulation(ctx.spec)}),
        }  # fmt: skip
    )
    return RunRecord(run=run, tables={})


# -- Spark ----------------------------------------------------------------------------------------------
def _sum_or_none(rows: list[dict[str, Any]], key: str) -> float | None:
    """Sum of ``key`` over the applications, or None unless every application has it."""
    vals = [r.get(key) for r in rows]
    return float(sum(vals)) if vals and all(v is not None for v in vals) else None  # type: ignore[arg-type]


def spark_app(k: int, res: dict[str, Any], run_dir: Path, cores: int) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """Application ``k``'s ``apps`` row and its task, stage, job and progress rows, from its driver's
    result ``res`` and what it left in ``run_dir`` (event log, listener output, executor plugin)."""
    app_id = res.get("app_id")
    row: dict[str, Any] = {"app_index": k, "app_id": app_id, "cores": cores}
    started, ready = res.get("started_at"), res.get("session_ready_at")
    row["session_s"] = ready - started if ready and started else None
    if not app_id or not (run_dir / "eventlog" / app_id).exists():
        row.update(status="failed", cause=res.get("error") or "no event log was written")
        return row, {}
    frames: dict[str, pd.DataFrame] = {}
    log = eventlog.parse(run_dir / "eventlog" / app_id)
    lpath = run_dir / "listener" / f"app{k}.jsonl"
    if lpath.exists():
        llog = listener.parse(lpath)
        row["listener_tasks"] = len(llog.ends)
        if not llog.progress.empty:
            frames["task_progress"] = llog.progress.copy()
    plugin_files = sorted((run_dir / "logs" / app_id).glob(f"executors-*/*/{listener.PLUGIN_FILE}"))
    if plugin_files:
        tc = listener.task_cpu(plugin_files)
        row["plugin_tasks"] = len(tc)
        row["task_user_cpu_s"] = float(tc["user_ns"].sum()) / 1e9
        row["task_thread_cpu_s"] = float(tc["cpu_ns"].sum()) / 1e9
    for name, rows in (("tasks", log.tasks), ("stages", log.stages), ("jobs", log.jobs)):
        frames[name] = pd.DataFrame(eventlog.records(rows))
    for df in frames.values():
        df["app_index"] = k
    span = log.workload_span_ms()
    ok = res.get("ok", False) and log.all_jobs_succeeded()
    tk = frames["tasks"]
    row.update(
        status="ok" if ok else "failed",
        cause=None if ok else (res.get("error") or "a Spark job did not succeed").split("\n")[0][:500],
        job_time_s=span / 1000.0 if span is not None else None,
        first_job_at_ms=log.first_job_at_ms(),
        last_job_end_at_ms=log.last_job_end_at_ms(),
        n_tasks=len(log.tasks),
        executor_cpu_s=float(tk["executor_cpu_ms"].sum()) / 1000 if not tk.empty else 0.0,
        executor_run_s=float(tk["executor_run_ms"].sum()) / 1000 if not tk.empty else 0.0,
        fetch_wait_s=float(tk["fetch_wait_ms"].sum()) / 1000 if not tk.empty else 0.0,
        remote_bytes_read=int(tk["remote_bytes"].sum()) if not tk.empty else 0,
        shuffle_bytes_written=int(tk["shuffle_write_bytes"].sum()) if not tk.empty else 0,
    )
    return row, frames


def _spark_tables(ctx: RunContext, out: SparkOutput) -> tuple[list[dict[str, Any]], dict[str, pd.DataFrame]]:
    """Every application's ``apps`` row, and the run's tables from all of them."""
    n_apps = ctx.spec.workload.apps
    app_rows = []
    per_app: dict[str, list[pd.DataFrame]] = {"tasks": [], "stages": [], "jobs": [], "task_progress": []}
    for k in range(n_apps):
        res = out.driver_results[k] if k < len(out.driver_results) else {}
        row, frames = spark_app(k, res, ctx.run_dir, out.total_cores // n_apps)
        app_rows.append(row)
        for name, df in frames.items():
            per_app[name].append(df)
    tables = {name: pd.concat(dfs, ignore_index=True) for name, dfs in per_app.items() if dfs}
    tables["apps"] = pd.DataFrame(app_rows)
    return app_rows, tables


def spark(ctx: RunContext, out: SparkOutput) -> RunRecord:
    """The record of a Spark run: one row per application in ``apps``, their tasks, stages and jobs,
    the run's totals; failed if any application failed or the scenario's promises did not hold."""
    spec, tel = ctx.spec, ctx.telemetry
    app_rows, tables = _spark_tables(ctx, out)
    status, cause = ctx.status, ctx.cause
    bad = [r for r in app_rows if r.get("status") != "ok"]
    if status == "ok" and bad:
        status, cause = "failed", f"app {bad[0]['app_index']}: {bad[0].get('cause')}"
    samples = load_samples(ctx.run_dir / "queue_samples.csv", ctx.started)
    tasks = tables.get("tasks", pd.DataFrame())
    has = not tasks.empty
    recovered = faults.recovery(tasks, tables.get("stages"))
    times = [r["job_time_s"] for r in app_rows if r.get("job_time_s") is not None]
    sessions = [r["session_s"] for r in app_rows if r.get("session_s") is not None]
    tx, drops = bottleneck_deltas(tel.before, tel.after)
    rows = [dict(r) for r in tel.traffic_rows]
    problems = promises(ctx.plan, ctx.run_dir, rows, job_window(tables["apps"]), out.fault_events)
    status, cause = validity.verdict(status, cause, problems)
    run = RunRow.of(
        {
            **_base(ctx),
            "status": status,
            "cause": cause,
            "session_s": max(sessions) if sessions else None,
            "app_id": ",".join(str(r["app_id"]) for r in app_rows if r.get("app_id")) or None,
            "job_time_s": sum(times) / len(times) if times and len(times) == len(app_rows) else None,
            "n_apps": len(app_rows),
            "total_cores": out.total_cores,
            "task_user_cpu_s": _sum_or_none(app_rows, "task_user_cpu_s"),
            "task_thread_cpu_s": _sum_or_none(app_rows, "task_thread_cpu_s"),
            "executor_user_s": out.executor_os_cpu[0] if out.executor_os_cpu else None,
            "executor_sys_s": out.executor_os_cpu[1] if out.executor_os_cpu else None,
            "n_jobs": len(tables["jobs"]) if "jobs" in tables else 0,
            "n_tasks": len(tasks),
            "executor_cpu_s": float(tasks["executor_cpu_ms"].sum()) / 1000 if has else None,
            "executor_run_s": float(tasks["executor_run_ms"].sum()) / 1000 if has else None,
            "fetch_wait_s": float(tasks["fetch_wait_ms"].sum()) / 1000 if has else None,
            "remote_bytes_read": int(tasks["remote_bytes"].sum()) if has else None,
            "local_bytes_read": int(tasks["local_bytes"].sum()) if has else None,
            "shuffle_bytes_written": int(tasks["shuffle_write_bytes"].sum()) if has else None,
            "bottleneck_tx_bytes": tx,
            "bottleneck_drops": drops,
            "bottleneck_marks": _ecn_marks(tel.before, tel.after),
            "failed_tasks": recovered["failed_tasks"] if has else None,
            "fetch_failures": recovered["fetch_failures"] if has else None,
            "stage_reattempts": recovered["stage_reattempts"] if has else None,
            "bottleneck_max_backlog_bytes": int(samples["backlog_bytes"].max()) if not samples.empty else None,
            "cc_configured": _cc_configured(spec, "spark-worker"),
            "cc_observed": cc_observed(out.cc_seen),
            "environment_json": _environment(ctx),
            **box_columns(ctx),
        }
    )
    tables["queue_samples"] = samples
    tables["cross_traffic"] = pd.DataFrame(rows)
    if out.fault_events:
        tables["faults"] = pd.DataFrame([dataclasses.asdict(e) for e in out.fault_events])
    return RunRecord(run=run, tables=tables)


NDP_READ_COLUMNS = (
    "path", "proxy", "policy", "operators", "rows", "body_bytes", "input_bytes", "exec_s", "read_s", "queue_s",
    "datanode", "elapsed_s",
)  # fmt: skip


def ndp_tables(run_dir: Path, driver_results: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """The queries of a tpch run (policy used, time, answer checked, Net-Aware's estimate) and the
    connector's per-partition reads (bytes received, the proxy's timings)."""
    rows = []
    for res in driver_results:
        out = res.get("output") or {}
        for q in out.get("queries", []):
            rows.append(
                {
                    "i": q.get("i"), "query": q.get("query"), "policy_asked": q.get("policy_asked"),
                    "policy": q.get("policy"), "arrival_s": q.get("arrival_s"), "time_s": q.get("time_s"),
                    "rows": q.get("rows"), "correct": q.get("correct"), "ok": q.get("ok"), "error": q.get("error"),
                    "estimate_json": json.dumps(q["estimate"]) if q.get("estimate") else None,
                }
            )  # fmt: skip
    reads = []
    path = run_dir / "ndp_reads.jsonl"
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue  # a line cut short by a killed executor
            reads.append({k: doc.get(k) for k in NDP_READ_COLUMNS})
    return {"ndp_queries": pd.DataFrame(rows), "ndp_reads": pd.DataFrame(reads)}


# -- MapReduce replay -----------------------------------------------------------------------------------
MR_FETCH_COLUMNS = ("map", "reduce", "src", "dst", "bytes", "t_request", "t_first_byte", "t_end", "fct_s", "start_s")


def replay(ctx: RunContext, out: ReplayOutput) -> RunRecord:
    """The record of a MapReduce shuffle replay: its fetches go to ``mr_fetches``; the job time
    counts only if the run is ok (promises included)."""
    spec, tel = ctx.spec, ctx.telemetry
    rows = [dict(r) for r in tel.traffic_rows]
    status, cause = validity.verdict(ctx.status, ctx.cause, promises(ctx.plan, ctx.run_dir, rows, out.window, []))
    samples = load_samples(ctx.run_dir / "queue_samples.csv", ctx.started)
    result = out.result
    fetches = result.fetches if result is not None else pd.DataFrame()
    tx, drops = bottleneck_deltas(tel.before, tel.after)
    run = RunRow.of(
        {
            **_base(ctx), "status": status, "cause": cause,
            "job_time_s": result.job_time_s if result is not None and status == "ok" else None,
            "n_apps": 1, "n_tasks": out.n_tasks,
            "remote_bytes_read": int(fetches["bytes"].sum()) if not fetches.empty else None,
            "bottleneck_tx_bytes": tx, "bottleneck_drops": drops,
            "bottleneck_max_backlog_bytes": int(samples["backlog_bytes"].max()) if not samples.empty else None,
            "cc_configured": _cc_configured(spec, "mapreduce"),
            "environment_json": _environment(ctx), **box_columns(ctx),
        }
    )  # fmt: skip
    tables = {
        "queue_samples": samples,
        "cross_traffic": pd.DataFrame(rows),
        "mr_fetches": fetches[[c for c in MR_FETCH_COLUMNS if c in fetches.columns]] if not fetches.empty else fetches,
    }
    return RunRecord(run=run, tables=tables)
