"""The starvation detector on synthetic task tables: starved, CPU-bound, unchanged, too few runs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from conftest import BASE_SPEC
from shufflelab import diagnose as dg
from shufflelab.spec import stored


def _runs(job_times: list[float], cpu: list[float], cores: int = 4, wait_share: float = 0.1) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_id": [f"r{i}" for i in range(len(job_times))],
            "job_time_s": job_times,
            "executor_cpu_s": cpu,
            "fetch_wait_s": [t * cores * wait_share for t in job_times],
            "total_cores": cores,
        }
    )


def _tasks(runs: pd.DataFrame, per_task_cpu_ms: float, n: int = 20) -> pd.DataFrame:
    rows = []
    for _, r in runs.iterrows():
        start = 1_000_000
        for i in range(n):
            rows.append(
                {
                    "run_id": r["run_id"],
                    "executor_cpu_ms": per_task_cpu_ms,
                    "launch_at_ms": start + i * 100,
                    "finish_at_ms": start + int(r["job_time_s"] * 1000 * (i + 1) / n),
                }
            )
    return pd.DataFrame(rows)


rng = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _fresh_rng() -> None:
    """Each test draws the same noise whichever tests run before it (``-k`` included)."""
    global rng
    rng = np.random.default_rng(7)


def _noisy(mean: float, n: int = 10, sd: float = 0.04) -> list[float]:
    return [float(x) for x in mean * (1 + rng.normal(0, sd, n))]


def test_starved_job() -> None:
    base = _runs(_noisy(300), _noisy(400, sd=0.01))
    scen = _runs(_noisy(620), _noisy(400, sd=0.01), wait_share=0.5)
    d = dg.diagnose("udp", "none", base, scen, _tasks(base, 100), _tasks(scen, 101))
    assert d.verdict == "starved", d.reasons
    assert 1.9 < d.job.ratio < 2.2 and d.job.ratio_ci_low > 1.5
    assert 0.97 < d.cpu.ratio < 1.03
    assert d.idle_share_scenario > d.idle_share_baseline
    assert d.fetch_wait_share_scenario > d.fetch_wait_share_baseline
    assert "job time +" in d.reasons[0]


def test_cpu_contention_is_not_starvation() -> None:
    base = _runs(_noisy(300), _noisy(400, sd=0.01))
    scen = _runs(_noisy(450), _noisy(560, sd=0.01))  # slower *and* 40 % more CPU
    d = dg.diagnose("cpuhog", "none", base, scen, _tasks(base, 100), _tasks(scen, 140))
    assert d.verdict == "inconclusive"
    assert "CPU contention" in d.reasons[0]


def test_unchanged_job_is_not_starved() -> None:
    base = _runs(_noisy(300), _noisy(400))
    scen = _runs(_noisy(302), _noisy(401))
    d = dg.diagnose("control", "none", base, scen, _tasks(base, 100), _tasks(scen, 100))
    assert d.verdict == "not starved", d.reasons


def test_os_user_cpu_separates_interrupt_work() -> None:
    """Cross traffic's forwarding is charged to the executors' thread CPU time on this kernel (+20 %);
    the task threads' user CPU time is flat: the detector judges with user time and says so."""
    base = _runs(_noisy(300), _noisy(400, sd=0.01))
    scen = _runs(_noisy(620), _noisy(480, sd=0.01), wait_share=0.5)
    base["task_user_cpu_s"] = _noisy(360, sd=0.01)
    scen["task_user_cpu_s"] = _noisy(360, sd=0.01)
    d = dg.diagnose("udp", "none", base, scen, _tasks(base, 100), _tasks(scen, 120))
    assert d.verdict == "starved", d.reasons
    assert d.cpu_measure == "user" and 0.97 < d.cpu.ratio < 1.03
    assert d.thread_cpu is not None and 1.15 < d.thread_cpu.ratio < 1.25
    assert any("task user CPU time unchanged" in r for r in d.reasons)
    assert any("includes interrupt work" in r for r in d.reasons)
    # without the OS measurement (older results) the same data is judged on thread CPU time
    d2 = dg.diagnose("udp", "none", base.drop(columns=["task_user_cpu_s"]), scen.drop(columns=["task_user_cpu_s"]),
                     _tasks(base, 100), _tasks(scen, 120))  # fmt: skip
    assert d2.cpu_measure == "thread" and d2.verdict == "inconclusive"


def test_too_few_runs_is_inconclusive() -> None:
    base = _runs([300.0, 310.0], [400.0, 401.0])
    scen = _runs([600.0, 640.0], [400.0, 402.0])
    d = dg.diagnose("udp", "none", base, scen, _tasks(base, 100), _tasks(scen, 100), min_reps=3)
    assert d.verdict == "inconclusive" and "too few" in d.reasons[0]


def test_backlog_progress_correlation_is_negative_when_progress_stalls() -> None:
    # tasks finish only while the queue is empty
    finish = [1000 + 100 * i for i in range(10)] + [20000 + 100 * i for i in range(10)]
    tasks = pd.DataFrame({"run_id": "r0", "launch_at_ms": 1000, "finish_at_ms": finish, "executor_cpu_ms": 1.0})
    t = np.arange(1.0, 30.0, 0.1)
    backlog = np.where((t > 3) & (t < 19.5), 200_000, 0)
    samples = pd.DataFrame({"run_id": "r0", "t": t, "backlog_bytes": backlog})
    rho, p = dg.backlog_progress(tasks, samples)
    assert rho < -0.4 and p < 0.05


def test_baseline_pairs_match_on_everything_but_traffic() -> None:
    import json

    def spec(udp: float, sink: str, rows: int) -> str:
        d = copy.deepcopy(BASE_SPEC)
        d["cross_traffic"] = {"udp_percent": udp, "sink": sink}
        d["workload"]["params"]["rows"] = rows
        return json.dumps(d)

    labels = ["none-1", "shared-1", "control-1", "none-2", "shared-2"]
    jsons = [spec(0, "w1", 1), spec(95, "w1", 1), spec(95, "tsink", 1), spec(0, "w1", 2), spec(95, "w1", 2)]
    # a baseline differs only in cross traffic: "none-1" is the baseline of both traffic cases of size 1
    pairs = dg.baseline_pairs({label: stored(j) for label, j in zip(labels, jsons, strict=True)})
    assert ("shared-1", "none-1") in pairs and ("shared-2", "none-2") in pairs
    assert ("control-1", "none-1") in pairs
    assert len(pairs) == 3


def test_cpu_theft_without_more_fetch_wait_is_not_network_starvation() -> None:
    """The control case: other processes take CPU, the job is 9 % slower with the same work and the
    same fetch wait; executors look idler (descheduled), yet nothing waits on the network."""
    base = _runs(_noisy(300, sd=0.02), _noisy(400, sd=0.01))
    scen = _runs(_noisy(327, sd=0.02), _noisy(400, sd=0.01))
    scen["fetch_wait_s"] = base["fetch_wait_s"].to_numpy() * np.array(_noisy(1.0, sd=0.03))
    d = dg.diagnose("control", "none", base, scen, _tasks(base, 100), _tasks(scen, 100))
    assert d.verdict == "not starved", d.reasons
    assert "did not wait longer for shuffle data" in d.reasons[0]
    assert d.idle_share_scenario > d.idle_share_baseline and d.fetch is not None and d.fetch.ratio_ci_low < 1.0


def test_a_large_fetch_wait_ratio_that_is_not_significant_is_no_evidence() -> None:
    """Slower, with fetch wait x7 on average but too noisy to be significant (3 runs a side): the
    tasks may well have waited on the network, so the verdict is inconclusive, not "not starved"."""
    base = _runs([18.3, 18.0, 18.4], [5.2, 5.7, 6.1])
    scen = _runs([42.4, 37.7, 28.4], [6.5, 7.0, 7.4])
    scen["fetch_wait_s"] = [30.0, 2.0, 0.5]
    base["fetch_wait_s"] = [0.9, 1.0, 1.1]
    d = dg.diagnose("udp", "none", base, scen, _tasks(base, 100), _tasks(scen, 100))
    assert d.job.significant and d.fetch is not None and not d.fetch.ratio_ci_low > 1.0 and d.fetch.ratio > 5
    assert d.verdict == "inconclusive", d.reasons
    assert "is not significant" in d.reasons[0] and "did not wait longer" not in " ".join(d.reasons)


def test_load_matched_control_separates_the_hosts_cpu_cost() -> None:
    """CPU +12 % vs the quiet baseline (the host forwards the traffic on the executors' CPUs) and
    the same +12 % in a control whose traffic avoids the job's path: against the control the CPU is
    unchanged, so the slower, fetch-waiting job is starved; the reasons name the control."""
    base = _runs(_noisy(300), _noisy(400, sd=0.01))
    scen = _runs(_noisy(620), _noisy(448, sd=0.01), wait_share=0.5)
    ctl = _runs(_noisy(300), _noisy(448, sd=0.01))  # off the job's path: its fetch wait as the baseline's
    plain = dg.diagnose("udp", "none", base, scen, _tasks(base, 100), _tasks(scen, 112))
    assert plain.verdict == "inconclusive" and plain.cpu_vs_control is None
    d = dg.diagnose("udp", "none", base, scen, _tasks(base, 100), _tasks(scen, 112), control="ctl", control_runs=ctl)
    assert d.verdict == "starved", d.reasons
    assert d.cpu_vs_control is not None and 0.97 < d.cpu_vs_control.ratio < 1.03
    assert any("load-matched control 'ctl'" in r for r in d.reasons)
    assert d.row()["cpu_vs_control"].endswith("(ctl)")
    # a "control" whose tasks also waited longer on fetches is on the job's path: not used
    on_path = _runs(_noisy(600), _noisy(448, sd=0.01), wait_share=0.5)
    d2 = dg.diagnose("udp", "none", base, scen, _tasks(base, 100), _tasks(scen, 112), control="ctl",
                     control_runs=on_path)  # fmt: skip
    assert d2.verdict == "inconclusive" and any("fetch wait grew too" in r for r in d2.reasons)
    # a control with a different CPU cost does not rescue the verdict
    cheap = _runs(_noisy(300), _noisy(400, sd=0.01))
    d3 = dg.diagnose("udp", "none", base, scen, _tasks(base, 100), _tasks(scen, 112), control="ctl",
                     control_runs=cheap)  # fmt: skip
    assert d3.verdict == "inconclusive" and any("not inside" in r and "'ctl'" in r for r in d3.reasons)


def test_control_of_pairs_scenarios_with_the_same_load_elsewhere() -> None:
    import json

    def spec(udp: float, sink: str | None, rate: int = 20) -> str:
        d = copy.deepcopy(BASE_SPEC)
        d["topology"]["bottleneck"]["rate_mbps"] = rate
        d["cross_traffic"] = {"udp_percent": udp, "sink": sink}
        return json.dumps(d)

    jsons = {"none": spec(0, None), "shared": spec(95, "w1"), "control": spec(95, None),
             "other-rate": spec(95, None, rate=10)}  # fmt: skip
    got = dg.control_of({label: stored(j) for label, j in jsons.items()})
    assert got["shared"] == "control" and "none" not in got and "other-rate" not in got


def test_a_run_without_job_time_is_left_out_and_counted() -> None:
    """Regression: one successful run without a job time (NULL) made every job-time statistic NaN
    and the verdict 'inconclusive (ratio nan)'. It is left out, and the reasons say so."""
    base = _runs(_noisy(300), _noisy(400, sd=0.01))
    scen = _runs(_noisy(620), _noisy(400, sd=0.01), wait_share=0.5)
    holed = pd.concat([scen, _runs([float("nan")], [400.0]).assign(run_id="r-null")], ignore_index=True)
    d = dg.diagnose("udp", "none", base, holed, _tasks(base, 100), _tasks(scen, 101))
    same = dg.diagnose("udp", "none", base, scen, _tasks(base, 100), _tasks(scen, 101))
    assert d.verdict == same.verdict == "starved", d.reasons
    assert (d.n_baseline, d.n_scenario, d.excluded) == (10, 10, 1)
    assert d.job == same.job
    assert not any("nan" in r for r in d.reasons)
    assert d.reasons[-1] == "1 successful run(s) without a job time left out: r-null (udp)"


def test_store_with_a_null_job_time(tmp_path: Path) -> None:
    """The same through a results file: the NULL comes from DuckDB."""
    import synthetic_store

    db = synthetic_store.build(tmp_path / "s.duckdb", 5, null_job_time=1)
    (d,) = dg.diagnose_store(db)
    assert d.verdict == "starved" and (d.n_baseline, d.n_scenario, d.excluded) == (5, 5, 1), d.reasons
    assert "without a job time left out: udp=75-r6 (udp=75)" in d.reasons[-1]
    assert not any("nan" in r for r in d.reasons)


def _cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from shufflelab.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "1000"})


@pytest.mark.parametrize(
    "options",
    [["--baseline", "nope"], ["--scenario", "udp=75", "--baseline", "nope"], ["--scenario", "nope"]],
)
def test_unknown_labels_are_refused(tmp_path: Path, options: list[str]) -> None:
    """Regression: an unknown --baseline was accepted silently (ignored without --scenario)."""
    import synthetic_store

    db = synthetic_store.build(tmp_path / "s.duckdb", 3)
    r = _cli("diagnose", str(db), *options)
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
    option = "--baseline" if "--baseline" in options else "--scenario"
    assert f"error: {option} 'nope': no scenario has this label (known labels: udp=0, udp=75)" in r.output


def test_a_named_baseline_is_used(tmp_path: Path) -> None:
    import synthetic_store

    db = synthetic_store.build(tmp_path / "s.duckdb", 3)
    r = _cli("diagnose", str(db), "--baseline", "udp=0")
    assert r.exit_code == 0 and "udp=75 vs udp=0" in r.output, r.output
    r = _cli("diagnose", str(db), "--scenario", "udp=75", "--baseline", "udp=75")
    assert r.exit_code == 2 and "is the scenario itself" in r.output


# -- job times that are no durations, and --min-reps below 2 (issue 31, item 8) -------------------------


@pytest.mark.parametrize(
    ("base_s", "scen_s"),
    [([0.0, 0.0, 0.0], [0.0, 0.0, 0.0]), ([-5.0, -5.0, -5.0], [-3.0, -4.0, -2.0]), ([10.0, 0.0, 10.0], [20.0] * 3)],
)
def test_zero_and_negative_job_times_are_invalid_data_not_runs_without_variation(
    base_s: list[float], scen_s: list[float]
) -> None:
    base, scen = _runs(base_s, [4.0] * 3), _runs(scen_s, [4.0] * 3)
    d = dg.diagnose("udp", "none", base, scen, _tasks(base, 100), _tasks(scen, 100))
    bad = [f"r{i}: {v:g} s (none)" for i, v in enumerate(base_s) if v <= 0]
    bad += [f"r{i}: {v:g} s (udp)" for i, v in enumerate(scen_s) if v <= 0]
    assert d.reasons[0] == f"invalid data: {len(bad)} run(s) with a job time of 0 s or less left out: {', '.join(bad)}"
    assert d.verdict == "inconclusive" and not any("run-to-run variation" in r for r in d.reasons)


def test_a_constant_slowdown_is_explained_as_no_run_to_run_variation() -> None:
    base, scen = _runs([10.0] * 3, [4.0] * 3), _runs([20.0] * 3, [4.0] * 3)
    d = dg.diagnose("udp", "none", base, scen, _tasks(base, 100), _tasks(scen, 100))
    assert d.job.ratio == 2.0 and "no run-to-run variation" in " ".join(d.reasons)
    assert not any(r.startswith("invalid data") for r in d.reasons)


@pytest.mark.parametrize("with_run_time", [False, True])
def test_a_constant_slowdown_does_not_ask_for_repetitions_that_cannot_change_it(with_run_time: bool) -> None:
    base, scen = _runs([10.0] * 4, [4.0] * 4), _runs([13.0] * 4, [4.0] * 4)
    if with_run_time:  # the attribution's reasons too
        base["executor_run_s"], scen["executor_run_s"] = 40.0, 52.0
    d = dg.diagnose("udp", "none", base, scen, _tasks(base, 100), _tasks(scen, 100))
    text = " ".join(d.reasons)
    assert "more repetitions" not in text and "runs a side" not in text and "decides: the job time" not in text
    assert "job times do not vary from run to run (4/4 runs: 10 s vs 13 s, a constant +30 %)" in text


@pytest.mark.parametrize("value", ["0", "-5", "1"])
def test_min_reps_below_two_is_refused(tmp_path: Path, value: str) -> None:
    import synthetic_store

    db = synthetic_store.build(tmp_path / "s.duckdb", 3)
    r = _cli("diagnose", str(db), f"--min-reps={value}")
    assert r.exit_code == 2 and "Invalid value for '--min-reps': Input should be greater than or equal to 2" in r.output
