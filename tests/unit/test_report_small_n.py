"""Reports at small n: every section at n = 1, 2 and 10 on synthetic stores;
no 'nan', no zero-length or withheld-but-drawn intervals, a headline; figures that do not mislead."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import pytest
import synthetic_store
from matplotlib.collections import LineCollection
from matplotlib.patches import Rectangle

from shufflelab import report
from shufflelab.results import RunRecord, Store


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> dict[str, plt.Figure]:
    """Every figure the report saves, by file name (kept open after saving)."""
    seen: dict[str, plt.Figure] = {}
    from shufflelab.report import figures as report_figures

    finish = report_figures._finish

    def keep(fig: plt.Figure, path: Path) -> None:
        seen[path.name] = fig
        finish(fig, path)

    monkeypatch.setattr(report_figures, "_finish", keep)
    return seen


@dataclass
class Rendered:
    db: Path
    paths: report.ReportPaths
    figures: dict[str, plt.Figure]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[int], Rendered]]:
    """The report of a synthetic store of n runs a scenario with every figure it saved, written once
    per n for the tests of this module that read it (none of them changes it)."""
    from shufflelab.report import figures as report_figures

    done: dict[int, Rendered] = {}
    finish = report_figures._finish

    def at(n: int) -> Rendered:
        if n not in done:
            seen: dict[str, plt.Figure] = {}

            def keep(fig: plt.Figure, path: Path) -> None:
                seen[path.name] = fig
                finish(fig, path)

            d = tmp_path_factory.mktemp(f"n{n}")
            db = synthetic_store.build(d / "s.duckdb", n)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(report_figures, "_finish", keep)
                done[n] = Rendered(db, report.write(db, d / "out"), seen)
        return done[n]

    yield at


def _segments(fig: plt.Figure) -> list[float]:
    """Lengths of every error-bar segment drawn in the figure."""
    out = []
    for ax in fig.axes:
        for coll in ax.collections:
            if isinstance(coll, LineCollection):
                for seg in coll.get_segments():
                    out.append(math.dist(seg[0], seg[-1]))
    return out


@pytest.mark.parametrize("n", [1, 2, 10])
def test_every_section_at_n(rendered: Callable[[int], Rendered], n: int) -> None:
    r = rendered(n)
    paths, figures = r.paths, r.figures
    md, page = paths.markdown.read_text(), paths.html.read_text()
    for text in (md, re.sub(r"data:image/png;base64,[^']*", "", page)):
        assert not re.search(r"\bnan\b", text, re.IGNORECASE), text
        assert not re.search(r"\binf\b", text, re.IGNORECASE)
        # no zero-length interval such as [12.3, 12.3]
        assert not re.search(r"\[(-?\d+(?:\.\d+)?), \1\]", text)
    head = md.split("## Headline\n\n", 1)[1].split("\n\n", 1)[0]
    assert head.startswith("- udp=75 vs udp=0: job time x") and "<h2>Headline</h2><ul>\n<li>udp=75" in page
    expected = {"Slowdown from cross traffic", "Starvation diagnosis", "Per scenario", "Shuffle path share", "What-if"}
    assert all(f"## {s}" in md for s in expected)
    assert set(figures) == {"job_times.png", "backlog.png", "bytes.png", "fct.png", "cpu_vs_job.png"}
    for fig in figures.values():  # an interval that is drawn has a length
        assert all(length > 0 for length in _segments(fig))
    intervals = [s for name in ("job_times.png", "cpu_vs_job.png") for s in _segments(figures[name])]
    if n < 3:
        assert "too few runs for an interval/verdict (need 3 per side)" in head
        assert "95 % CI" not in head and "Welch p" not in head
        # the one-row slowdown table is wider than the page: printed transposed
        slowdown = ("| udp_percent | 75 |", f"| n | {n}/{n} |", "| p_welch | – |")
        assert all(row in md for row in slowdown) and "| verdict | too few runs for a verdict |" in md
        assert not intervals  # none drawn, none printed
        assert ("n = 1, no interval" if n == 1 else "too few runs for an interval (n = 2, need 3)") in md
    else:
        assert re.search(
            r"x1\.\d\d \(\+\d+ %\), 95 % CI \[1\.\d\d, 2\.\d\d\], Welch p = [\d.e-]+, n = 10/10: slower", head
        )
        assert "starvation diagnosis: starved" in head
        assert intervals


def test_cpu_axes_start_at_zero(rendered: Callable[[int], Rendered]) -> None:
    """Regression: the CPU-vs-job-time axes were zoomed to the data, so a 4 % CPU change filled the
    height and read as CPU rising with job time. Both axes now start at 0: a flat CPU looks flat."""
    r = rendered(10)
    ax = r.figures["cpu_vs_job.png"].axes[0]
    assert ax.get_xlim()[0] == 0 and ax.get_ylim()[0] == 0
    table = report.scenario_table(report.load(r.db))
    cpu = table["cpu_mean_s"]
    assert cpu.max() / cpu.min() < 1.05  # the store's CPU is flat ...
    assert (cpu.max() - cpu.min()) / (ax.get_ylim()[1] - ax.get_ylim()[0]) < 0.05  # ... and looks it


def test_one_run_draws_and_prints_no_interval(rendered: Callable[[int], Rendered]) -> None:
    """Regression: one-run scenarios drew zero-length '95 % CI' bars."""
    r = rendered(1)
    db, figures = r.db, r.figures
    assert _segments(figures["job_times.png"]) == [] and _segments(figures["cpu_vs_job.png"]) == []
    notes = [t.get_text() for t in figures["job_times.png"].axes[0].texts]
    assert notes == ["n = 1", "n = 1"]
    table = report.scenario_table(report.load(db))
    assert list(table["job_ci_95_s"]) == ["n = 1, no interval"] * 2


def test_two_runs_give_no_interval_and_no_p(tmp_path: Path) -> None:
    """Regression: with n = 2 a bootstrap CI excluding 1 sat next to Welch p = 0.38. Below 3 runs a
    side the slowdown has neither; from 3 on, the interval and the p-value agree."""
    db = synthetic_store.build(tmp_path / "s.duckdb", 2)
    row = report.slowdown_table(report.load(db)).iloc[0]  # type: ignore[union-attr]
    assert row["job_ci_95"] == "too few runs for an interval (n = 2/2, need 3 per side)"
    assert row["p_welch"] == "–" and row["verdict"] == "too few runs for a verdict"
    db3 = synthetic_store.build(tmp_path / "s3.duckdb", 3)
    row3 = report.slowdown_table(report.load(db3)).iloc[0]  # type: ignore[union-attr]
    low = float(row3["job_ci_95"].strip("[]").split(",")[0])
    assert (low > 1) == (float(row3["p_welch"]) < 0.05) and row3["verdict"] == "slower"


def _bytes_store(path: Path, pairs: list[tuple[int, int]]) -> Path:
    """A store whose runs have the given (remote shuffle bytes, bottleneck bytes), nothing else."""
    st = Store(path)
    st.init_experiment("b", "", json.dumps(synthetic_store.spec(0)), "b.toml")
    st.add_scenarios([{"scenario_id": "s", "label": "s", "values": {}, "spec_json": "{}", "backend": "x"}])
    for i, (remote, sent) in enumerate(pairs):
        run = {"run_id": f"r{i}", "scenario_id": "s", "rep": i + 1, "status": "ok", "job_time_s": 10.0,
               "remote_bytes_read": remote, "bottleneck_tx_bytes": sent, "started_at": float(i)}  # fmt: skip
        st.write_run(RunRecord(run=run, tables={}))
    return path


@pytest.mark.parametrize(
    "pairs",
    [
        [(49_000_000, 52_000_000), (50_000_000, 52_300_000)],  # the axis was 48.8-52.5 MB: the bars looked cut
        # docs/results/starvation-red: the axis started at 22 MB (a 24.7 MB bar was a sliver) and the
        # legend covered a bar
        list(zip([int(x * 1e6) for x in (43.45, 42.86, 40.91, 24.67, 24.70, 36.64, 45.80, 39.49, 24.67, 24.67)],
                 [int(x * 1e6) for x in (50.48, 175.04, 178.50, 27.68, 137.85, 43.03, 176.81, 177.43, 27.67, 140.17)],
                 strict=True)),
    ],
)  # fmt: skip
def test_bytes_chart_shows_every_bar(tmp_path: Path, figures: dict[str, plt.Figure], pairs: Any) -> None:
    """Regression: the log-scaled bytes chart cut the data (limits hugging it, legend over it)."""
    db = _bytes_store(tmp_path / "b.duckdb", pairs)
    assert report.fig_bytes(report.load(db), tmp_path / "bytes.png") is not None
    fig = figures["bytes.png"]
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_height() > 0]
    assert len(bars) == 2 * len(pairs)
    tops = [b.get_y() + b.get_height() for b in bars]
    assert lo * 1.3 <= min(tops) and max(tops) * 1.3 <= hi  # every bar inside, with room
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert not any(legend.overlaps(b.get_window_extent()) for b in bars)


def test_headline_without_baselines_names_the_runs_that_did_not_finish() -> None:
    table = pd.DataFrame({"scenario": ["a", "b"], "n": [3, 0], "job_mean_s": [10.0, math.nan]})
    assert report.headline(table, None, [], not_ok=3) == [
        "3 successful runs over 1 scenario(s); mean job time from 10.0 s (a, n = 3) to 10.0 s (a, n = 3); "
        "3 run(s) did not finish (see 'Runs that did not finish')."
    ]
    empty = pd.DataFrame({"scenario": ["a"], "n": [0], "job_mean_s": [math.nan]})
    assert report.headline(empty, None, [], not_ok=2)[0].startswith("No successful run")


def test_seed002_headline_is_the_gap_vcc_closes() -> None:
    closure = pd.DataFrame(
        {"pairs": [0, 4], "closure": [math.nan, 0.998], "closure_ci_low": [math.nan, 0.99],
         "closure_ci_high": [math.nan, 1.001], "closure_bound": ["exact", "lower"]}
    )  # fmt: skip
    assert report.vcc_headline(closure) == [
        "4 competing pairs: VCC closes 0.998 of the legacy-ECN gap (bootstrap 95 % CI 0.990-1.001; legacy runs "
        "timed out, so a lower bound)."
    ]


def test_many_comparisons_are_summed_up_in_the_headline() -> None:
    slow = pd.DataFrame(
        {"cc": ["cubic", "cubic", "reno", "reno"], "udp_percent": [50.0, 100.0, 50.0, 100.0],
         "n": ["5/5", "5/5", "5/5", "2/2"], "job_ratio": [1.2, 7.3, 1.02, 2.5],
         "job_ci_95": ["[1.03, 1.42]", "[6.28, 8.69]", "[0.95, 1.10]", "n = 2/2"],
         "p_welch": ["0.022", "1e-06", "0.5", "–"],
         "verdict": ["slower", "slower", "no significant change", "too few runs for a verdict"],
         "cpu_ratio": [1.0] * 4, "cpu_ci_95": ["[0.9, 1.1]"] * 4}
    )  # fmt: skip
    assert report.headline(pd.DataFrame(), slow, []) == [
        "Cross traffic vs none in 4 comparisons: 2 slower, 1 no significant change, 1 too few runs for a verdict; "
        "job time from x1.02 (cc=reno, UDP at 50 % vs none) to x7.30 (cc=cubic, UDP at 100 % vs none, "
        "95 % CI [6.28, 8.69], Welch p = 1e-06, n = 5/5)."
    ]
    assert len(report.headline(pd.DataFrame(), slow.iloc[:3], [])) == 3  # a few: one line each


def test_a_change_that_rounds_to_zero_is_printed_without_a_sign() -> None:
    from types import SimpleNamespace

    from shufflelab.document import signed
    from shufflelab.stats import compare

    job = compare([10.0, 10.2, 9.8], [9.98, 10.17, 9.79])  # x0.998: -0.2 %
    line = report.headline(pd.DataFrame(), None, [SimpleNamespace(scenario="a", baseline="b", job=job, verdict="x")])
    assert "job time x1.00 (0 %)" in line[0], line
    assert [signed(v) for v in (-0.2, 0.4, -0.6, 0.0, 12.0)] == ["0", "0", "-1", "0", "+12"]
    assert signed(-0.04, 1) == "0.0" and signed(-0.06, 1) == "-0.1"
