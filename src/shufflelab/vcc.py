"""Seed 002's analysis (not VCC itself: the VCC datapath is the userspace switch, ``crates/switch``):
job time vs competing TCP pairs for ECN, legacy and VCC hosts, as the report's seed-002 section shows it.

Inputs are the runs of an experiment whose matrix varies ``cross_traffic.tcp_pairs`` and whose cases
name the host kinds (by default ``ecn``, ``legacy``, ``vcc``). A run that hit its ``run_timeout_s``
is *censored*: its job took at least that long. Censored runs are kept at their timeout, so every
mean that includes one is a lower bound (shown as "≥").

Gap closure (how much of the legacy penalty VCC removes) per number of pairs::

    closure = (T_legacy − T_vcc) / (T_legacy − T_ecn)

1 = VCC as fast as ECN hosts, 0 = no better than legacy. With censored legacy runs (T_legacy a
lower bound) and T_vcc ≥ T_ecn, the value computed is a lower bound of the true closure; with
T_vcc < T_ecn it is above 1 and an upper bound (the true value lies between it and 1). The 95 % CI
is a bootstrap over runs within each case.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from shufflelab import netplan
from shufflelab.spec import ExperimentSpec

PAIRS_KEY = "cross_traffic.tcp_pairs"
CASES = ("ecn", "legacy", "vcc")


def applies(keys: list[str], runs: pd.DataFrame, cases: tuple[str, str, str] = CASES) -> bool:
    """Whether these runs form seed 002's comparison (pairs swept, the three cases present)."""
    return PAIRS_KEY in keys and "case" in keys and set(cases) <= set(runs["case"].dropna())


def observations(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per finished or censored run: pairs, case, time_s, censored.

    Timeouts enter at their run_timeout_s (read from the run's cause or the scenario spec); other
    failures are left out (they say nothing about the job's time)."""
    rows = []
    for r in runs.to_dict("records"):
        if r["status"] == "ok" and pd.notna(r["job_time_s"]):
            rows.append((int(r["_pairs"]), r["case"], float(r["job_time_s"]), False))
        elif r["status"] == "timeout" and pd.notna(r["_timeout"]):
            rows.append((int(r["_pairs"]), r["case"], float(r["_timeout"]), True))
    return pd.DataFrame(rows, columns=["pairs", "case", "time_s", "censored"])


def prepare(runs: pd.DataFrame, specs: Mapping[str, ExperimentSpec | None]) -> pd.DataFrame:
    """``runs`` (with matrix values as columns) plus ``_pairs`` and ``_timeout`` (from each scenario's spec)."""
    timeouts = {lbl: s.experiment.run_timeout_s for lbl, s in specs.items() if s is not None}
    out = runs.copy()
    out["_pairs"] = out[PAIRS_KEY].astype(int)
    out["_timeout"] = out["label"].map(timeouts)
    return out


@dataclass
class Cell:
    pairs: int
    case: str
    n: int
    n_censored: int
    mean_s: float
    ci_low_s: float
    ci_high_s: float

    @property
    def lower_bound(self) -> bool:
        return self.n_censored > 0

    def text(self) -> str:
        if self.n == 0:
            return "–"
        ge = "≥ " if self.lower_bound else ""
        tail = f" ({self.n_censored}/{self.n} timed out)" if self.n_censored else ""
        return f"{ge}{self.mean_s:.1f} [{self.ci_low_s:.1f}–{self.ci_high_s:.1f}]{tail}"


def _boot_means(x: np.ndarray, rng: np.random.Generator, b: int) -> np.ndarray:
    return rng.choice(x, size=(b, len(x)), replace=True).mean(axis=1)


def cells(obs: pd.DataFrame, b: int = 4000, seed: int = 0) -> list[Cell]:
    """Mean job time per (pairs, case) with a bootstrap 95 % CI (censored runs at their timeout)."""
    rng = np.random.default_rng(seed)
    out = []
    for (pairs, case), g in obs.groupby(["pairs", "case"], sort=True):
        x = g["time_s"].to_numpy(float)
        bm = _boot_means(x, rng, b) if len(x) > 1 else np.repeat(x.mean(), 2)
        out.append(Cell(int(pairs), str(case), len(x), int(g["censored"].sum()), float(x.mean()),
                        float(np.percentile(bm, 2.5)), float(np.percentile(bm, 97.5))))  # fmt: skip
    return out


def closure_table(obs: pd.DataFrame, b: int = 4000, seed: int = 0, cases: tuple[str, str, str] = CASES) -> pd.DataFrame:
    """Per number of pairs: mean time of each case, the legacy gap and the share VCC closes (95 % CI)."""
    ecn, legacy, vcc = cases
    rng = np.random.default_rng(seed)
    rows = []
    for pairs, g in obs.groupby("pairs", sort=True):
        x = {c: g[g["case"] == c]["time_s"].to_numpy(float) for c in cases}
        if any(len(v) == 0 for v in x.values()):
            continue
        m = {c: float(v.mean()) for c, v in x.items()}
        gap = m[legacy] - m[ecn]
        closure = (m[legacy] - m[vcc]) / gap if gap > 0 else float("nan")
        boot = {c: _boot_means(v, rng, b) for c, v in x.items()}
        bgap = boot[legacy] - boot[ecn]
        with np.errstate(divide="ignore", invalid="ignore"):
            bclos = np.where(bgap > 0, (boot[legacy] - boot[vcc]) / bgap, np.nan)
        bclos = bclos[np.isfinite(bclos)] if gap > 0 else np.array([])  # no gap: nothing to close
        censored = bool(g[g["case"] == legacy]["censored"].any())
        rows.append({
            "pairs": int(pairs),
            f"{ecn}_s": m[ecn], f"{legacy}_s": m[legacy], f"{vcc}_s": m[vcc],
            "legacy_censored": censored,
            "gap_s": gap,
            "closure": closure,
            "closure_ci_low": float(np.percentile(bclos, 2.5)) if len(bclos) > 10 else float("nan"),
            "closure_ci_high": float(np.percentile(bclos, 97.5)) if len(bclos) > 10 else float("nan"),
            # legacy censored: the true legacy mean is larger, so the true closure lies between the
            # value shown and 1 (a lower bound when VCC >= ECN, an upper bound when VCC < ECN)
            "closure_bound": ("lower" if m[vcc] >= m[ecn] else "upper") if censored else "exact",
        })  # fmt: skip
    return pd.DataFrame(rows)


def figure(cell_list: list[Cell], path, timeout_note: str = ""):  # noqa: ANN001, ANN201 - matplotlib types
    """Job time vs competing pairs, one line per case, 95 % CI bars; censored means as open markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    colors = {"ecn": "#4c72b0", "legacy": "#c44e52", "vcc": "#55a868"}
    names = {"ecn": "(a) ECN hosts (DCTCP)", "legacy": "(b) legacy hosts", "vcc": "(c) legacy hosts + VCC"}
    # ECN and VCC often coincide: different markers and a dashed line keep both visible
    styles = {"ecn": ("s", "--"), "legacy": ("o", "-"), "vcc": ("D", ":")}
    by_case: dict[str, list[Cell]] = {}
    for c in cell_list:
        by_case.setdefault(c.case, []).append(c)
    for case, cs in by_case.items():
        cs = sorted(cs, key=lambda c: c.pairs)
        x = [c.pairs for c in cs]
        y = [c.mean_s for c in cs]
        err = [[c.mean_s - c.ci_low_s for c in cs], [c.ci_high_s - c.mean_s for c in cs]]
        col = colors.get(case)
        marker, line = styles.get(case, ("o", "-"))
        ax.errorbar(x, y, yerr=err, capsize=4, marker=marker, linestyle=line, markerfacecolor="none", color=col,
                    label=names.get(case, case))  # fmt: skip
        for c in cs:
            if c.lower_bound:  # a lower bound: open marker and an arrow up
                ax.plot([c.pairs], [c.mean_s], marker="o", markersize=11, markerfacecolor="white",
                        markeredgecolor=col, zorder=5)  # fmt: skip
                ax.annotate("", xy=(c.pairs, c.mean_s * 1.18), xytext=(c.pairs, c.mean_s),
                            arrowprops={"arrowstyle": "->", "color": col})  # fmt: skip
    ax.set_xlabel("competing iperf3 TCP pairs (DCTCP hosts)")
    ax.set_ylabel("MapReduce job time (s), mean and 95 % CI")
    ax.set_xticks(sorted({c.pairs for c in cell_list}))
    ax.set_ylim(0, 1.3 * max(c.ci_high_s for c in cell_list))
    title = "Shuffle job time vs competing pairs"
    ax.set_title(title + (f"\n{timeout_note}" if timeout_note else ""), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fig_backlog(store, runs: pd.DataFrame, spec: ExperimentSpec, path):  # noqa: ANN001, ANN201 - Store, matplotlib
    """Bottleneck backlog over time at the largest number of pairs: one run per case (the first
    with samples, finished or timed out), summed over the router's ports per sampling round."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = int(runs["_pairs"].max()) if "_pairs" in runs.columns else int(runs[PAIRS_KEY].max())
    at = runs[(runs[PAIRS_KEY].astype(int) == top) & runs["status"].isin(["ok", "timeout"])]
    period_ms = float(spec.telemetry.queue_period_ms)
    red = netplan.bottleneck(spec).red
    fig, ax = plt.subplots(figsize=(8, 4))
    colors = {"ecn": "#4c72b0", "legacy": "#c44e52", "vcc": "#55a868"}
    drawn = 0
    for case in CASES:
        cand = at[at["case"] == case].sort_values("rep")
        for _, run in cand.iterrows():
            q = store.query(
                "SELECT min(t) AS t, sum(backlog_bytes) AS b FROM (SELECT t, backlog_bytes, "
                "CAST(floor(t * 1000 / ?) AS BIGINT) AS k FROM queue_samples WHERE run_id = ?) GROUP BY k ORDER BY k",
                [period_ms, run["run_id"]],
            )
            if q.empty:
                continue
            tail = " (timed out)" if run["status"] == "timeout" else ""
            mean_kb = q["b"].mean() / 1e3
            ax.plot(q["t"] - q["t"].iloc[0], q["b"] / 1e3, lw=0.8, color=colors.get(case),
                    label=f"{case}, rep {run['rep']}{tail}: mean {mean_kb:.0f} kB")  # fmt: skip
            drawn += 1
            break
    if not drawn:
        plt.close(fig)
        return None
    if red is not None and red.min_bytes:
        ax.axhline(
            red.min_bytes / 1e3, color="k", ls="--", lw=0.8, label=f"marking threshold {red.min_bytes / 1e3:g} kB"
        )
    ax.set_xlabel("time since the run's first sample (s)")
    ax.set_ylabel("bottleneck backlog (kB), both directions")
    ax.set_title(f"Inter-rack link backlog with {top} competing pairs (sampled every {period_ms:g} ms)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
