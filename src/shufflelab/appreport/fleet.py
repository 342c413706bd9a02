"""The fleet page: many applications of one ``shufflelab analyze`` store seen together.

Where the network's cost goes across the fleet and per application name (core-hours, the share in
fetch wait, the share of slots with no task running), the applications ranked by network cost, the
application report's "what pays off" summed over the fleet with the error the what-if replay showed
on the lab's own interventions (:data:`WHATIF_ERRORS`), and recurring applications (same name) as
time series with change points flagged and explained (the stage and the metric that moved).

Methods, stated once:

* **core time** of an application = its task slots (peak executor cores, else inferred) x its job
  time (first job submitted to last job end); fetch-wait share = sum of tasks' fetch wait / core
  time; idle share = 1 - sum of tasks' executor run time / core time (slots with no task running:
  waiting for data, for the scheduler or the driver -- a log cannot tell which).
* **network cost** = core-hours in fetch wait; applications are ranked by fetch-wait share of their
  core time (core-hours shown next to it), so a small application that only waits ranks above a
  big one that computes.
* **what pays off**: per application, the replay of :mod:`shufflelab.appreport.analysis` (fetch
  wait / k, relative to its own k = 1 answer) and the stage model for twice the executors; the
  fleet's saving is the sum of core time x predicted saved share. Each is a model estimate; its
  range applies the log replay's extreme errors measured on the lab's interventions of comparable
  size (:func:`error_range`) to every application alike (one with no predicted saving keeps 0) --
  not a confidence interval. The executor model has no measured
  error (the lab has not run that change) and says so; a congestion control (DCTCP) cannot be
  priced from a log at all (a log records no queue or congestion control).
* **change points** (:func:`change_point`): in each name's series of job times (ok runs, log scale),
  Welch's t-test between the runs before and after every split leaving >= 3 runs a side; the best
  split's p-value is Bonferroni-corrected for the splits tried, then Benjamini-Hochberg across the
  fleet's series (:data:`FDR`, scipy.stats.false_discovery_control); a series is flagged when the
  adjusted p-value is below FDR and the median changed by at least :data:`MIN_CHANGE`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats as sps  # noqa: E402

from shufflelab import document  # noqa: E402
from shufflelab.appreport import analysis  # noqa: E402
from shufflelab.appreport.analysis import App  # noqa: E402
from shufflelab.appreport.stores import load_all  # noqa: E402
from shufflelab.document import Document, Figure, Section, Table, md_text, signed  # noqa: E402
from shufflelab.results import Store, StoreError, reading  # noqa: E402

TOP = 25
"""Rows shown in a ranked table; the rest are counted."""
MIN_RUNS = 6
"""A series needs this many ok runs to be tested for a change point (3 a side)."""
MIN_SIDE = 3
FDR = 0.05
"""The false-discovery rate of the change points flagged across the fleet's series."""
MIN_CHANGE = 0.10
"""A change point is flagged only when the series' median job time moved by at least this share."""
SERIES_FIGURES = 6

# The what-if replay's measured error on the lab's own interventions: each row a committed report
# where the change the replay predicts (removing UDP cross traffic: the job's network k = rate /
# (rate - UDP) times faster) was actually run; error = predicted mean job time / measured mean - 1,
# for the lab's replay (``error_lab``: ``whatif.validate``, the "What-if check" of
# docs/results/<report>/report.md) and for the replay of a log (``error_log``: fetch wait only, the
# one this page uses). Computed by scripts/whatif_error_table.py into docs/whatif-error.tsv (a test
# checks these rows against it). Rows with k = 1 (UDP off the job's path) are no network change.
WHATIF_ERRORS: tuple[tuple[str, str, float, int, float, float], ...] = (
    ("cc-under-udp", "cc=cubic,udp=50", 2.0, 5, -0.009, 0.121),
    ("cc-under-udp", "cc=cubic,udp=90", 10.0, 5, -0.010, 0.522),
    ("cc-under-udp", "cc=cubic,udp=100", 50.0, 5, 0.454, 1.505),
    ("cc-under-udp", "cc=reno,udp=50", 2.0, 5, -0.022, 0.125),
    ("cc-under-udp", "cc=reno,udp=90", 10.0, 5, 0.011, 0.554),
    ("cc-under-udp", "cc=reno,udp=100", 50.0, 5, 0.339, 1.575),
    ("cc-under-udp", "cc=bbr,udp=50", 2.0, 5, 0.040, 0.178),
    ("cc-under-udp", "cc=bbr,udp=90", 10.0, 5, 0.027, 0.516),
    ("cc-under-udp", "cc=bbr,udp=100", 50.0, 5, 0.262, 1.077),
    ("cc-under-udp-switch", "cc=cubic,udp=50", 2.0, 6, -0.106, -0.003),
    ("cc-under-udp-switch", "cc=cubic,udp=90", 10.0, 4, -0.260, -0.065),
    ("cc-under-udp-switch", "cc=cubic,udp=100", 50.0, 3, -0.287, 0.008),
    ("cc-under-udp-switch", "cc=reno,udp=50", 2.0, 6, -0.114, -0.014),
    ("cc-under-udp-switch", "cc=reno,udp=90", 10.0, 3, -0.226, -0.031),
    ("cc-under-udp-switch", "cc=reno,udp=100", 50.0, 3, -0.275, 0.070),
    ("cc-under-udp-switch", "cc=dctcp,udp=50", 2.0, 6, -0.092, 0.005),
    ("cc-under-udp-switch", "cc=dctcp,udp=90", 10.0, 3, -0.249, -0.066),
    ("cc-under-udp-switch", "cc=dctcp,udp=100", 50.0, 3, -0.260, -0.062),
    ("starvation", "workload=small-records,apps=1,case=shared", 20.0, 10, -0.363, 0.177),
    ("starvation", "workload=small-records,apps=1,case=control", 1.0, 10, 0.122, 0.122),
    ("starvation", "workload=groupby-test,apps=1,case=shared", 20.0, 10, -0.132, 0.072),
    ("starvation-red", "workload=small-records,apps=1,case=shared", 20.0, 6, -0.517, -0.343),
    ("starvation-red", "workload=small-records,apps=1,case=control", 1.0, 4, -0.024, -0.024),
    ("starvation-red", "workload=groupby-test,apps=1,case=shared", 20.0, 4, -0.374, -0.224),
    ("starvation-control", "case=shared", 20.0, 10, -0.358, 0.147),
    ("starvation-control", "case=control", 1.0, 10, 0.076, 0.076),
    ("starvation-preliminary", "workload=small-records,apps=1,case=shared", 20.0, 4, -0.060, 0.271),
    ("starvation-preliminary", "workload=small-records,apps=1,case=control", 1.0, 4, 0.382, 0.382),
    ("user-app", "udp=75", 4.0, 3, 0.011, 0.338),
)
COMPARABLE_K = 10.0
"""The error range of a fix comes from the network changes the lab ran of at most this speed-up
(the 50 % and 90 % UDP runs and the demo): the size of the changes priced here (2x, 4x)."""


def error_table() -> pd.DataFrame:
    return pd.DataFrame(WHATIF_ERRORS, columns=["report", "scenario", "speedup", "runs", "error_lab", "error_log"])


def error_range(max_k: float = COMPARABLE_K) -> tuple[float, float]:
    """The log replay's most negative and most positive measured error over the network changes the
    lab ran with 1 < k <= ``max_k``."""
    e = [r[5] for r in WHATIF_ERRORS if 1 < r[2] <= max_k]
    return min(e), max(e)


def saved_range(saved_share: float) -> tuple[float, float]:
    """A predicted saved share of one application's job time under the log replay's measured error
    range: the true job time with the change = predicted / (1 + error)."""
    lo, hi = error_range()
    kept = 1 - saved_share
    a, b = 1 - kept / (1 + hi), 1 - kept / (1 + lo)
    return min(a, b), max(a, b)


# --------------------------------------------------------------------------------------------- data


def app_table(store: Store) -> pd.DataFrame:
    """One row per application: ids, name, status, job time, slots, core time and its shares."""
    q = """
        SELECT a.run_id, coalesce(a.app_index, 0) AS app_index, a.app_id, coalesce(s.label, a.app_id) AS name,
               a.status, a.job_time_s, a.first_job_at_ms, a.cores, a.fetch_wait_s, a.executor_run_s,
               a.executor_cpu_s, a.remote_bytes_read, a.n_tasks,
               (SELECT sum(coalesce(e.total_cores, 1)) FROM executors e
                 WHERE e.run_id = a.run_id AND coalesce(e.app_index, 0) = coalesce(a.app_index, 0)) AS executor_cores
        FROM apps a LEFT JOIN runs r USING (run_id) LEFT JOIN scenarios s USING (scenario_id)
        ORDER BY a.first_job_at_ms NULLS LAST, a.run_id
    """
    df = store.query(q)
    if df.empty:
        return df
    slots = df["cores"].fillna(df["executor_cores"]).astype(float)
    df["slots"] = slots
    # an application that had not ended (killed, still running) has no core time: its "job time"
    # ends at its last ended job while its running jobs' tasks already count (fetch wait up to 5x it)
    ended = df["status"].astype(str) != "incomplete"
    df["core_s"] = (slots * df["job_time_s"].astype(float)).where(ended)
    ok = df["core_s"] > 0
    df["fetch_wait_share"] = np.where(ok, df["fetch_wait_s"].astype(float) / df["core_s"].where(ok, 1), np.nan)
    idle = 1 - df["executor_run_s"].astype(float) / df["core_s"].where(ok, 1)
    df["idle_share"] = np.where(ok, idle.clip(lower=0), np.nan)
    df["network_core_h"] = df["fetch_wait_s"].astype(float) / 3600
    return df


def _apps(store: Store, rows: pd.DataFrame) -> list[App]:
    """The applications' tables, read with one query per table (not per application)."""
    return load_all(store, [(str(r.run_id), int(r.app_index), str(r.name)) for r in rows.itertuples(index=False)])


def what_ifs(apps: list[App]) -> pd.DataFrame:
    """Per ended application: the predicted job time with a 2x / 4x faster network (replay) and with
    twice the executors (stage model); NaN where the model cannot run on it."""
    rows = []
    for a in apps:
        row: dict[str, object] = {"run_id": a.run_id, "app_index": a.app_index}
        if a.ended and not a.tasks.empty and not a.jobs.empty:
            try:
                one = analysis.replay_s(a, 1.0)
                for k in (2.0, 4.0):
                    row[f"net{k:g}x_s"] = analysis.network_prediction_s(a, k, at_one=one)
            except Exception:  # noqa: BLE001 - one application the replay cannot use must not lose the fleet
                pass
            try:
                slots = a.slots
                cp = analysis.critical_path(a) if slots else None
                now = analysis.scaled_time_s(a, slots, cp=cp) if slots else float("nan")
                if now > 0:
                    row["executors2x_s"] = a.job_time_s * analysis.scaled_time_s(a, 2 * slots, cp=cp) / now
            except Exception:  # noqa: BLE001
                pass
        rows.append(row)
    df = pd.DataFrame(rows)
    for c in ("net2x_s", "net4x_s", "executors2x_s"):
        if c not in df:
            df[c] = np.nan
    return df


@dataclass
class ChangePoint:
    name: str
    n: int
    split: int  # index (0-based, in run order) of the first run after the change
    first_after: str  # that run's application id
    change: float  # median after / median before - 1
    p_split: float  # Bonferroni-corrected p of the best split
    p_adjusted: float = float("nan")  # after Benjamini-Hochberg across series
    flagged: bool = False
    stage: str = ""
    metric: str = ""


def change_point(times: list[float]) -> tuple[int, float]:
    """The best split of a series (index of the first run after it) and its p-value, Bonferroni-
    corrected for the splits tried: Welch's t-test on log job time, >= MIN_SIDE runs a side."""
    x = np.log(np.asarray(times, dtype=float))
    splits = range(MIN_SIDE, len(x) - MIN_SIDE + 1)
    best, best_p = -1, 1.0
    for k in splits:
        a, b = x[:k], x[k:]
        if np.ptp(a) == 0 and np.ptp(b) == 0:
            p = 0.0 if a[0] != b[0] else 1.0
        else:
            p = float(sps.ttest_ind(a, b, equal_var=False).pvalue)
        if best < 0 or p < best_p:
            best, best_p = k, p
    return best, min(1.0, best_p * len(splits))


def change_points(df: pd.DataFrame) -> list[ChangePoint]:
    """Every recurring name with >= MIN_RUNS ok runs, tested; flags set after the fleet-wide correction."""
    ok = df[(df["status"] == "ok") & df["job_time_s"].notna() & (df["job_time_s"] > 0)]
    out = []
    for name, g in ok.groupby(_base_name(ok), sort=True):
        if len(g) < MIN_RUNS:
            continue
        g = g.sort_values("first_job_at_ms")
        t = g["job_time_s"].astype(float).tolist()
        k, p = change_point(t)
        change = float(np.median(t[k:]) / np.median(t[:k]) - 1)
        out.append(ChangePoint(str(name), len(t), k, str(g["app_id"].iloc[k]), change, p))
    if out:
        adj = sps.false_discovery_control([c.p_split for c in out], method="bh")
        for c, q in zip(out, adj, strict=True):
            c.p_adjusted = float(q)
            c.flagged = bool(q < FDR and abs(c.change) >= MIN_CHANGE)
    return out


def _base_name(df: pd.DataFrame) -> pd.Series:
    return df["name"].astype(str)


STAGE_METRICS = {
    "fetch wait": "fetch_wait_ms",
    "executor CPU": "executor_cpu_ms",
    "GC": "gc_ms",
    "shuffle write": "shuffle_write_ms",
    "deserialize": "deserialize_ms",
    "remote bytes read (MB)": "remote_bytes",
}


def what_moved(store: Store, df: pd.DataFrame, cp: ChangePoint) -> tuple[str, str]:
    """The stage whose median duration grew most across the change, and its task metric (summed per
    run) that grew most, each as before -> after medians."""
    g = df[(df["name"] == cp.name) & (df["status"] == "ok") & df["job_time_s"].notna()]
    g = g.sort_values("first_job_at_ms")
    runs = g["run_id"].tolist()
    before, after = set(runs[: cp.split]), set(runs[cp.split :])
    marks = ",".join("?" * len(runs))
    sums = ", ".join(f"sum({c}) AS {c}" for c in STAGE_METRICS.values())
    st = store.query(
        f"SELECT run_id, stage_id, max(name) AS name, max(completed_at_ms - submitted_at_ms) AS duration_ms "
        f"FROM stages WHERE run_id IN ({marks}) GROUP BY run_id, stage_id",
        runs,
    )
    tk = store.query(f"SELECT run_id, stage_id, {sums} FROM tasks WHERE run_id IN ({marks}) GROUP BY 1, 2", runs)
    if st.empty:
        return "", ""
    m = st.merge(tk, on=["run_id", "stage_id"], how="left")
    m["side"] = np.where(m["run_id"].isin(after), "after", np.where(m["run_id"].isin(before), "before", ""))
    med = m.groupby(["stage_id", "side"]).median(numeric_only=True).unstack("side")
    if ("duration_ms", "after") not in med or ("duration_ms", "before") not in med:
        return "", ""
    grew = (med[("duration_ms", "after")] - med[("duration_ms", "before")]).dropna()
    if grew.empty:
        return "", ""
    sid = grew.idxmax()
    b, a = med.loc[sid, ("duration_ms", "before")], med.loc[sid, ("duration_ms", "after")]
    sname = str(st[st["stage_id"] == sid]["name"].iloc[0])[:40]
    stage = f"stage {sid} ({sname}): {b / 1000:.1f} -> {a / 1000:.1f} s"
    best, best_d = "", 0.0
    for label, col in STAGE_METRICS.items():
        if col == "remote_bytes":
            continue
        d = float(med.loc[sid, (col, "after")] - med.loc[sid, (col, "before")])
        if d > best_d:
            best_d = d
            best = f"{label}: {med.loc[sid, (col, 'before')] / 1000:.1f} -> {med.loc[sid, (col, 'after')] / 1000:.1f} s"
    return stage, best or "no task metric grew (time outside tasks: scheduling, driver)"


# ------------------------------------------------------------------------------------------- render


def _top(df: pd.DataFrame, caption: str, k: int = TOP, keys: int = 1) -> Table:
    more = len(df) - k
    cap = (caption + (f" Top {k} of {len(df)}; {more} more not shown." if more > 0 else "")).strip()
    return Table(df.head(k).reset_index(drop=True), cap, keys=keys)


def _quantiles(df: pd.DataFrame) -> pd.DataFrame:
    cols = {
        "job time (s)": df["job_time_s"],
        "core-hours": df["core_s"] / 3600,
        "fetch-wait share": df["fetch_wait_share"],
        "idle share": df["idle_share"],
    }
    rows = []
    for label, s in cols.items():
        s = s.dropna().astype(float)
        q = s.quantile([0.5, 0.9, 0.99]) if len(s) else pd.Series([np.nan] * 3, index=[0.5, 0.9, 0.99])
        rows.append(
            {
                "quantity": label,
                "n": len(s),
                "p50": q[0.5],
                "p90": q[0.9],
                "p99": q[0.99],
                "max": s.max() if len(s) else np.nan,
            }  # fmt: skip
        )
    return pd.DataFrame(rows)


def _fig_distributions(df: pd.DataFrame, path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    share = np.sort(df["fetch_wait_share"].dropna().astype(float).to_numpy())
    ax = axes[0]
    if len(share):
        ax.step(share, np.arange(1, len(share) + 1) / len(share), where="post")
    ax.set_xlabel("fetch wait / core time (per application)")
    ax.set_ylabel("share of applications (ECDF)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    jt = df["job_time_s"].dropna().astype(float)
    jt = jt[jt > 0]
    ax = axes[1]
    if len(jt):
        bins = np.logspace(np.log10(jt.min()), np.log10(jt.max() * 1.0001), min(60, max(5, int(np.sqrt(len(jt))))))
        ax.hist(jt, bins=bins)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # no overlapping minor labels
    ax.set_xlabel("job time (s, log scale)")
    ax.set_ylabel("applications")
    ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))  # counts: no 0.5 application
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fig_series(df: pd.DataFrame, cps: list[ChangePoint], path: Path) -> None:
    n = len(cps)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.6 * rows), squeeze=False)
    for ax, cp in zip(axes.flat, cps, strict=False):
        g = df[(df["name"] == cp.name) & (df["status"] == "ok") & df["job_time_s"].notna()]
        g = g.sort_values("first_job_at_ms")
        ax.plot(range(len(g)), g["job_time_s"].astype(float), marker="o", ms=3)
        ax.axvline(cp.split - 0.5, color="C3", ls="--")
        ax.set_title(cp.name.replace("$", r"\$")[:40], fontsize=9)
        ax.set_xlabel("run")
        ax.set_ylabel("job time (s)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _hours(x: float) -> str:
    """Core-hours to three significant digits below 100 (a fleet of five short applications saves
    0.0193 core-hours, not '0.0'), with thousands separators above."""
    if not math.isfinite(x):
        return "–"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _pct(x: float) -> str:
    return "–" if not math.isfinite(x) else f"{x:.0%}"


def document_of(store: Store, title: str, figures: Path) -> Document:
    df = app_table(store)
    if df.empty:
        raise StoreError(f"{store.path}: no application in the store")
    figures.mkdir(parents=True, exist_ok=True)
    ended = df[df["core_s"] > 0]
    core_h = float(ended["core_s"].sum()) / 3600
    fw_h = float(ended["fetch_wait_s"].sum()) / 3600
    busy_h = float(ended["executor_run_s"].sum()) / 3600
    counts = df["status"].value_counts().to_dict()
    status = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    doc = Document(
        f"Fleet: {md_text(title)}",
        f"{len(df)} applications ({status}); {df['name'].nunique()} names. Core time = task slots x job "
        "time (first job submitted to last job end); applications without a job time (killed, still "
        "running) are counted but have no core time.",
    )
    doc.headline = [
        f"**{_hours(core_h)} core-hours** over {len(ended)} applications with a job time; "
        f"**{_pct(fw_h / core_h if core_h else float('nan'))} in fetch wait** (waiting for shuffle data), "
        f"{_pct(max(0.0, 1 - busy_h / core_h) if core_h else float('nan'))} with no task running "
        "(waiting for data, the scheduler or the driver: a log cannot tell which).",
    ]

    # distributions
    fig1 = figures / "fleet-distributions.png"
    _fig_distributions(df, fig1)
    doc.sections.append(
        Section(
            "Distributions",
            ["Quantiles, not means: a few applications carry the tails."],
            tables=[Table(_quantiles(df), "Per application, over those with a value.")],
            figures=[Figure(fig1, "Left: ECDF of fetch wait / core time. Right: job times (log bins).")],
        )
    )

    # ranked by network cost
    rank = ended.sort_values(["fetch_wait_share", "network_core_h"], ascending=False)
    shown = pd.DataFrame(
        {
            "application": rank["app_id"].astype(str),
            "name": rank["name"].astype(str).map(md_text),
            "status": rank["status"],
            "job_s": rank["job_time_s"].astype(float).round(1),
            "core_h": (rank["core_s"] / 3600).round(3),
            "fetch_wait_share": rank["fetch_wait_share"].round(3),
            "fetch_wait_core_h": rank["network_core_h"].round(3),
            "idle_share": rank["idle_share"].round(3),
        }
    )
    doc.sections.append(
        Section(
            "Applications ranked by network cost",
            ["Ranked by the share of core time in fetch wait; core-hours in fetch wait next to it."],
            tables=[_top(shown, "")],
        )
    )

    # per name
    by = ended.groupby("name")
    names = pd.DataFrame(
        {
            "runs": by.size(),
            "core_h": by["core_s"].sum() / 3600,
            "fetch_wait_core_h": by["fetch_wait_s"].sum() / 3600,
            "median_job_s": by["job_time_s"].median(),
            "p90_job_s": by["job_time_s"].quantile(0.9),
        }
    )
    names["fetch_wait_share"] = names["fetch_wait_core_h"] / names["core_h"]
    names = names.sort_values("fetch_wait_core_h", ascending=False).reset_index()
    names["name"] = names["name"].astype(str).map(md_text)
    doc.sections.append(
        Section(
            "Per application name",
            ["Sorted by core-hours in fetch wait."],
            tables=[_top(names.round(3), "")],
        )
    )

    pays, net2 = _pays_off(store, df)
    if net2:
        doc.headline.append(net2)
    doc.sections.append(pays)
    doc.sections += _series(store, df, figures)
    doc.sections.append(
        Section(
            "The what-if replay's measured error",
            [
                "Each row is a committed lab report where the change the replay predicts was run: the UDP "
                "cross traffic removed (the job's network k = rate / (rate − UDP rate) times faster). "
                "error = predicted mean job time / measured mean − 1; error_lab for the lab's replay (fetch "
                "wait plus scheduler delay above the quiet floor: `whatif.validate`, the reports' What-if "
                "check), error_log for the replay of a log (fetch wait only), which this page uses. Rows with "
                "k = 1 (UDP off the job's path) are no network change and are left out of the ranges.",
            ],
            tables=[Table(error_table(), "scripts/whatif_error_table.py over docs/results/<report>/data.")],
        )
    )
    return doc


def _pays_off(store: Store, df: pd.DataFrame) -> tuple[Section, str]:
    ended = df[df["core_s"] > 0]
    wi = what_ifs(_apps(store, ended)).merge(ended[["run_id", "app_index", "core_s", "job_time_s"]])
    lo_e, hi_e = error_range()
    rows: list[dict[str, object]] = []
    headline = ""
    for label, col, measured in (
        ("2x faster network", "net2x_s", True),
        ("4x faster network", "net4x_s", True),
        ("twice the executors", "executors2x_s", False),
    ):
        ok = wi[wi[col].notna() & (wi["job_time_s"] > 0)]
        saved = (1 - ok[col] / ok["job_time_s"]).clip(upper=1)
        core = float((ok["core_s"] * saved).sum()) / 3600
        total = float(ok["core_s"].sum()) / 3600
        share = core / total if total else float("nan")
        if measured and math.isfinite(share):
            # per application: one the replay finds no network time in saves nothing either way
            ends = [np.where(saved > 0, 1 - (1 - saved) / (1 + e), saved) for e in (lo_e, hi_e)]
            a, b = (float((ok["core_s"] * x).sum()) / 3600 for x in ends)
            lo, hi = min(a, b) / total, max(a, b) / total
            rng = f"{lo:.0%} … {hi:.0%} ({_hours(lo * total)} … {_hours(hi * total)} core-h)"
            err = (
                f"log replay's measured error {signed(100 * lo_e)}% … {signed(100 * hi_e)}% "
                f"at k ≤ {COMPARABLE_K:g} (below)"
            )
            if not headline:
                headline = (
                    f"A {label} would save {_hours(core)} core-hours ({share:.0%}) by the what-if replay -- a model "
                    f"estimate; with its error measured on the lab's interventions, {lo:.0%} … {hi:.0%}."
                )
        else:
            rng, err = "unknown", "no measured error: the lab has not run this change"
        rows.append(
            {
                "fix": label,
                "applications": len(ok),
                "estimate_core_h_saved": round(core, 2),
                "estimate_share": _pct(share),
                "range_from_measured_error": rng,
                "uncertainty": err,
            }
        )
    rows.append(
        {
            "fix": "DCTCP (another congestion control)",
            "applications": 0,
            "estimate_core_h_saved": float("nan"),
            "estimate_share": "–",
            "range_from_measured_error": "cannot be estimated",
            "uncertainty": "a log records no queue or congestion control; the lab measures it on a given "
            "network (experiments/cc-under-udp.toml)",
        }
    )
    section = Section(
        "What pays off, summed over the fleet (model estimates)",
        [
            "Each number is a **model estimate**, not a bound: per application, the what-if replay of its "
            "log (fetch wait / k, relative to its own k = 1 answer) or the stage model (twice the slots), times "
            "its core time, summed. The range applies the most negative and the most positive error of the log "
            f"replay measured on the lab's own network changes with k ≤ {COMPARABLE_K:g} (table below) to every "
            "application alike; it is not a confidence interval. Where the cross traffic was sent through the "
            "hosts (iperf3) the log replay predicted job times too long: a log shows neither the CPU that cross "
            "traffic costs nor the scheduler's network waits, so real changes saved more than it said -- the "
            "demo's 75 %-UDP runs were estimated to save 'at most' 23 %, 21 % and 37 % with an infinitely fast "
            "network, yet ran 34 % faster without the UDP on average. Where the UDP was made in the switch "
            "(no host CPU), it was within 7 % either way.",
        ],
        tables=[Table(pd.DataFrame(rows), "Applications with a job time that the model could replay.")],
    )
    return section, headline


def _series(store: Store, df: pd.DataFrame, figures: Path) -> list[Section]:
    cps = change_points(df)
    if not cps:
        return [
            Section(
                "Recurring applications",
                [f"No name has {MIN_RUNS} or more ok runs: no series to test for a change point."],
            )
        ]
    flagged = sorted([c for c in cps if c.flagged], key=lambda c: -abs(c.change))
    for c in flagged[:TOP]:
        c.stage, c.metric = what_moved(store, df, c)
    method = (
        f"Change point: Welch's t-test on log job time between the runs before and after every split "
        f"with ≥ {MIN_SIDE} ok runs a side; the best split's p-value Bonferroni-corrected for the splits "
        f"tried, then Benjamini–Hochberg across the {len(cps)} series (false-discovery rate {FDR:.0%}); "
        f"flagged when the adjusted p < {FDR} and the median moved ≥ {MIN_CHANGE:.0%}. A drift strong enough "
        "shows as a change at its most significant split. What moved: the stage whose median duration "
        "grew most, and its task metric (summed over the stage's tasks, median over runs) that grew most."
    )
    table = pd.DataFrame(
        [
            {
                "name": md_text(c.name),
                "runs": c.n,
                "first_run_after": c.first_after,
                "run_index": c.split,
                "change": f"{signed(100 * c.change)}%",
                "p_adjusted": c.p_adjusted,
                "stage_that_moved": md_text(c.stage),
                "metric_that_moved": c.metric,
            }
            for c in flagged
        ]
    )
    sec = Section(
        "Recurring applications: regressions",
        [method, f"{len(flagged)} of {len(cps)} series flagged."],
    )
    if flagged:
        sec.tables.append(_top(table, "Flagged series, largest change first."))
        path = figures / "fleet-series.png"
        _fig_series(df, flagged[:SERIES_FIGURES], path)
        sec.figures.append(
            Figure(
                path,
                f"Job time per run of the {min(SERIES_FIGURES, len(flagged))} largest changes; "
                "dashed: the change point.",
            )  # fmt: skip
        )
    return [sec]


PAGES = ("fleet.md", "fleet.html")


def write(db: Path, out: Path) -> tuple[Path, Path]:
    """Write ``fleet.md`` and ``fleet.html`` (figures in ``out/figures``) for the store ``db``."""
    with reading(db):
        doc = document_of(Store(db), db.name, out / "figures")
    out.mkdir(parents=True, exist_ok=True)
    md_path, html_path = (out / p for p in PAGES)
    md_path.write_text(document.to_markdown(doc))
    html_path.write_text(document.to_html(doc))
    return html_path, md_path


def remove(out: Path) -> None:
    """Remove the fleet page from ``out``: one written there for an earlier store (of several
    applications) must not outlive it next to the report of a store of one (its figures went with
    the report's, which clears ``out/figures``)."""
    for p in PAGES:
        (out / p).unlink(missing_ok=True)
