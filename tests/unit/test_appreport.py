"""The event-log analysis report: critical path, bounds, stage health and what pays off, checked
against independent computations on real Spark 3.5 / 4.3 logs and on hand-made schedules."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pandas as pd
import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from conftest import BASE_SPEC
from shufflelab import appreport, document
from shufflelab.appreport import analysis as an
from shufflelab.appreport import render
from shufflelab.cli import app as cli
from shufflelab.eventlog.ingest import ingest
from shufflelab.results import Store, reading

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "eventlogs"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("appreport") / "logs.duckdb"
    ingest([HERE / "spark-3.5", HERE / "spark-4.3"], db)
    return db


@pytest.fixture(scope="module")
def loaded(store: Path) -> list[an.App]:
    """Every application of the store, read once for the module (the reads through one connection,
    as the report reads them)."""
    with reading(store):
        s = Store(store)
        return [appreport.load(s, r, i, n) for r, i, n in appreport.applications(s)]


@pytest.fixture
def apps(loaded: list[an.App]) -> list[an.App]:
    """The store's applications, a copy of their own for each test."""
    return copy.deepcopy(loaded)


def test_critical_path_is_a_gating_chain_within_the_job(apps: list[an.App]) -> None:
    assert len(apps) >= 14
    for a in apps:
        cp = an.critical_path(a)
        if cp.empty:
            continue
        assert cp["duration_s"].sum() <= a.job_time_s + 1e-6, a.name
        # each stage starts after the previous one on the path ended, and the path ends with the last stage
        assert (cp["start_s"].iloc[1:].to_numpy() >= cp["end_s"].iloc[:-1].to_numpy() - 1e-9).all(), a.name
        last = a.stages.dropna(subset=["completed_at_ms"])["completed_at_ms"].max()
        t0 = a.jobs["submitted_at_ms"].min()
        assert cp["end_s"].iloc[-1] == pytest.approx((last - t0) / 1000)


def test_network_bounds_never_exceed_the_recording_and_order_by_speed(apps: list[an.App]) -> None:
    for a in apps:
        if a.tasks.empty or a.jobs.empty:
            continue
        b = {x.what: x.predicted_s for x in an.bounds(a).rows}
        inf, two = b["infinitely fast network"], b["2x faster network"]
        assert inf <= two + 1e-6 <= a.job_time_s + 1e-6, a.name
        assert inf >= 0


def test_stage_health_equals_a_count_from_the_raw_rows(apps: list[an.App]) -> None:
    a = max(apps, key=lambda x: len(x.tasks))
    h = an.stage_health(a).set_index("stage")
    for sid, g in a.tasks.groupby("stage_id"):
        ok = g[g["successful"].astype(bool)]["duration_ms"].astype(float)
        if ok.empty:
            continue
        med = float(ok.median())
        assert h.loc[sid, "tasks"] == len(g)
        assert h.loc[sid, "failed"] == int((~g["successful"].astype(bool)).sum())
        if med > 0:
            assert h.loc[sid, "skew"] == pytest.approx(float(ok.max()) / med, abs=0.01)
            assert h.loc[sid, "stragglers"] == int((ok > 1.5 * med).sum())


def _app(durations: list[list[float]], fetch: float = 0.0) -> an.App:
    """Stages one after another, each with tasks of the given durations (ms) on two one-core executors."""
    tasks, stages, t = [], [], 0.0
    tid = 0
    for sid, ds in enumerate(durations):
        free = [t, t]
        for i, d in enumerate(ds):
            e = min(range(2), key=free.__getitem__)
            start = free[e]
            tasks.append(
                {
                    "stage_id": sid,
                    "stage_attempt": 0,
                    "task_id": tid,
                    "task_index": i,
                    "executor_id": str(e),
                    "host": f"h{e}",
                    "launch_at_ms": start,
                    "finish_at_ms": start + d,
                    "duration_ms": d,
                    "successful": True,
                    "fetch_wait_ms": fetch * d,
                    "remote_bytes": 0,
                    "speculative": False,
                    "executor_run_ms": d,
                    "deserialize_ms": 0.0,
                    "result_serialization_ms": 0.0,
                    "gc_ms": 0.0,
                    "memory_spilled_bytes": 0,
                    "disk_spilled_bytes": 0,
                    "input_bytes": 0,
                    "shuffle_write_ms": 0.0,
                    "remote_reqs_duration_ms": 0.0,
                    "shuffle_write_bytes": 0,
                    "executor_cpu_ms": d,
                }  # fmt: skip
            )
            tid += 1
            free[e] = start + d
        end = max(free)
        stages.append({"stage_id": sid, "stage_attempt": 0, "name": f"s{sid}", "submitted_at_ms": t,
                       "completed_at_ms": end, "parent_ids": None})  # fmt: skip
        t = end
    jobs = pd.DataFrame([{"job_id": 0, "submitted_at_ms": 0.0, "completed_at_ms": t}])
    ex = pd.DataFrame({"executor_id": ["0", "1"], "total_cores": [1, 1]})
    return an.App("r", 0, "hand", pd.DataFrame(tasks), pd.DataFrame(stages), jobs, ex, t / 1000, "ok")


def test_stage_model_by_hand() -> None:
    a = _app([[100, 100, 100, 700]])
    assert a.slots == 2
    assert an.scaled_time_s(a, 2) == pytest.approx(0.7)  # max(700, 1000 / 2)
    assert an.scaled_time_s(a, 8) == pytest.approx(0.7)  # the longest task bounds it
    assert an.scaled_time_s(a, 2, equal_tasks=True) == pytest.approx(0.5)  # max(250, 500)
    assert an.scaled_time_s(a, 1) == pytest.approx(1.0)


def test_no_fetch_wait_means_no_network_gain_and_half_fetch_wait_bounds_it() -> None:
    quiet = _app([[400, 400], [300, 300]])
    b = {x.what: x.predicted_s for x in an.bounds(quiet).rows}
    assert b["infinitely fast network"] == pytest.approx(quiet.job_time_s)
    waiting = _app([[400, 400], [300, 300]], fetch=0.5)
    b = {x.what: x.predicted_s for x in an.bounds(waiting).rows}
    assert b["infinitely fast network"] == pytest.approx(waiting.job_time_s / 2)
    assert b["2x faster network"] == pytest.approx(waiting.job_time_s * 0.75)
    fixes = an.what_pays_off(waiting, an.bounds(waiting), an.stage_health(waiting))
    assert fixes[0].fix == "a perfect network" and fixes[0].gain == pytest.approx(0.5)
    assert math.isnan(fixes[-1].gain) and "congestion control" in fixes[-1].fix


def test_report_and_analyze_write_the_app_report(store: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["report", str(store), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "rep" / "report.md").read_text()
    for text in ("## Headline", "### What pays off", "### Critical path", "model estimate", "## Limits", "baseline"):
        assert text in md
    assert "nan" not in md
    r = CliRunner().invoke(
        cli,
        [
            "analyze",
            str(HERE / "spark-4.3" / "zstd"),
            "--db",
            str(tmp_path / "a.duckdb"),
            "--out",
            str(tmp_path / "a"),
            "--link-gbps",
            "1",
            "--baseline",
            str(HERE / "spark-4.3" / "lz4"),
        ],  # fmt: skip
    )
    assert r.exit_code == 0, r.output
    md = (tmp_path / "a" / "report.md").read_text()
    assert "network efficiency at 1 Gbit/s" in md and "too few runs" in md
    r = CliRunner().invoke(cli, ["analyze", str(HERE / "spark-4.3" / "zstd"), "--db", str(tmp_path / "b.duckdb"),
                                 "--link-gbps", "1"])  # fmt: skip
    assert r.exit_code == 2 and "give --out" in r.output


def test_whatif_takes_an_imported_logs_cores_from_its_executors(store: Path) -> None:
    from shufflelab import whatif

    assert whatif.spec_cores({"source": "eventlog"}) is None  # not a lab spec: no cores from it
    lab = copy.deepcopy(BASE_SPEC)
    lab["spark"] = {"worker_cores": 2}
    assert whatif.spec_cores(lab) == 2
    lab["workload"]["apps"] = 2
    assert whatif.spec_cores(lab) is None  # two applications share a worker's cores: left to Spark
    s = Store(store)
    r, i, _ = appreport.applications(s)[0]
    cores = whatif.recorded_cores(s, r, i)
    ex = s.query("SELECT executor_id, total_cores FROM executors WHERE run_id = ?", [r])
    assert cores == {str(e): int(c) for e, c in ex.itertuples(index=False, name=None)}


# -- the headline, names in report.md, the FCT section without remote reads (issue 31, item 3) -----------


def _named(name: str, durations: list[list[float]], fetch: float = 0.0, start_ms: float = 0.0) -> an.App:
    a = _app(durations, fetch)
    for df in (a.tasks, a.stages):
        for col in ("launch_at_ms", "finish_at_ms", "submitted_at_ms", "completed_at_ms"):
            if col in df:
                df[col] = df[col] + start_ms
    a.jobs[["submitted_at_ms", "completed_at_ms"]] += start_ms
    a.name, a.app_id, a.run_id = name, f"app-{name}", name
    return a


def test_the_headline_shows_the_longest_and_the_most_network_bound_saying_so(tmp_path: Path) -> None:
    # in start order: two short ones first, then the long ones; "waits" is short but waits on fetches
    apps = [
        _named("first", [[100, 100]], start_ms=0),
        _named("waits", [[150, 150]], fetch=0.6, start_ms=1e3),
        _named("long3", [[900, 900]], start_ms=2e3),
        _named("long1", [[3000, 3000]], start_ms=3e3),
        _named("long2", [[2000, 2000]], start_ms=4e3),
    ]
    d = render.document("t", apps, tmp_path / "figures", None)
    head = d.headline
    assert head[0] == (
        "5 applications; shown: the 3 longest by job time (longest first) and the most network-bound "
        "(largest fetch wait share of its core time)."
    )
    assert [h.split(":")[0] for h in head[1:]] == ["long1", "long2", "long3", "most network-bound"]
    assert head[4].startswith("most network-bound: waits: 0.1 s; fetch wait is 60% of its core time")
    one = render.document("t", apps[:1], tmp_path / "figures", None)
    assert len(one.headline) == 1 and one.headline[0].startswith("first: 0.1 s")


def test_report_md_escapes_application_names_as_the_html_does(tmp_path: Path) -> None:
    name = "<img src=x onerror=alert(1)> **pwn** [x](http://e) _a_ | `c`"
    a = _named(name, [[400, 400], [300, 300]], fetch=0.2)
    d = render.document("t", [a, _named("other", [[100, 100]])], tmp_path / "figures", None)
    md = document.to_markdown(d)
    page = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(md)
    for made in ("<img src=x", "<strong>pwn", 'href="http://e"', "<em>a"):
        assert made not in page
    assert page.count("&lt;img src=x onerror=alert(1)&gt; **pwn** [x](http://e) _a_") >= 4  # title, table, lines
    h = document.to_html(d)
    assert "<img src=x" not in h and h.count("&lt;img src=x onerror=alert(1)&gt; **pwn** [x](http://e) _a_") >= 4


def test_the_fct_section_says_there_were_no_remote_reads(tmp_path: Path) -> None:
    a = _named("local", [[400, 400], [300, 300]])
    a.tasks["shuffle_write_bytes"] = 2_000_000
    a.tasks["shuffle_write_ms"] = 12.0
    a.tasks["local_bytes"] = 1_000_000
    (section,) = [s for s, *_ in [render.app_sections(a, tmp_path, None, 0)] for s in s if "FCT" in s.title]
    assert section.paragraphs == [
        "No remote shuffle reads: no task fetched shuffle data over the network (it read 4 MB of shuffle data "
        "locally), so there is no read FCT; the rows of kind write are shuffle write times (to local disk: CPU "
        "and disk, not the network)."
    ]
    assert set(section.tables[0].df["kind"]) == {"write"}


def test_bounds_and_fixes_find_the_critical_path_once(apps: list[an.App], monkeypatch: pytest.MonkeyPatch) -> None:
    """The stage model recomputed the critical path for every slot count it was asked about: six
    times per application's bounds, once more for what pays off and for the fleet page's what-ifs."""
    from shufflelab.appreport import fleet

    a = next(x for x in apps if x.ended and not x.tasks.empty and x.tasks["gc_ms"].sum() > 0)
    expected = an.bounds(a)
    calls: list[int] = []
    real = an.critical_path

    def counted(app: an.App) -> pd.DataFrame:
        calls.append(1)
        return real(app)

    monkeypatch.setattr(an, "critical_path", counted)
    got = an.bounds(a)
    assert len(calls) == 1 and got == expected and len(got.rows) == 7  # 3 network, 2 executors, skew, GC
    cp = real(a)
    calls.clear()
    fixes = an.what_pays_off(a, an.bounds(a, cp=cp), an.stage_health(a), cp)
    assert len(calls) == 0 and repr(fixes) == repr(an.what_pays_off(a, expected, an.stage_health(a)))  # NaN gains
    calls.clear()
    fleet.what_ifs([a])
    assert len(calls) == 1
