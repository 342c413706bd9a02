"""Experiment reports: tables and figures from a results store, as HTML and Markdown.

The job-time table follows seed 000's Table 1 when the matrix varies congestion control (rows:
the other varied values, columns: congestion control). Every report states how the experiment
is scaled relative to the seed and what this host could not emulate.

``data`` loads the store and computes the tables, ``figures`` draws, ``text`` words the headline
and the limits, ``sections`` turns each analysis into a Section; :func:`write` renders them once
(shufflelab.document) to Markdown and HTML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from shufflelab import document
from shufflelab.report.data import (
    CC_COMPARISON_NOTE,
    CC_KEY,
    FAULTS_NOTE,
    SHUFFLE_NOTE,
    SLOWDOWN_NOTE,
    UDP_KEY,
    VCC_NOTE,
    WHATIF_NOTE,
    Data,
    cc_comparison_table,
    faults_table,
    load,
    scenario_table,
    seed000_table,
    shuffle_table,
    slowdown_table,
    verdict,
)
from shufflelab.report.figures import _finish, fig_bytes, fig_job_times, log_limits
from shufflelab.report.text import SEED_SCALE, headline, scale_note, selftest_fact, user_app_line, vcc_headline
from shufflelab.results import reading

__all__ = [
    "CC_COMPARISON_NOTE", "CC_KEY", "FAULTS_NOTE", "SEED_SCALE", "SHUFFLE_NOTE", "SLOWDOWN_NOTE", "UDP_KEY",
    "VCC_NOTE", "WHATIF_NOTE", "Data", "ReportPaths", "_finish", "cc_comparison_table", "faults_table", "fig_bytes",
    "fig_job_times", "headline", "load", "log_limits", "scale_note", "scenario_table", "seed000_table",
    "selftest_fact", "shuffle_table", "slowdown_table", "user_app_line", "vcc_headline", "verdict", "write",
]  # fmt: skip


@dataclass
class ReportPaths:
    html: Path
    markdown: Path
    figures: list[Path]
    headline: list[str] = field(default_factory=list)  # the report's finding, as in its Headline section


def write(db: Path, out: Path | None = None) -> ReportPaths:
    """Write ``report.html``, ``report.md`` and ``figures/*.png`` for the experiment in ``db`` (its
    reads through one connection: :func:`shufflelab.results.reading`)."""
    with reading(db):
        return _write(db, out)


def _write(db: Path, out: Path | None) -> ReportPaths:
    from shufflelab.report.sections import analyses

    d = load(db)
    out = out or db.parent / f"{d.name}-report"
    figdir = out / "figures"
    figdir.mkdir(parents=True, exist_ok=True)
    for stale in figdir.glob("*.png"):  # a re-written report keeps no figure of an earlier version
        stale.unlink()
    found = analyses(d, db, figdir)
    doc = document.Document(d.name, d.description, found.head, found.sections)
    html_path, md_path = document.write(doc, out)
    return ReportPaths(html_path, md_path, [f.path for f in found.figures], found.head)
