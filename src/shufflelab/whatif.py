"""What would a faster shuffle path buy this job? A critical-path replay of a recorded run.

Given a run's tasks (from the event log) and a speed-up ``k`` of the network (one number, or one
per host: the host whose fetches would be faster), each task's network-bound time shrinks to
``1 / k`` of itself (:func:`network_ms`; the rest of the task is unchanged) and the run is
replayed: every task on its original executor's slots, in its original launch order across
stages, after its original gap (scheduler latency, or the hand-off overlap when the driver
launched it before recording the previous task's end; gaps longer than the run's typical one are
delay scheduling and shrink by ``k``); a stage starts when the stage that gated it in the
recording ends (shifted by what that stage gained) -- the stage DAG as it was observed. The
predicted job time is the replayed span from the first job submission to the end of the last
stage plus the recorded tail. At ``k = 1`` the replay reproduces the recording exactly.

``cpu_saving_per_gb_s`` models the RDMA case (seed 004) as well: CPU seconds saved per GB of
remote shuffle data read, taken off each task's run time.

The model is first-order: a faster network also changes which executor takes which task (Spark
schedules greedily) and how map output is spilled; neither is modelled. It is validated against
real interventions by :func:`validate` (remove the cross traffic, measure, compare).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from shufflelab.spec import ExperimentSpec

Speedup = float | dict[str, float] | Callable[[str], float]


@dataclass
class Prediction:
    observed_s: float
    predicted_s: float
    stages: pd.DataFrame  # per stage: observed and predicted start/end (s from the first job)

    @property
    def ratio(self) -> float:
        return self.predicted_s / self.observed_s if self.observed_s > 0 else float("nan")


def _k(speedup: Speedup, host: str) -> float:
    if callable(speedup):
        return float(speedup(host))
    if isinstance(speedup, dict):
        return float(speedup.get(host, 1.0))
    return float(speedup)


NETWORK_FLOOR_QUANTILE = 0.1
"""The quantile of an application's per-task scheduler delay and deserialization wait taken as
their network-free floor (docs/design.md, "What-if")."""

HANDOFF_MS = 250.0
"""A task launched within this long before another task's recorded end on the same executor took
that task's slot: the driver launches the next task as soon as the executor reports a task done,
and records the finish only after it has handled the result (tens of ms, up to ~200 ms measured on
one-core executors; docs/design.md, "What-if")."""


def executor_slots(tasks: pd.DataFrame) -> dict[str, int]:
    """Task slots per executor inferred from the recording, for logs that do not say how many cores
    an executor had: a task takes the slot of a task whose recorded end is at most HANDOFF_MS after
    its launch, otherwise it opens a slot. Executors with several cores that only ran tasks shorter
    than HANDOFF_MS are under-counted; pass ``cores`` when known."""
    out: dict[str, int] = {}
    for ex, g in tasks.groupby("executor_id"):
        ends: list[float] = []
        for a, b in sorted(zip(g["launch_at_ms"].astype(float), g["finish_at_ms"].astype(float), strict=True)):
            free = [i for i, e in enumerate(ends) if e - a <= HANDOFF_MS]
            if free:
                ends[min(free, key=ends.__getitem__)] = b
            else:
                ends.append(b)
        out[str(ex)] = max(1, len(ends))
    return out


def predict(
    tasks: pd.DataFrame,
    stages: pd.DataFrame,
    jobs: pd.DataFrame,
    speedup: Speedup,
    cpu_saving_per_gb_s: float = 0.0,
    cores: int | Mapping[str, int] | None = None,
    network: Callable[[pd.DataFrame], pd.Series] | None = None,
    delay_scheduling: bool = True,
) -> Prediction:
    """Replay one application's run with a faster network (see the module doc). ``cores``: task
    slots per executor (one number, or per executor id); inferred from the recording when None.
    ``network``: each task's network-bound time (ms); :func:`network_ms` when None.
    ``delay_scheduling``: launch gaps above the run's typical one shrink by k (False: kept as recorded)."""
    if tasks.empty or jobs.empty:
        raise ValueError("a prediction needs the run's tasks and jobs")
    t0 = _time_ms(jobs["submitted_at_ms"].min())
    end_obs = _time_ms(jobs["completed_at_ms"].max())
    if t0 is None:
        raise ValueError("no job has a submission time: the replay starts at the first job's submission")
    if end_obs is None:
        raise ValueError("no job ended (the application was still running or was killed): no job time to replay")
    t = tasks.copy()
    t["executor_id"] = t["executor_id"].astype(str)
    t["k"] = [max(1e-9, _k(speedup, h)) for h in t["host"]]
    saved = (network or network_ms)(t) * (1 - 1 / t["k"]) + t["remote_bytes"] / 1e9 * cpu_saving_per_gb_s * 1000
    t["new_ms"] = (t["duration_ms"] - saved).clip(lower=0)
    t["stage_key"] = list(zip(t["stage_id"].astype(int), t["stage_attempt"].astype(int), strict=True))
    st = stages.dropna(subset=["submitted_at_ms", "completed_at_ms"]).copy()
    st["stage_key"] = list(zip(st["stage_id"].astype(int), st["stage_attempt"].astype(int), strict=True))
    st = st[st["stage_key"].isin(set(t["stage_key"]))].drop_duplicates("stage_key")
    st = st.sort_values(["submitted_at_ms", "stage_id"]).reset_index(drop=True)
    t = t[t["stage_key"].isin(set(st["stage_key"]))].sort_values(["launch_at_ms", "task_id"])
    if t.empty:
        raise ValueError("a prediction needs tasks of completed stages")
    if cores is None:
        slots = executor_slots(t)
    elif isinstance(cores, int):
        slots = {ex: max(1, cores) for ex in t["executor_id"].unique()}
    else:
        slots = {ex: max(1, int(cores.get(ex, 1))) for ex in t["executor_id"].unique()}
    submitted = {k: float(v) for k, v in zip(st["stage_key"], st["submitted_at_ms"], strict=True)}
    completed = {k: float(v) for k, v in zip(st["stage_key"], st["completed_at_ms"], strict=True)}
    last_finish = t.groupby("stage_key")["finish_at_ms"].max().astype(float).to_dict()
    left = t.groupby("stage_key").size().to_dict()
    typical_latency = _typical_latency(t, submitted, slots)
    new_sub: dict[tuple[int, int], float] = {}
    new_last: dict[tuple[int, int], float] = {}
    new_end: dict[tuple[int, int], float] = {}
    # Slots of each executor, shared by every stage: the observed ones (when each was last freed in
    # the recording) and the replayed ones. Tasks are replayed in launch order across stages, so
    # stages that ran at the same time share their executors as they did.
    obs_free = {ex: [float("-inf")] * n for ex, n in slots.items()}
    new_free = {ex: [float("-inf")] * n for ex, n in slots.items()}
    for task in t.itertuples(index=False):
        key = task.stage_key
        sub = submitted[key]
        if key not in new_sub:
            # the stage that gated this one: the latest-completing stage that ended before it was
            # submitted (all its tasks launched earlier, so it is replayed by now)
            gates = [(completed[g], g) for g in new_end if completed[g] <= sub]
            if gates:
                g_end, g_key = max(gates)
                new_sub[key] = new_end[g_key] + (sub - g_end)
            else:
                new_sub[key] = sub
            new_last[key] = new_sub[key]
        ex = task.executor_id
        of, nf = obs_free[ex], new_free[ex]
        j = min(range(len(of)), key=of.__getitem__)
        i = min(range(len(nf)), key=nf.__getitem__)
        # the gap between the slot freeing (or the stage starting) and this task's launch, signed:
        # negative when the driver launched it before recording the previous task's end (hand-off).
        # Up to the run's typical value it is scheduler latency, kept; the excess is Spark's delay
        # scheduling (locality wait) reacting to slow executors, which shrinks with the network.
        gap = float(task.launch_at_ms) - max(sub, of[j])
        excess = max(0.0, gap - typical_latency) if delay_scheduling else 0.0
        latency = gap - excess + excess / float(task.k)
        start = max(new_sub[key], max(new_sub[key], nf[i]) + latency)
        of[j] = float(task.finish_at_ms)
        nf[i] = start + float(task.new_ms)
        new_last[key] = max(new_last[key], nf[i])
        left[key] -= 1
        if left[key] == 0:
            new_end[key] = new_last[key] + max(0.0, completed[key] - last_finish[key])
    rows = [
        {
            "stage_id": key[0],
            "stage_attempt": key[1],
            "observed_start_s": (submitted[key] - t0) / 1000,
            "observed_end_s": (completed[key] - t0) / 1000,
            "predicted_start_s": (new_sub[key] - t0) / 1000,
            "predicted_end_s": (new_end[key] - t0) / 1000,
        }
        for key in st["stage_key"]
    ]
    last_obs = max(completed.values())
    predicted = (max(new_end.values()) + (end_obs - last_obs) - t0) / 1000
    return Prediction((end_obs - t0) / 1000, predicted, pd.DataFrame(rows))


def _time_ms(v: Any) -> float | None:
    """A time from a table (None, NaN or pd.NA when it was not recorded) as a float, or None."""
    try:
        t = float(v)
    except (TypeError, ValueError):
        return None
    return t if math.isfinite(t) else None


def network_ms(tasks: pd.DataFrame) -> pd.Series:
    """Each task's network-bound time (ms), the part a faster network divides by k: its fetch wait,
    plus what its scheduler delay (launch and result messages between driver and executor) and the
    non-CPU part of its deserialization (fetching the task binary from the driver) spent above the
    application's quiet floor (their NETWORK_FLOOR_QUANTILE over the application's tasks)."""
    net = tasks["fetch_wait_ms"].astype(float)
    cols = tasks.columns
    if not {"executor_run_ms", "deserialize_ms", "deserialize_cpu_ms", "result_serialization_ms"} <= set(cols):
        return net
    sched = tasks["duration_ms"] - tasks["executor_run_ms"] - tasks["deserialize_ms"] - tasks["result_serialization_ms"]
    deser = tasks["deserialize_ms"] - tasks["deserialize_cpu_ms"]
    for part in (sched.astype(float).clip(lower=0), deser.astype(float).clip(lower=0)):
        net = net + (part - part.quantile(NETWORK_FLOOR_QUANTILE)).clip(lower=0)
    return net.fillna(tasks["fetch_wait_ms"].astype(float))


def _typical_latency(t: pd.DataFrame, submitted: Mapping[tuple[int, int], float], slots: Mapping[str, int]) -> float:
    """Median gap between a slot becoming free (or its task's stage starting) and its next task's
    launch, hand-offs counted as 0 (``t`` in launch order)."""
    free = {ex: [float("-inf")] * n for ex, n in slots.items()}
    gaps: list[float] = []
    for task in t.itertuples(index=False):
        f = free[task.executor_id]
        j = min(range(len(f)), key=f.__getitem__)
        gaps.append(max(0.0, float(task.launch_at_ms) - max(submitted[task.stage_key], f[j])))
        f[j] = float(task.finish_at_ms)
    return float(pd.Series(gaps).median()) if gaps else 0.0


def _lab_spec(spec: ExperimentSpec | Mapping[str, Any] | None) -> ExperimentSpec | None:
    """A scenario's spec as ``Store.scenario_specs`` gives it (a stored dictionary is validated again);
    None for an imported event log's, which is no lab spec."""
    from shufflelab.spec import ExperimentSpec, stored

    return spec if spec is None or isinstance(spec, ExperimentSpec) else stored(spec)


def udp_speedup(spec: ExperimentSpec | Mapping[str, Any] | None) -> float:
    """The network speed-up that removing a spec's UDP cross traffic gives the job's fetches:
    rate / (rate - UDP rate), applied to every task when the UDP shares the job's bottleneck.

    In a ``star`` the UDP fills one host's port only, yet an all-to-all shuffle makes every
    reducer fetch a block from that host (and that host's ACKs wait in the same queue), so every
    task's fetch wait ends on the congested port: the speed-up is applied to all tasks. A UDP
    sink outside the job (no worker role) shares no queue with it: speed-up 1."""
    s = _lab_spec(spec)
    if s is None or s.cross_traffic.udp_percent <= 0:
        return 1.0
    if s.topology.kind == "star":
        sink = s.traffic_endpoints()[1]
        roles = s.hosts[sink].roles if sink in s.hosts else []
        if not any(r in roles for r in ("spark-worker", "spark-master")):
            return 1.0
    return 1 / max(0.02, 1 - s.cross_traffic.udp_percent / 100)


def spec_cores(spec: ExperimentSpec | Mapping[str, Any] | None) -> int | None:
    """Task slots per executor that a scenario's spec gives its applications, or None when the spec
    leaves it to Spark (several applications sharing multi-core workers)."""
    s = _lab_spec(spec)
    if s is None:  # not a lab spec (an imported event log)
        return None
    worker = s.spark.worker_cores  # spark.executor.cores is the lab's to set (sparkconf.RESERVED)
    if worker == 1 or s.workload.apps == 1:
        return worker
    return None


def recorded_cores(store: Any, run_id: str, app_index: int = 0) -> dict[str, int] | None:
    """Task slots per executor as the event log recorded them (None when it did not)."""
    ex = store.query(
        "SELECT executor_id, total_cores FROM executors WHERE run_id = ? AND coalesce(app_index, 0) = ? "
        "AND total_cores IS NOT NULL",
        [run_id, app_index],
    )
    return {str(e): max(1, int(c)) for e, c in ex.itertuples(index=False, name=None)} or None


def run_inputs(store: Any, run_id: str, app_index: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One application's tasks, stages and jobs from a results store (the replay's inputs)."""
    q = "SELECT * FROM {} WHERE run_id = ? AND coalesce(app_index, 0) = ?"
    tasks, stages, jobs = (store.query(q.format(x), [run_id, app_index]) for x in ("tasks", "stages", "jobs"))
    return tasks, stages, jobs


def validate(db: Any, pairs: list[tuple[str, str]] | None = None) -> pd.DataFrame:
    """For each (scenario with UDP, its baseline without): predict the baseline's job time from each
    scenario run by removing the UDP's share of the bottleneck, and compare with the measured
    baseline. One row per pair: measured and predicted means and the relative error."""
    from shufflelab import diagnose as dg
    from shufflelab import stats
    from shufflelab.results import Store

    store = Store(db)
    specs = store.scenario_specs()
    pairs = pairs if pairs is not None else dg.baseline_pairs(specs)
    runs = store.query(
        "SELECT r.run_id, r.job_time_s, r.n_apps, s.label FROM runs r JOIN scenarios s USING (scenario_id) "
        "WHERE r.status = 'ok'"
    )
    out = []
    for s_label, b_label in pairs:
        spec = specs[s_label]
        if spec is None or spec.workload.apps != 1:
            continue  # one application per run: the replay models one app's DAG
        k = udp_speedup(spec)
        cores = spec_cores(spec)
        preds, observed = [], []
        for run_id in runs[runs["label"] == s_label]["run_id"]:
            tasks, stages, jobs = run_inputs(store, run_id)
            if tasks.empty:
                continue
            p = predict(tasks, stages, jobs, k, cores=cores)
            preds.append(p.predicted_s)
            observed.append(p.observed_s)
        base = runs[runs["label"] == b_label]["job_time_s"].dropna().tolist()
        if not preds or not base:
            continue
        bs, ps = stats.summarize(base), stats.summarize(preds)
        out.append(
            {
                "scenario": s_label,
                "baseline": b_label,
                "speedup": k,
                "n": len(preds),
                "observed_with_traffic_s": stats.summarize(observed).mean,
                "predicted_without_s": ps.mean,
                "measured_without_s": bs.mean,
                "measured_ci_s": bs.ci_text(),
                "error": ps.mean / bs.mean - 1,
            }
        )
    return pd.DataFrame(out)
