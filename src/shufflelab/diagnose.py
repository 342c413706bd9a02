"""Starvation detector: is a job starving for the network, compared with its baseline?

Seed 001's signature of starvation: the job takes much longer with cross traffic while the CPU
time it uses is unchanged -- the executors sit idle waiting for shuffle data. The detector tests
exactly that over repeated runs (pure functions over the results tables):

- job time ratio (scenario / baseline) with Welch's test and the 95 % CI that inverts it (one
  inference: the CI excludes 1 exactly when p < 0.05; ``stats.compare``);
- total executor CPU time ratio and per-task CPU time ratio, each with a CI;
- share of executor core-time spent idle (1 - CPU / (job time x cores)) and waiting on fetches;
- Spearman correlation, within the scenario's runs, of the bottleneck backlog with task progress
  (task completions per second): negative when progress stalls while the queue is full.

Which CPU time: the task threads' *user-mode* CPU time (``runs.task_user_cpu_s``, measured in
the executors by shufflelab's plugin) when every compared run has it, else the event log's
``executorCpuTime``. On a kernel without IRQ time accounting (this host's:
``CONFIG_IRQ_TIME_ACCOUNTING`` is off) the thread CPU time that Spark reports also contains the
packet-forwarding work that interrupts charge to whichever thread was running -- with cross
traffic, the executors pay for forwarding it, which reads as "CPU time grew" although the
tasks did no more work. User time excludes that (interrupt ticks count as system time); the
event-log ratio is still reported next to it. (The executor processes' OS user time,
``runs.executor_user_s``, is recorded too but not used: JIT and idle JVM threads make it grow
with the job's duration.)

The verdict is the attribution's (:mod:`shufflelab.attribution`): the added job time split into
waiting for data and busy executors, each with its interval; *starved* when waiting is
significantly the larger part. The rules below are seed 001's strict test, still computed and
reported (``strict_verdict``), and the verdict when the runs lack the executors' run time.

Strict verdict: **starved** when the job is significantly slower (p < alpha and the ratio's CI above 1),
CPU time is unchanged (an equivalence test, TOST at alpha: the ratio's 90 % CI inside
1 +/- ``cpu_tolerance``), the tasks' fetch wait grew
significantly (the extra time is spent waiting for shuffle data) and the idle share grew;
A **load-matched control** can stand in for the baseline in the CPU test only: a scenario identical
to the one diagnosed, with the same cross-traffic load, but whose traffic goes to a host off the
job's path (its sink differs) and whose tasks' fetch wait did not grow. On one emulation host the
cross traffic is forwarded and received by the same CPUs the executors run on, so it costs the
job CPU time whether or not it shares the job's bottleneck (measured: task user CPU +3 % in the
control); the control carries that cost and nothing else. When the CPU is not shown unchanged
against the baseline, the detector tests scenario vs control (same TOST); if equivalent, the CPU
change is the host's, not the job's, and the verdict may be "starved" -- the reasons then give
both ratios and name the control.

**not starved** when the job is not significantly slower and its mean ratio is below
1 + ``cpu_tolerance``, or when it is slower but its fetch wait did not grow (not significantly,
and its mean ratio below 1 + ``cpu_tolerance``: a large ratio that is merely not significant is
no evidence of no growth, so that case is inconclusive) (the executors lost the
time to something else -- CPU taken by other processes, as in the control case, where idle
executor time grows although nothing waits on the network); **inconclusive** otherwise (too few
runs, or slower and waiting on fetches with CPU time changed too), always with the reasons and
effect sizes. Fewer than ``min_reps`` runs (with a job time) on either side: no interval and no
verdict. A successful run without a job time is left out, and the reasons say so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from shufflelab.attribution import Attribution, attribute, attributed_verdict, attribution_columns, constant_text
from shufflelab.stats import Comparison, compare

if TYPE_CHECKING:
    from shufflelab.spec import ExperimentSpec


@dataclass
class Diagnosis:
    scenario: str
    baseline: str
    verdict: str  # "starved" | "not starved" | "inconclusive"
    reasons: list[str]
    job: Comparison
    cpu: Comparison
    task_cpu: Comparison
    idle_share_baseline: float
    idle_share_scenario: float
    fetch_wait_share_baseline: float
    fetch_wait_share_scenario: float
    backlog_progress_rho: float
    backlog_progress_p: float
    n_baseline: int
    n_scenario: int
    extra: dict[str, float] = field(default_factory=dict)
    thread_cpu: Comparison | None = None
    cpu_measure: str = "thread"
    fetch: Comparison | None = None
    control: str | None = None  # the load-matched control the CPU was compared with, if it was
    cpu_vs_control: Comparison | None = None
    excluded: int = 0  # successful runs left out because they have no job time
    strict_verdict: str = ""  # seed 001's strict test (CPU shown unchanged); the verdict is the attribution's
    attribution: Attribution | None = None  # the added job time split into waiting and busy (attribution.py)

    def row(self) -> dict[str, object]:
        def ci(c: Comparison) -> str:
            return c.ci_text()

        return {
            "scenario": self.scenario,
            "baseline": self.baseline,
            "verdict": self.verdict,
            **attribution_columns(self.attribution, self.strict_verdict),
            "n": f"{self.n_baseline}/{self.n_scenario}",
            "job_ratio": self.job.ratio,
            "job_ci": ci(self.job),
            "job_p": self.job.p_value,
            "cpu_measure": self.cpu_measure,
            "cpu_ratio": self.cpu.ratio,
            "cpu_ci": ci(self.cpu),
            "cpu_vs_control": (
                f"{self.cpu_vs_control.ratio:.2f} {ci(self.cpu_vs_control)} ({self.control})"
                if self.cpu_vs_control is not None
                else "–"
            ),
            "eventlog_cpu_ratio": self.thread_cpu.ratio if self.thread_cpu else self.cpu.ratio,
            "task_cpu_ratio": self.task_cpu.ratio,
            "fetch_wait_ratio": self.fetch.ratio if self.fetch else float("nan"),
            "fetch_wait_ci": ci(self.fetch) if self.fetch else "–",
            "idle_share": f"{_pct(self.idle_share_baseline)} -> {_pct(self.idle_share_scenario)}",
            "fetch_wait_share": f"{_pct(self.fetch_wait_share_baseline)} -> {_pct(self.fetch_wait_share_scenario)}",
            "backlog_progress_rho": self.backlog_progress_rho,
        }


def _shares(runs: pd.DataFrame) -> tuple[list[float], list[float]]:
    idle, wait = [], []
    for _, r in runs.iterrows():
        capacity = _num(r["job_time_s"]) * _num(r["total_cores"])
        if not capacity > 0 or not math.isfinite(capacity):
            continue
        cpu, fetch = _num(r["executor_cpu_s"]), _num(r["fetch_wait_s"])
        if math.isfinite(cpu):
            idle.append(max(0.0, 1.0 - cpu / capacity))
        if math.isfinite(fetch):
            wait.append(fetch / capacity)
    return idle, wait


def _num(x: object) -> float:
    """A table cell as a float; NULL (None, NaN, pd.NA) as NaN."""
    try:
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def _with_job_time(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The runs that have a (finite) job time, and the ids of those that do not."""
    jt = pd.to_numeric(runs["job_time_s"], errors="coerce").astype(float)
    keep = np.isfinite(jt.to_numpy())
    ids = runs["run_id"].astype(str).tolist() if "run_id" in runs.columns else [str(i) for i in runs.index]
    return runs[keep], [i for i, k in zip(ids, keep, strict=True) if not k]


def _positive_job_time(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The runs whose job time is a duration (> 0 s), and the others named with it: 0 s or less is
    invalid data (a broken recording or import), which must not read as runs without variation."""
    jt = pd.to_numeric(runs["job_time_s"], errors="coerce").astype(float).to_numpy()
    bad = jt <= 0
    ids = runs["run_id"].astype(str).tolist() if "run_id" in runs.columns else [str(i) for i in runs.index]
    return runs[~bad], [f"{i}: {v:g} s" for i, v, b in zip(ids, jt, bad, strict=True) if b]


def task_cpu_per_run(tasks: pd.DataFrame) -> list[float]:
    """Mean executor CPU time per task (ms), one value per run (the unit of replication)."""
    if tasks.empty:
        return []
    return [float(x) for x in tasks.groupby("run_id")["executor_cpu_ms"].mean()]


def backlog_progress(tasks: pd.DataFrame, samples: pd.DataFrame, bin_s: float = 1.0) -> tuple[float, float]:
    """Spearman rho (and p) of mean backlog vs task completions per ``bin_s`` bin, pooled over runs."""
    xs: list[float] = []
    ys: list[float] = []
    if tasks.empty or samples.empty:
        return float("nan"), float("nan")
    for run_id, t in tasks.groupby("run_id"):
        q = samples[samples["run_id"] == run_id]
        if q.empty:
            continue
        start = t["launch_at_ms"].min() / 1000.0
        end = t["finish_at_ms"].max() / 1000.0
        edges = np.arange(start, end + bin_s, bin_s)
        if len(edges) < 3:
            continue
        done, _ = np.histogram(t["finish_at_ms"] / 1000.0, bins=edges)
        per_dev = q.groupby("t")["backlog_bytes"].sum()  # several shaped ports: total backlog
        idx = np.digitize(per_dev.index.to_numpy(), edges) - 1
        for b in range(len(edges) - 1):
            vals = per_dev.to_numpy()[idx == b]
            if vals.size:
                xs.append(float(vals.mean()))
                ys.append(float(done[b]))
    if len(xs) < 5 or np.std(xs) == 0 or np.std(ys) == 0:
        return float("nan"), float("nan")
    res = sps.spearmanr(xs, ys)
    return float(res.statistic), float(res.pvalue)


def _ci(c: Comparison, digits: int = 2) -> str:
    """'CI 1.07-1.33' at the comparison's level, or why there is no interval."""
    if not c.has_interval:
        return c.ci_text()
    hi = "unbounded" if math.isinf(c.ratio_ci_high) else f"{c.ratio_ci_high:.{digits}f}"
    return f"CI {c.ratio_ci_low:.{digits}f}-{hi}"


def _p(c: Comparison) -> str:
    return "–" if math.isnan(c.p_value) else f"{c.p_value:.2g}"


def _pct(x: float) -> str:
    return "–" if math.isnan(x) else f"{x:.0%}"


def diagnose(
    scenario: str,
    baseline: str,
    base_runs: pd.DataFrame,
    scen_runs: pd.DataFrame,
    base_tasks: pd.DataFrame,
    scen_tasks: pd.DataFrame,
    scen_samples: pd.DataFrame | None = None,
    *,
    min_reps: int = 3,
    alpha: float = 0.05,
    cpu_tolerance: float = 0.10,
    cpu_measure: str = "auto",
    control: str | None = None,
    control_runs: pd.DataFrame | None = None,
) -> Diagnosis:
    """Compare ``scenario``'s successful runs with ``baseline``'s (see the module doc for the rules);
    ``control``/``control_runs``: a load-matched control for the CPU test (module doc). Runs without
    a job time (NULL) are left out of every comparison, and the reasons say which."""
    base_runs, base_out = _with_job_time(base_runs)
    scen_runs, scen_out = _with_job_time(scen_runs)
    base_runs, base_bad = _positive_job_time(base_runs)
    scen_runs, scen_bad = _positive_job_time(scen_runs)
    if control_runs is not None:
        control_runs, _ = _positive_job_time(_with_job_time(control_runs)[0])
    min_reps = max(2, min_reps)  # one run has no spread: nothing to test

    def cmp(base: list[float], scen: list[float], confidence: float = 1 - alpha) -> Comparison:
        return compare(base, scen, confidence=confidence, min_n=min_reps)

    job = cmp(base_runs["job_time_s"].tolist(), scen_runs["job_time_s"].tolist())
    thread_cpu = cmp(base_runs["executor_cpu_s"].tolist(), scen_runs["executor_cpu_s"].tolist())
    col = "task_user_cpu_s"
    use_user = cpu_measure == "user" or (
        cpu_measure == "auto"
        and col in base_runs.columns
        and col in scen_runs.columns
        and len(base_runs) > 0
        and len(scen_runs) > 0
        and base_runs[col].notna().all()
        and scen_runs[col].notna().all()
    )
    if use_user:
        cpu_col, cpu_name = col, "task user CPU time"
        cpu = cmp(base_runs[col].tolist(), scen_runs[col].tolist())
    else:
        cpu_col, cpu, cpu_name = "executor_cpu_s", thread_cpu, "executor CPU time (event log)"
    task_cpu = cmp(task_cpu_per_run(base_tasks), task_cpu_per_run(scen_tasks))
    idle_b, wait_b = _shares(base_runs)
    idle_s, wait_s = _shares(scen_runs)

    def mean(v: list[float]) -> float:
        return float(np.mean(v)) if v else float("nan")

    rho, rho_p = backlog_progress(scen_tasks, scen_samples if scen_samples is not None else pd.DataFrame())
    n_b, n_s = len(base_runs), len(scen_runs)
    reasons: list[str] = []
    # one inference for "slower": Welch's test, whose inversion is the ratio's interval (stats.py)
    slower = job.significant and job.ratio_ci_low > 1.0
    # "CPU unchanged" is an equivalence claim: two one-sided tests at alpha (TOST), i.e. the
    # (1 - 2 alpha) = 90 % CI of the ratio inside 1 +/- tolerance
    cpu_vals = (base_runs[cpu_col].tolist(), scen_runs[cpu_col].tolist())
    cpu_eq = cmp(*cpu_vals, confidence=1 - 2 * alpha)
    cpu_same = cpu_eq.has_interval and (
        (1 - cpu_tolerance) <= cpu_eq.ratio_ci_low and cpu_eq.ratio_ci_high <= (1 + cpu_tolerance)
    )
    idle_up = mean(idle_s) > mean(idle_b)
    fetch = cmp(base_runs["fetch_wait_s"].tolist(), scen_runs["fetch_wait_s"].tolist())
    fetch_up = fetch.has_interval and fetch.ratio_ci_low > 1.0  # the fetch-wait ratio's CI above 1
    # the CPU against a load-matched control (same cross-traffic load, off the job's path), used only
    # when the control's runs have the same CPU measure and its tasks did not wait longer on fetches
    cpu_ctl: Comparison | None = None
    cpu_ctl_same = False
    ctl_fetch: Comparison | None = None
    if control is not None and control_runs is not None and len(control_runs) >= min_reps and not cpu_same:
        has = cpu_col in control_runs.columns and control_runs[cpu_col].notna().all()
        if has:
            ctl_fetch = cmp(base_runs["fetch_wait_s"].tolist(), control_runs["fetch_wait_s"].tolist())
            if not (ctl_fetch.has_interval and ctl_fetch.ratio_ci_low > 1.0):
                ctl_vals = control_runs[cpu_col].tolist()
                cpu_ctl = cmp(ctl_vals, cpu_vals[1], confidence=1 - 2 * alpha)
                cpu_ctl_same = cpu_ctl.has_interval and (
                    (1 - cpu_tolerance) <= cpu_ctl.ratio_ci_low and cpu_ctl.ratio_ci_high <= (1 + cpu_tolerance)
                )
    pct = job.percent_change
    level = f"{1 - alpha:.0%}".replace("%", " %")
    eq_level = f"{1 - 2 * alpha:.0%}".replace("%", " %")
    if min(n_b, n_s) < min_reps:
        verdict = "inconclusive"
        reasons.append(
            f"too few runs for an interval/verdict ({n_b} baseline, {n_s} scenario with a job time; "
            f"need >= {min_reps} each)"
        )
    elif slower and not fetch_up and fetch.has_interval and fetch.ratio < 1 + cpu_tolerance:
        # the executors lost time, but not waiting for shuffle data: CPU taken by others, not the network
        verdict = "not starved"
        reasons.append(
            f"job slower ({pct:+.0f} %, {_ci(job)}) but tasks did not wait longer for shuffle data (fetch wait "
            f"ratio {fetch.ratio:.2f}, {_ci(fetch)}): the time went elsewhere (CPU contention), not to the network"
        )
    elif slower and (cpu_same or cpu_ctl_same) and fetch_up and idle_up:
        verdict = "starved"
        reasons.append(
            f"job time {pct:+.0f} % (ratio {job.ratio:.2f}, {level} {_ci(job)}, Welch p = {job.p_value:.2g})"
        )
        if cpu_same:
            reasons.append(
                f"{cpu_name} unchanged: ratio {cpu.ratio:.2f}, {eq_level} {_ci(cpu_eq, 3)} inside "
                f"+/-{cpu_tolerance:.0%} (equivalence, TOST at {alpha:g}; {level} {_ci(cpu)})"
            )
        else:
            assert cpu_ctl is not None and ctl_fetch is not None
            reasons.append(
                f"{cpu_name} vs baseline {cpu.ratio:.2f} ({eq_level} {_ci(cpu_eq, 3)}, not shown within "
                f"+/-{cpu_tolerance:.0%}), but unchanged vs the load-matched control {control!r} (same cross "
                f"traffic off the job's path; its fetch wait ratio {ctl_fetch.ratio:.2f}, {_ci(ctl_fetch)}): ratio "
                f"{cpu_ctl.ratio:.2f}, {eq_level} {_ci(cpu_ctl, 3)} inside +/-{cpu_tolerance:.0%} -- the CPU "
                "change is the host's cost of carrying the traffic, not more work by the job"
            )
        reasons.append(f"idle executor core-time {_pct(mean(idle_b))} -> {_pct(mean(idle_s))}")
        reasons.append(
            f"fetch wait ratio {fetch.ratio:.2f} ({_ci(fetch)}): the extra time is spent waiting for shuffle data"
        )
    elif not slower and job.ratio < 1 + cpu_tolerance:
        verdict = "not starved"
        reasons.append(f"job time not significantly longer: ratio {job.ratio:.2f} ({_ci(job)}, Welch p = {_p(job)})")
    else:
        verdict = "inconclusive"
        if slower and not fetch_up and not fetch.ratio < 1 + cpu_tolerance:
            # no evidence either way: a large fetch-wait ratio that is not significant is not "no growth"
            reasons.append(
                f"job slower ({pct:+.0f} %, {_ci(job)}); fetch wait ratio {fetch.ratio:.2f} ({_ci(fetch)}) "
                "is not significant: whether the tasks waited longer for shuffle data needs more repetitions"
            )
        if slower and not cpu_same:
            reasons.append(
                f"job slower ({pct:+.0f} %) but {cpu_name} not shown unchanged (ratio {cpu.ratio:.2f}, "
                f"{eq_level} {_ci(cpu_eq, 3)} not inside +/-{cpu_tolerance:.0%}): CPU contention, not only the network"
            )
            if cpu_ctl is not None:
                reasons.append(
                    f"vs the load-matched control {control!r}: ratio {cpu_ctl.ratio:.2f}, {eq_level} "
                    f"{_ci(cpu_ctl, 3)} (not inside +/-{cpu_tolerance:.0%} either)"
                )
            elif ctl_fetch is not None:
                reasons.append(
                    f"control {control!r} not used for the CPU: its fetch wait grew too (ratio {ctl_fetch.ratio:.2f}, "
                    f"{_ci(ctl_fetch)})"
                )
        elif slower:
            reasons.append(f"job slower ({pct:+.0f} %) and waiting longer on fetches, but executors were not idler")
        elif job.constant:
            reasons.append(constant_text(base_runs["job_time_s"], scen_runs["job_time_s"], job))
        else:
            reasons.append(
                f"job time ratio {job.ratio:.2f} not significant (Welch p = {_p(job)}, {_ci(job)}): "
                "more repetitions needed"
            )
    if use_user and not math.isnan(thread_cpu.ratio):
        reasons.append(
            f"event-log executor CPU time ratio {thread_cpu.ratio:.2f} ({_ci(thread_cpu)}; includes interrupt "
            "work charged to the executors)"
        )
    if not math.isnan(rho):
        reasons.append(f"backlog vs task completions per second: Spearman rho = {rho:.2f} (p = {rho_p:.2g})")
    strict = verdict
    att = attribute(base_runs, scen_runs, cpu_col, alpha=alpha, tolerance=cpu_tolerance, min_reps=min_reps)
    verdict, reasons = attributed_verdict(att, strict, reasons)
    excluded = len(base_out) + len(scen_out)
    if excluded:
        which = [f"{i} ({baseline})" for i in base_out] + [f"{i} ({scenario})" for i in scen_out]
        reasons.append(f"{excluded} successful run(s) without a job time left out: {', '.join(which)}")
    if base_bad or scen_bad:  # first: it is about the data, not the verdict
        bad = [f"{i} ({baseline})" for i in base_bad] + [f"{i} ({scenario})" for i in scen_bad]
        reasons.insert(0, f"invalid data: {len(bad)} run(s) with a job time of 0 s or less left out: {', '.join(bad)}")
    return Diagnosis(
        scenario, baseline, verdict, reasons, job, cpu, task_cpu,
        mean(idle_b), mean(idle_s), mean(wait_b), mean(wait_s), rho, rho_p, n_b, n_s,
        thread_cpu=thread_cpu, cpu_measure="user" if use_user else "thread", fetch=fetch,
        control=control if cpu_ctl is not None else None, cpu_vs_control=cpu_ctl, excluded=excluded,
        strict_verdict=strict, attribution=att,
    )  # fmt: skip


# -- over a results file --------------------------------------------------------------------------
def _traffic(spec: ExperimentSpec | None) -> bool:
    return spec is not None and spec.cross_traffic.active


def _without_traffic(spec: ExperimentSpec) -> str:
    """The spec but its cross traffic (and what only names or varies the experiment), comparable as text."""
    import json

    return json.dumps(spec.model_dump(mode="json", exclude={"cross_traffic", "experiment", "matrix", "cases"}),
                      sort_keys=True)  # fmt: skip


def baseline_pairs(specs: Mapping[str, ExperimentSpec | None]) -> list[tuple[str, str]]:
    """(scenario label, baseline label): each scenario with cross traffic and the scenario that is
    identical except that it has none (``specs``: label -> spec, as ``Store.scenario_specs``)."""
    quiet = {_without_traffic(s): label for label, s in specs.items() if s is not None and not _traffic(s)}
    pairs = []
    for label, s in specs.items():
        if s is not None and _traffic(s) and _without_traffic(s) in quiet:
            pairs.append((label, quiet[_without_traffic(s)]))
    return pairs


def _endpoints_removed(spec: ExperimentSpec) -> str:
    import json

    exclude: dict[str, Any] = {"experiment": True, "matrix": True, "cases": True, "cross_traffic": {"source", "sink"}}
    return json.dumps(spec.model_dump(mode="json", exclude=exclude), sort_keys=True)


def control_of(specs: Mapping[str, ExperimentSpec | None]) -> dict[str, str]:
    """scenario label -> a load-matched control: a scenario with cross traffic that differs from it
    only in the traffic's source/sink (the same load, elsewhere). Whether the control is off the
    job's path is checked with the data (its fetch wait must not grow)."""
    lab = {label: s for label, s in specs.items() if s is not None}
    out = {}
    for label, s in lab.items():
        if not _traffic(s):
            continue
        for other, o in lab.items():
            same_load = _endpoints_removed(o) == _endpoints_removed(s)
            if other != label and _traffic(o) and o.traffic_endpoints() != s.traffic_endpoints() and same_load:
                out[label] = other
                break
    return out


def diagnose_store(
    db: object, scenario: str | None = None, baseline: str | None = None, max_rep: int | None = None, **kw: object
) -> list[Diagnosis]:
    """Diagnose every (scenario, baseline) pair in a results file, or the one named; ``max_rep``: only
    the runs of the first repetitions (a sequential look, ``sequential.py``)."""
    from shufflelab.results import Store

    store = Store(db)  # type: ignore[arg-type]
    specs = store.scenario_specs()
    labels = list(specs)
    known = ", ".join(labels) or "none"
    if any(s is not None and s.workload.name == "mapreduce" for s in specs.values()):
        raise ValueError(
            "a MapReduce replay has no Spark tasks: the starvation diagnosis needs their fetch wait and CPU time "
            "(the report's seed 002 section compares the job times)"
        )
    for option, label in (("--scenario", scenario), ("--baseline", baseline)):
        if label is not None and label not in labels:
            raise ValueError(f"{option} {label!r}: no scenario has this label (known labels: {known})")
    if scenario is not None and scenario == baseline:
        raise ValueError(f"--baseline {baseline!r} is the scenario itself: name a different scenario")
    pairs: list[tuple[str, str | None]]
    if scenario is not None:
        pairs = [(scenario, baseline)] if baseline else [p for p in baseline_pairs(specs) if p[0] == scenario]
        if not pairs or pairs[0][1] is None:
            raise ValueError(f"scenario {scenario!r} has no baseline without cross traffic; name one with --baseline")
    elif baseline is not None:
        # every scenario with cross traffic against the named baseline
        pairs = [(label, baseline) for label in labels if label != baseline and _traffic(specs[label])]
        if not pairs:
            raise ValueError(f"--baseline {baseline!r}: no scenario with cross traffic to compare with it")
    else:
        pairs = list(baseline_pairs(specs))
    runs = store.query("SELECT r.*, s.label FROM runs r JOIN scenarios s USING (scenario_id) WHERE r.status = 'ok'")
    if max_rep is not None:
        runs = runs[runs["rep"] <= max_rep]
    if "total_cores" not in runs.columns or runs["total_cores"].isna().any():
        cores = {lbl: len(sp.hosts_with("spark-worker")) * sp.spark.worker_cores
                 for lbl, sp in specs.items() if sp is not None}  # fmt: skip
        runs["total_cores"] = [cores.get(lbl) for lbl in runs["label"]]
    controls = control_of(specs)
    out = []
    for s_label, b_label in pairs:
        assert b_label is not None
        sr = runs[runs["label"] == s_label]
        br = runs[runs["label"] == b_label]
        ids_s = list(sr["run_id"])
        ids_b = list(br["run_id"])
        st = _tasks_of(store, ids_s)
        bt = _tasks_of(store, ids_b)
        qs = store.query(
            f"SELECT run_id, t, backlog_bytes FROM queue_samples WHERE run_id IN ({_placeholders(ids_s)})", ids_s
        ) if ids_s else pd.DataFrame()  # fmt: skip
        ctl = controls.get(s_label)
        cr = runs[runs["label"] == ctl] if ctl is not None else None
        out.append(diagnose(s_label, b_label, br, sr, bt, st, qs, control=ctl, control_runs=cr, **kw))  # type: ignore[arg-type]
    return out


def _placeholders(ids: list[str]) -> str:
    return ",".join("?" for _ in ids) or "NULL"


def _tasks_of(store: object, run_ids: list[str]) -> pd.DataFrame:
    if not run_ids:
        return pd.DataFrame(columns=["run_id", "executor_cpu_ms", "launch_at_ms", "finish_at_ms"])
    return store.query(  # type: ignore[attr-defined,no-any-return]
        f"SELECT * FROM tasks WHERE run_id IN ({_placeholders(run_ids)})", run_ids
    )
