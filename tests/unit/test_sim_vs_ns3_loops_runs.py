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


def _rows(ns_means: list[float], sim_means: list[float]) -> tuple[dict[str, object], dict[str, object]]:
    ns = {"mean": sum(ns_means) / len(ns_means), "run_means": ns_means, "p99": 0.2, "end": 0.3}
    ns |= {"timeouts": 1.0, "syn_lost": 0.0, "aborted": []}
    sim = {"mean": sum(sim_means) / len(sim_means), "seed_means": sim_means, "p99": 0.2, "end": 0.3}
    sim |= {"timeouts": 1.0, "passes": [2], "cpu_s": 0.1}
    return ns, sim


def test_a_row_says_whether_its_mean_is_within_ten_percent_at_95_percent() -> None:
    ns, sim = _rows([1.00e-3, 1.01e-3, 0.99e-3], [1.02e-3, 1.03e-3, 1.01e-3, 1.02e-3])
    line, what = loops.row_line(0.1, "cubic", ns, sim)
    assert what == "within" and "| +2.0 % [" in line and "| within |" in line
    # the interval is the model's error against ns-3's (not ns-3's against the model's): around +2 %
    lo, hi = (float(x) for x in line.split("| +2.0 % [")[1].split("]")[0].split(", "))
    assert lo < 2.0 < hi and hi > 3.0
    ns, sim = _rows([1.00e-3, 1.01e-3, 0.99e-3], [1.30e-3, 1.31e-3, 1.29e-3, 1.30e-3])
    assert loops.row_line(0.1, "dctcp", ns, sim)[1] == "out"
    # three runs far apart: the interval straddles the bound, and the row says so
    ns, sim = _rows([0.6e-3, 1.0e-3, 1.4e-3], [1.02e-3, 1.03e-3, 1.01e-3, 1.02e-3])
    assert loops.row_line(0.1, "cubic", ns, sim)[1] == "undecided"
    # one ns-3 run and one seed: no interval, no verdict
    ns, sim = _rows([1.0e-3], [1.02e-3])
    line, what = loops.row_line(0.3, "cubic", ns, sim)
    assert what == "–" and "| +2.0 % | – |" in line


def test_the_tally_counts_each_verdict_and_names_rows_without_an_interval() -> None:
    line = loops.tally_line(["within", "out", "–", "within", "undecided"])
    assert line.endswith(": no interval (one run or one seed) 1, out 1, undecided 1, within 2.")
    assert "–" not in line


def test_rows_written_with_json_give_ns3_s_side_back_without_running_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns_runs: list[tuple[str, float]] = []

    def ns3_row(binary: Path, cc: str, mb: float, runs: int) -> dict[str, object]:
        ns_runs.append((cc, mb))
        ns, _ = _rows([1.0e-3 if cc == "cubic" else 0.8e-3, 1.1e-3 if cc == "cubic" else 0.7e-3], [1.0e-3])
        return ns

    def sim_row(cc: str, mb: float, seeds: int) -> dict[str, object]:
        return _rows([1.0e-3], [1.05e-3, 1.06e-3] if cc == "cubic" else [0.7e-3, 0.72e-3])[1]

    monkeypatch.setattr(loops, "ns3_row", ns3_row)
    monkeypatch.setattr(loops, "sim_row", sim_row)
    monkeypatch.setattr(loops, "compile_ns3", lambda *_: Path("two_tier-0"))
    monkeypatch.setattr(loops, "STORED_NS3", {})
    monkeypatch.setattr(loops, "HOSTS_PER_LEAF", [4])
    base = ["x", "--blocks-mb", "0.1", "--ns3-runs", "2", "--seeds", "2"]
    first, stored = tmp_path / "first.md", tmp_path / "rows.json"
    monkeypatch.setattr("sys.argv", [*base, "--out", str(first), "--json", str(stored)])
    assert loops.main() == 0 and ns_runs == [("cubic", 0.1), ("dctcp", 0.1)]

    def no_ns3(*_: object) -> None:
        raise AssertionError("ns-3 compiled for a stored row")

    monkeypatch.setattr(loops, "compile_ns3", no_ns3)
    again = tmp_path / "again.md"
    monkeypatch.setattr("sys.argv", [*base, "--out", str(again), "--ns3-rows", str(stored)])
    assert loops.main() == 0 and len(ns_runs) == 2
    assert again.read_text() == first.read_text()
    # another number of ns-3 runs is another row: not taken from the file
    monkeypatch.setattr(loops, "STORED_NS3", {})
    monkeypatch.setattr(loops, "compile_ns3", lambda *_: Path("two_tier-0"))
    monkeypatch.setattr("sys.argv", [*base[:4], "3", *base[5:], "--out", str(again), "--ns3-rows", str(stored)])
    assert loops.main() == 0 and len(ns_runs) == 4


def test_a_file_that_is_not_the_check_s_rows_is_refused_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "rows.json"
    bad.write_text('[{"ns3_args": ["--leaves=2"], "ns3_runs": 3, "ns3": {"mean": 1.0}}]')
    with pytest.raises(SystemExit, match=r"--ns3-rows .*rows\.json: not this check's rows \(KeyError"):
        loops.load_stored_ns3([bad])
    bad.write_text("{")
    with pytest.raises(SystemExit, match="not this check's rows"):
        loops.load_stored_ns3([bad])
