"""Experiment reports: tables and figures from a results store, as HTML and Markdown.

The job-time table follows seed 000's Table 1 when the matrix varies congestion control (rows:
the other varied values, columns: congestion control). Every report states how the experiment
is scaled relative to the seed and what this host could not emulate.
"""

from __future__ import annotations

import base64
import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from shufflelab.results import Store, StoreError  # noqa: E402
from shufflelab.stats import MIN_N, Comparison, compare, summarize  # noqa: E402

CC_KEY = "tcp.congestion_control"
UDP_KEY = "cross_traffic.udp_percent"


@dataclass
class ReportPaths:
    html: Path
    markdown: Path
    figures: list[Path]
    headline: list[str] = field(default_factory=list)  # the report's finding, as in its Headline section


@dataclass
class Data:
    name: str
    description: str
    spec: dict[str, Any]
    runs: pd.DataFrame  # one row per run, with the scenario's matrix values as columns
    keys: list[str]  # varied matrix keys
    environment: dict[str, Any]


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
    spec = json.loads(exp.loc[0, "spec_json"])
    runs, keys = store.runs_with_values()
    env: dict[str, Any] = {}
    if not runs.empty and runs["environment_json"].notna().any():
        env = json.loads(runs["environment_json"].dropna().iloc[-1])
    return Data(str(exp.loc[0, "name"]), str(exp.loc[0, "description"] or ""), spec, runs, keys, env)


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


def _finish(fig: plt.Figure, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- figures ---------------------------------------------------------------------------------------
def _interval_bars(
    ax: Axes, xs: list[float], means: list[float], lows: list[float], highs: list[float], ns: list[int]
) -> None:
    """95 % CI bars where there is an interval (n >= MIN_N), and an 'n = k' note over every bar
    whose interval is withheld (none is drawn with zero length)."""
    have = [k for k, (lo, hi) in enumerate(zip(lows, highs, strict=True)) if math.isfinite(lo) and math.isfinite(hi)]
    if have:
        ax.errorbar(
            [xs[k] for k in have], [means[k] for k in have],
            yerr=[[means[k] - lows[k] for k in have], [highs[k] - means[k] for k in have]],
            fmt="none", ecolor="black", capsize=3, lw=1,
        )  # fmt: skip
    for k, (x, m, n) in enumerate(zip(xs, means, ns, strict=True)):
        if k not in have and math.isfinite(m):
            ax.annotate(f"n = {n}", (x, m), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7)


def fig_job_times(d: Data, table: pd.DataFrame, path: Path) -> Path:
    """Mean job time per scenario; 95 % CI bars only where a scenario has >= MIN_N successful runs."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    hue = CC_KEY if CC_KEY in d.keys else None
    xkey = UDP_KEY if UDP_KEY in d.keys else None
    if hue and xkey:
        xs = sorted(table[xkey].unique())
        hues = list(dict.fromkeys(table[hue]))
        width = 0.8 / max(1, len(hues))
        for i, h in enumerate(hues):
            sub = table[table[hue] == h].set_index(xkey)

            def col(name: str, default: float = float("nan"), sub: pd.DataFrame = sub) -> list[Any]:
                return [sub[name].get(x, default) for x in xs]

            pos = [j + (i - (len(hues) - 1) / 2) * width for j in range(len(xs))]
            means = col("job_mean_s")
            ax.bar(pos, means, width, label=str(h))
            _interval_bars(ax, pos, means, col("job_ci_low_s"), col("job_ci_high_s"), col("n", 0))
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels([f"{x:g} %" for x in xs])
        ax.set_xlabel("UDP cross traffic (% of bottleneck rate)")
        ax.legend(title="congestion control")
    else:
        labels = table["scenario"].tolist()
        pos = list(range(len(labels)))
        means = table["job_mean_s"].tolist()
        ax.bar(pos, means, color="#4c72b0")
        _interval_bars(ax, pos, means, table["job_ci_low_s"].tolist(), table["job_ci_high_s"].tolist(),
                       table["n"].tolist())  # fmt: skip
        ax.set_xticks(pos)
        ax.set_xticklabels(labels, rotation=20, ha="right")
    ax.set_ylim(bottom=0)
    ax.set_ylabel(f"job time (s), mean; 95 % CI if n >= {MIN_N}")
    ax.set_title("Spark job time")
    ax.grid(axis="y", alpha=0.3)
    _finish(fig, path)
    return path


def _chosen_runs(d: Data) -> pd.DataFrame:
    """The first successful run of the scenario with the most cross traffic, and of its baseline."""
    ok = d.runs[d.runs["status"] == "ok"]
    if ok.empty:
        return ok
    if UDP_KEY in d.keys:
        hi = ok[ok[UDP_KEY] == ok[UDP_KEY].max()].head(1)
        lo = ok[ok[UDP_KEY] == ok[UDP_KEY].min()]
        if CC_KEY in d.keys and not hi.empty:
            lo = lo[lo[CC_KEY] == hi.iloc[0][CC_KEY]]
        return pd.concat([lo.head(1), hi])
    return ok.head(1)


def fig_backlog(
    d: Data, db: Path, path: Path, pairs: list[tuple[str, str]] | None = None
) -> tuple[Path, list[str]] | None:
    """Backlog in bytes and packets over time, the scenario with cross traffic and its baseline.

    With several shaped router ports (topology ``star``) the backlog is summed over them per
    sample: the router's total egress queue, which is what the seed's router reported."""
    chosen = _chosen_runs(d)
    ok = d.runs[d.runs["status"] == "ok"]
    for scen, base in pairs or []:
        a, b = ok[ok["label"] == scen].head(1), ok[ok["label"] == base].head(1)
        if not a.empty and not b.empty:
            chosen = pd.concat([b, a])
            break
    if chosen.empty:
        return None
    store = Store(db)
    period_ms = float(d.spec.get("telemetry", {}).get("queue_period_ms", 100))
    fig, axes = plt.subplots(2, 1, figsize=(9, 5.2), sharex=True)
    labels = []
    for _, run in chosen.iterrows():
        q = store.query(
            # one sampling round reads every port within a few ms: bin by the period, sum the ports
            "SELECT min(t) AS t, sum(backlog_bytes) AS backlog_bytes, sum(backlog_packets) AS backlog_packets "
            "FROM (SELECT t, dev, backlog_bytes, backlog_packets, CAST(floor(t * 1000 / ?) AS BIGINT) AS k "
            "FROM queue_samples WHERE run_id = ?) GROUP BY k ORDER BY k",
            [period_ms, run["run_id"]],
        )
        jobs = store.query("SELECT min(submitted_at_ms) AS s FROM jobs WHERE run_id = ?", [run["run_id"]])
        if q.empty:
            continue
        t0 = jobs.loc[0, "s"] / 1000.0 if not jobs.empty and pd.notna(jobs.loc[0, "s"]) else q["t"].iloc[0]
        label = f"{run['label']} (rep {run['rep']})"
        labels.append(label)
        axes[0].plot(q["t"] - t0, q["backlog_bytes"] / 1e3, lw=0.8, label=label)
        axes[1].plot(q["t"] - t0, q["backlog_packets"], lw=0.8, label=label)
    if not labels:  # no queue samples (e.g. a store rebuilt from the exported tables): no empty figure
        plt.close(fig)
        return None
    axes[0].set_ylabel("backlog (kB)")
    axes[1].set_ylabel("backlog (packets)")
    axes[1].set_xlabel("time since the first Spark job started (s)")
    axes[0].set_title(f"Router egress backlog, all shaped ports (sampled every {period_ms:g} ms)")
    axes[0].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    _finish(fig, path)
    return path, labels


def _legend_outside(ax: Axes, **kw: Any) -> None:
    """The legend right of the axes, where it cannot cover data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kw)


def log_limits(values: list[float]) -> tuple[float, float]:
    """Limits of a log axis that show every positive value with room: from the decade at or below
    the smallest value / 1.3 to the decade at or above the largest x 1.3."""
    lo, hi = min(values), max(values)
    return 10.0 ** math.floor(math.log10(lo / 1.3)), 10.0 ** math.ceil(math.log10(hi * 1.3))


def fig_bytes(d: Data, path: Path) -> Path | None:
    ok = d.runs[(d.runs["status"] == "ok") & d.runs["bottleneck_tx_bytes"].notna()]
    if ok.empty:
        return None
    remote = (pd.to_numeric(ok["remote_bytes_read"], errors="coerce").astype(float) / 1e6).tolist()
    sent = (pd.to_numeric(ok["bottleneck_tx_bytes"], errors="coerce").astype(float) / 1e6).tolist()
    shown = [v for v in remote + sent if math.isfinite(v) and v > 0]  # a log axis has no place for 0
    if not shown:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.4))
    for offset, vals, label in (
        (-0.2, remote, "remote shuffle bytes read (event log)"),
        (0.2, sent, "bytes sent by the bottleneck (qdisc)"),
    ):
        keep = [(i + offset, v) for i, v in enumerate(vals) if math.isfinite(v) and v > 0]
        ax.bar([x for x, _ in keep], [v for _, v in keep], 0.4, label=label)
    ax.set_yscale("log")
    ax.set_ylim(*log_limits(shown))  # every bar inside the axes, whatever the autoscaler would pick
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    if len(ok) <= 60:
        ax.set_xticks(list(range(len(ok))))
        ax.set_xticklabels(
            [f"{lbl} #{r}" for lbl, r in zip(ok["label"], ok["rep"], strict=True)],
            rotation=70,
            ha="right",
            fontsize=7,
        )
    else:  # too many runs to name each one legibly
        ax.set_xlabel(f"{len(ok)} successful runs, in start order")
    ax.set_ylabel("MB (log scale)")
    ax.set_title("Bytes through the bottleneck vs shuffle bytes fetched remotely, per run")
    _legend_outside(ax, fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    _finish(fig, path)
    return path


def fig_cpu_vs_job(d: Data, table: pd.DataFrame, path: Path) -> Path | None:
    """Mean executor CPU time against mean job time per scenario, both axes from 0 so that a flat
    CPU looks flat; 95 % CI bars where a scenario has >= MIN_N runs."""
    rows = table[table["job_mean_s"].notna() & table["cpu_mean_s"].notna()] if not table.empty else table
    if rows.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 4.4))
    cmap = plt.get_cmap("tab10" if len(rows) <= 10 else "tab20")
    x_top = y_top = 0.0
    for k, (_, r) in enumerate(rows.iterrows()):
        x, y = float(r["job_mean_s"]), float(r["cpu_mean_s"])
        xlo, xhi, ylo, yhi = (float(r[c]) for c in ("job_ci_low_s", "job_ci_high_s", "cpu_ci_low_s", "cpu_ci_high_s"))
        both = all(math.isfinite(v) for v in (xlo, xhi, ylo, yhi))
        ax.errorbar(
            [x], [y],
            xerr=[[x - xlo], [xhi - x]] if both else None, yerr=[[y - ylo], [yhi - y]] if both else None,
            fmt="o", capsize=3, color=cmap(k % cmap.N), label=f"{r['scenario']} (n = {int(r['n'])})",
        )  # fmt: skip
        x_top, y_top = max(x_top, xhi if both else x), max(y_top, yhi if both else y)
    ax.set_xlim(0, x_top * 1.1)
    ax.set_ylim(0, y_top * 1.15)
    ax.set_xlabel("job time (s)")
    ax.set_ylabel("executor CPU time, all tasks (s)")
    ax.set_title("CPU time vs job time, both axes from 0\n(flat CPU while job time rises = waiting on the network)",
                 fontsize=10)  # fmt: skip
    _legend_outside(ax, fontsize=7, title=f"scenario (95 % CI if n >= {MIN_N})", title_fontsize=7)
    ax.grid(alpha=0.3)
    _finish(fig, path)
    return path


def fig_fct(db: Path, pairs: list[tuple[str, str]], path: Path) -> Path | None:
    """Box plots of shuffle-read FCT per data-volume bucket, each scenario next to its baseline."""
    from shufflelab import fct

    store = Store(db)
    labels = list(dict.fromkeys([b for _, b in pairs] + [s for s, _ in pairs]))
    frames = []
    for label in labels:
        t = store.query(
            "SELECT t.* FROM tasks t JOIN runs r USING (run_id) JOIN scenarios s USING (scenario_id) "
            "WHERE r.status = 'ok' AND s.label = ?",
            [label],
        )
        if t.empty:
            continue
        fl = fct.flows(t)
        fl = fl[(fl["kind"] == "read") & (fl["fct_ms"] > 0)]
        fl["scenario"] = label
        frames.append(fl)
    if not frames:
        return None
    data = pd.concat(frames)
    buckets = [b for b in fct.BUCKET_LABELS if b in set(data["bucket"])]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        series = [data[(data["scenario"] == label) & (data["bucket"] == b)]["fct_ms"].tolist() for b in buckets]
        pos = [j + (i - (len(labels) - 1) / 2) * width for j in range(len(buckets))]
        keep = [(p, s) for p, s in zip(pos, series, strict=True) if s]
        if not keep:
            continue
        bp = ax.boxplot([s for _, s in keep], positions=[p for p, _ in keep], widths=width * 0.9, patch_artist=True,
                        showfliers=True, flierprops={"markersize": 2})  # fmt: skip
        colour = plt.get_cmap("tab10")(i)
        for patch in bp["boxes"]:
            patch.set_facecolor(colour)
            patch.set_alpha(0.6)
        ax.plot([], [], color=colour, lw=6, alpha=0.6, label=label)
    ax.set_yscale("log")
    ax.set_xticks(range(len(buckets)))
    ax.set_xticklabels(buckets)
    ax.set_xlabel("remote shuffle data read by the task")
    ax.set_ylabel("read FCT per task (ms, log scale)")
    ax.set_title("Shuffle-read flow completion time per task, by data volume")
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    _finish(fig, path)
    return path


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
    specs = {row["label"]: json.loads(row["spec_json"]) for _, row in Store(db).query(
        "SELECT label, spec_json FROM scenarios").iterrows()}  # fmt: skip
    runs = ok[["run_id", "label"]].copy()
    runs["rate_mbps"] = [specs[lbl]["topology"]["bottleneck"]["rate_mbps"] for lbl in runs["label"]]
    runs["kind"] = [specs[lbl]["topology"].get("kind", "shared") for lbl in runs["label"]]
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


def fig_fetch_progress(db: Path, pairs: list[tuple[str, str]], path: Path) -> Path | None:
    """From the task listener's heartbeat lines: the distribution of a waiting task's fetch rate
    per heartbeat interval (intervals in which the task spent time blocked on fetches), each
    scenario next to its baseline. Starved tasks sit at the left: blocked, yet receiving little."""
    from shufflelab import listener

    store = Store(db)
    labels = list(dict.fromkeys([b for _, b in pairs] + [s for s, _ in pairs]))
    try:
        prog = store.query(
            "SELECT s.label, p.run_id, p.app_index, p.t_ms, p.task, p.stage, p.executor, p.remote_bytes, "
            "p.fetch_wait_ms, p.remote_reqs_ms FROM task_progress p JOIN runs r USING (run_id) "
            "JOIN scenarios s USING (scenario_id) WHERE r.status = 'ok'"
        )
    except Exception:  # noqa: BLE001 - results files from before the listener have no such table
        return None
    if prog.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 4.2))
    drawn = 0
    for i, label in enumerate(labels):
        p = prog[prog["label"] == label]
        if p.empty:
            continue
        rates = pd.concat([listener.fetch_rates(g) for _, g in p.groupby(["run_id", "app_index"])], ignore_index=True)
        waiting = rates[(rates["wait_ms"] > 0) & (rates["bytes"] >= 0)]
        if waiting.empty:
            continue
        x = (waiting["rate_Bps"].clip(lower=1e3) / 1e6).sort_values().to_numpy()
        y = [(k + 1) / len(x) for k in range(len(x))]
        ax.step(x, y, where="post", color=plt.get_cmap("tab10")(i), label=f"{label} ({len(x)} intervals)")
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xscale("log")
    ax.set_xlabel("remote fetch rate in an interval with fetch wait (MB/s, log; < 1 kB/s drawn at 1 kB/s)")
    ax.set_ylabel("fraction of intervals")
    ax.set_title("Fetch progress of waiting tasks (task listener, one sample per executor heartbeat)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    _finish(fig, path)
    return path


# -- text ----------------------------------------------------------------------------------------------
SLOWDOWN_NOTE = (
    "job_ratio = mean job time with the cross traffic / without it (0 % UDP), the same for executor CPU time "
    "(cpu_ratio). One inference: Welch's t-test (unequal variances) of 'mean with = ratio x mean without'; "
    "the 95 % CI is the set of ratios that test does not reject (Fieller's method), so it excludes 1 exactly "
    f"when p < 0.05. With fewer than {MIN_N} successful runs on a side there is no interval, p or verdict."
)


def _comparison_line(scenario: str, baseline: str, c: Comparison) -> str:
    n = f"n = {c.n_baseline}/{c.n_treatment}"
    if math.isnan(c.ratio):
        return f"{scenario} vs {baseline}: no successful run with a job time on a side ({n})"
    head = f"{scenario} vs {baseline}: job time x{c.ratio:.2f} ({c.percent_change:+.0f} %)"
    if c.too_few:
        return f"{head}, {n}: too few runs for an interval/verdict (need {MIN_N} per side)"
    return f"{head}, 95 % CI {c.ci_text()}, Welch p = {_p_text(c)}, {n}: {verdict(c)}"


def vcc_headline(closure: pd.DataFrame | None) -> list[str]:
    """Seed 002's finding: the share of the legacy hosts' gap that VCC closes, per number of pairs."""
    lines = []
    for _, r in (closure if closure is not None else pd.DataFrame()).iterrows():
        if not math.isfinite(r["closure"]):
            continue
        ci = (f"bootstrap 95 % CI {r['closure_ci_low']:.3f}-{r['closure_ci_high']:.3f}"
              if math.isfinite(r["closure_ci_low"]) else "no interval")  # fmt: skip
        kind = {"lower": "a lower", "upper": "an upper"}.get(str(r["closure_bound"]))
        bound = f"; legacy runs timed out, so {kind} bound" if kind else ""
        lines.append(
            f"{int(r['pairs'])} competing pairs: VCC closes {r['closure']:.3f} of the legacy-ECN gap ({ci}{bound})."
        )
    return lines


def headline(
    table: pd.DataFrame,
    slow: pd.DataFrame | None,
    diagnoses: list[Any],
    not_ok: int = 0,
    first: list[str] | None = None,
) -> list[str]:
    """The report's finding in a few lines: ``first`` (an experiment's own finding), then each scenario
    with cross traffic against its baseline (job-time ratio, interval, p, verdict; and the starvation
    diagnosis), else the job-time range of the successful runs and how many runs did not finish."""
    return (first or []) + _headline(table, slow, diagnoses, not_ok)


def _headline(table: pd.DataFrame, slow: pd.DataFrame | None, diagnoses: list[Any], not_ok: int) -> list[str]:
    if diagnoses:
        return [f"{_comparison_line(x.scenario, x.baseline, x.job)}; starvation diagnosis: {x.verdict}."
                for x in diagnoses]  # fmt: skip
    if slow is not None and not slow.empty:
        keys = [c for c in slow.columns if c not in ("udp_percent", "n", "job_ratio", "job_ci_95", "p_welch",
                                                     "verdict", "cpu_ratio", "cpu_ci_95")]  # fmt: skip
        lines = []
        for _, r in slow.iterrows():
            where = ", ".join(f"{k}={r[k]}" for k in keys)
            head = f"{where + ', ' if where else ''}UDP at {r['udp_percent']:g} % vs none"
            head += f": job time x{r['job_ratio']:.2f}, n = {r['n']}"
            if r["verdict"].startswith("too few"):
                lines.append(f"{head}: too few runs for an interval/verdict (need {MIN_N} per side).")
            else:
                lines.append(f"{head}, 95 % CI {r['job_ci_95']}, Welch p = {r['p_welch']}: {r['verdict']}.")
        return lines
    measured = table[table["n"] > 0] if not table.empty else table
    if measured.empty:
        return ["No successful run: nothing was measured (see 'Runs that did not finish')."]
    lo = measured.loc[measured["job_mean_s"].idxmin()]
    hi = measured.loc[measured["job_mean_s"].idxmax()]
    unfinished = f"; {not_ok} run(s) did not finish (see 'Runs that did not finish')" if not_ok else ""
    return [
        f"{int(measured['n'].sum())} successful runs over {len(measured)} scenario(s); mean job time from "
        f"{lo['job_mean_s']:.1f} s ({lo['scenario']}, n = {lo['n']}) to {hi['job_mean_s']:.1f} s "
        f"({hi['scenario']}, n = {hi['n']}){unfinished}."
    ]


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

SEED_SCALE = {
    "sort-aggregate": "Seed 000 used 1 master + 4 workers (1 core each), a 1 Gbit/s link with 10 ms added delay, "
    "400-1000 partitions and 500-600 M rows, and DCTCP as the third congestion control.",
    "small-records": "Seed 001 used 7 VMs (master + 4 executors of 1 core / 2 GB, a traffic VM, a central router "
    "with RED under a 10 Gbit/s HTB class), 2 ms delay, DCTCP + ECN, 100 M records and 10 runs per scenario.",
}
SEED_SCALE["mapreduce"] = (
    "Seed 002 used MRemu (Hadoop MapReduce traffic from job traces, no compute) on 2 switches joined by a "
    "1 Gbit/s link with 8 servers per switch at 1 Gbit/s, iperf TCP pairs on ECN-capable hosts, 10 runs per point."
)
SEED_SCALE["groupby-test"] = SEED_SCALE["small-records"].replace("100 M records", "Spark's GroupByTest")


def selftest_fact(d: Data) -> str | None:
    """One line on the link self-tests recorded with the runs (None if no run had one)."""
    checks: dict[tuple[str, str], dict[str, Any]] = {}
    n_runs = 0
    for env in d.runs.get("environment_json", pd.Series(dtype=object)).dropna():
        rows = json.loads(env).get("selftest") or []
        n_runs += bool(rows)
        for r in rows:
            checks[(str(r.get("port")), json.dumps(r.get("rate_mbps")))] = r
    if not checks:
        return None
    bad = [r for r in checks.values() if not r.get("ok")]
    ratios = [r["rate_ratio"] for r in checks.values() if r.get("rate_ratio") is not None]
    span = f" (goodput / configured rate {min(ratios):.2f}-{max(ratios):.2f})" if ratios else ""
    if not bad:
        return f"Link self-test before the runs: every checked port within tolerance{span}; {n_runs} runs covered."
    return (
        f"Link self-test: {len(bad)} port configuration(s) deviated{span} -- "
        + "; ".join(f"{r['port']} at {r['rate_mbps']:g} Mbit/s: {r['problem']}" for r in bad)
        + " (telemetry.selftest = 'warn': the runs went on; read their network results with care)."
    )


def user_app_line(w: dict[str, Any]) -> str:
    """What a user application workload was, for the report: not a built-in, its entry point and inputs."""
    entry = Path(w["script"]).name if w.get("script") else f"{w.get('main_class')} in {Path(w.get('jar') or '').name}"
    args = " ".join(w.get("args") or []) or "no arguments"
    conf = ", ".join(f"{k}={v}" for k, v in (w.get("conf") or {}).items())
    return (
        f"Workload: the user's own application {entry} ({args}{'; conf ' + conf if conf else ''}), "
        "not one of the lab's built-in workloads: its data sizes are whatever it was given here."
    )


def scale_note(d: Data) -> list[str]:
    s = d.spec
    hosts = s.get("hosts", {})
    workers = [h for h, v in hosts.items() if "spark-worker" in v.get("roles", [])]
    link = s["topology"]["bottleneck"]
    params = s["workload"].get("params", {})
    varied = {
        json.dumps(json.loads(v)["workload"], sort_keys=True)
        for v in d.runs.get("values_json", [])
        if "workload" in json.loads(v)
    }
    if varied:  # the matrix replaces the whole workload: show what actually ran
        params = {"varied": "; ".join(sorted(varied))}
    mr = s["workload"]["name"] == "mapreduce"
    mr_hosts = [h for h, v in hosts.items() if "mapreduce" in v.get("roles", [])]
    who = (
        f"{len(mr_hosts)} MapReduce hosts (trace replay over real TCP, no Hadoop)"
        if mr
        else f"{len(workers)} workers x {s['spark'].get('worker_cores', 1)} core(s)"
    )
    lines = [
        f"Scaled to one host ({d.environment.get('cpus', '?')} CPUs): {who}, "
        f"topology '{s['topology'].get('kind', 'shared')}' with a "
        f"{link['rate_mbps']:g} Mbit/s bottleneck, workload {s['workload']['name']}"
        + (" " + ", ".join(f"{k}={v}" for k, v in params.items()) if params else "")
        + ".",
    ]
    seed = SEED_SCALE.get(str(s["workload"]["name"]))
    if seed:
        lines.append(seed)
    if s["workload"]["name"] == "app":
        lines.append(user_app_line(s["workload"]))
    caps = d.environment.get("capabilities", {})
    missing_q = [q for q in ("netem", "red") if q not in caps.get("qdiscs", [])]
    missing_cc = [c for c in ("dctcp",) if c not in caps.get("congestion_controls", [])]
    emu = d.environment.get("emulation") or {}
    if emu.get("datapath") == "switch":
        # the union over the runs: scenarios differ (e.g. which hosts run dctcp or vcc)
        items: list[str] = []
        for env in d.runs.get("environment_json", pd.Series(dtype=object)).dropna():
            for item in (json.loads(env).get("emulation") or {}).get("emulated_by_switch", []):
                if item not in items:
                    items.append(item)
        items = items or list(emu.get("emulated_by_switch", []))
        lines.append("Network emulated by shufflelab's userspace switch (over all scenarios): " + "; ".join(items))
    elif missing_q or missing_cc:
        lines.append(
            "The kernel has no "
            + ", ".join([f"{q} qdisc" for q in missing_q] + [f"{c} congestion control" for c in missing_cc])
            + "; this experiment ran on the kernel datapath (HTB + FIFO), so it has no added delay, no RED/ECN "
            "marking and no DCTCP. Specs that ask for them run on the userspace switch "
            "(e.g. experiments/starvation-red.toml)."
        )
    if caps.get("irq_time_accounting") is False and not mr:
        lines.append(
            "Executor CPU time from the event log includes interrupt work (packet forwarding) charged to the "
            "executors by this kernel (no IRQ time accounting); see docs/design.md, 'CPU time and interrupts'."
        )
    lines.append(
        f"Environment: kernel {d.environment.get('kernel', '?')}, pyspark {d.environment.get('pyspark', '?')}, "
        f"shufflelab {d.environment.get('shufflelab_commit') or '?'}. All figures are measured on the emulated "
        "fabric, none simulated."
    )
    return lines


def _md_table(df: pd.DataFrame, index: bool = False) -> str:
    df2 = df.reset_index() if index else df
    cols = [str(c) for c in df2.columns]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df2.iterrows():
        cells = []
        for v in r.tolist():
            cells.append(_fmt(v, 3) if isinstance(v, float) else str(v))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _html_table(df: pd.DataFrame, index: bool = False) -> str:
    return str(
        (df.reset_index() if index else df).to_html(
            index=False, float_format=lambda v: _fmt(v, 3), border=0, classes="t", na_rep="–"
        )
    )


def write(db: Path, out: Path | None = None) -> ReportPaths:
    """Write ``report.html``, ``report.md`` and ``figures/*.png`` for the experiment in ``db``."""
    d = load(db)
    out = out or db.parent / f"{d.name}-report"
    figdir = out / "figures"
    figdir.mkdir(parents=True, exist_ok=True)
    for stale in figdir.glob("*.png"):  # a re-written report keeps no figure of an earlier version
        stale.unlink()
    table = scenario_table(d)
    t000 = seed000_table(d, table)
    slow = slowdown_table(d)
    figures: list[tuple[str, Path]] = []
    if not table.empty:
        figures.append(
            (
                f"Job time per scenario (mean; 95 % CI where n ≥ {MIN_N}, else the n is shown).",
                fig_job_times(d, table, figdir / "job_times.png"),
            )
        )
    from shufflelab import diagnose as dg
    from shufflelab import vcc

    # a MapReduce replay has no Spark tasks: the Spark analyses (diagnosis, FCT, what-if) do not apply
    mapreduce = d.spec.get("workload", {}).get("name") == "mapreduce"
    seed002 = vcc.applies(d.keys, d.runs)
    pairs = [] if mapreduce else dg.baseline_pairs(Store(db).query("SELECT label, spec_json FROM scenarios"))
    bl = None if seed002 else fig_backlog(d, db, figdir / "backlog.png", pairs)
    if bl:
        figures.append((f"Bottleneck backlog over time: {', '.join(bl[1])}.", bl[0]))
    fb = fig_bytes(d, figdir / "bytes.png")
    if fb:
        figures.append(("Bytes through the bottleneck vs remote shuffle bytes, per run.", fb))
    diagnoses = dg.diagnose_store(db) if pairs else []
    diag_table = pd.DataFrame([x.row() for x in diagnoses]) if diagnoses else None
    ff = fig_fct(db, pairs, figdir / "fct.png") if pairs else None
    if ff:
        figures.append(("Shuffle-read FCT per task by data volume (log scale), scenarios and baselines.", ff))
    fp = fig_fetch_progress(db, pairs, figdir / "fetch_progress.png") if pairs else None
    if fp:
        figures.append(("Fetch rate of tasks blocked on fetches, per heartbeat interval (task listener).", fp))
    fc = None if mapreduce else fig_cpu_vs_job(d, table, figdir / "cpu_vs_job.png")
    if fc:
        figures.append((f"Executor CPU time vs job time per scenario (mean; 95 % CI where n ≥ {MIN_N}; axes from 0).",
                        fc))  # fmt: skip

    vcc_cells: list[vcc.Cell] = []
    vcc_table = None
    if seed002:
        specs = dict(Store(db).query("SELECT label, spec_json FROM scenarios").itertuples(index=False, name=None))
        prepared = vcc.prepare(d.runs, specs)
        obs = vcc.observations(prepared)
        if not obs.empty:
            vcc_cells = vcc.cells(obs)
            vcc_table = vcc.closure_table(obs)
            note = "open marker + arrow: some runs timed out (mean is a lower bound)"
            figures.insert(0, ("Seed 002: job time vs competing pairs per host kind (95 % CI).",
                               vcc.figure(vcc_cells, figdir / "vcc_job_times.png", note)))  # fmt: skip
        vb = vcc.fig_backlog(Store(db), prepared, d.spec, figdir / "vcc_backlog.png")
        if vb:
            figures.insert(1, ("Seed 002: bottleneck backlog over time per host kind at the most competing pairs.", vb))
    shuf = shuffle_table(d, db)
    fault_tab = faults_table(d, db)
    from shufflelab.ndp import report as ndp_report

    ndp = ndp_report.load(db)
    ndp_tabs: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame] | None = None
    if ndp is not None:
        ndp_runs, ndp_conds = ndp
        ndp_tabs = (
            ndp_report.policy_table(ndp_runs, ndp_conds, ndp_report.choices(db, ndp_runs, ndp_conds)),
            ndp_report.bytes_table(ndp_runs, ndp_conds),
            ndp_report.picks_table(db, ndp_runs, ndp_conds),
        )
        nf = ndp_report.figure(ndp_tabs[0], ndp_conds, figdir / "ndp_policies.png")
        if nf:
            figures.insert(0, ("Seed 003: mean query time per pushdown policy and condition.", nf))
    from shufflelab import whatif

    wi_error: str | None = None
    try:
        wi = whatif.validate(db, pairs) if pairs else None
    except Exception as exc:  # noqa: BLE001 - a model failure must not cost the report
        wi, wi_error = None, f"{type(exc).__name__}: {exc}"
    if wi is not None and wi.empty:
        wi = None
    n_ok = int((d.runs["status"] == "ok").sum())
    failed = d.runs[d.runs["status"] != "ok"][["label", "rep", "status", "cause"]]
    ok = d.runs[d.runs["status"] == "ok"]
    crossing = (ok["bottleneck_tx_bytes"] >= ok["remote_bytes_read"]).sum() if not ok.empty else 0
    facts = [
        f"{len(d.runs)} runs recorded, {n_ok} ok, {len(failed)} not ok.",
        f"Shuffle bytes crossed the bottleneck in {crossing} of {n_ok} successful runs "
        "(bottleneck bytes sent >= remote shuffle bytes read).",
    ]
    st = selftest_fact(d)
    if st:
        facts.append(st)
    scale = scale_note(d)
    summary_cols = [*d.keys, "n", "not_ok", "job_mean_s", "job_sd_s", "job_ci_95_s",
                    "cpu_mean_s", "cpu_sd_s", "remote_mb", "bottleneck_mb", "max_backlog_kb"]  # fmt: skip
    head = headline(table, slow, diagnoses, len(failed), vcc_headline(vcc_table))
    summary = table[[c for c in summary_cols if c in table.columns]] if not table.empty else table

    md = [f"# {d.name}", "", d.description, "", "## Headline", ""] + [f"- {line}" for line in head]
    md += ["", "## Scale and limits", ""]
    md += [f"- {line}" for line in scale] + ["", "## Facts", ""] + [f"- {f}" for f in facts]
    if t000 is not None:
        md += [
            "",
            "## Job time (s, mean ± σ) -- rows: cross traffic, columns: congestion control",
            "",
        ]
        md += [_md_table(t000, index=True)]
    if slow is not None:
        md += [
            "",
            "## Slowdown from cross traffic (ratio of mean job times, 95 % CI, Welch p)",
            "",
            SLOWDOWN_NOTE,
            "",
        ]
        md += [_md_table(slow)]
    if vcc_cells:
        grid = pd.DataFrame([{"pairs": c.pairs, "case": c.case, "cell": c.text()} for c in vcc_cells])
        grid = grid.pivot(index="pairs", columns="case", values="cell")
        grid.columns.name = None
        md += ["", "## Seed 002: job time (s, mean [95 % CI]) by competing pairs and host kind", "",
               VCC_NOTE, "", _md_table(grid, index=True)]  # fmt: skip
        if vcc_table is not None and not vcc_table.empty:
            md += ["", "Gap closed by VCC: (legacy − vcc) / (legacy − ecn), bootstrap 95 % CI:", "",
                   _md_table(vcc_table)]  # fmt: skip
    if diag_table is not None:
        md += ["", "## Starvation diagnosis (`shufflelab diagnose`)", "", _md_table(diag_table), ""]
        for x in diagnoses:
            md += [f"- **{x.scenario}** vs {x.baseline}: **{x.verdict}** -- " + "; ".join(x.reasons)]
    md += ["", "## Per scenario", "", _md_table(summary)]
    if shuf is not None:
        md += ["", "## Shuffle path share (mean over runs)", "", SHUFFLE_NOTE, "", _md_table(shuf)]
    if wi is not None:
        md += ["", "## What-if check: predicted vs measured job time without the cross traffic", "", WHATIF_NOTE, "",
               _md_table(wi)]  # fmt: skip
    elif wi_error:
        md += ["", f"(what-if check skipped: {wi_error})"]
    if fault_tab is not None:
        md += ["", "## Faults and Spark's recovery", "", FAULTS_NOTE, "", _md_table(fault_tab)]
    if ndp_tabs is not None:
        md += ["", "## Near-data processing: time per policy, Net-Aware vs Oracle", "", ndp_report.NOTE, "",
               _md_table(ndp_tabs[0]), "", "### Bytes per policy", "", _md_table(ndp_tabs[1])]  # fmt: skip
        if not ndp_tabs[2].empty:
            md += ["", "### What Net-Aware picked and why (estimates: none / filter / filter+project / full)", "",
                   _md_table(ndp_tabs[2])]  # fmt: skip
    if not failed.empty:
        md += ["", "## Runs that did not finish", "", _md_table(failed)]
    md += ["", "## Figures", ""]
    for caption, p in figures:
        md += [f"![{caption}](figures/{p.name})", "", f"*{caption}*", ""]
    md_path = out / "report.md"
    md_path.write_text("\n".join(md) + "\n")

    def img(p: Path) -> str:
        return "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode()

    h = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>shufflelab: {html.escape(d.name)}</title><style>",
        "body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;color:#222;padding:0 1em}",
        "table.t{border-collapse:collapse;font-size:13px;margin:1em 0;display:block;overflow-x:auto}",
        "table.t td,table.t th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:right}",
        "table.t th{background:#f3f3f3}figure{margin:1.5em 0}img{max-width:100%}",
        "figcaption{font-size:13px;color:#555}.note{background:#fff8e1;padding:.6em 1em;border-radius:4px}",
        "</style></head><body>",
        f"<h1>{html.escape(d.name)}</h1><p>{html.escape(d.description)}</p>",
        "<h2>Headline</h2><ul>",
        *[f"<li>{html.escape(line)}</li>" for line in head],
        "</ul>",
        "<h2>Scale and limits</h2><div class='note'><ul>",
        *[f"<li>{html.escape(line)}</li>" for line in scale],
        "</ul></div><h2>Facts</h2><ul>",
        *[f"<li>{html.escape(f)}</li>" for f in facts],
        "</ul>",
    ]
    if t000 is not None:
        h += ["<h2>Job time (s, mean ± σ)</h2><p>rows: cross traffic; columns: congestion control</p>"]
        h += [_html_table(t000, index=True)]
    if slow is not None:
        h += ["<h2>Slowdown from cross traffic</h2>", f"<p>{html.escape(SLOWDOWN_NOTE)}</p>",
              _html_table(slow)]  # fmt: skip
    if vcc_cells:
        h += ["<h2>Seed 002: job time by competing pairs and host kind</h2>", f"<p>{html.escape(VCC_NOTE)}</p>",
              _html_table(grid, index=True)]  # fmt: skip
        if vcc_table is not None and not vcc_table.empty:
            h += ["<p>Gap closed by VCC: (legacy − vcc) / (legacy − ecn), bootstrap 95 % CI</p>",
                  _html_table(vcc_table)]  # fmt: skip
    if diag_table is not None:
        h += ["<h2>Starvation diagnosis</h2>", _html_table(diag_table), "<ul>"]
        h += [f"<li><b>{html.escape(x.scenario)}</b> vs {html.escape(x.baseline)}: <b>{x.verdict}</b> &mdash; "
              f"{html.escape('; '.join(x.reasons))}</li>" for x in diagnoses]  # fmt: skip
        h += ["</ul>"]
    h += ["<h2>Per scenario</h2>", _html_table(summary)]
    if shuf is not None:
        h += ["<h2>Shuffle path share</h2>", f"<p>{html.escape(SHUFFLE_NOTE)}</p>", _html_table(shuf)]
    if wi is not None:
        h += ["<h2>What-if check: predicted vs measured without the cross traffic</h2>",
              f"<p>{html.escape(WHATIF_NOTE)}</p>", _html_table(wi)]  # fmt: skip
    if fault_tab is not None:
        h += ["<h2>Faults and Spark's recovery</h2>", f"<p>{html.escape(FAULTS_NOTE)}</p>", _html_table(fault_tab)]
    if ndp_tabs is not None:
        h += ["<h2>Near-data processing: time per policy, Net-Aware vs Oracle</h2>",
              f"<p>{html.escape(ndp_report.NOTE)}</p>", _html_table(ndp_tabs[0]), "<h3>Bytes per policy</h3>",
              _html_table(ndp_tabs[1])]  # fmt: skip
        if not ndp_tabs[2].empty:
            h += ["<h3>What Net-Aware picked and why</h3>", _html_table(ndp_tabs[2])]
    if not failed.empty:
        h += ["<h2>Runs that did not finish</h2>", _html_table(failed)]
    h += ["<h2>Figures</h2>"]
    for caption, p in figures:
        h += [f"<figure><img src='{img(p)}' alt='{html.escape(caption)}'><figcaption>{html.escape(caption)}"
              "</figcaption></figure>"]  # fmt: skip
    h += ["</body></html>"]
    html_path = out / "report.html"
    html_path.write_text("\n".join(h))
    return ReportPaths(html_path, md_path, [p for _, p in figures], head)
