"""The event-log report as a Document: headline, per-application sections, starvation, limits."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from shufflelab import fct  # noqa: E402
from shufflelab.appreport import analysis as an  # noqa: E402
from shufflelab.appreport.analysis import App  # noqa: E402
from shufflelab.diagnose import Diagnosis  # noqa: E402
from shufflelab.document import Document, Figure, Section, Table, md_text  # noqa: E402

DETAILED = 10
"""Applications given their own sections (the longest); the rest appear in the summary table."""
SUMMARY_ROWS = 100
"""Rows of the summary table at most (the longest by job time): 10,000 applications' rows would make a
page no one reads; the fleet page ranks them all."""

ONE_LOG = (
    "One recording shows where this run's time went (fetch wait, skew, spills, GC) and bounds what a faster "
    "network or more executors could buy by replaying its own schedule. It cannot show whether the network "
    "was slower than usual: that needs baseline logs of the same application on a quiet network "
    "(--baseline LOG...), which give the starvation verdict (job slower with CPU time unchanged and more "
    "fetch wait), or a lab experiment that removes the cross traffic (a real intervention)."
)

LIMITS = [
    "Every 'predicted' number is a model estimate from the recorded schedule, not a measurement: the "
    "what-if replay (network) reproduces the recording exactly at speed-up 1 and was checked against "
    "real interventions in the lab (docs/results/); the stage model (executors, parallelism) is shown "
    "next to the recorded time at the recorded slot count so its error is visible.",
    "An event log records no link rate, queue, congestion control or cross traffic: network efficiency "
    "needs --link-gbps; congestion control and pushdown are priced by the lab or the simulator, not here.",
]


def _pct(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{100 * x:.1g}%" if 0 < abs(x) < 0.005 else f"{x:.0%}"


def _table(title: str, df: pd.DataFrame, empty: str) -> Section:
    """A level-3 section of one table, or a sentence saying why there is none."""
    if df.empty:
        return Section(title, paragraphs=[f"None: {empty}."], level=3)
    return Section(title, tables=[Table(df)], level=3)


def _s(x: float) -> str:
    return "– (not computable)" if math.isnan(x) else f"{x:.2f} s"


def _mpl(text: str) -> str:
    """A name in a figure's title as it is (``$`` would start matplotlib's math text)."""
    return text.replace("$", r"\$")


def fig_timeline(app: App, cp: pd.DataFrame, path: Path) -> Path | None:
    st = app.stages.dropna(subset=["submitted_at_ms", "completed_at_ms"])
    if st.empty or app.jobs.empty:
        return None
    t0 = float(app.jobs["submitted_at_ms"].min())
    st = st.sort_values("submitted_at_ms").drop_duplicates(["stage_id", "stage_attempt"]).tail(60)
    on_cp = set(zip(cp["stage_id"], cp["attempt"], strict=True)) if not cp.empty else set()
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.22 * len(st)))
    for y, s in enumerate(st.itertuples(index=False)):
        a = (float(s.submitted_at_ms) - t0) / 1000
        b = (float(s.completed_at_ms) - t0) / 1000
        red = (s.stage_id, s.stage_attempt) in on_cp
        ax.barh(y, max(b - a, 1e-3), left=a, color="#c0392b" if red else "#95a5a6")
    labels = [
        f"stage {int(i)}" + (f" (attempt {int(a)})" if a else "")
        for i, a in zip(st["stage_id"], st["stage_attempt"], strict=True)
    ]
    ax.set_yticks(range(len(st)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the first job")
    ax.set_title(f"{_mpl(app.name)}: stages (red: critical path)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fig_fixes(app: App, fixes: list[an.Fix], path: Path) -> Path | None:
    priced = [f for f in fixes if not math.isnan(f.gain)]
    if not priced:
        return None
    fig, ax = plt.subplots(figsize=(7, 0.8 + 0.35 * len(priced)))
    ax.barh([f.fix for f in priced], [100 * f.gain for f in priced], color="#2e86c1")
    ax.invert_yaxis()
    ax.axvline(0, color="#333", lw=0.8)
    ax.set_xlabel("predicted job time saved (%, model estimate)")
    ax.set_title(f"{_mpl(app.name)}: what pays off", fontsize=9)
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fig_fct(app: App, fl: pd.DataFrame, path: Path) -> Path | None:
    """Shuffle-read FCT per task against its remote volume (log-log), bucket medians marked."""
    reads = fl[(fl["kind"] == "read") & (fl["fct_ms"] > 0)] if not fl.empty else fl
    if reads.empty:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    ax.scatter(reads["volume_mb"], reads["fct_ms"], s=8, alpha=0.5, color="#2e86c1", label="one task")
    med = reads.groupby("bucket").agg(v=("volume_mb", "median"), f=("fct_ms", "median"))
    ax.scatter(med["v"], med["f"], s=60, marker="D", color="#c0392b", label="bucket median")
    lo, hi = float(reads["volume_mb"].min()), float(reads["volume_mb"].max())
    for edge in fct.BUCKET_EDGES_MB[1:-1]:
        if lo < edge < hi:  # bucket edges inside the data only
            ax.axvline(edge, color="#bbb", lw=0.6, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("remote shuffle data read by the task (MB)")
    ax.set_ylabel("read FCT (ms, remote requests' time)")
    ax.set_title(f"{_mpl(app.name)}: shuffle-read FCT per volume (recorded)", fontsize=9)
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def app_sections(app: App, figdir: Path, link_gbps: float | None, idx: int) -> tuple[list[Section], str]:
    """The sections of one application and its headline line (its name, id, file and the reader's
    problems escaped: Markdown in them is shown, not rendered)."""
    name = md_text(app.name)
    version = f"Spark {app.spark_version}" if app.spark_version else ""
    about = ", ".join(md_text(x) for x in (app.app_id, version) if x)
    where = f"{about}; read from {md_text(app.log)}" if app.log else about
    found = (
        [
            f"**{'partial: ' if app.status == 'partial' else ''}what the reader found**: "
            + "; ".join(md_text(p) for p in app.problems)
            + (" (the numbers cover what could be read)" if app.status == "partial" else "")
        ]
        if app.status == "partial" or app.problems
        else []
    )
    if app.jobs.empty or app.tasks.empty:  # nothing ran, or the log was cut before it did
        what = "no job" if app.jobs.empty else "no task"
        bullets = [where, f"status {app.status}; {what} recorded in this log: nothing to analyse", *found]
        return [Section(name, bullets=bullets, level=2)], f"{name}: {what} recorded ({app.status})."
    if not app.ended:  # jobs ran, none ended: still running, or killed before a job ended
        bullets = [
            where,
            f"status {app.status}; {len(app.jobs)} job(s) and {len(app.tasks)} task(s) recorded, but no job ended in "
            "this log (the application was still running or was killed): no job time, nothing to replay",
            *found,
        ]
        return [Section(name, bullets=bullets, level=2)], f"{name}: no job ended ({app.status})."
    cp = an.critical_path(app)
    b = an.bounds(app, cp=cp)
    health = an.stage_health(app)
    fixes = an.what_pays_off(app, b, health, cp)
    sh = an.shuffle_summary(app, link_gbps)
    facts = [
        where,
        f"status {app.status}; job time {app.job_time_s:.2f} s (first job submitted to last job end); "
        f"{len(app.tasks)} tasks in {app.stages['stage_id'].nunique() if not app.stages.empty else 0} stages on "
        f"{app.slots} task slots",
        f"shuffle: fetch wait {_pct(sh['read_share'])} and shuffle write {_pct(sh['write_share'])} of executor "
        f"run time; fetch wait is {_pct(sh['fetch_wait_of_core_time'])} of the application's core time; "
        f"{sh['remote_mb']:.3g} MB read remotely",
    ]
    facts += found
    if link_gbps and sh["network_efficiency"] is None:
        facts.append(f"network efficiency at {link_gbps:g} Gbit/s: not defined (no remote shuffle data was read)")
    elif link_gbps:
        facts.append(
            f"network efficiency at {link_gbps:g} Gbit/s: {_pct(sh['network_efficiency'])} (ideal "
            f"{sh['ideal_shuffle_s'] or 0:.3g} s: the busiest host's remote shuffle bytes at that rate on its own "
            f"link; observed {sh['observed_shuffle_s'] or 0:.3g} s: the stages fetching remote data)"
        )
    if not cp.empty:
        facts.append(
            f"critical path: {len(cp)} stages, {cp['duration_s'].sum():.2f} s of {app.job_time_s:.2f} s "
            f"(the rest is driver time between stages)"
        )
    facts.append(
        f"the models at the recorded settings: replay {_s(b.replay_at_recorded_s)}, stage model "
        f"{_s(b.model_at_recorded_s)}, vs {app.job_time_s:.2f} s recorded (predictions below are scaled by these)"
    )
    figures = []
    tl = fig_timeline(app, cp, figdir / f"app{idx}_timeline.png")
    if tl:
        figures.append(Figure(tl, f"{name}: stage timeline, critical path in red."))
    fl = fct.flows(app.tasks) if not app.tasks.empty else pd.DataFrame()
    fc = fig_fct(app, fl, figdir / f"app{idx}_fct.png")
    if fc:
        figures.append(Figure(fc, f"{name}: each task's shuffle-read FCT against its remote volume (recorded)."))
    ff = fig_fixes(app, fixes, figdir / f"app{idx}_what_pays_off.png")
    if ff:
        figures.append(Figure(ff, f"{name}: predicted gain of each fix (model estimates)."))
    pays = pd.DataFrame(
        [
            {"fix": f.fix, "predicted gain": "not priced" if math.isnan(f.gain) else f"{f.gain:.0%}", "how": f.how}
            for f in fixes
        ]
    )
    health_cols = ["stage", "tasks", "failed", "median_ms", "max_ms", "skew", "stragglers", "spill_mb", "gc_share",
                   "fetch_wait_share"]  # fmt: skip
    sections = [
        Section(name, bullets=facts, level=2),
        Section("What pays off", tables=[Table(pays)], level=3),
        _table("Bounds (model estimates)", b.table(), "no bound computable from this log"),
        _table("Critical path", cp.round(3).assign(name=[md_text(str(x)) for x in cp["name"]]), "no completed stage"),
        Section(
            "Stages: skew, stragglers, spills, GC",
            paragraphs=[f"skew = longest / median task; stragglers: tasks over {an.STRAGGLER:g}x the median."],
            tables=[Table(health[[c for c in health_cols if c in health.columns]])] if not health.empty else [],
            level=3,
        ),
        _fct_section(app),
    ]
    if figures:
        sections.append(Section("Figures", figures=figures, level=3))
    best = next((f for f in fixes if not math.isnan(f.gain)), None)
    inf = next((x for x in b.rows if x.what == "infinitely fast network"), None)
    head = (
        f"{name}: {app.job_time_s:.1f} s; fetch wait is {_pct(sh['fetch_wait_of_core_time'])} of its core time"
        + (f"; an infinitely fast network would save at most {inf.gain(app.job_time_s):.0%}" if inf else "")
        + (f"; best-paying fix: {best.fix} ({best.gain:.0%}, model estimate)" if best else "")
        + "."
    )
    return sections, head


def _fct_section(app: App) -> Section:
    """Shuffle-read FCT per volume bucket; without remote reads it says so (the write rows alone
    would read as if they were the reads)."""
    title = "Shuffle-read FCT per volume bucket"
    table = an.fct_table(app).round(1)
    if table.empty:
        return Section(title, paragraphs=["None: no task read or wrote shuffle data."], level=3)
    write = "rows of kind write are shuffle write times (to local disk: CPU and disk, not the network)"
    if not (table["kind"] == "read").any():
        local = float(app.tasks["local_bytes"].sum()) / 1e6 if "local_bytes" in app.tasks else 0.0
        note = (
            "No remote shuffle reads: no task fetched shuffle data over the network"
            + (f" (it read {local:.3g} MB of shuffle data locally)" if local > 0 else "")
            + f", so there is no read FCT; the {write}."
        )
        return Section(title, paragraphs=[note], tables=[Table(table)], level=3)
    return Section(
        title, paragraphs=[f"read: remote requests' time per task; {write}."], tables=[Table(table)], level=3
    )


def starvation_section(verdicts: list[Diagnosis] | None, problem: str | None = None) -> Section:
    """The verdict per application against its baseline logs, or what one log can and cannot show."""
    title = "Is it starving for the network?"
    if problem is not None:
        return Section(title, paragraphs=[f"No verdict: {md_text(problem)}.", ONE_LOG])
    if not verdicts:
        return Section(title, paragraphs=[ONE_LOG])
    rows = pd.DataFrame(
        [
            {
                "application": md_text(d.scenario),
                "verdict": d.verdict,
                "runs (baseline / these)": f"{d.n_baseline} / {d.n_scenario}",
                "job time ratio": d.job.ratio,
                "fetch wait of core time": (
                    f"{_pct(d.fetch_wait_share_baseline)} -> {_pct(d.fetch_wait_share_scenario)}"
                ),
            }
            for d in verdicts
        ]
    )
    bullets = [f"{md_text(d.scenario)}: **{d.verdict}**: " + "; ".join(md_text(r) for r in d.reasons) for d in verdicts]
    return Section(
        title,
        paragraphs=[
            "Each application compared with the baseline logs of the same application (shufflelab.diagnose: "
            "starved when the job is significantly slower with CPU time unchanged and more fetch wait)."
        ],
        bullets=bullets,
        tables=[Table(rows)],
    )


def _job_s(a: App) -> float:
    """The job time to order applications by (one without it last)."""
    return a.job_time_s if a.ended else -math.inf


def _summary_row(a: App) -> dict[str, object]:
    """The application's row of the summary table (what could not be computed left empty)."""
    row: dict[str, object] = {
        "application": md_text(a.name),
        "app id": md_text(a.app_id),
        "status": a.status,
        "job_s": round(a.job_time_s, 2) if not a.jobs.empty and a.ended else None,
        "tasks": len(a.tasks),
    }
    try:
        row["slots"] = a.slots
        row["remote_mb"] = round(float(a.tasks["remote_bytes"].sum()) / 1e6, 1) if not a.tasks.empty else 0.0
        row["fetch_wait_of_core_time"] = an.shuffle_summary(a, None)["fetch_wait_of_core_time"] if a.ended else None
    except Exception:  # noqa: BLE001 - its own section says why; the other rows stay
        row.update(slots=None, remote_mb=None, fetch_wait_of_core_time=None)
    return row


def _not_analysed(app: App, exc: BaseException) -> tuple[list[Section], str]:
    """The section of an application whose analysis failed: what was read, and the error (the other
    applications' sections are written)."""
    why = md_text(f"{type(exc).__name__}: {exc}")
    name = md_text(app.name)
    bullets = [f"status {app.status}; read from {md_text(app.log or app.run_id)}", f"could not be analysed: {why}"]
    bullets += [f"what the reader found: {md_text(p)}" for p in app.problems]
    return [Section(name, bullets=bullets, level=2)], f"{name}: could not be analysed ({why})."


def document(
    title: str,
    apps: list[App],
    figdir: Path,
    link_gbps: float | None,
    verdicts: list[Diagnosis] | None = None,
    baseline_problem: str | None = None,
) -> Document:
    figdir.mkdir(parents=True, exist_ok=True)
    for stale in figdir.glob("*.png"):
        stale.unlink()
    rows = [_summary_row(a) for a in apps]
    summary = pd.DataFrame(rows)
    longest = sorted(range(len(apps)), key=lambda i: -_job_s(apps[i]))
    detailed = longest[:DETAILED]  # longest first
    caption = ""
    if len(apps) > SUMMARY_ROWS:  # a fleet: its longest here, every one ranked on the fleet page
        summary = summary.iloc[longest[:SUMMARY_ROWS]].reset_index(drop=True)
        caption = (
            f"The {SUMMARY_ROWS} longest by job time of {len(apps)}; {len(apps) - SUMMARY_ROWS} more not shown "
            "(the fleet page, fleet.html, ranks them all by network cost)."
        )
    sections: list[Section] = [
        Section(
            "Applications",
            paragraphs=[
                f"{len(apps)} application(s) read from event logs"
                + (f"; the {len(detailed)} longest have their own sections." if len(apps) > DETAILED else ".")
            ],
            tables=[Table(summary, caption)],
        )
    ]
    heads: dict[int, str] = {}
    for i in sorted(detailed):
        try:
            secs, head = app_sections(apps[i], figdir, link_gbps, i)
        except Exception as exc:  # noqa: BLE001 - one application's failure must not lose the others' report
            secs, head = _not_analysed(apps[i], exc)
        sections += secs
        heads[i] = head
    sections.append(starvation_section(verdicts, baseline_problem))
    sections.append(Section("Limits", bullets=LIMITS, note=True))
    return Document(
        f"Event-log analysis: {title}",
        "Spark applications read by shufflelab analyze; how much the network costs them, why, and which fix pays off.",
        headline(apps, detailed, heads, [r.get("fetch_wait_of_core_time") for r in rows]),
        sections,
    )


HEADLINED = 3
"""Applications in the headline: the longest by job time (and the most network-bound if it is not one of them)."""


def headline(apps: list[App], longest_first: list[int], heads: dict[int, str], wait_share: list[object]) -> list[str]:
    """The headline: one line for one application; for several, which ones are shown and why (the
    HEADLINED longest by job time, then the most network-bound -- the largest fetch wait share of
    its core time -- when it is not among them), then their lines."""
    top = longest_first[:HEADLINED]
    if len(apps) == 1:
        return [heads[i] for i in top]
    shares = {
        i: float(v) for i, v in enumerate(wait_share) if isinstance(v, (int, float)) and v == v and v > 0
    }  # over every application, with a section or not
    bound = max(shares, key=shares.__getitem__, default=None)
    extra = [bound] if bound is not None and bound not in top else []
    longest = "longest" if len(top) == 1 else f"{len(top)} longest"
    intro = f"{len(apps)} applications; shown: the {longest} by job time (longest first)"
    bound_is = "the most network-bound (largest fetch wait share of its core time)"
    if extra:
        intro += f" and {bound_is}"
    elif bound is not None:
        intro += f"; {bound_is} is among them: {md_text(apps[bound].name)}"
    lines = [intro + ".", *(heads[i] for i in top)]
    for i in extra:
        no_section = (
            f"{md_text(apps[i].name)}: fetch wait is {_pct(shares[i])} of its core time (no section of its own: "
            f"not among the {len(longest_first)} longest)"
        )
        lines.append(f"most network-bound: {heads.get(i, no_section)}")
    return lines
