"""Figures (PNG) and a Markdown report from simulation results, in the style of the SparkNDP
paper's figures: mean query time per pushdown policy, one group of bars per matrix point."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from shufflelab.sim.runner import load  # noqa: E402
from shufflelab.sim.spec import POLICIES, POLICY_LABELS  # noqa: E402

STATIC = ("no-pushdown", "filter", "filter+project", "full")
TIE = 5e-4  # policies within 0.05 % of the fastest share the win


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (experiment, matrix point, policy): mean over seeds of the mean job time, its standard
    deviation, the mean number of pushed operators and the runs' wall time."""
    g = runs.groupby(["experiment", "scenario_id", "label", "x_value", "policy"], dropna=False)
    out = g.agg(
        mean_job_s=("mean_job_s", "mean"),
        std_job_s=("mean_job_s", "std"),
        pushed_ops=("mean_pushed_ops", "mean"),
        seeds=("seed", "nunique"),
        wall_s=("wall_s", "mean"),
    ).reset_index()
    return out.fillna({"std_job_s": 0.0})


def comparisons(summary: pd.DataFrame) -> pd.DataFrame:
    """Per matrix point: the best static policy, the overall winner and Net-Aware's gaps."""
    rows = []
    for (exp, sid, label, x), grp in summary.groupby(
        ["experiment", "scenario_id", "label", "x_value"], dropna=False, sort=False
    ):
        t = dict(zip(grp["policy"], grp["mean_job_s"], strict=True))
        static = {p: t[p] for p in STATIC if p in t}
        best_static = min(static, key=static.__getitem__) if static else None
        row = {"experiment": exp, "scenario_id": sid, "label": label, "x_value": x}
        row.update({p: t.get(p) for p in POLICIES})
        fastest = min(t.values())
        row["winner"] = [p for p in POLICIES if p in t and t[p] <= fastest * (1 + TIE)]
        row["best_static"] = best_static
        na = t.get("net-aware")
        if na is not None and best_static is not None:
            row["na_vs_best_static_pct"] = 100 * (na - static[best_static]) / static[best_static]
            np_lf = [t[p] for p in ("no-pushdown", "full") if p in t]
            if np_lf:
                row["na_vs_best_np_lflow_pct"] = 100 * (na - min(np_lf)) / min(np_lf)
        if na is not None and "oracle" in t:
            row["na_vs_oracle_pct"] = 100 * (na - t["oracle"]) / t["oracle"]
        for pol, short in (("net-aware-chain", "chain"), ("net-aware-fluid", "fluid")):
            v = t.get(pol)
            if v is not None and best_static is not None:
                row[f"{short}_vs_best_static_pct"] = 100 * (v - static[best_static]) / static[best_static]
            if v is not None and "oracle" in t:
                row[f"{short}_vs_oracle_pct"] = 100 * (v - t["oracle"]) / t["oracle"]
        rows.append(row)
    return pd.DataFrame(rows)


def figure(summary: pd.DataFrame, title: str, x_label: str, path: Path) -> Path:
    """Grouped bars: x = matrix point, one bar per policy, y = mean query time (s)."""
    points = summary.drop_duplicates("scenario_id")[["scenario_id", "label", "x_value"]]
    policies = [p for p in POLICIES if p in set(summary["policy"])]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(points) + 2), 4.2))
    width = 0.8 / max(1, len(policies))
    for i, pol in enumerate(policies):
        sub = summary[summary["policy"] == pol].set_index("scenario_id")
        ys = [sub.loc[s, "mean_job_s"] if s in sub.index else 0 for s in points["scenario_id"]]
        es = [sub.loc[s, "std_job_s"] if s in sub.index else 0 for s in points["scenario_id"]]
        xs = [k + (i - (len(policies) - 1) / 2) * width for k in range(len(points))]
        ax.bar(xs, ys, width, yerr=es, label=POLICY_LABELS[pol], capsize=2)
    ticks = [(f"{x:g}" if pd.notna(x) else lbl) for x, lbl in zip(points["x_value"], points["label"], strict=True)]
    ax.set_xticks(range(len(points)), ticks)
    ax.set_xlabel(x_label)
    ax.set_ylabel("mean query execution time (s, simulated)")
    ax.set_title(textwrap.fill(title, 70), fontsize=10)
    ax.legend(fontsize=8, ncols=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _fmt(v: object) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:,.1f}"
    return str(v)


def markdown(cmp: pd.DataFrame, policies: list[str]) -> str:
    head = ["point"] + [POLICY_LABELS[p] for p in policies]
    gaps = [
        ("na_vs_best_static_pct", "NA vs best static"),
        ("na_vs_oracle_pct", "NA vs Oracle"),
        ("chain_vs_best_static_pct", "chain vs best static"),
        ("chain_vs_oracle_pct", "chain vs Oracle"),
        ("fluid_vs_best_static_pct", "fluid vs best static"),
        ("fluid_vs_oracle_pct", "fluid vs Oracle"),
    ]
    gaps = [(k, h) for k, h in gaps if k in cmp.columns]
    head += ["winner"] + [h for _, h in gaps]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in cmp.iterrows():
        cells = [str(r["label"])] + [_fmt(r[p]) for p in policies]
        cells.append(" = ".join(POLICY_LABELS[p] for p in r["winner"]))
        for key, _ in gaps:
            v = r.get(key)
            cells.append("–" if v is None or pd.isna(v) else f"{v:+.1f} %")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(db_paths: list[Path], out_dir: Path) -> Path:
    """Write ``<experiment>.png`` per experiment and ``README.md`` covering all of them. Every file
    is read before anything is written: a file that is not a simulator store (``FileNotFoundError``,
    :class:`~shufflelab.sim.runner.NotSimResults`) leaves no output folder behind."""
    loaded = [load(db) for db in db_paths]
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = [
        "# Simulation results (seed 003, SparkNDP)",
        "",
        "Written by `shufflelab sim report`; times are simulated (virtual) seconds, the mean over",
        "seeds of each run's mean query time. NA = Net-Aware (the paper's model, exactly); chain =",
        "Net-Aware (chain), this project's extension that prices each prefix whole, as a",
        "storage → network → compute pipeline; fluid = Net-Aware (fluid), the chain pricing with a",
        "per-transfer fluid view of the network that also charges the delay a choice imposes on",
        "the transfers already in it. Gaps are",
        "(policy − other) / other: negative means the policy is faster. The Oracle is greedy (per",
        "job, every prefix simulated with the earlier jobs fixed and later ones absent), so a",
        "dynamic policy can beat it. Model and assumptions: ../../design-sim.md.",
        "",
    ]
    for tables in loaded:
        runs = tables["sim_runs"]
        for _, exp in tables["sim_experiments"].iterrows():
            sub = runs[runs["experiment"] == exp["name"]]
            if sub.empty:
                continue
            summary = summarize(sub)
            cmp = comparisons(summary)
            policies = [p for p in POLICIES if p in set(summary["policy"])]
            spec = json.loads(exp["spec_json"])
            x_label = exp["x_key"] or "scenario"
            png = figure(summary, f"{exp['figure']}: {exp['description']}", x_label, out_dir / f"{exp['name']}.png")
            seeds = int(summary["seeds"].max())
            wall = float(sub["wall_s"].sum())
            parts += [
                f"## {exp['name']} — {exp['figure']}",
                "",
                f"{exp['description']}. Spec: `{exp['spec_path']}`; {seeds} seed(s) per point; "
                f"{len(sub)} runs in {wall:.2f} s of wall time in the Rust core.",
                "",
                f"![{exp['name']}]({png.name})",
                "",
                markdown(cmp, policies),
                "",
                "Mean pushed operators per policy (Net-Aware and Oracle choose per job): "
                + ", ".join(
                    f"{POLICY_LABELS[p]} {summary[summary['policy'] == p]['pushed_ops'].mean():.2f}" for p in policies
                ),
                "",
                "Operators: "
                + ", ".join(
                    f"{o['name']} ({o['cycles_per_byte']:g} cycles/B, reduction {o['reduction_factor']:g})"
                    for o in spec["workload"]["operators"]
                ),
                "",
            ]
    md = out_dir / "README.md"
    md.write_text("\n".join(parts))
    return md
