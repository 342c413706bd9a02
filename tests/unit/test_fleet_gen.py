"""The synthetic fleet generator: deterministic for a seed, real logs the reader accepts, the truth it claims."""

from __future__ import annotations

from pathlib import Path

from shufflelab.eventlog import fleet
from shufflelab.eventlog.files import discover
from shufflelab.eventlog.model import EventLog
from shufflelab.eventlog.read import read_source


def test_same_seed_same_fleet_and_another_seed_differs(tmp_path: Path) -> None:
    a = fleet.generate(tmp_path / "a", 12, seed=3, runs=6)
    b = fleet.generate(tmp_path / "b", 12, seed=3, runs=6)
    c = fleet.generate(tmp_path / "c", 12, seed=4, runs=6)
    files = sorted(p.name for p in (tmp_path / "a" / "logs").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "b" / "logs").iterdir())
    assert all((tmp_path / "a" / "logs" / f).read_bytes() == (tmp_path / "b" / "logs" / f).read_bytes() for f in files)
    assert a.to_json() == b.to_json() != c.to_json()
    assert len(files) == 12 and len({x.app_id for x in a.apps}) == 12


def test_regressed_run_gains_fetch_wait_in_the_named_stage(tmp_path: Path) -> None:
    truth = fleet.generate(tmp_path, 12, seed=0, runs=6)
    (name, reg), stage = next(iter(truth.regressions.items())), truth.regressed_stage["daily-000"]
    runs = sorted((x for x in truth.apps if x.name == name), key=lambda x: x.run)
    sources, problems = discover([tmp_path / "logs" / x.file for x in runs])
    assert not problems
    logs = {Path(s.display).name: read_source(s).log for s in sources}
    before, after = logs[runs[reg - 1].file], logs[runs[reg].file]
    assert before.app_name == name and before.app_id == runs[reg - 1].app_id
    span_b, span_a = before.workload_span_ms(), after.workload_span_ms()
    assert span_b and span_a and span_a / span_b > 1.25  # +40 % injected, noise 3 %

    def wait(log: EventLog) -> float:
        return sum(t.fetch_wait_ms for t in log.tasks if t.stage_id == stage)

    assert wait(after) > wait(before) + 0.2 * span_b
