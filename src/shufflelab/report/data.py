"""The experiment report's data: the store loaded once, and its tables (per scenario, seed 000's
Table 1, slowdowns, shuffle shares, faults) with the notes that explain them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from shufflelab.results import Store, StoreError
from shufflelab.stats import MIN_N, Comparison, compare, summarize

if TYPE_CHECKING:
    from shufflelab.spec import ExperimentSpec

CC_KEY = "tcp.congestion_control"
UDP_KEY = "cross_traffic.udp_percent"


@dataclass
class Data:
    name: str
    description: str
    spec: ExperimentSpec  # the experiment's spec, validated again (Store.experiment_spec)
    runs: pd.DataFrame  # one row per run, with the scenario's matrix values as columns
    keys: list[str]  # varied matrix keys
    environment: dict[str, Any]
    scenarios: dict[str, ExperimentSpec | None] = field(default_factory=dict)  # label -> Store.scenario_specs()


VCC_NOTE = (
    "Mean over runs with a bootstrap 95 % CI. A run that reached its run_timeout_s is censored: it enters "
    "at its timeout, so a mean marked ≥ is a lower bound. Where legacy runs were censored the true closure "
    "lies between the value shown and 1 (closure_bound: lower / upper; exact without censoring)."
)


def load(db: Path) -> Data:
    store = Store(db)
    exp = store.query("SELECT * FROM experiments LIMIT 1")
    if exp.empty:
        raise StoreError(f"{db}: a results file with no experiment recorded")
    spec = store.experiment_spec()
    if spec is None:
        raise StoreError(
            f"{db}: Spark event logs imported by shufflelab analyze, not a lab experiment: "
            "their report is the application report (shufflelab.appreport)"
        )
    runs, keys = store.runs_with_values()
    env: dict[str, Any] = {}
    if not runs.empty and runs["environment_json"].notna().any():
        env = json.loads(runs["environment_json"].dropna().iloc[-1])
    name, description = str(exp.loc[0, "name"]), str(exp.loc[0, "description"] or "")
    return Data(name, description, spec, runs, keys, env, store.scenario_specs())


def _fmt(x: float, digits: int = 1) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def scenario_table(d: Data) -> pd.DataFrame:
    """Per scenario: n, mean ± σ and 95 % CI of job time, CPU time, shuffle bytes, bottleneck bytes."""
    ok = d.runs[d.runs["status"] == "ok"]
    rows = []
    for label, g in d.runs.groupby("label", sort=False):
        good = ok[ok["label"] == label]
        s = summarize(good["job_time_s"].tolist())
        cpu = summarize(good["executor_cpu_s"].tolist())
        # a whole-table matrix value (e.g. a workload) is shown by its name
        row: dict[str, Any] = {
            k: (v.get("name", json.dumps(v)) if isinstance(v, dict) else v)
            for k, v in ((k, g.iloc[0][k]) for k in d.keys)
        }
        row.update(
            scenario=label,
            n=s.n,
            not_ok=int((g["status"] != "ok").sum()),
            job_mean_s=s.mean,
            job_sd_s=s.sd,
            job_ci_low_s=s.ci_low if s.has_interval() else float("nan"),
            job_ci_high_s=s.ci_high if s.has_interval() else float("nan"),
            job_ci_95_s=s.ci_text(),
            cpu_mean_s=cpu.mean,
            cpu_ci_low_s=cpu.ci_low if cpu.has_interval() else float("nan"),
            cpu_ci_high_s=cpu.ci_high if cpu.has_interval() else float("nan"),
            cpu_sd_s=cpu.sd,
            remote_mb=good["remote_bytes_read"].mean() / 1e6 if s.n else float("nan"),
            bottleneck_mb=good["bottleneck_tx_bytes"].mean() / 1e6 if s.n else float("nan"),
            max_backlog_kb=good["bottleneck_max_backlog_bytes"].mean() / 1e3 if s.n else float("nan"),
        )
        rows.append(row)
    return pd.DataFrame(rows)


def seed000_table(d: Data, table: pd.DataFrame) -> pd.DataFrame | None:
    """Job time (s, mean ± σ) with rows = other matrix values, columns = congestion control."""
    if CC_KEY not in d.keys or table.empty:
        return None
    row_keys = [k for k in d.keys if k != CC_KEY]

    def text(m: float, s: float, n: int) -> str:
        if n == 0:
            return "no run"
        return f"{_fmt(m)} ± {_fmt(s)}" if n >= 2 else f"{_fmt(m)} (n = 1)"

    cells = zip(table["job_mean_s"], table["job_sd_s"], table["n"], strict=True)
    cell = table.assign(cell=[text(m, s, n) for m, s, n in cells])
    if not row_keys:
        return cell.set_index(CC_KEY)[["cell"]].T
    pivot = cell.pivot_table(index=row_keys, columns=CC_KEY, values="cell", aggfunc="first", sort=False)
    pivot.columns.name = None
    return pivot


def verdict(c: Comparison) -> str:
    """One word for a job-time comparison, from the one inference of ``stats.compare``."""
    if c.too_few:
        return "too few runs for a verdict"
    if not c.has_interval:
        return "no verdict (no run-to-run variation)"
    if c.significant:
        return "slower" if c.ratio > 1 else "faster"
    return "no significant change"


def _p_text(c: Comparison) -> str:
    return "–" if math.isnan(c.p_value) else f"{c.p_value:.2g}"


def slowdown_table(d: Data) -> pd.DataFrame | None:
    """Each scenario vs the same scenario without UDP: ratio of mean job times, its 95 % CI and Welch p
    (one inference, ``stats.compare``; no interval or verdict below ``MIN_N`` runs a side)."""
    if UDP_KEY not in d.keys:
        return None
    ok = d.runs[d.runs["status"] == "ok"]
    others = [k for k in d.keys if k != UDP_KEY]
    rows = []
    for _, g in ok.groupby(others, sort=False) if others else [((), ok)]:
        base = g[g[UDP_KEY] == 0]["job_time_s"].tolist()
        if not base:
            continue
        for udp, h in g.groupby(UDP_KEY):
            if udp == 0:
                continue
            c = compare(base, h["job_time_s"].tolist())
            cpu = compare(g[g[UDP_KEY] == 0]["executor_cpu_s"].tolist(), h["executor_cpu_s"].tolist())
            row = {k: h.iloc[0][k] for k in others}
            row.update(
                udp_percent=udp,
                n=f"{c.n_baseline}/{c.n_treatment}",
                job_ratio=c.ratio,
                job_ci_95=c.ci_text(),
                p_welch=_p_text(c),
                verdict=verdict(c),
                cpu_ratio=cpu.ratio,
                cpu_ci_95=cpu.ci_text(),
            )
            rows.append(row)
    return pd.DataFrame(rows) if rows else None


def _holm(ps: list[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p values (nan stays nan, outside the family)."""
    idx = sorted((i for i, p in enumerate(ps) if not math.isnan(p)), key=lambda i: ps[i])
    out = [float("nan")] * len(ps)
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (len(idx) - rank) * ps[i]))
        out[i] = running
    return out


def cc_comparison_table(d: Data) -> pd.DataFrame | None:
    """At each value of the other varied keys: every pair of congestion controls compared (ratio of
    mean job times, its 95 % CI and Welch p, ``stats.compare``), p Holm-adjusted within the level,
    and the ranking by mean with ``<`` where the adjacent pair differs after the adjustment (pairs further
    apart that differ while every step between them shows ``≈`` are named after it)."""
    if CC_KEY not in d.keys:
        return None
    ok = d.runs[d.runs["status"] == "ok"]
    ccs = list(dict.fromkeys(d.runs[CC_KEY]))
    if len(ccs) < 2 or ok.empty:
        return None
    others = [k for k in d.keys if k != CC_KEY]
    rows: list[dict[str, Any]] = []
    for key, g in ok.groupby(others, sort=False) if others else [((), ok)]:
        times = {cc: g[g[CC_KEY] == cc]["job_time_s"].tolist() for cc in ccs}
        present = [cc for cc in ccs if times[cc]]
        order = sorted(present, key=lambda cc: sum(times[cc]) / len(times[cc]))
        pairs = [(a, b) for i, a in enumerate(order) for b in order[i + 1 :]]
        comps = [compare(times[a], times[b]) for a, b in pairs]
        holm = _holm([c.p_value if c.has_interval else float("nan") for c in comps])
        differs = {
            (a, b): c.has_interval and p < 1 - c.confidence for (a, b), c, p in zip(pairs, comps, holm, strict=True)
        }
        ranking = order[0] if order else ""
        for a, b in zip(order, order[1:], strict=False):
            ranking += (" < " if differs[(a, b)] else " ≈ ") + b
        # a pair that differs although the chain between them does not say so
        chain = [differs[(a, b)] for a, b in zip(order, order[1:], strict=False)]
        apart = [
            f"{order[i]} < {order[j]}"
            for i in range(len(order))
            for j in range(i + 2, len(order))
            if differs[(order[i], order[j])] and not any(chain[i:j])
        ]
        if apart:
            ranking += f" ({'; '.join(apart)})"
        if not any(c.has_interval for c in comps):  # '≈' would claim a test that was not made
            ranking = f"{', '.join(order)} by mean; too few runs to test"
        values = key if isinstance(key, tuple) else (key,)
        for (a, b), c, p in zip(pairs, comps, holm, strict=True):
            row: dict[str, Any] = dict(zip(others, values, strict=True))
            row.update(
                faster=a,
                slower=b,
                n=f"{c.n_baseline}/{c.n_treatment}",
                job_ratio=c.ratio,
                job_ci_95=c.ci_text(),
                p_welch=_p_text(c),
                p_holm="–" if math.isnan(p) else f"{p:.2g}",
                verdict=("differs" if differs[(a, b)] else "no significant difference")
                if c.has_interval
                else verdict(c),
                ranking=ranking,
            )
            rows.append(row)
    return pd.DataFrame(rows) if rows else None


def shuffle_table(d: Data, db: Path) -> pd.DataFrame | None:
    """Per scenario: the shuffle path's share of executor time and the network efficiency (mean over runs)."""
    from shufflelab import shuffle

    ok = d.runs[d.runs["status"] == "ok"]
    if ok.empty:
        return None
    tasks = Store(db).query(
        "SELECT t.run_id, t.app_index, t.stage_id, t.stage_attempt, t.host, t.launch_at_ms, t.finish_at_ms, "
        "t.executor_run_ms, t.fetch_wait_ms, t.shuffle_write_ms, t.remote_bytes FROM tasks t "
        "JOIN runs r USING (run_id) WHERE r.status = 'ok'"
    )
    if tasks.empty:
        return None
    runs = ok[["run_id", "label"]][[d.scenarios.get(lbl) is not None for lbl in ok["label"]]].copy()
    topologies = [d.scenarios[lbl].topology for lbl in runs["label"]]  # type: ignore[union-attr]
    runs["rate_mbps"] = [t.bottleneck.rate_mbps for t in topologies]
    runs["kind"] = [t.kind for t in topologies]
    per = shuffle.per_run(tasks, runs).merge(runs[["run_id", "label"]], on="run_id")
    if per.empty:
        return None
    g = per.groupby("label", sort=False)
    out = pd.DataFrame(
        {
            "n": g.size(),
            "read_share": g["read_share"].mean(),
            "write_share": g["write_share"].mean(),
            "shuffle_share": g["share"].mean(),
            "ideal_shuffle_s": g["ideal_shuffle_s"].mean(),
            "observed_shuffle_s": g["observed_shuffle_s"].mean(),
            "network_efficiency": g["network_efficiency"].mean(),
        }
    ).reset_index(names="scenario")
    return out


FAULTS_NOTE = (
    "Faults injected during the runs (spec [[faults]], timed from the SparkSession being up) and what Spark "
    "did about them, from the event logs: failed task attempts, fetch failures and stage re-attempts (means "
    "over runs), job time vs the scenario without faults. 'lasted' is the fault's measured duration."
)


def faults_table(d: Data, db: Path) -> pd.DataFrame | None:
    """Per scenario with injected faults: the faults, their measured duration, Spark's recovery and the
    job time against the runs without faults (None if no run had faults)."""
    store = Store(db)
    try:
        f = store.query("SELECT f.*, r.scenario_id FROM faults f JOIN runs r USING (run_id)")
    except Exception:  # noqa: BLE001 - results files from before fault injection have no such table
        return None
    if f.empty:
        return None
    runs = d.runs.copy()
    faulted = set(f["run_id"])
    base = runs[(runs["status"] == "ok") & ~runs["run_id"].isin(faulted)]
    base_mean = base["job_time_s"].mean() if not base.empty else float("nan")
    rows = []
    for label, g in runs[runs["run_id"].isin(faulted)].groupby("label", sort=False):
        fr = f[f["run_id"].isin(g["run_id"])]
        named = zip(fr["kind"], fr["host"], strict=True)
        kinds = ", ".join(sorted({f"{k}({h})" if isinstance(h, str) else k for k, h in named}))
        lasted = (fr["ended_at"] - fr["started_at"]).dropna()
        ok = g[g["status"] == "ok"]
        rows.append(
            {
                "scenario": label,
                "faults": kinds,
                "n": len(g),
                "ok": len(ok),
                "errors": int(fr["error"].notna().sum()),
                "lasted_s": round(float(lasted.mean()), 2) if not lasted.empty else None,
                "job_mean_s": round(float(ok["job_time_s"].mean()), 2) if not ok.empty else None,
                "vs_no_fault": round(float(ok["job_time_s"].mean() / base_mean), 2) if not ok.empty else None,
                "failed_tasks": round(float(g["failed_tasks"].mean()), 1) if "failed_tasks" in g else None,
                "fetch_failures": round(float(g["fetch_failures"].mean()), 1) if "fetch_failures" in g else None,
                "stage_reattempts": round(float(g["stage_reattempts"].mean()), 1) if "stage_reattempts" in g else None,
            }
        )
    return pd.DataFrame(rows)


SLOWDOWN_NOTE = (
    "job_ratio = mean job time with the cross traffic / without it (0 % UDP), the same for executor CPU time "
    "(cpu_ratio). One inference: Welch's t-test (unequal variances) of 'mean with = ratio x mean without'; "
    "the 95 % CI is the set of ratios that test does not reject (Fieller's method), so it excludes 1 exactly "
    f"when p < 0.05. With fewer than {MIN_N} successful runs on a side there is no interval, p or verdict."
)


CC_COMPARISON_NOTE = (
    "Each pair of congestion controls at one level of the other varied values: job_ratio = mean job time of "
    "the slower by mean / that of the faster, its 95 % CI and Welch p as in the slowdown table; p_holm is "
    "Holm-adjusted over the pairs of that level. ranking orders them by mean, '<' where that adjacent pair "
    "differs at 5 % after the adjustment, '≈' where it does not; in brackets, pairs that differ although "
    f"every step between them shows '≈'. Below {MIN_N} runs a side: no interval or verdict."
)


WHATIF_NOTE = (
    "Each run with cross traffic is replayed by shufflelab.whatif with its network waits (fetch wait, and "
    "scheduler delay and task-binary wait above the run's quiet floor) shortened by the bandwidth the UDP "
    "took (speedup = rate / (rate - UDP rate)); the prediction is compared with the "
    "measured runs of the same scenario without cross traffic (a real intervention). error = predicted "
    "mean / measured mean - 1."
)
SHUFFLE_NOTE = (
    "read/write share = fetch wait / shuffle write time over executor run time; network efficiency = "
    "the busiest bottleneck's shuffle bytes at its configured rate / the wall time of the stages that "
    "fetched remote data (1 = as fast as the link allows; see shufflelab/shuffle.py)."
)
