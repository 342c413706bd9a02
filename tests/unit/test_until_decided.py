"""``run --until-decided`` against the runner's fakes (tests/fakes.py): repetitions go only to the
comparisons still open, interleaved, up to the cap; a second invocation resumes from the stored runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import fakes
from shufflelab import capabilities, sequential
from shufflelab import spec as S
from shufflelab.emulate import runner as R
from shufflelab.emulate import until_decided as U

CAPS = capabilities.Capabilities(root=True, netns=True, veth=True, tools={"java": "17", "iperf3": "3.16"})


def _spec(spec_dict: dict[str, Any], reps: int = 3) -> S.ExperimentSpec:
    spec_dict["experiment"].update(repetitions=reps, run_timeout_s=60)
    spec_dict["spark"] = {"listener": False, "cds": False}
    spec_dict["telemetry"] = {"selftest": "off"}
    # three scenarios the fakes can run (they have no iperf3 servers); the decisions are scripted
    spec_dict["matrix"] = {"workload.params.rows": [1000, 2000, 3000]}
    return S.parse(spec_dict)


def _factory(tmp_path: Path, backend: fakes.Backend, calls: list[tuple[int, set[str] | None]]) -> U.RunnerFactory:
    def make(spec: S.ExperimentSpec, labels: set[str] | None) -> U.Runner:
        calls.append((spec.experiment.repetitions, labels))
        r = R.EmulateRunner(spec, "t.toml", tmp_path / "results", caps=CAPS, backend=backend.seams())
        return U.only(r, labels)

    return make


def _reps(store_path: Path) -> dict[str, list[int]]:
    from shufflelab.results import Store

    df = Store(store_path).query("SELECT s.label, r.rep FROM runs r JOIN scenarios s USING (scenario_id) ORDER BY 1, 2")
    out: dict[str, list[int]] = {}
    for label, rep in df.itertuples(index=False, name=None):
        out.setdefault(str(label), []).append(int(rep))
    return out


def _scripted(decided_at: dict[str, int]) -> Any:
    """Decisions as the design would give them: comparison ``label`` decided at look ``n`` once the
    store holds n repetitions of it and of its baseline."""

    def decide(db: Path, design: sequential.Design) -> list[sequential.Decision]:
        reps = _reps(db)
        out = []
        for label, at in decided_at.items():
            n = min(len(reps[label]), len(reps["rows=1000"]))
            out.append(sequential.Decision(label, "rows=1000", n, design.nominal_alpha(n),
                                           "starved" if n >= at else "inconclusive", n >= at, None))  # fmt: skip
        return out

    return decide


def test_only_open_comparisons_get_more_repetitions_up_to_the_cap(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    base, mid, high = (f"rows={k}" for k in (1000, 2000, 3000))
    decide = _scripted({high: 3, mid: 99})  # one comparison decided at the first look, one never
    calls: list[tuple[int, set[str] | None]] = []
    b = fakes.Backend(tmp_path / "scratch")
    res = U.run(_spec(spec_dict), _factory(tmp_path, b, calls), 5, decide=decide)
    assert _reps(res.store_path) == {base: [1, 2, 3, 4, 5], mid: [1, 2, 3, 4, 5], high: [1, 2, 3]}
    assert calls == [(3, None), (4, {base, mid}), (5, {base, mid})]
    assert res.added == [(4, [base, mid]), (5, [base, mid])]
    # interleaved: rep 4 of both scenarios before rep 5 of either
    assert [(o.label, o.rep) for o in res.outcomes][9:] == [(base, 4), (mid, 4), (base, 5), (mid, 5)]
    assert {d.scenario: (d.decided, d.look) for d in res.decisions} == {high: (True, 3), mid: (False, 5)}
    assert sequential.load(R.Store(res.store_path)) == sequential.Design(3, 5)

    # resumed with the same cap: nothing runs; with a higher cap only the open comparison goes on
    again = fakes.Backend(tmp_path / "scratch2")
    res2 = U.run(_spec(spec_dict), _factory(tmp_path, again, []), 5, decide=decide)
    assert res2.outcomes == [] and again.fabrics == []
    more = U.run(_spec(spec_dict), _factory(tmp_path, fakes.Backend(tmp_path / "scratch3"), []), 6, decide=decide)
    assert [(o.label, o.rep) for o in more.outcomes] == [(base, 6), (mid, 6)]


def test_the_design_decides_from_the_stored_runs(tmp_path: Path) -> None:
    """The real decisions over a store (tests/unit/synthetic_store.py): a job twice as slow, waiting
    on fetches, is decided at the first look, judged at that look's nominal level; the runs of later
    repetitions do not change a decision taken before them."""
    import synthetic_store

    design = sequential.Design(3, 6)
    db = synthetic_store.build(tmp_path / "s.duckdb", 6, slowdown=2.0)
    (d,) = sequential.decisions(db, design)
    assert d.decided and d.look == 3 and d.verdict == "starved"
    assert d.alpha == design.nominal_alpha(3) < 0.05
    level = f"{(1 - design.nominal_alpha(3)) * 100:.2f} %"  # 96.90 %: the look's interval, not 95 %
    assert d.diagnosis is not None and level in d.diagnosis.reasons[0]
    quiet = synthetic_store.build(tmp_path / "q.duckdb", 6, slowdown=1.0)
    (q,) = sequential.decisions(quiet, design)
    assert q.decided and q.verdict == "not starved"
    line = sequential.summary(design, [d, q])
    assert "Pocock-type" in line and "2 decided (at n = 3, 3)" in line


def test_the_report_names_the_design_and_judges_at_its_look(tmp_path: Path) -> None:
    import synthetic_store

    from shufflelab import report
    from shufflelab.results import Store

    db = synthetic_store.build(tmp_path / "s.duckdb", 5, slowdown=2.0)
    sequential.save(Store(db), sequential.Design(3, 8))
    md = report.write(db, tmp_path / "out").markdown.read_text()
    assert "Repetitions until decided: group-sequential design, Lan-DeMets Pocock-type alpha spending" in md
    level = f"{(1 - sequential.Design(3, 8).nominal_alpha(3)) * 100:.2f} %"
    section = md.split("## Starvation diagnosis")[1].split("\n## ")[0]
    assert "1 decided (at n = 3)" in section and f"({level} Welch intervals" in section
    assert f"{level} CI" in md.split("## Headline")[1].split("\n## ")[0]  # the headline's interval is the look's


def test_a_report_exported_with_its_tables_is_read_back_with_its_design(tmp_path: Path) -> None:
    # `report --tables` exports the design with the runs; loading those tables again (rerendering a
    # committed report, scripts/verdicts.py) refused the design's table as "not a results table"
    import synthetic_store

    from shufflelab.results import Store

    db = synthetic_store.build(tmp_path / "s.duckdb", 5, slowdown=2.0)
    sequential.save(Store(db), sequential.Design(3, 8))
    assert "sequential_design" in Store(db).export_parquet(tmp_path / "data")
    again = Store(tmp_path / "again.duckdb")
    assert "sequential_design" in again.import_parquet(tmp_path / "data")
    assert sequential.load(again) == sequential.Design(3, 8)
    fixed = synthetic_store.build(tmp_path / "fixed.duckdb", 5, slowdown=2.0)
    assert sequential.load(Store(fixed)) is None  # a fixed number of repetitions: the table is empty


def test_cap_options_without_until_decided_are_refused(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from shufflelab.cli import app

    spec = Path(__file__).parents[2] / "experiments" / "quickstart.toml"
    r = CliRunner().invoke(app, ["run", str(spec), "--results", str(tmp_path), "--max-reps", "5"])
    assert r.exit_code != 0 and "--max-reps and --spending go with --until-decided" in r.output


def test_the_verdicts_page_reads_each_comparison_at_its_deciding_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # scripts/verdicts.py diagnosed every committed store on all of its runs at 95 %, so a comparison
    # decided at n = 3 whose baseline was repeated for other comparisons read with n = 5/3 and
    # another level than its report says
    import importlib.util

    import synthetic_store

    from shufflelab.results import Store

    db = synthetic_store.build(tmp_path / "s.duckdb", 5, slowdown=2.0)
    sequential.save(Store(db), sequential.Design(3, 8))
    folder = tmp_path / "docs" / "results" / "seq"
    Store(db).export_parquet(folder / "data")
    script = Path(__file__).parents[2] / "scripts" / "verdicts.py"
    spec = importlib.util.spec_from_file_location("verdicts_script", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.chdir(tmp_path)
    lines, _, _ = mod.rows()
    assert [line.split(" | ")[2] for line in lines] == ["3/3"]
