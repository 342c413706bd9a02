"""What would a faster shuffle path buy this job? A critical-path replay of a recorded run.

Given a run's tasks (from the event log) and a speed-up ``k`` of the network (one number, or one
per host: the host whose fetches would be faster), each task's fetch wait shrinks to
``fetch_wait / k`` (its network-bound part; the rest of the task is unchanged) and the run is
replayed: every task on its original executor, in its original order, with its original
scheduler latency; a stage starts when the stage that gated it in the recording ends (shifted by
what that stage gained) -- the stage DAG as it was observed. The predicted job time is the
replayed span from the first job submission to the end of the last stage plus the recorded tail.

``cpu_saving_per_gb_s`` models the RDMA case (seed 004) as well: CPU seconds saved per GB of
remote shuffle data read, taken off each task's run time.

The model is first-order: a faster network also changes which executor takes which task (Spark
schedules greedily) and how map output is spilled; neither is modelled. It is validated against
real interventions by :func:`validate` (remove the cross traffic, measure, compare).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

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


def predict(
    tasks: pd.DataFrame,
    stages: pd.DataFrame,
    jobs: pd.DataFrame,
    speedup: Speedup,
    cpu_saving_per_gb_s: float = 0.0,
) -> Prediction:
    """Replay one application's run with a faster network (see the module doc)."""
    if tasks.empty or jobs.empty:
        raise ValueError("a prediction needs the run's tasks and jobs")
    t0 = float(jobs["submitted_at_ms"].min())
    end_obs = float(jobs["completed_at_ms"].max())
    t = tasks.copy()
    t["k"] = [max(1e-9, _k(speedup, h)) for h in t["host"]]
    saved = t["fetch_wait_ms"] * (1 - 1 / t["k"]) + t["remote_bytes"] / 1e9 * cpu_saving_per_gb_s * 1000
    t["new_ms"] = (t["duration_ms"] - saved).clip(lower=0)
    st = stages.dropna(subset=["submitted_at_ms", "completed_at_ms"]).copy()
    st = st[st.set_index(["stage_id", "stage_attempt"]).index.isin(t.set_index(["stage_id", "stage_attempt"]).index)]
    st = st.sort_values(["submitted_at_ms", "stage_id"]).reset_index(drop=True)
    new_end: dict[tuple[int, int], float] = {}
    rows = []
    slot_free: dict[str, list[float]] = {}
    cores = t.groupby("executor_id")["task_id"].count().to_dict()  # bounded below by concurrency
    for ex, g in t.groupby("executor_id"):
        iv = sorted(zip(g["launch_at_ms"], g["finish_at_ms"], strict=True))
        live, peak = [], 0
        for a, b in iv:
            live = [x for x in live if x > a] + [b]
            peak = max(peak, len(live))
        cores[ex] = max(1, peak)
    typical_latency = _typical_latency(t, st, cores)
    for _, s in st.iterrows():
        key = (int(s["stage_id"]), int(s["stage_attempt"]))
        sub = float(s["submitted_at_ms"])
        # the stage that gated this one: the latest-completing stage that ended before it was submitted
        gate = [(float(p["completed_at_ms"]), (int(p["stage_id"]), int(p["stage_attempt"])))
                for _, p in st.iterrows() if float(p["completed_at_ms"]) <= sub and (int(p["stage_id"]),
                int(p["stage_attempt"])) in new_end]  # fmt: skip
        if gate:
            g_end, g_key = max(gate)
            new_sub = new_end[g_key] + (sub - g_end)
        else:
            new_sub = sub
        ts = t[(t["stage_id"] == key[0]) & (t["stage_attempt"] == key[1])].sort_values("launch_at_ms")
        obs_free: dict[str, list[float]] = {}
        end = new_sub
        for _, task in ts.iterrows():
            ex = str(task["executor_id"])
            of = obs_free.setdefault(ex, [sub] * cores[ex])
            j = min(range(len(of)), key=of.__getitem__)
            # scheduler latency: kept up to the run's typical value; longer gaps are Spark's delay
            # scheduling (locality wait) reacting to slow executors, which a faster network removes
            latency = min(max(0.0, float(task["launch_at_ms"]) - max(sub, of[j])), typical_latency)
            of[j] = float(task["finish_at_ms"])
            nf = slot_free.setdefault(ex, [0.0] * cores[ex])
            i = min(range(len(nf)), key=nf.__getitem__)
            start = max(new_sub, nf[i]) + latency
            finish = start + float(task["new_ms"])
            nf[i] = finish
            end = max(end, finish)
        stage_tail = float(s["completed_at_ms"]) - float(ts["finish_at_ms"].max())
        new_end[key] = end + max(0.0, stage_tail)
        rows.append(
            {
                "stage_id": key[0],
                "stage_attempt": key[1],
                "observed_start_s": (sub - t0) / 1000,
                "observed_end_s": (float(s["completed_at_ms"]) - t0) / 1000,
                "predicted_start_s": (new_sub - t0) / 1000,
                "predicted_end_s": (new_end[key] - t0) / 1000,
            }
        )
    last_obs = float(st["completed_at_ms"].max())
    last_new = max(new_end.values())
    predicted = (last_new + (end_obs - last_obs) - t0) / 1000
    return Prediction((end_obs - t0) / 1000, predicted, pd.DataFrame(rows))


def _typical_latency(t: pd.DataFrame, st: pd.DataFrame, cores: dict[Any, int]) -> float:
    """Median gap between a slot becoming free (or its stage starting) and its next task's launch."""
    gaps: list[float] = []
    for _, s in st.iterrows():
        sub = float(s["submitted_at_ms"])
        ts = t[(t["stage_id"] == s["stage_id"]) & (t["stage_attempt"] == s["stage_attempt"])]
        free: dict[Any, list[float]] = {}
        for _, task in ts.sort_values("launch_at_ms").iterrows():
            f = free.setdefault(task["executor_id"], [sub] * cores[task["executor_id"]])
            j = min(range(len(f)), key=f.__getitem__)
            gaps.append(max(0.0, float(task["launch_at_ms"]) - f[j]))
            f[j] = float(task["finish_at_ms"])
    return float(pd.Series(gaps).median()) if gaps else 0.0


def udp_speedup(spec: dict[str, Any]) -> float:
    """The network speed-up that removing a spec's UDP cross traffic gives the job's fetches:
    rate / (rate - UDP rate), applied to every task when the UDP shares the job's bottleneck.

    In a ``star`` the UDP fills one host's port only, yet an all-to-all shuffle makes every
    reducer fetch a block from that host (and that host's ACKs wait in the same queue), so every
    task's fetch wait ends on the congested port: the speed-up is applied to all tasks. A UDP
    sink outside the job (no worker role) shares no queue with it: speed-up 1."""
    ct = spec.get("cross_traffic", {})
    pct = float(ct.get("udp_percent", 0))
    if pct <= 0:
        return 1.0
    if spec["topology"].get("kind", "shared") == "star":
        sink = ct.get("sink") or next(
            (h for h, v in spec["hosts"].items() if "traffic-sink" in v.get("roles", [])), None
        )
        roles = spec["hosts"].get(sink, {}).get("roles", []) if sink else []
        if not any(r in roles for r in ("spark-worker", "spark-master")):
            return 1.0
    return 1 / max(0.02, 1 - pct / 100)


def validate(db: Any, pairs: list[tuple[str, str]] | None = None) -> pd.DataFrame:
    """For each (scenario with UDP, its baseline without): predict the baseline's job time from each
    scenario run by removing the UDP's share of the bottleneck, and compare with the measured
    baseline. One row per pair: measured and predicted means and the relative error."""
    from shufflelab import diagnose as dg
    from shufflelab import stats
    from shufflelab.results import Store

    store = Store(db)
    scen = store.query("SELECT label, spec_json FROM scenarios")
    specs = {r["label"]: json.loads(r["spec_json"]) for _, r in scen.iterrows()}
    pairs = pairs if pairs is not None else dg.baseline_pairs(scen)
    runs = store.query(
        "SELECT r.run_id, r.job_time_s, r.n_apps, s.label FROM runs r JOIN scenarios s USING (scenario_id) "
        "WHERE r.status = 'ok'"
    )
    out = []
    for s_label, b_label in pairs:
        if specs[s_label].get("workload", {}).get("apps", 1) != 1:
            continue  # one application per run: the replay models one app's DAG
        k = udp_speedup(specs[s_label])
        preds, observed = [], []
        for run_id in runs[runs["label"] == s_label]["run_id"]:
            q = "SELECT * FROM {} WHERE run_id = ?"
            tasks, stages, jobs = (store.query(q.format(x), [run_id]) for x in ("tasks", "stages", "jobs"))
            if tasks.empty:
                continue
            p = predict(tasks, stages, jobs, k)
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
