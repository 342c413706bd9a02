"""The fleet page on a synthetic fleet with a known truth (eventlog.fleet): network-bound applications
rank on top, the injected regression is flagged at its run with the stage and metric that moved, a
flat series is not flagged; and the change-point test on its own."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from shufflelab.appreport import fleet as report
from shufflelab.eventlog import fleet
from shufflelab.eventlog.ingest import ingest
from shufflelab.results import Store


@pytest.fixture(scope="module")
def fleet_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, fleet.Truth]:
    root = tmp_path_factory.mktemp("fleet")
    truth = fleet.generate(root, 40, seed=7, runs=8)
    db = root / "fleet.duckdb"
    ingest([root / "logs"], db)
    return db, truth


def test_network_bound_applications_rank_on_top(fleet_store: tuple[Path, fleet.Truth]) -> None:
    db, truth = fleet_store
    df = report.app_table(Store(db))
    ranked = df[df["core_s"] > 0].sort_values("fetch_wait_share", ascending=False)["app_id"].tolist()
    bound = set(truth.network_bound)
    assert len(bound) >= 3
    assert set(ranked[: len(bound)]) == bound


def test_regression_flagged_at_its_run_and_flat_series_not(fleet_store: tuple[Path, fleet.Truth]) -> None:
    db, truth = fleet_store
    store = Store(db)
    df = report.app_table(store)
    cps = {c.name: c for c in report.change_points(df)}
    (name, run), flat = next(iter(truth.regressions.items())), truth.flat[0]
    assert cps[name].flagged and cps[name].split == run
    assert cps[name].first_after == next(a.app_id for a in truth.apps if a.name == name and a.run == run)
    assert not cps[flat].flagged
    stage, metric = report.what_moved(store, df, cps[name])
    assert stage.startswith(f"stage {truth.regressed_stage[name]} ") and metric.startswith("fetch wait:")


def test_page_written_with_error_table_and_estimates(fleet_store: tuple[Path, fleet.Truth], tmp_path: Path) -> None:
    db, truth = fleet_store
    html, md = report.write(db, tmp_path)
    text = md.read_text()
    assert html.exists() and (tmp_path / "figures" / "fleet-distributions.png").exists()
    assert "model estimate" in text and "at most" not in text.replace("'at most'", "")
    assert "DCTCP" in text and "cannot be estimated" in text
    assert "| starvation-red | workload=small-records,apps=1,case=shared | 20 | 6 | -0.517 | -0.343 |" in text
    assert f"{len(truth.apps)} applications" in text


def test_change_point_on_plain_series() -> None:
    rng = np.random.default_rng(0)
    flat = list(np.exp(rng.normal(0, 0.03, 12)) * 100)
    step = flat[:7] + [x * 1.3 for x in flat[7:]]
    k, p = report.change_point(step)
    assert k == 7 and p < 0.001
    assert report.change_point(flat)[1] > 0.05


def test_error_table_matches_the_committed_reports() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs"
    tsv = [line.split("\t") for line in (docs / "whatif-error.tsv").read_text().splitlines()[1:]]
    assert [(r[0], r[1], float(r[2]), int(r[3]), float(r[4]), float(r[5])) for r in tsv] == list(report.WHATIF_ERRORS)
    for rep, scenario, _, _, error_lab, _ in report.WHATIF_ERRORS:  # the lab's column is the reports' own check
        section = (docs / "results" / rep / "report.md").read_text().split("## What-if check", 1)[1].split("\n## ")[0]
        assert scenario in section and f"{error_lab:.3f}" in section, (rep, scenario)
    lo, hi = report.error_range()
    assert (lo, hi) == (-0.066, 0.554)  # k <= 10: the 50 % and 90 % UDP runs and the demo
    a, b = report.saved_range(0.2)
    assert 0 < a < 0.2 < b < 1  # the switch's runs: the log replay erred both ways


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`analyze` over the logs of a small fleet (3 applications) into ``a/``, once for the module:
    the folder of the fleet's logs (``f/logs``), its store (``all.duckdb``) and ``a/``. The tests
    copy ``a/`` before writing into it."""
    from typer.testing import CliRunner

    from shufflelab.cli import app as cli

    root = tmp_path_factory.mktemp("small-fleet")
    fleet.generate(root / "f", 3, seed=1, runs=6)
    logs = str(root / "f" / "logs")
    r = CliRunner().invoke(cli, ["analyze", logs, "--db", str(root / "all.duckdb"), "--out", str(root / "a")])
    assert r.exit_code == 0, r.output
    return root


def test_analyze_and_report_write_the_fleet_page_only_for_several_applications(analyzed: Path, tmp_path: Path) -> None:
    # (that one application gets no fleet page: the next test, whose out folder held one before)
    from typer.testing import CliRunner

    from shufflelab.cli import app as cli

    root = analyzed
    assert "3 applications" in (root / "a" / "fleet.md").read_text() and (root / "a" / "fleet.html").exists()
    r = CliRunner().invoke(cli, ["report", str(root / "all.duckdb"), "--out", str(tmp_path / "r")])
    assert r.exit_code == 0 and "fleet:" in r.output, r.output
    assert (tmp_path / "r" / "fleet.md").read_text() == (root / "a" / "fleet.md").read_text()


def test_a_fleet_page_of_an_earlier_store_does_not_outlive_it_in_the_out_folder(analyzed: Path, tmp_path: Path) -> None:
    """One application analysed into a folder that holds another store's fleet page: the page goes
    (and none is written for the one application)."""
    import shutil

    from typer.testing import CliRunner

    from shufflelab.cli import app as cli

    root = analyzed
    out = tmp_path / "o"
    shutil.copytree(root / "a", out)
    assert (out / "fleet.md").exists()
    one = sorted((root / "f" / "logs").iterdir())[0]
    r = CliRunner().invoke(cli, ["analyze", str(one), "--db", str(tmp_path / "one.duckdb"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert (out / "report.md").exists()
    assert not (out / "fleet.md").exists() and not (out / "fleet.html").exists()  # no page of the other store


def test_the_report_reads_a_fleet_in_a_fixed_number_of_queries(
    fleet_store: tuple[Path, fleet.Truth], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """appreport.write read each application with six queries, each opening the store: at 10,000
    applications 60,000 opens (0.1 s each) before a line was written. Now one query per table."""
    from shufflelab import appreport
    from shufflelab.appreport import render

    db, truth = fleet_store
    queries: list[str] = []
    real = Store.query

    def counted(self: Store, sql: str, params: object = None) -> object:
        queries.append(sql)
        return real(self, sql, params)  # type: ignore[arg-type]

    class Read(Exception):
        pass

    seen: list[object] = []

    def stop(title: str, apps: list[object], *a: object, **k: object) -> None:
        seen.extend(apps)
        raise Read

    monkeypatch.setattr(Store, "query", counted)
    monkeypatch.setattr(render, "document", stop)
    with pytest.raises(Read):
        appreport.write(db, tmp_path)
    assert len(seen) == len(truth.apps) and len(queries) <= 8, len(queries)
    s = Store(db)
    one = appreport.load(s, *appreport.applications(s)[5])
    same = next(a for a in seen if a.run_id == one.run_id)  # type: ignore[attr-defined]
    for t in ("tasks", "stages", "jobs", "executors"):  # the same rows as one application's own queries
        x, y = (getattr(a, t).astype(object) for a in (same, one))
        pd.testing.assert_frame_equal(x.where(x.notna(), None), y.where(y.notna(), None))
    assert (same.log, same.job_time_s, same.status) == (one.log, one.job_time_s, one.status)  # type: ignore[attr-defined]


def test_the_report_of_a_fleet_lists_its_longest_applications_and_counts_the_rest(
    fleet_store: tuple[Path, fleet.Truth], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """report.md listed every application: 10,000 rows. Now the longest SUMMARY_ROWS, the rest counted."""
    from shufflelab import appreport
    from shufflelab.appreport import render

    db, truth = fleet_store
    monkeypatch.setattr(render, "SUMMARY_ROWS", 4)
    monkeypatch.setattr(render, "DETAILED", 1)
    apps = appreport.load_all(Store(db))
    doc = render.document("f", apps, tmp_path, None)
    table = doc.sections[0].tables[0]
    longest = sorted((a.job_time_s for a in apps if a.job_time_s == a.job_time_s), reverse=True)[:4]
    assert list(table.df["job_s"]) == [round(x, 2) for x in longest]
    assert f"of {len(truth.apps)}; {len(truth.apps) - 4} more not shown" in table.caption


def test_a_small_fleet_headline_gives_its_saving_in_significant_digits(analyzed: Path) -> None:
    """A few short applications (the small fleet's page: three, 0.18 core-hours): the headline said
    'would save 0.0 core-hours (12%)'."""
    root = analyzed
    md = (root / "a" / "fleet.md").read_text()
    headline = [x.removeprefix("- ") for x in md.split("## Headline\n\n", 1)[1].split("\n\n", 1)[0].splitlines()]
    saving = next(h for h in headline if "would save" in h)
    assert "save 0.0 core-hours" not in saving and " 0.0 core-hours" not in headline[0]
    assert re.search(r"would save 0\.0\d+ core-hours \(\d+%\)", saving), saving


def test_an_application_that_had_not_ended_has_no_core_time(tmp_path: Path) -> None:
    """A log cut while it ran (in progress) had a job time up to its last ended job and the fetch
    wait of its running jobs' tasks too: 489 % of its 'core time' at 10,000 applications, ranked first."""
    t = fleet.templates()["udp75"]
    logs = tmp_path / "logs"
    logs.mkdir()
    for i, cut in enumerate((None, 0.5)):
        app = f"app-20270101000000-{i:04d}"
        lines = fleet.render(t, app, f"cut-{i}", fleet.START_MS, 1.0, {}, cut=cut)
        (logs / (app + (".inprogress" if cut else ""))).write_text("\n".join(lines) + "\n")
    ingest([logs], tmp_path / "f.duckdb")
    df = report.app_table(Store(tmp_path / "f.duckdb")).set_index("app_id")
    assert (
        df.loc["app-20270101000000-0001", "status"] == "incomplete"
        and df.loc["app-20270101000000-0001", "job_time_s"] > 0
    )
    assert np.isnan(df.loc["app-20270101000000-0001", "core_s"]) and np.isnan(
        df.loc["app-20270101000000-0001", "fetch_wait_share"]
    )
    assert 0 < df.loc["app-20270101000000-0000", "fetch_wait_share"] <= 1
