"""The NDP section of a report (workload ``tpch``): time per policy per condition, bytes across
the bottleneck, Net-Aware against the Oracle, and what Net-Aware picked and why.

A *condition* is one point of the experiment without the policy (storage cores, link rate, query,
single/stream). The metric is the mean query time of a run (one query: its time; a stream: the
mean over its queries), from the workload's own clock (DataFrame planning to collected answer).
The **Oracle** is the offline best: per condition, the static policy with the lowest mean over its
runs. Gap = Net-Aware's mean / Oracle's mean − 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from shufflelab.results import Store  # noqa: E402

STATIC = ("none", "filter", "filter+project", "full")
POLICY_KEY = "policy"
NOTE = (
    "Metric: mean query time per run (s). Oracle = the best static policy per condition, known only "
    "after running them all; gap = Net-Aware / Oracle − 1 (includes run-to-run noise); choice gap = the "
    "static policy Net-Aware chose (na_chose, when one for every query) / Oracle − 1: what the decision "
    "cost; policies that pushed the same operators (same_plan) count as one plan timed over all their runs, "
    "and gap_plan = Net-Aware / the best such plan − 1. Bytes: what the connector received from the "
    "proxies/DataNodes (MB, mean per run) and what the bottleneck ports sent (MB, includes Spark's own traffic)."
)


def load(db: Path) -> tuple[pd.DataFrame, list[str]] | None:
    """Runs of a tpch experiment with their values, metric and bytes; None if the store has none."""
    store = Store(db)
    try:
        q = store.query("SELECT run_id, avg(time_s) AS query_s, count(*) AS queries FROM ndp_queries GROUP BY 1")
        r = store.query(
            "SELECT run_id, sum(body_bytes) AS body_bytes,"
            " string_agg(DISTINCT coalesce(operators, ''), ' | ' ORDER BY coalesce(operators, '')) AS plan"
            " FROM ndp_reads GROUP BY 1"
        )
    except Exception:  # noqa: BLE001 - results files without NDP tables
        return None
    if q.empty:
        return None
    runs, keys = store.runs_with_values()
    runs = runs[runs["status"] == "ok"].merge(q, on="run_id").merge(r, on="run_id", how="left")
    # matrix keys are dotted paths (workload.params.policy): tables use their last part
    short = {k: k.rsplit(".", 1)[-1] for k in keys}
    runs = runs.rename(columns=short)
    keys = [short[k] for k in keys]
    if "rate_mbps" in keys:
        runs = runs.rename(columns={"rate_mbps": "rate"})
        keys = ["rate" if k == "rate_mbps" else k for k in keys]
    if POLICY_KEY not in runs.columns:
        return None
    conds = [k for k in keys if k != POLICY_KEY]
    for k in conds:
        runs[k] = runs[k].astype(str)
    return runs, conds


def policy_table(runs: pd.DataFrame, conds: list[str], choices: dict[tuple, str] | None = None) -> pd.DataFrame:
    """Per condition: mean query time per policy, the Oracle's policy and Net-Aware's gap to it.

    ``choices`` (condition → the one static policy Net-Aware chose for every query there, see
    :func:`choices`) adds ``choice_gap_pct``: what the *decision* cost, without the run-to-run
    noise between Net-Aware's own runs and the static runs. Static policies that pushed the same
    operators (column ``plan`` of the runs: Q14/Q19's aggregate sits above a join, so ``full``
    pushes what ``filter+project`` pushes) are one plan: the choice gap compares plans, each timed
    by the mean over all runs of its policies."""
    rows = []
    for cond, g in runs.groupby(conds, sort=True) if conds else [((), runs)]:
        cond = cond if isinstance(cond, tuple) else (cond,)
        row: dict[str, Any] = dict(zip(conds, cond, strict=True))
        means = g.groupby(POLICY_KEY)["query_s"].mean()
        ns = g.groupby(POLICY_KEY)["query_s"].count()
        for p in (*STATIC, "net-aware"):
            row[p] = round(float(means[p]), 2) if p in means else None
        static = {p: float(means[p]) for p in STATIC if p in means}
        row["n"] = int(ns.min()) if len(ns) else 0
        if len(static) == len(STATIC):  # the Oracle needs every static policy measured
            oracle = min(static, key=lambda p: static[p])
            row["oracle"] = oracle
            plan_of = _plans(g)
            st = g[g[POLICY_KEY].isin(STATIC)]
            plan_s = st.groupby(st[POLICY_KEY].map(plan_of))["query_s"].mean()
            if "net-aware" in means:
                row["gap_pct"] = round(100 * (float(means["net-aware"]) / static[oracle] - 1), 1)
                row["gap_plan_pct"] = round(100 * (float(means["net-aware"]) / float(plan_s.min()) - 1), 1)
            chosen = (choices or {}).get(tuple(str(c) for c in cond))
            if chosen in static:
                row["na_chose"] = chosen
                twins = [p for p in STATIC if p != chosen and plan_of[p] == plan_of[chosen]]
                if twins:
                    row["same_plan"] = "=".join([chosen, *twins])
                row["choice_gap_pct"] = round(100 * (plan_s[plan_of[chosen]] / plan_s.min() - 1), 1)
        rows.append(row)
    return pd.DataFrame(rows)


def _plans(g: pd.DataFrame) -> dict[str, str]:
    """Static policy → the operators it pushed (its most common plan); the policy itself when unknown."""
    out = {}
    for p in STATIC:
        runs_p = g[g[POLICY_KEY] == p]
        plans = runs_p["plan"].dropna() if "plan" in runs_p.columns else pd.Series(dtype=str)
        out[p] = str(plans.mode().iloc[0]) if len(plans) else p
    return out


def bytes_table(runs: pd.DataFrame, conds: list[str]) -> pd.DataFrame:
    """Per query and link rate (bytes do not depend on storage cores): MB received and MB the bottleneck sent."""
    keys = [k for k in conds if k != "storage_cores"]
    g = runs.groupby([*keys, POLICY_KEY], sort=True).agg(
        received_mb=("body_bytes", lambda s: round(float(s.mean()) / 1e6, 2)),
        bottleneck_mb=("bottleneck_tx_bytes", lambda s: round(float(s.mean()) / 1e6, 2)),
        n=("run_id", "count"),
    )
    return g.reset_index()


def _decisions(db: Path, runs: pd.DataFrame, conds: list[str]) -> pd.DataFrame:
    """Net-Aware's per-query decisions (policy, estimate) with their run's condition; empty if none."""
    na = runs[runs[POLICY_KEY] == "net-aware"]
    if na.empty:
        return pd.DataFrame()
    q = Store(db).query("SELECT run_id, i, policy, estimate_json FROM ndp_queries WHERE estimate_json IS NOT NULL")
    return q.merge(na[["run_id", *conds]], on="run_id")


def choices(db: Path, runs: pd.DataFrame, conds: list[str]) -> dict[tuple, str]:
    """Condition → the policy Net-Aware chose, where it chose the same one for every query there."""
    q = _decisions(db, runs, conds)
    if q.empty:
        return {}
    out = {}
    for cond, g in q.groupby(conds, sort=True) if conds else [((), q)]:
        cond = cond if isinstance(cond, tuple) else (cond,)
        picked = g["policy"].unique()
        if len(picked) == 1:
            out[tuple(str(c) for c in cond)] = str(picked[0])
    return out


def picks_table(db: Path, runs: pd.DataFrame, conds: list[str]) -> pd.DataFrame:
    """Net-Aware's choices per condition (share of queries per policy) and its estimate for one of them."""
    q = _decisions(db, runs, conds)
    if q.empty:
        return pd.DataFrame()
    rows = []
    for cond, g in q.groupby(conds, sort=True) if conds else [((), q)]:
        cond = cond if isinstance(cond, tuple) else (cond,)
        counts = g["policy"].value_counts()
        est = json.loads(g.iloc[0]["estimate_json"])
        t = est.get("terms", {})
        rows.append(
            {
                **dict(zip(conds, cond, strict=True)),
                "picked": ", ".join(f"{p} {n}/{len(g)}" for p, n in counts.items()),
                "est_s": " / ".join(f"{v:.1f}" for v in est["times_s"].values()),
                "crossing_mb": " / ".join(f"{v:g}" for v in t.get("crossing_mb", {}).values()),
                "storage_s": " / ".join(f"{v:.1f}" for v in t.get("storage_s", {}).values()),
                "storage_wait_s": t.get("storage_wait_s"),
            }
        )
    return pd.DataFrame(rows)


def figure(table: pd.DataFrame, conds: list[str], path: Path) -> Path | None:
    if table.empty:
        return None
    labels = [", ".join(str(r[k]) for k in conds) for _, r in table.iterrows()]
    policies = [p for p in (*STATIC, "net-aware") if p in table.columns and table[p].notna().any()]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(labels) * len(policies) / 2), 4.2))
    width = 0.8 / max(1, len(policies))
    for j, p in enumerate(policies):
        xs = [i + (j - (len(policies) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(xs, table[p].astype(float), width, label=p, hatch="//" if p == "net-aware" else None)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("mean query time (s)")
    ax.set_title("TPC-H through NDP: time per pushdown policy (" + ", ".join(conds) + ")", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path
