"""The experiment report's figures (matplotlib, Agg): job times, backlog, bytes, CPU vs job time,
FCT and fetch progress."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from shufflelab.report.data import CC_KEY, UDP_KEY, Data  # noqa: E402
from shufflelab.results import Store  # noqa: E402
from shufflelab.stats import MIN_N  # noqa: E402


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
    period_ms = float(d.spec.telemetry.queue_period_ms)
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
