"""diagnose, whatif and analyze --baseline on stores of event logs (real Spark 3.5 / 4.3 logs), and the
application report's figures and network efficiency, checked against computations from the raw rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from shufflelab import appreport, shuffle
from shufflelab.appreport import analysis as an
from shufflelab.appreport import starvation
from shufflelab.cli import app as cli
from shufflelab.eventlog.ingest import ingest
from shufflelab.results import Store, reading

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "eventlogs"


def _logs(*variants: str) -> list[Path]:
    return [HERE / line / v for v in variants for line in ("spark-3.5", "spark-4.3")]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("appcmd")
    out = {"plain": d / "plain.duckdb", "zstd": d / "zstd.duckdb", "mixed": d / "mixed.duckdb"}
    ingest(_logs("plain"), out["plain"])
    ingest(_logs("zstd"), out["zstd"])
    ingest(_logs("lz4", "failed"), out["mixed"])
    return out


def _said(r: object) -> str:
    """A command's output with the terminal's line wrapping undone."""
    return " ".join(str(r.output).split())  # type: ignore[attr-defined]


def _apps(db: Path) -> list[an.App]:
    """Every application of the store (read through one connection, as the report reads them)."""
    with reading(db):
        s = Store(db)
        return [appreport.load(s, r, i, n) for r, i, n in appreport.applications(s)]


def _runs(db: Path) -> pd.DataFrame:
    return Store(db).query("SELECT r.*, s.label FROM runs r JOIN scenarios s USING (scenario_id)")


def test_one_name_on_each_side_is_compared_and_the_ratio_is_the_runs(stores: dict[str, Path]) -> None:
    (d,) = starvation.diagnose_stores(stores["zstd"], stores["plain"], min_reps=2)
    scen, base = _runs(stores["zstd"]), _runs(stores["plain"])
    assert (d.n_scenario, d.n_baseline) == (2, 2)
    assert d.job.ratio == pytest.approx(scen["job_time_s"].mean() / base["job_time_s"].mean())
    assert any("compared as one" in r for r in d.reasons)
    assert d.verdict in ("starved", "not starved", "inconclusive")


def test_applications_are_paired_by_name_and_failed_runs_left_out(stores: dict[str, Path]) -> None:
    found = {d.scenario: d for d in starvation.diagnose_stores(stores["mixed"], stores["mixed"], min_reps=2)}
    assert set(found) == {"fixture-lz4", "fixture-failed"}
    same = found["fixture-lz4"]
    # the same two runs on both sides: no slowdown, but two runs a side do not bound the ratio below
    # x1.10 (the fixture's runs differ), so "not starved" is not shown either
    assert same.job.ratio == pytest.approx(1.0) and same.verdict == "inconclusive"
    assert same.job.ratio_ci_high > 1.10 and "runs a side" in " ".join(same.reasons)
    failed = found["fixture-failed"]  # both runs failed: nothing to compare
    assert failed.n_scenario == 0 and failed.verdict == "inconclusive"
    assert any("4 application run(s) that did not end ok left out" in r for r in failed.reasons)
    with pytest.raises(ValueError, match="no application name is in both"):
        starvation.diagnose_stores(stores["mixed"], stores["plain"])
    with pytest.raises(ValueError, match="--scenario 'nope'"):
        starvation.diagnose_stores(stores["mixed"], stores["mixed"], "nope")


def test_diagnose_command_on_event_log_stores(stores: dict[str, Path], tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["diagnose", str(stores["zstd"])])
    assert r.exit_code == 2 and "holds applications read from event logs" in _said(r) and "--baseline" in _said(r)
    r = CliRunner().invoke(cli, ["diagnose", str(stores["zstd"]), "--baseline", str(tmp_path / "none.duckdb")])
    assert r.exit_code == 2 and "none.duckdb: no such file" in _said(r)
    text = tmp_path / "x.duckdb"
    text.write_text("not a store")
    r = CliRunner().invoke(cli, ["diagnose", str(stores["zstd"]), "--baseline", str(text)])
    assert r.exit_code == 2 and "not a store of event logs" in _said(r)
    r = CliRunner().invoke(
        cli, ["diagnose", str(stores["zstd"]), "--baseline", str(stores["plain"]), "--min-reps", "2"]
    )
    assert r.exit_code == 0, r.output
    assert "fixture-zstd vs fixture-plain (baseline logs)" in _said(r)
    assert "Traceback" not in _said(r)


def test_whatif_on_event_logs_is_the_reports_network_bound(stores: dict[str, Path]) -> None:
    rows = appreport.whatif_table(stores["zstd"], 2.0)
    apps = {a.name: a for a in _apps(stores["zstd"])}
    assert set(rows["application"]) == set(apps)
    for row in rows.itertuples(index=False):
        a = apps[row.application]
        b = {x.what: x.predicted_s for x in an.bounds(a).rows}
        assert row.predicted_s == pytest.approx(b["2x faster network"])
        assert row.predicted_s <= row.recorded_s + 1e-6
        assert row.recorded_s == pytest.approx(a.job_time_s)
    r = CliRunner().invoke(cli, ["whatif", str(stores["zstd"]), "--speedup", "2"])
    assert r.exit_code == 0, r.output
    assert "Model estimate" in _said(r) and "fixture-zstd" in _said(r)
    r = CliRunner().invoke(cli, ["whatif", str(stores["zstd"]), "--select", "nope"])
    assert r.exit_code == 2 and "no application matches" in _said(r)


def test_network_efficiency_is_the_busiest_hosts_bytes_at_the_link_rate(stores: dict[str, Path]) -> None:
    for a in _apps(stores["zstd"]):
        sh = an.shuffle_summary(a, 10.0)
        reading = a.tasks[a.tasks["remote_bytes"] > 0]
        if reading.empty:
            assert sh["network_efficiency"] is None
            continue
        busiest = float(a.tasks.groupby("host")["remote_bytes"].sum().max())
        ideal = busiest * 8 / (10e9 * shuffle.WIRE_PAYLOAD)
        assert sh["ideal_shuffle_s"] == pytest.approx(ideal)
        assert sh["network_efficiency"] == pytest.approx(ideal / sh["observed_shuffle_s"])


def test_the_critical_path_names_the_attempt_that_completed(stores: dict[str, Path]) -> None:
    retried = 0
    for a in _apps(stores["zstd"]):
        last = a.stages.dropna(subset=["completed_at_ms"]).groupby("stage_id")["stage_attempt"].max()
        cp = an.critical_path(a)
        for sid, attempt in zip(cp["stage_id"], cp["attempt"], strict=True):
            assert attempt == last[sid]
            retried += attempt > 0
    assert retried > 0  # the fixtures' lost executor makes a stage run twice


def test_analyze_baseline_store_holds_only_the_baselines_given(tmp_path: Path) -> None:
    """(and the figures of an application with remote reads, in the first report)"""
    db, out = tmp_path / "a.duckdb", tmp_path / "rep"
    args = ["analyze", str(HERE / "spark-4.3" / "zstd"), "--db", str(db), "--out", str(out)]
    r = CliRunner().invoke(cli, [*args, "--baseline", str(HERE / "spark-3.5" / "zstd")])
    assert r.exit_code == 0, r.output
    # the figures of an application with remote reads
    figs = sorted(p.name for p in (out / "figures").iterdir())
    assert figs == ["app0_fct.png", "app0_timeline.png", "app0_what_pays_off.png"]
    md = (out / "report.md").read_text()
    assert "figures/app0_fct.png" in md and "nan" not in md
    base = tmp_path / "a-baseline.duckdb"
    assert list(_runs(base)["app_id"]) == ["app-20261124133847-0001"]
    r = CliRunner().invoke(cli, [*args, "--baseline", str(HERE / "spark-3.5" / "plain")])
    assert r.exit_code == 0, r.output
    assert list(_runs(base)["app_id"]) == ["app-20261124133740-0000"]  # the earlier baseline is gone
    md = (out / "report.md").read_text()
    assert "compared as one" in md  # fixture-zstd vs the baseline's fixture-plain
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-baseline.duckdb", "a.duckdb", "rep"]
    junk = tmp_path / "junk.json"
    junk.write_text('{"not": "a spark log"}\n')
    r = CliRunner().invoke(cli, [*args, "--baseline", str(junk)])
    assert r.exit_code == 0, r.output  # the application was read: the report is written, without a verdict
    assert "junk.json: not a Spark event log" in _said(r)
    md = (out / "report.md").read_text()
    assert "No verdict: none of the baseline logs could be read" in md
    assert list(_runs(base)["app_id"]) == ["app-20261124133740-0000"]  # an unreadable baseline replaces nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-baseline.duckdb", "a.duckdb", "junk.json", "rep"]


def test_lab_only_commands_refuse_event_log_stores_by_name(stores: dict[str, Path], tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["calibrate", str(stores["zstd"]), "--cores", "4"])
    assert r.exit_code == 2 and "holds applications read from event logs" in _said(r)
    r = CliRunner().invoke(cli, ["report", str(stores["zstd"]), "--out", str(tmp_path / "r"), "--tables"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "r" / "report.md").is_file() and (tmp_path / "r" / "data" / "tasks.parquet").is_file()


def test_a_cut_log_is_reported_partial_with_what_was_read(tmp_path: Path) -> None:
    src = HERE / "spark-4.3" / "plain" / "app-20261124131230-0000"
    data = src.read_bytes()
    cut = tmp_path / "logs" / src.name
    cut.parent.mkdir()
    cut.write_bytes(data[: int(len(data) * 0.6)])  # a copy cut short, its last line torn
    r = CliRunner().invoke(cli, ["analyze", str(cut), "--db", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "r")])
    assert r.exit_code == 0, r.output
    (row,) = _runs(tmp_path / "c.duckdb").itertuples(index=False)
    assert row.status == "partial"
    text = (tmp_path / "r" / "report.md").read_text()
    md = " ".join(text.split())
    assert "**partial: what the reader found**" in md and str(cut) in md
    # the summary row: the application marked partial with the tasks that could be read
    (line,) = [x for x in text.splitlines() if f"| {row.app_id} | partial |" in x]
    assert row.n_tasks > 0 and f"| {row.n_tasks} |" in line


def test_gc_bound_and_spills_by_hand() -> None:
    from test_appreport import _app

    a = _app([[400, 400, 200], [300, 300]])
    a.tasks["gc_ms"] = a.tasks["duration_ms"] * 0.5  # half of every task is GC
    a.tasks.loc[a.tasks["stage_id"] == 1, "memory_spilled_bytes"] = 5e6
    b = an.bounds(a)
    no_gc = next(x for x in b.rows if x.what == an.NO_GC)
    assert no_gc.predicted_s == pytest.approx(a.job_time_s / 2)  # stages back to back: every stage halves
    fixes = {f.fix: f for f in an.what_pays_off(a, b, an.stage_health(a))}
    assert fixes["less GC (executor memory, GC settings)"].gain == pytest.approx(0.5)
    spill = fixes["more memory per task or more partitions where stages spill"]
    assert math.isnan(spill.gain) and "stages 1 spilled 10 MB" in spill.how


def test_a_log_without_a_job_is_named_not_analysed(tmp_path: Path) -> None:
    log = tmp_path / "started.json"
    log.write_text('{"Event":"SparkListenerLogStart","Spark Version":"3.5.0"}\n')
    db, out = tmp_path / "s.duckdb", tmp_path / "r"
    r = CliRunner().invoke(cli, ["analyze", str(log), "--db", str(db), "--out", str(out)])
    assert r.exit_code == 0, r.output
    md = (out / "report.md").read_text()
    assert "no job recorded in this log: nothing to analyse" in md and "started.json" in md
    assert "nan" not in md and "None" not in md
    r = CliRunner().invoke(cli, ["whatif", str(db)])
    assert r.exit_code == 0 and "not replayed" in _said(r)


def test_the_labs_whatif_validation_has_nothing_to_pair_in_event_logs(stores: dict[str, Path]) -> None:
    from shufflelab import whatif

    spec = Store(stores["zstd"]).query("SELECT spec_json FROM scenarios")["spec_json"].iloc[0]
    assert whatif.udp_speedup(json.loads(spec)) == 1.0 and whatif.spec_cores(json.loads(spec)) is None
    assert whatif.validate(stores["zstd"]).empty  # no scenario with cross traffic, no KeyError on a lab field


# -- applications without an ended job, and one bad application among good ones (issue 31, item 2) ----

PLAIN = HERE / "spark-4.3" / "plain" / "app-20261124131230-0000"


def _killed_copy(dest: Path, keep_lines: int, app_id: str = "app-20261124131230-0099") -> Path:
    """The plain fixture's first ``keep_lines`` lines as another application's in-progress log."""
    lines = PLAIN.read_bytes().split(b"\n")[:keep_lines]
    f = dest / f"{app_id}.inprogress"
    f.write_bytes(b"\n".join(lines).replace(PLAIN.name.encode(), app_id.encode()) + b"\n")
    return f


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_application_killed_at_any_line_never_loses_the_report_or_whatif(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    lines = PLAIN.read_bytes().split(b"\n")
    first_end = next(i for i, x in enumerate(lines) if x.startswith(b'{"Event":"SparkListenerJobEnd"'))
    # killed anywhere from its start to just before its first job ended (the class that crashed)
    start = next(i for i, x in enumerate(lines) if x.startswith(b'{"Event":"SparkListenerJobStart"'))
    keep = data.draw(st.integers(start + 1, first_end), label="lines kept")
    d = tmp_path_factory.mktemp("killed")
    (d / "logs").mkdir()
    _killed_copy(d / "logs", keep)
    (d / "logs" / PLAIN.name).write_bytes(PLAIN.read_bytes())
    db = d / "k.duckdb"
    ingest([d / "logs"], db)
    rows = appreport.whatif_table(db, 2.0)
    assert len(rows) == 2
    killed, whole = (rows[rows["application"].str.contains(x)].iloc[0] for x in ("0099", "0000"))
    assert math.isnan(killed["recorded_s"]) and killed["note"]  # no job time, and why it is not replayed
    assert whole["note"] == "" and whole["predicted_s"] > 0
    _, md = appreport.write(db, d / "rep")
    text = md.read_text()
    assert "## fixture-plain (app-20261124131230-0099)" in text and "## fixture-plain (app-20261124131230-0000)" in text
    assert "| job_s | 133.730 | – |" in text  # the killed one has no job time, not 0


def test_analyze_out_and_whatif_on_a_store_with_a_killed_application(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = PLAIN.read_bytes().split(b"\n")
    _killed_copy(logs, next(i for i, x in enumerate(lines) if x.startswith(b'{"Event":"SparkListenerJobEnd"')))
    (logs / PLAIN.name).write_bytes(PLAIN.read_bytes())
    db = tmp_path / "k.duckdb"
    r = CliRunner().invoke(cli, ["analyze", str(logs), "--db", str(db), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["whatif", str(db)], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    said = _said(r)
    assert "│ – │ │ │ not replayed: no job ended" in said and "133.7" in said
    rows = appreport.whatif_table(db, 2.0)
    assert "no job ended (the application was still running or was killed)" in rows["note"].iloc[1]
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "no job ended in this log (the application was still running or was killed)" in text


def test_one_application_whose_analysis_fails_does_not_lose_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "two.duckdb"
    ingest(_logs("plain"), db)
    real = an.critical_path

    def failing(app: an.App) -> pd.DataFrame:
        if app.app_id == "app-20261124131230-0000":
            raise RuntimeError("boom in one application")
        return real(app)

    monkeypatch.setattr(an, "critical_path", failing)
    _, md = appreport.write(db, tmp_path / "rep")
    text = " ".join(md.read_text().split())
    assert "could not be analysed: RuntimeError: boom in one application" in text
    assert "app-20261124133740-0000" in text and "critical path:" in text  # the 3.5 application's section

    monkeypatch.setattr(an, "replay_s", lambda app, k, *a, **kw: (_ for _ in ()).throw(RuntimeError("boom")))
    rows = appreport.whatif_table(db, 2.0)
    assert len(rows) == 2 and all("could not be replayed (RuntimeError: boom)" in n for n in rows["note"])
