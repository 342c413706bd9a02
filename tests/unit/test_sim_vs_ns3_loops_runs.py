"""benchmarks/sim_vs_ns3_loops.py's ns-3 runner: which failures leave a run out (counted as aborted)
and which stop the benchmark (subprocess faked; ns-3 itself is not run here)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from benchmarks import sim_vs_ns3_loops as loops


def fake_run(code: int, stderr: str = "", stdout: str = ""):  # type: ignore[no-untyped-def]
    def run(args: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, code, stdout, stderr)

    return run


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loops, "NS3_RUNS", tmp_path / "runs")
    monkeypatch.setattr(loops, "FRESH_NS3", [False])


def test_a_run_ns3_crashes_on_is_left_out_as_aborted_and_kept_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loops.subprocess, "run", fake_run(-signal.SIGSEGV))
    assert loops.run_ns3(["two_tier", "--orderSeed=3"]) == (None, "ns-3 crashed (SIGSEGV)")
    # read back from the cache without running again
    monkeypatch.setattr(loops.subprocess, "run", fake_run(0, stdout='{"flows": []}'))
    assert loops.run_ns3(["two_tier", "--orderSeed=3"]) == (None, "ns-3 crashed (SIGSEGV)")


def test_an_assertion_is_named_and_any_other_failure_stops_the_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    line = 'NS_ASSERT failed, cond="m_sentSize >= m_sackedOut"'
    monkeypatch.setattr(loops.subprocess, "run", fake_run(-signal.SIGABRT, stderr=f"x\n{line}\n"))
    assert loops.run_ns3(["two_tier", "--orderSeed=1"]) == (None, line)
    monkeypatch.setattr(loops.subprocess, "run", fake_run(1, stderr="--sendJitter must be in [0, 1]"))
    with pytest.raises(SystemExit, match="ns-3 failed"):
        loops.run_ns3(["two_tier", "--orderSeed=2"])
    monkeypatch.setattr(loops.subprocess, "run", fake_run(0, stdout='noise\n{"flows": [[0, 1, 0.5]]}'))
    assert loops.run_ns3(["two_tier", "--orderSeed=4"]) == ({"flows": [[0, 1, 0.5]]}, None)
