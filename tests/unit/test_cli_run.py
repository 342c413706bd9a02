"""``shufflelab run``'s exit status: non-zero when a run of the invocation did not end ok."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from shufflelab import cli
from shufflelab.emulate import runner

QUICKSTART = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.toml"


def _fake_runner(statuses: list[str]) -> type:
    class FakeRunner:  # stands in for the emulate backend: no fabric, no Spark
        def __init__(
            self,
            spec: Any,
            spec_path: str,
            results: Path,
            progress: Any,
            select: Any = None,
            backend: Any = None,
            kinds: Any = None,
        ) -> None:
            self.results = results

        def run(self) -> runner.ExperimentResult:
            outcomes = [
                runner.RunOutcome(
                    f"id{i}",
                    f"udp={i}",
                    1,
                    st,
                    10.0 if st == "ok" else None,
                    None if st == "ok" else "no event log was written",
                )
                for i, st in enumerate(statuses)
            ]
            return runner.ExperimentResult(self.results / "x.duckdb", outcomes)

    return FakeRunner


@pytest.mark.parametrize(
    ("statuses", "code"),
    [(["ok", "ok"], 0), (["ok", "failed"], 1), (["timeout", "ok"], 1), ([], 0)],
)
def test_run_exits_non_zero_when_a_run_failed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, statuses: list[str], code: int
) -> None:
    monkeypatch.setattr(runner, "EmulateRunner", _fake_runner(statuses))
    monkeypatch.setattr(cli, "_install_signal_handlers", lambda: None)
    res = CliRunner().invoke(cli.app, ["run", str(QUICKSTART), "--results", str(tmp_path), "--no-report"])
    assert res.exit_code == code, res.output
    bad = [s for s in statuses if s != "ok"]
    if bad:
        assert f"{len(bad)} of {len(statuses)} runs of this invocation did not end ok" in res.output
        assert "no event log was written" in res.output  # which runs, and why


class _MustNotRun:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a spec with a reserved Spark conf key reached the runner")


def test_run_refuses_a_reserved_spark_conf_with_exit_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(runner, "EmulateRunner", _MustNotRun)
    monkeypatch.setattr(cli, "_install_signal_handlers", lambda: None)
    spec = tmp_path / "nolog.toml"
    spec.write_text(QUICKSTART.read_text() + '\n[spark.conf]\n"spark.eventLog.enabled" = "false"\n')
    res = CliRunner().invoke(cli.app, ["run", str(spec), "--results", str(tmp_path), "--no-report"])
    assert res.exit_code == 2
    assert 'spark.conf."spark.eventLog.enabled"' in res.output and "reserved" in res.output
