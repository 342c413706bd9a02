"""One Spark application's recording, analysed: shuffle path, critical path, bounds, skew, what pays off.

Pure functions over the tables ``shufflelab analyze`` (or a lab run) writes for one application:
``tasks``, ``stages``, ``jobs`` and ``executors``. Every number derived from a model says so:

* the **critical path** is the chain of stages that gated one another in the recording (each
  stage's gate is the latest-completing stage that ended before it was submitted, the rule the
  what-if replay uses), ending at the last stage to complete;
* **network bounds** come from :func:`shufflelab.whatif.predict` (a replay of the recorded
  schedule with the network-bound part of each task shortened k-fold; k = ∞ is the "infinitely
  fast network" bound);
* **executor scaling** and **perfect parallelism** use the stage-level model Sparklens offered
  for Spark 2: a stage with total task time W, longest task L and S slots takes max(L, W / S);
  the application takes its driver time (job time not covered by any stage) plus the stages on
  its critical path. Perfect parallelism is the same model with every task of a stage equal
  (L = W / n), and "no garbage collection" the same model with each task's GC time taken off.
  The model's own answer at the recorded slot count is reported next to the recorded time, so
  its error is visible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from shufflelab import fct, shuffle, whatif
from shufflelab.document import signed

INFINITE = 1e9
"""The speed-up that stands for an infinitely fast network in the replay."""


@dataclass
class App:
    run_id: str
    app_index: int
    name: str
    tasks: pd.DataFrame
    stages: pd.DataFrame
    jobs: pd.DataFrame
    executors: pd.DataFrame
    job_time_s: float  # first job submitted to last job end; NaN when no job ended (running or killed)
    status: str
    app_id: str = ""
    log: str = ""  # where it was read from
    spark_version: str = ""
    problems: list[str] = field(default_factory=list)  # what the reader found wrong (a cut log, ...)

    @property
    def ended(self) -> bool:
        """Whether a job of it ended, so it has a job time (a running or killed one may have none)."""
        return math.isfinite(self.job_time_s)

    @property
    def slots(self) -> int:
        """Task slots of the application: executors' cores where the log says, else inferred."""
        ex = self.executors
        if not ex.empty and ex["total_cores"].notna().any():
            return int(ex.drop_duplicates("executor_id")["total_cores"].fillna(1).sum())
        return int(sum(whatif.executor_slots(self.tasks).values())) if not self.tasks.empty else 0

    def cores_per_executor(self) -> dict[str, int] | None:
        ex = self.executors
        if ex.empty or not ex["total_cores"].notna().any():
            return None
        return {str(r.executor_id): int(r.total_cores or 1) for r in ex.itertuples(index=False)}


def _keyed(stages: pd.DataFrame) -> pd.DataFrame:
    st = stages.dropna(subset=["submitted_at_ms", "completed_at_ms"]).copy()
    st = st.sort_values(["stage_id", "stage_attempt"]).drop_duplicates(["stage_id"], keep="last")
    return st.reset_index(drop=True)


def critical_path(app: App) -> pd.DataFrame:
    """The stages that gated one another, in time order: stage_id, attempt (the last one's), name,
    start_s, end_s, duration_s."""
    st = _keyed(app.stages)
    if st.empty or app.jobs.empty:
        return pd.DataFrame(columns=["stage_id", "attempt", "name", "start_s", "end_s", "duration_s"])
    t0 = float(app.jobs["submitted_at_ms"].min())
    by_end = st.sort_values("completed_at_ms")
    cur = by_end.iloc[-1]
    chain = [cur]
    while True:
        sub = float(cur["submitted_at_ms"])
        earlier = by_end[(by_end["completed_at_ms"] <= sub) & (by_end["stage_id"] != cur["stage_id"])]
        if earlier.empty:
            break
        cur = earlier.iloc[-1]
        chain.append(cur)
    rows = [
        {
            "stage_id": int(s["stage_id"]),
            "attempt": int(s["stage_attempt"]),
            "name": str(s.get("name") or "")[:60],
            "start_s": (float(s["submitted_at_ms"]) - t0) / 1000,
            "end_s": (float(s["completed_at_ms"]) - t0) / 1000,
            "duration_s": (float(s["completed_at_ms"]) - float(s["submitted_at_ms"])) / 1000,
        }
        for s in reversed(chain)
    ]
    return pd.DataFrame(rows)


def stage_model_s(tasks: pd.DataFrame, slots: int, equal_tasks: bool = False) -> float:
    """The stage-level model's time of one stage: max(longest task, total task time / slots)."""
    ok = tasks[tasks["successful"].fillna(True).astype(bool)] if "successful" in tasks.columns else tasks
    if ok.empty or slots <= 0:
        return 0.0
    work = float(ok["duration_ms"].sum())
    longest = work / len(ok) if equal_tasks else float(ok["duration_ms"].max())
    return max(longest, work / slots) / 1000


def scaled_time_s(
    app: App,
    slots: int,
    equal_tasks: bool = False,
    tasks: pd.DataFrame | None = None,
    cp: pd.DataFrame | None = None,
) -> float:
    """Job time by the stage-level model with ``slots`` task slots (see the module doc); ``tasks``:
    the application's tasks changed (e.g. without their GC time), default as recorded; ``cp``: its
    :func:`critical_path` when the caller has it already."""
    cp = critical_path(app) if cp is None else cp
    if cp.empty:
        return float("nan")
    on_path = float(cp["duration_s"].sum())
    driver = max(0.0, app.job_time_s - on_path)
    t = app.tasks if tasks is None else tasks
    total = 0.0
    for sid, attempt in zip(cp["stage_id"], cp["attempt"], strict=True):  # the attempt that completed
        total += stage_model_s(t[(t["stage_id"] == sid) & (t["stage_attempt"] == attempt)], slots, equal_tasks)
    return driver + total


NO_GC = "no garbage collection (upper bound)"


@dataclass
class Bound:
    what: str
    predicted_s: float
    how: str

    def gain(self, observed_s: float) -> float:
        return 1 - self.predicted_s / observed_s if observed_s > 0 else float("nan")


@dataclass
class Bounds:
    observed_s: float
    model_at_recorded_s: float
    rows: list[Bound] = field(default_factory=list)
    replay_at_recorded_s: float = float("nan")

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "what if": b.what,
                    "predicted_s": round(b.predicted_s, 2),
                    "vs recorded": f"{signed(-100 * b.gain(self.observed_s))}%",
                    "how": b.how,
                }
                for b in self.rows
            ]
        )


def fetch_wait_ms(tasks: pd.DataFrame) -> pd.Series:
    """A task's network-bound time in a log from any cluster: its fetch wait only. (The lab also counts
    scheduler delay above the run's floor, which it showed to be network time on its own fabric; on
    another cluster that delay may be anything, so it is not attributed here.)"""
    return tasks["fetch_wait_ms"].fillna(0).astype(float)


def replay_s(app: App, k: float, cpu_saving_per_gb_s: float = 0.0, cores: dict[str, int] | None = None) -> float:
    """The what-if replay's job time with the network k times faster (fetch wait / k, launch gaps kept)."""
    p = whatif.predict(
        app.tasks,
        app.stages,
        app.jobs,
        k,
        cpu_saving_per_gb_s,
        cores=cores if cores is not None else app.cores_per_executor(),
        network=fetch_wait_ms,
        delay_scheduling=False,
    )
    return p.predicted_s


def network_prediction_s(
    app: App,
    k: float,
    cpu_saving_per_gb_s: float = 0.0,
    cores: dict[str, int] | None = None,
    at_one: float | None = None,
) -> float:
    """The job time predicted with a k times faster network: recorded x replay(k) / replay(1).

    The replay reproduces lab recordings exactly at k = 1; logs with speculation or lost executors
    can be off by a few per cent, so its prediction is taken relative to its own k = 1 answer."""
    now = replay_s(app, 1.0, cores=cores) if at_one is None else at_one
    if not now > 0:
        return float("nan")
    return app.job_time_s * replay_s(app, k, cpu_saving_per_gb_s, cores) / now


def bounds(app: App, speedups: tuple[float, ...] = (2.0, 4.0), cp: pd.DataFrame | None = None) -> Bounds:
    """Network bounds from the what-if replay, executor scaling and perfect parallelism from the stage model.

    The stage model's predictions are taken relative to its own answer at the recorded slots
    (predicted = recorded x model(new) / model(recorded)), so its absolute error cancels. ``cp``: the
    application's :func:`critical_path` when the caller has it already (it is computed once here)."""
    cores = app.cores_per_executor()
    replay = "what-if replay of the recorded schedule, fetch wait / k, launch gaps kept (shufflelab.whatif)"
    out: list[Bound] = []
    replay_now = float("nan")
    if not app.tasks.empty and not app.jobs.empty and app.ended:
        try:
            replay_now = replay_s(app, 1.0, cores=cores)
        except ValueError:  # nothing the replay can start from (no completed stage): no network bound
            replay_now = float("nan")
        for k in (*speedups, INFINITE) if math.isfinite(replay_now) else ():
            label = "infinitely fast network" if k == INFINITE else f"{k:g}x faster network"
            scaled = network_prediction_s(app, k, cores=cores, at_one=replay_now)
            out.append(Bound(label, scaled, replay + ", relative to its k = 1 answer"))
    slots = app.slots
    if cp is None and slots:
        cp = critical_path(app)
    model_now = scaled_time_s(app, slots, cp=cp) if slots else float("nan")
    stage = "stage model max(longest task, work / slots) on the critical path, relative to its recorded-slots answer"

    def rel(model_s: float) -> float:
        return app.job_time_s * model_s / model_now if model_now > 0 else float("nan")

    if slots and model_now > 0:
        for factor, label in ((0.5, "half the executors"), (2.0, "twice the executors")):
            n = max(1, int(round(slots * factor)))
            out.append(Bound(f"{label} ({n} slots)", rel(scaled_time_s(app, n, cp=cp)), stage))
        out.append(
            Bound("perfect parallelism (no skew)", rel(scaled_time_s(app, slots, equal_tasks=True, cp=cp)), stage)
        )
        gc = app.tasks["gc_ms"].fillna(0).astype(float)
        if gc.sum() > 0:
            no_gc = app.tasks.assign(duration_ms=(app.tasks["duration_ms"].astype(float) - gc).clip(lower=0))
            out.append(
                Bound(
                    NO_GC, rel(scaled_time_s(app, slots, tasks=no_gc, cp=cp)), stage + "; each task minus its GC time"
                )
            )
    return Bounds(app.job_time_s, model_now, out, replay_now)


def shuffle_summary(app: App, link_gbps: float | None) -> dict[str, float | None]:
    """Shuffle-path share, fetch-wait share of core time, network efficiency at a given link rate."""
    t = app.tasks
    s = shuffle.share(t).iloc[0] if not t.empty else None
    core_ms = app.slots * app.job_time_s * 1000
    # each host's own link (a cluster behind a non-blocking switch): the busiest host sets the ideal
    eff = shuffle.network_efficiency(t, link_gbps * 1000, "star") if link_gbps else {}
    return {
        "read_share": None if s is None else _num(s["read_share"]),
        "write_share": None if s is None else _num(s["write_share"]),
        "fetch_wait_of_core_time": float(t["fetch_wait_ms"].sum()) / core_ms if core_ms > 0 else None,
        "remote_mb": float(t["remote_bytes"].sum()) / 1e6 if not t.empty else 0.0,
        "network_efficiency": eff.get("efficiency"),
        "ideal_shuffle_s": eff.get("ideal_s"),
        "observed_shuffle_s": eff.get("observed_s"),
    }


def _num(x: object) -> float | None:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def fct_table(app: App) -> pd.DataFrame:
    return fct.summary(fct.flows(app.tasks)) if not app.tasks.empty else fct.summary(pd.DataFrame())


GC_WORTH = 0.02
"""GC is listed as a fix when it takes at least this share of executor run time."""

STRAGGLER = 1.5
"""A task is a straggler when it took longer than this many times its stage's median task."""


def stage_health(app: App) -> pd.DataFrame:
    """Per stage: tasks, duration skew (max / median), stragglers, spill, GC share, failed tasks."""
    t = app.tasks
    if t.empty:
        return pd.DataFrame()
    rows = []
    names = _keyed(app.stages).set_index("stage_id")["name"].to_dict() if not app.stages.empty else {}
    for sid, g in t.groupby("stage_id", sort=True):
        ok = g[g["successful"].fillna(True).astype(bool)]
        d = ok["duration_ms"].astype(float) if not ok.empty else g["duration_ms"].astype(float)
        med = float(d.median()) if len(d) else float("nan")
        run = float(g["executor_run_ms"].sum())
        rows.append(
            {
                "stage": int(sid),  # type: ignore[call-overload]
                "name": str(names.get(sid, ""))[:40],
                "tasks": len(g),
                "failed": int((~g["successful"].fillna(True).astype(bool)).sum()),
                "speculative": int(g["speculative"].fillna(False).astype(bool).sum()),
                "median_ms": round(med, 1),
                "max_ms": round(float(d.max()), 1) if len(d) else float("nan"),
                "skew": round(float(d.max()) / med, 2) if med > 0 else float("nan"),
                "stragglers": int((d > STRAGGLER * med).sum()) if med > 0 else 0,
                "spill_mb": round(float(g["memory_spilled_bytes"].sum() + g["disk_spilled_bytes"].sum()) / 1e6, 2),
                "gc_share": round(float(g["gc_ms"].sum()) / run, 3) if run > 0 else float("nan"),
                "fetch_wait_share": round(float(g["fetch_wait_ms"].sum()) / run, 3) if run > 0 else float("nan"),
                "input_mb": round(float(g["input_bytes"].sum()) / 1e6, 2),
            }
        )
    return pd.DataFrame(rows)


@dataclass
class Fix:
    fix: str
    gain: float  # fraction of the recorded job time saved (nan: not priced from a log)
    how: str


def what_pays_off(app: App, b: Bounds, health: pd.DataFrame, cp: pd.DataFrame | None = None) -> list[Fix]:
    """Candidate fixes ranked by predicted gain; those a log cannot price are listed last, saying why
    (``cp``: the application's :func:`critical_path` when the caller has it already)."""
    obs = app.job_time_s
    fixes: list[Fix] = []
    by = {x.what: x for x in b.rows}
    for label in ("2x faster network", "infinitely fast network"):
        if label in by:
            fixes.append(Fix(f"a {label.replace('infinitely fast', 'perfect')}", by[label].gain(obs), by[label].how))
    more = [x for x in b.rows if x.what.startswith("twice the executors")]
    if more:
        fixes.append(Fix(more[0].what.replace("twice", "add executors: twice"), more[0].gain(obs), more[0].how))
    pp = by.get("perfect parallelism (no skew)")
    if pp is not None:
        fixes.append(
            Fix("even out partitions (skew / stragglers)", pp.gain(obs), pp.how + "; every task of a stage equal")
        )
    if not health.empty and len(app.tasks):
        overhead = app.tasks["deserialize_ms"].fillna(0).astype(float) + app.tasks["result_serialization_ms"].fillna(0)
        small = float(np.median(app.tasks["duration_ms"].astype(float)))
        share = float(overhead.sum()) / max(1.0, float(app.tasks["duration_ms"].sum()))
        if small < 200 and share > 0.05:
            fixes.append(
                Fix(
                    "fewer, larger partitions",
                    share / 2,
                    f"median task {small:.0f} ms with {share:.0%} of task time in (de)serialization; "
                    "halving the task count halves that overhead (upper bound, first order)",
                )
            )
    gc = by.get(NO_GC)
    run = float(app.tasks["executor_run_ms"].sum()) if not app.tasks.empty else 0.0
    gc_share = float(app.tasks["gc_ms"].sum()) / run if run > 0 else 0.0
    if gc is not None and gc_share >= GC_WORTH:
        fixes.append(
            Fix("less GC (executor memory, GC settings)", gc.gain(obs), gc.how + f" ({gc_share:.0%} of run time)")
        )
    spilled = health[health["spill_mb"] > 0] if not health.empty else health
    if not spilled.empty:
        fixes.append(
            Fix(
                "more memory per task or more partitions where stages spill",
                float("nan"),
                f"stages {', '.join(str(x) for x in spilled['stage'].head(8))} spilled "
                f"{spilled['spill_mb'].sum():.0f} MB; a log records how much was spilled, not how long it took",
            )
        )
    scans = float(app.tasks["input_bytes"].sum()) if not app.tasks.empty else 0.0
    if scans > 0:
        scan_stages = health[health["input_mb"] > 0]["stage"].tolist() if not health.empty else []
        cp = critical_path(app) if cp is None else cp
        on_cp = float(cp[cp["stage_id"].isin(scan_stages)]["duration_s"].sum()) if not cp.empty else 0.0
        fixes.append(
            Fix(
                "pushdown to storage (seed 003)",
                float("nan"),
                f"scan stages are {on_cp / obs:.0%} of the job on its critical path ({scans / 1e6:.0f} MB read); "
                "their gain depends on the storage hosts' CPU and the link: price it with the lab's NDP "
                "experiment (experiments/ndp-tpch.toml) or the simulator",
            )
        )
    fixes.append(
        Fix(
            "another congestion control",
            float("nan"),
            "a log records no congestion control or queue: the lab (experiments/cc-under-udp.toml) and the "
            "simulator price it for a given network",
        )
    )
    priced = sorted([f for f in fixes if not math.isnan(f.gain)], key=lambda f: -f.gain)
    return priced + [f for f in fixes if math.isnan(f.gain)]
