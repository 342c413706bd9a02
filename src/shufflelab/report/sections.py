"""The experiment report's sections: each analysis of a results store as a titled Section (text,
tables, figures); ``report.write`` puts them in order and renders them once (shufflelab.document)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from shufflelab.document import Figure, Section, Table
from shufflelab.report import figures as F
from shufflelab.report.data import (
    CC_COMPARISON_NOTE,
    FAULTS_NOTE,
    SHUFFLE_NOTE,
    SLOWDOWN_NOTE,
    VCC_NOTE,
    WHATIF_NOTE,
    Data,
    cc_comparison_table,
    faults_table,
    scenario_table,
    seed000_table,
    shuffle_table,
    slowdown_table,
)
from shufflelab.report.text import (
    box_fact,
    box_verdict_note,
    cross_generator_fact,
    headline,
    scale_note,
    selftest_fact,
    vcc_headline,
)
from shufflelab.results import Store
from shufflelab.stats import MIN_N

SUMMARY_COLS = ["n", "not_ok", "job_mean_s", "job_sd_s", "job_ci_95_s", "cpu_mean_s", "cpu_sd_s", "remote_mb",
                "bottleneck_mb", "max_backlog_kb"]  # fmt: skip


@dataclass
class Analyses:
    """What the analyses found for one store: the headline's inputs, the sections, the figures."""

    head: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)


def _add(out: Analyses, path: Path | None, caption: str, at: int | None = None) -> None:
    if path is None:
        return
    if at is None:
        out.figures.append(Figure(path, caption))
    else:
        out.figures.insert(at, Figure(path, caption))


def _vcc(d: Data, db: Path, figdir: Path, out: Analyses) -> tuple[list[Section], pd.DataFrame | None]:
    from shufflelab import vcc

    prepared = vcc.prepare(d.runs, d.scenarios)
    obs = vcc.observations(prepared)
    secs: list[Section] = []
    closure = None
    if not obs.empty:
        cells = vcc.cells(obs)
        closure = vcc.closure_table(obs)
        censored = any(c.lower_bound for c in cells)
        note = "open marker + arrow: some runs timed out (mean is a lower bound)" if censored else "no run timed out"
        caption = "Seed 002: job time vs competing pairs per host kind (95 % CI)."
        _add(out, vcc.figure(cells, figdir / "vcc_job_times.png", note), caption, at=0)
        grid = pd.DataFrame([{"pairs": c.pairs, "case": c.case, "cell": c.text()} for c in cells])
        grid = grid.pivot(index="pairs", columns="case", values="cell")
        grid.columns.name = None
        tables = [Table(grid, index=True)]
        if closure is not None and not closure.empty:
            tables.append(Table(closure, "Gap closed by VCC: (legacy − vcc) / (legacy − ecn), bootstrap 95 % CI:"))
        secs.append(Section("Seed 002: job time (s, mean [95 % CI]) by competing pairs and host kind", [VCC_NOTE],
                            tables=tables))  # fmt: skip
    vb = vcc.fig_backlog(Store(db), prepared, d.spec, figdir / "vcc_backlog.png")
    _add(out, vb, "Seed 002: bottleneck backlog over time per host kind at the most competing pairs.", at=1)
    return secs, closure


def _ndp(db: Path, figdir: Path, out: Analyses) -> list[Section]:
    from shufflelab.ndp import report as ndp_report

    ndp = ndp_report.load(db)
    if ndp is None:
        return []
    runs, conds = ndp
    policy = ndp_report.policy_table(runs, conds, ndp_report.choices(db, runs, conds))
    nf = ndp_report.figure(policy, conds, figdir / "ndp_policies.png")
    if nf:
        out.figures.insert(0, Figure(nf, "Seed 003: mean query time per pushdown policy and condition."))
    secs = [
        Section(
            "Near-data processing: time per policy, Net-Aware vs Oracle", [ndp_report.NOTE], tables=[Table(policy)]
        ),
        Section("Bytes per policy", tables=[Table(ndp_report.bytes_table(runs, conds))], level=3),
    ]
    picks = ndp_report.picks_table(db, runs, conds)
    if not picks.empty:
        secs.append(Section("What Net-Aware picked and why (estimates: none / filter / filter+project / full)",
                            tables=[Table(picks)], level=3))  # fmt: skip
    return secs


def _whatif(db: Path, pairs: list[tuple[str, str]]) -> list[Section]:
    from shufflelab import whatif

    try:
        wi = whatif.validate(db, pairs) if pairs else None
    except Exception as exc:  # noqa: BLE001 - a model failure must not cost the report
        return [Section("What-if check", [f"(what-if check skipped: {type(exc).__name__}: {exc})"])]
    if wi is None or wi.empty:
        return []
    title = "What-if check: predicted vs measured job time without the cross traffic"
    return [Section(title, [WHATIF_NOTE], tables=[Table(wi)])]


def analyses(d: Data, db: Path, figdir: Path) -> Analyses:
    """Every analysis of the store, as sections in report order (the facts and limits come first)."""
    from shufflelab import diagnose as dg
    from shufflelab import vcc

    out = Analyses()
    table = scenario_table(d)
    t000 = seed000_table(d, table)
    slow = slowdown_table(d)
    if not table.empty:
        caption = f"Job time per scenario (mean; 95 % CI where n ≥ {MIN_N}, else the n is shown)."
        _add(out, F.fig_job_times(d, table, figdir / "job_times.png"), caption)
    # a MapReduce replay has no Spark tasks: the Spark analyses (diagnosis, FCT, what-if) do not apply
    mapreduce = d.spec.workload.name == "mapreduce"
    seed002 = vcc.applies(d.keys, d.runs)
    pairs = [] if mapreduce else dg.baseline_pairs(d.scenarios)
    bl = None if seed002 else F.fig_backlog(d, db, figdir / "backlog.png", pairs)
    if bl:
        out.figures.append(Figure(bl[0], f"Bottleneck backlog over time: {', '.join(bl[1])}."))
    fb = F.fig_bytes(d, figdir / "bytes.png")
    if fb:
        out.figures.append(Figure(fb, "Bytes through the bottleneck vs remote shuffle bytes, per run."))
    diagnoses, seq_note = _diagnoses(db) if pairs else ([], None)
    ff = F.fig_fct(db, pairs, figdir / "fct.png") if pairs else None
    if ff:
        out.figures.append(Figure(ff, "Shuffle-read FCT per task by data volume (log scale), scenarios and baselines."))
    fp = F.fig_fetch_progress(db, pairs, figdir / "fetch_progress.png") if pairs else None
    if fp:
        out.figures.append(
            Figure(fp, "Fetch rate of tasks blocked on fetches, per heartbeat interval (task listener).")
        )
    fc = None if mapreduce else F.fig_cpu_vs_job(d, table, figdir / "cpu_vs_job.png")
    if fc:
        out.figures.append(Figure(fc, f"Executor CPU time vs job time per scenario (mean; 95 % CI where n ≥ {MIN_N}; "
                                      "axes from 0)."))  # fmt: skip
    vcc_secs, closure = _vcc(d, db, figdir, out) if seed002 else ([], None)
    failed = d.runs[d.runs["status"] != "ok"][["label", "rep", "status", "cause"]]
    out.head = headline(table, slow, diagnoses, len(failed), vcc_headline(closure))
    secs = [Section("Scale and limits", bullets=scale_note(d), note=True), Section("Facts", bullets=_facts(d))]
    if t000 is not None:
        secs.append(Section("Job time (s, mean ± σ) -- rows: cross traffic, columns: congestion control",
                            tables=[Table(t000, index=True)]))  # fmt: skip
    if slow is not None:
        secs.append(Section("Slowdown from cross traffic (ratio of mean job times, 95 % CI, Welch p)",
                            [SLOWDOWN_NOTE], tables=[Table(slow, keys=len(d.keys))]))  # fmt: skip
    ccs = cc_comparison_table(d)
    if ccs is not None:
        secs.append(Section("Congestion controls compared at each level (ratio of mean job times, 95 % CI, Welch p)",
                            [CC_COMPARISON_NOTE], tables=[Table(ccs, keys=len(d.keys) + 1)]))  # fmt: skip
    secs += vcc_secs
    if diagnoses:
        secs.append(_diagnosis(diagnoses, d, seq_note))
    summary = table[[c for c in [*d.keys, *SUMMARY_COLS] if c in table.columns]] if not table.empty else table
    secs.append(Section("Per scenario", tables=[Table(summary, keys=max(1, len(d.keys)))]))
    shuf = shuffle_table(d, db)
    if shuf is not None:
        secs.append(Section("Shuffle path share (mean over runs)", [SHUFFLE_NOTE], tables=[Table(shuf)]))
    secs += _whatif(db, pairs)
    fault_tab = faults_table(d, db)
    if fault_tab is not None:
        secs.append(Section("Faults and Spark's recovery", [FAULTS_NOTE], tables=[Table(fault_tab)]))
    secs += _ndp(db, figdir, out)
    if not failed.empty:
        secs.append(Section("Runs that did not finish", tables=[Table(failed)]))
    secs.append(Section("Figures", figures=out.figures))
    out.sections = secs
    return out


def _diagnoses(db: Path) -> tuple[list[Any], str | None]:
    """Every comparison's diagnosis and the sequential design's line (``sequential.read``)."""
    from shufflelab import sequential

    return sequential.read(db)


def _diagnosis(diagnoses: list[Any], d: Data, note: str | None = None) -> Section:
    return Section(
        "Starvation diagnosis (`shufflelab diagnose`)",
        [note] if note else [],
        tables=[Table(pd.DataFrame([x.row() for x in diagnoses]))],
        bullets=[
            f"**{x.scenario}** vs {x.baseline}: **{x.verdict}** -- "
            + "; ".join(x.reasons)
            + box_verdict_note(d, x.scenario, x.baseline)
            for x in diagnoses
        ],
    )


def _facts(d: Data) -> list[str]:
    n_ok = int((d.runs["status"] == "ok").sum())
    failed = int((d.runs["status"] != "ok").sum())
    ok = d.runs[d.runs["status"] == "ok"]
    crossing = int((ok["bottleneck_tx_bytes"] >= ok["remote_bytes_read"]).sum()) if not ok.empty else 0
    facts = [
        f"{len(d.runs)} runs recorded, {n_ok} ok, {failed} not ok.",
        f"Shuffle bytes crossed the bottleneck in {crossing} of {n_ok} successful runs "
        "(bottleneck bytes sent >= remote shuffle bytes read).",
    ]
    st = selftest_fact(d)
    if st:
        facts.append(st)
    gen = cross_generator_fact(d)
    if gen:
        facts.append(gen)
    box = box_fact(d)
    if box:
        facts.append(box)
    return facts
