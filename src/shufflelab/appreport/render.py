"""The event-log report as a Document: headline, per-application sections, starvation, limits."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from shufflelab.appreport import analysis as an  # noqa: E402
from shufflelab.appreport.analysis import App  # noqa: E402
from shufflelab.document import Document, Figure, Section, Table  # noqa: E402

DETAILED = 10
"""Applications given their own sections (the longest); the rest appear in the summary table."""

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
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0%}"


def fig_timeline(app: App, cp: pd.DataFrame, path: Path) -> Path | None:
    st = app.stages.dropna(subset=["submitted_at_ms", "completed_at_ms"])
    if st.empty or app.jobs.empty:
        return None
    t0 = float(app.jobs["submitted_at_ms"].min())
    st = st.sort_values("submitted_at_ms").drop_duplicates(["stage_id", "stage_attempt"]).tail(60)
    on_cp = set(cp["stage_id"]) if not cp.empty else set()
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.22 * len(st)))
    for y, s in enumerate(st.itertuples(index=False)):
        a = (float(s.submitted_at_ms) - t0) / 1000
        b = (float(s.completed_at_ms) - t0) / 1000
        ax.barh(y, max(b - a, 1e-3), left=a, color="#c0392b" if s.stage_id in on_cp else "#95a5a6")
    ax.set_yticks(range(len(st)), [f"stage {int(s)}" for s in st["stage_id"]], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the first job")
    ax.set_title(f"{app.name}: stages (red: critical path)", fontsize=9)
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
    ax.set_title(f"{app.name}: what pays off", fontsize=9)
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def app_sections(app: App, figdir: Path, link_gbps: float | None, idx: int) -> tuple[list[Section], str]:
    """The sections of one application and its headline line."""
    cp = an.critical_path(app)
    b = an.bounds(app)
    health = an.stage_health(app)
    fixes = an.what_pays_off(app, b, health)
    sh = an.shuffle_summary(app, link_gbps)
    facts = [
        f"status {app.status}; job time {app.job_time_s:.2f} s (first job submitted to last job end); "
        f"{len(app.tasks)} tasks in {app.stages['stage_id'].nunique() if not app.stages.empty else 0} stages on "
        f"{app.slots} task slots",
        f"shuffle: fetch wait {_pct(sh['read_share'])} and shuffle write {_pct(sh['write_share'])} of executor "
        f"run time; fetch wait is {_pct(sh['fetch_wait_of_core_time'])} of the application's core time; "
        f"{sh['remote_mb']:.1f} MB read remotely",
    ]
    if link_gbps:
        eff = sh["network_efficiency"]
        facts.append(
            f"network efficiency at {link_gbps:g} Gbit/s: {_pct(eff)} (ideal {sh['ideal_shuffle_s'] or 0:.2f} s "
            f"vs {sh['observed_shuffle_s'] or 0:.2f} s of stages fetching remote data)"
        )
    if not cp.empty:
        facts.append(
            f"critical path: {len(cp)} stages, {cp['duration_s'].sum():.2f} s of {app.job_time_s:.2f} s "
            f"(the rest is driver time between stages)"
        )
    facts.append(
        f"the models at the recorded settings: replay {b.replay_at_recorded_s:.2f} s, stage model "
        f"{b.model_at_recorded_s:.2f} s, vs {app.job_time_s:.2f} s recorded (predictions below are scaled by these)"
    )
    figures = []
    tl = fig_timeline(app, cp, figdir / f"app{idx}_timeline.png")
    if tl:
        figures.append(Figure(tl, f"{app.name}: stage timeline, critical path in red."))
    ff = fig_fixes(app, fixes, figdir / f"app{idx}_what_pays_off.png")
    if ff:
        figures.append(Figure(ff, f"{app.name}: predicted gain of each fix (model estimates)."))
    pays = pd.DataFrame(
        [
            {"fix": f.fix, "predicted gain": "not priced" if math.isnan(f.gain) else f"{f.gain:.0%}", "how": f.how}
            for f in fixes
        ]
    )
    health_cols = ["stage", "tasks", "failed", "median_ms", "max_ms", "skew", "stragglers", "spill_mb", "gc_share",
                   "fetch_wait_share"]  # fmt: skip
    sections = [
        Section(f"{app.name}", bullets=facts, level=2),
        Section("What pays off", tables=[Table(pays)], level=3),
        Section("Bounds (model estimates)", tables=[Table(b.table())], level=3),
        Section("Critical path", tables=[Table(cp.round(3))], level=3),
        Section(
            "Stages: skew, stragglers, spills, GC",
            paragraphs=[f"skew = longest / median task; stragglers: tasks over {an.STRAGGLER:g}x the median."],
            tables=[Table(health[[c for c in health_cols if c in health.columns]])] if not health.empty else [],
            level=3,
        ),
        Section("Shuffle-read FCT per volume bucket", tables=[Table(an.fct_table(app).round(1))], level=3),
        Section("Figures", figures=figures, level=3),
    ]
    best = next((f for f in fixes if not math.isnan(f.gain)), None)
    inf = next((x for x in b.rows if x.what == "infinitely fast network"), None)
    head = (
        f"{app.name}: {app.job_time_s:.1f} s; fetch wait is {_pct(sh['fetch_wait_of_core_time'])} of its core time"
        + (f"; an infinitely fast network would save at most {inf.gain(app.job_time_s):.0%}" if inf else "")
        + (f"; best-paying fix: {best.fix} ({best.gain:.0%}, model estimate)" if best else "")
        + "."
    )
    return sections, head


def starvation_section(apps: list[App], baselines: list[App] | None) -> Section:
    if not baselines:
        return Section("Is it starving for the network?", paragraphs=[ONE_LOG])
    from shufflelab import diagnose as dg

    def runs(xs: list[App]) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "run_id": f"{a.run_id}:{a.app_index}",
                    "job_time_s": a.job_time_s,
                    "executor_cpu_s": float(a.tasks["executor_cpu_ms"].sum()) / 1000,
                    "fetch_wait_s": float(a.tasks["fetch_wait_ms"].sum()) / 1000,
                    "total_cores": a.slots,
                }
                for a in xs
            ]
        )

    def tasks(xs: list[App]) -> pd.DataFrame:
        return pd.concat([a.tasks.assign(run_id=f"{a.run_id}:{a.app_index}") for a in xs], ignore_index=True)

    d = dg.diagnose("these logs", "baseline logs", runs(baselines), runs(apps), tasks(baselines), tasks(apps))
    return Section(
        "Is it starving for the network?",
        paragraphs=[
            f"{len(apps)} application(s) compared with {len(baselines)} baseline run(s) of the same application "
            f"(shufflelab.diagnose): **{d.verdict}**."
        ],
        bullets=list(d.reasons),
    )


def document(
    title: str, apps: list[App], figdir: Path, link_gbps: float | None, baselines: list[App] | None = None
) -> Document:
    figdir.mkdir(parents=True, exist_ok=True)
    for stale in figdir.glob("*.png"):
        stale.unlink()
    summary = pd.DataFrame(
        [
            {
                "application": a.name,
                "status": a.status,
                "job_s": round(a.job_time_s, 2),
                "tasks": len(a.tasks),
                "slots": a.slots,
                "remote_mb": round(float(a.tasks["remote_bytes"].sum()) / 1e6, 1) if not a.tasks.empty else 0.0,
                "fetch_wait_of_core_time": an.shuffle_summary(a, None)["fetch_wait_of_core_time"],
            }
            for a in apps
        ]
    )
    detailed = sorted(range(len(apps)), key=lambda i: -apps[i].job_time_s)[:DETAILED]
    sections: list[Section] = [
        Section(
            "Applications",
            paragraphs=[
                f"{len(apps)} application(s) read from event logs"
                + (f"; the {len(detailed)} longest have their own sections." if len(apps) > DETAILED else ".")
            ],
            tables=[Table(summary)],
        )
    ]
    heads: list[str] = []
    for i in sorted(detailed):
        secs, head = app_sections(apps[i], figdir, link_gbps, i)
        sections += secs
        heads.append(head)
    sections.append(starvation_section(apps, baselines))
    sections.append(Section("Limits", bullets=LIMITS, note=True))
    return Document(
        f"Event-log analysis: {title}",
        "Spark applications read by shufflelab analyze; how much the network costs them, why, and which fix pays off.",
        heads[:3],
        sections,
    )
