"""Calibration: the Spark-job model, fitting from a task table, and the
sim-vs-real error computation of ``shufflelab calibrate``. Pure Python: no compiled core needed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from shufflelab.results import RunRecord, Store
from shufflelab.sim import calibrate as cal
from shufflelab.sim import calibration_model as model
from shufflelab.sim import sparkjob

C = 12.5e6  # 100 Mbit/s in bytes/s


def platform(**over: Any) -> dict[str, Any]:
    p = {
        "slots": 3,
        "slots_per_executor": 1,
        "host_cores": 2.0,
        "background_cores": 0.0,
        "link_bytes_per_s": C,
        "cross_bytes_per_s": 0.0,
        "queue_bytes": 250_000.0,
        "tcp": "loss",
        "mss_wire_bytes": 1514.0,
    }
    p.update(over)
    return p


def task(cpu: float = 0.0, lat: float = 0.0, fetch: tuple[float, ...] = (), rtt: float = 0.0, ex: int = -1) -> dict:
    return {"cpu_s": cpu, "latency_s": lat, "fetch_bytes": list(fetch), "control_round_trips": rtt, "executor": ex}


def job(stages: list[list[dict]], gaps: list[float] | None = None, tail: float = 0.0, **plat: Any) -> dict[str, Any]:
    gaps = gaps or [0.0] * len(stages)
    return {
        "platform": platform(**plat),
        "stages": [
            {"stage_id": i, "gap_s": g, "tasks": ts} for i, (g, ts) in enumerate(zip(gaps, stages, strict=True))
        ],
        "tail_s": tail,
    }


# --- the model ---------------------------------------------------------------------------------


def test_processor_sharing_of_two_cores_among_three_slots() -> None:
    assert sparkjob.simulate(job([[task(1.0)]]))["job_time_s"] == pytest.approx(1.0)
    # three tasks on two cores: each at 2/3
    assert sparkjob.simulate(job([[task(1.0)] * 3]))["job_time_s"] == pytest.approx(1.5)
    # a fourth waits for a slot, then runs alone at full speed
    assert sparkjob.simulate(job([[task(1.0)] * 4]))["job_time_s"] == pytest.approx(2.5)
    # cross traffic's CPU slows only an oversubscribed host: 3 tasks on 2 - 0.5 cores
    assert sparkjob.simulate(job([[task(1.0)] * 3], background_cores=0.5))["job_time_s"] == pytest.approx(2.0)
    assert sparkjob.simulate(job([[task(1.0)]], background_cores=0.5))["job_time_s"] == pytest.approx(1.0)


def test_stages_run_in_sequence_with_gaps_and_tail() -> None:
    r = sparkjob.simulate(job([[task(1.0)], [], [task(0.0, lat=0.5)]], gaps=[0.5, 0.25, 0.25], tail=0.1))
    assert r["job_time_s"] == pytest.approx(0.5 + 1.0 + 0.25 + 0.25 + 0.5 + 0.1)
    assert [s["stage_id"] for s in r["stages"]] == [0, 1, 2]
    assert r["stages"][2]["start_s"] == pytest.approx(2.0)


def test_flows_share_the_bottleneck_and_bytes_are_conserved() -> None:
    r = sparkjob.simulate(job([[task(fetch=(C, C)), task(fetch=(C,))]]))
    # three equal flows: all end at 3 s
    assert r["job_time_s"] == pytest.approx(3.0)
    assert r["network_bytes"] == pytest.approx(3 * C)


def test_udp_reduces_capacity_for_loss_based_tcp_with_a_minimum_window_floor() -> None:
    p = platform(cross_bytes_per_s=0.9 * C)
    assert sparkjob.tcp_capacity_bytes_per_s(p, 6) == pytest.approx(0.1 * C)
    full = platform(cross_bytes_per_s=C)
    rtt = 2 * 250_000 / C
    assert sparkjob.queue_round_trip_s(full, 0) == pytest.approx(rtt)
    assert sparkjob.tcp_capacity_bytes_per_s(full, 6) == pytest.approx(6 * 1.5 * 1514 / rtt)
    assert sparkjob.tcp_capacity_bytes_per_s(platform(), 6) == C


def test_bbr_share_against_udp() -> None:
    for u in (0.5, 0.9, 1.0):
        b = C - u * C / 1.25
        got = sparkjob.tcp_capacity_bytes_per_s(platform(cross_bytes_per_s=u * C, tcp="bbr"), 6)
        assert got == pytest.approx(C * b / (u * C + b))
    # BBR takes more than the capacity left by UDP (it does not back off on loss)
    assert sparkjob.tcp_capacity_bytes_per_s(platform(cross_bytes_per_s=0.9 * C, tcp="bbr"), 6) > 0.1 * C


def test_standing_queue_delays_control_messages() -> None:
    quiet = sparkjob.simulate(job([[task(lat=0.1, rtt=2.0)]]))["job_time_s"]
    full = sparkjob.simulate(job([[task(lat=0.1, rtt=2.0)]], cross_bytes_per_s=C))["job_time_s"]
    assert quiet == pytest.approx(0.1)
    assert full == pytest.approx(0.1 + 2 * (2 * 250_000 / C))


def test_control_messages_pay_loss_recovery_only_at_a_queue_the_cross_traffic_keeps_full() -> None:
    one = [[task(lat=0.1, rtt=2.0)]]
    full = sparkjob.simulate(job(one, cross_bytes_per_s=C, control_loss_s=0.08))["job_time_s"]
    assert full == pytest.approx(0.1 + 2 * (2 * 250_000 / C + 0.08))
    # UDP below the link rate: no standing queue, no losses for a task alone
    below = sparkjob.simulate(job(one, cross_bytes_per_s=0.9 * C, control_loss_s=0.08))
    assert below["job_time_s"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="control_loss_s"):
        sparkjob.simulate(job(one, control_loss_s=-1.0))


def test_pinned_tasks_wait_for_their_executor() -> None:
    # executor 0 has a long task then a pinned one; the free executors may not take it
    r = sparkjob.simulate(job([[task(1.0, ex=0), task(0.1, ex=1), task(0.1, ex=0)]], host_cores=3.0))
    assert r["job_time_s"] == pytest.approx(1.1)
    unpinned = sparkjob.simulate(job([[task(1.0), task(0.1), task(0.1)]], host_cores=3.0))
    assert unpinned["job_time_s"] == pytest.approx(1.0)


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="slots"):
        sparkjob.simulate(job([[task(1.0)]], slots=0))
    with pytest.raises(ValueError, match="tcp"):
        sparkjob.simulate(job([[task(1.0)]], tcp="vegas"))


# --- fitting -----------------------------------------------------------------------------------

T0 = 1_000_000


def synthetic_run() -> dict[str, pd.DataFrame]:
    """Two stages on three one-core executors: 3 map tasks, then 3 reducers reading 3 MB each
    (2 MB remote from two executors, 1 MB local)."""
    rows = []
    tid = 0
    for ex, (launch, dur) in enumerate([(100, 900), (100, 900), (100, 600)]):
        rows.append(_task(0, tid, ex, str(ex), launch, dur, run=700 if dur == 900 else 450, deser=100))
        tid += 1
    for ex in range(3):
        rows.append(
            _task(
                1, tid, ex, str(ex), 1300, 500, run=400, deser=20, fetch_wait=50, remote=2_000_000, blocks=2, local=1e6
            )
        )
        tid += 1
    tasks = pd.DataFrame(rows)
    stages = pd.DataFrame(
        [
            {"stage_id": 0, "stage_attempt": 0, "submitted_at_ms": T0 + 50, "completed_at_ms": T0 + 1010},
            {"stage_id": 1, "stage_attempt": 0, "submitted_at_ms": T0 + 1250, "completed_at_ms": T0 + 1810},
        ]
    )
    jobs = pd.DataFrame([{"job_id": 0, "submitted_at_ms": T0, "completed_at_ms": T0 + 1900}])
    return {"tasks": tasks, "stages": stages, "jobs": jobs}


def _task(stage: int, tid: int, index: int, ex: str, launch: int, dur: int, **kw: Any) -> dict[str, Any]:
    return {
        "stage_id": stage,
        "stage_attempt": 0,
        "task_id": tid,
        "task_index": index,
        "executor_id": ex,
        "launch_at_ms": T0 + launch,
        "finish_at_ms": T0 + launch + dur,
        "duration_ms": float(dur),
        "successful": True,
        "executor_run_ms": float(kw.get("run", 0)),
        "deserialize_ms": float(kw.get("deser", 0)),
        "fetch_wait_ms": float(kw.get("fetch_wait", 0)),
        "remote_bytes": int(kw.get("remote", 0)),
        "remote_blocks": int(kw.get("blocks", 0)),
        "local_bytes": int(kw.get("local", 0)),
    }


def test_ps_rates_follow_concurrency() -> None:
    import numpy as np

    rates = model.ps_rates(np.array([0.0, 0.0, 0.0, 10.0]), np.array([10.0, 10.0, 10.0, 20.0]), 2.0)
    assert rates == pytest.approx([2 / 3, 2 / 3, 2 / 3, 1.0])


def test_fit_on_a_synthetic_task_table() -> None:
    w = model.fit_workload(**synthetic_run(), host_cores=2.0)
    s0, s1 = w["stages"]
    assert w["executors"] == 3
    # gaps: job start -> first launch (100 ms); last map finish (1000) -> first reducer (1300)
    assert s0["gap_s"] == pytest.approx(0.1)
    assert s1["gap_s"] == pytest.approx(0.3)
    assert w["tail_s"] == pytest.approx(0.1)
    # latency = duration - run - deserialize
    assert s0["tasks"][0]["latency_s"] == pytest.approx(0.1)
    # the 600 ms map task shared 2 cores with two others all its life: work = 0.55 s x 2/3
    short = next(t for t in s0["tasks"] if t["executor"] == 2)
    assert short["cpu_s"] == pytest.approx(0.55 * 2 / 3)
    # a long map task: 600 ms at 2/3, then 300 ms alone at 1 -> mean rate 7/9
    assert s0["tasks"][0]["cpu_s"] == pytest.approx(0.8 * 7 / 9)
    # reducers: 2 MB remote (wire bytes) from two executors; CPU excludes the fetch wait
    r = s1["tasks"][0]
    assert r["fetch_bytes"] == pytest.approx([1e6 * model.WIRE_FACTOR] * 2)
    assert r["local_fraction"] == pytest.approx(1 / 3)
    assert r["cpu_s"] == pytest.approx((0.4 + 0.02 - 0.05) * 2 / 3)
    assert [t["executor"] for t in s1["tasks"]] == [0, 1, 2]


def test_fit_counts_the_task_binary_fetch_once_per_executor_and_stage() -> None:
    run = synthetic_run()
    # a second stage-0 task on executor 0, after its first one
    extra = _task(0, 99, 3, "0", 1000, 200, run=150, deser=10)
    run["tasks"] = pd.concat([run["tasks"], pd.DataFrame([extra])], ignore_index=True)
    s0, s1 = model.fit_workload(**run, host_cores=2.0)["stages"]
    # launch + status, and the task binary for the first task of the stage on each executor
    assert [t["control_round_trips"] for t in s0["tasks"]] == [2.0, 2.0, 2.0, 1.0]
    # readers add the map-output lookup + fetch request
    assert [t["control_round_trips"] for t in s1["tasks"]] == [3.0, 3.0, 3.0]


def test_fit_by_replay_reproduces_the_fitted_run() -> None:
    run = synthetic_run()
    p = platform()
    w = model.fit_workload(**run, host_cores=2.0, platform=p)
    res = sparkjob.simulate({"platform": p, "stages": w["stages"], "tail_s": w["tail_s"]})
    assert res["job_time_s"] == pytest.approx(1.9, rel=0.02)
    want = {(int(t.stage_id), int(t.task_index)): t.duration_ms / 1000 for t in run["tasks"].itertuples()}
    for row in res["tasks"]:
        stage = w["stages"][row["stage_id"]]
        key = (row["stage_id"], stage["tasks"][row["index"]]["task_index"])
        assert row["end_s"] - row["start_s"] == pytest.approx(want[key], rel=0.02)


def test_failed_attempts_are_not_fitted() -> None:
    run = synthetic_run()
    bad = dict(run["tasks"].iloc[0])
    bad.update(task_id=99, successful=False, duration_ms=5000.0)
    run["tasks"] = pd.concat([run["tasks"], pd.DataFrame([bad])], ignore_index=True)
    w = model.fit_workload(**run, host_cores=2.0)
    assert len(w["stages"][0]["tasks"]) == 3


# --- errors and the whole calibration ---------------------------------------------------------


def test_relative_and_median_absolute_error() -> None:
    assert cal.relative_error(110.0, 100.0) == pytest.approx(0.10)
    assert cal.relative_error(90.0, 100.0) == pytest.approx(-0.10)
    assert cal.median_abs_error([0.05, -0.20, 0.10]) == pytest.approx(0.10)
    assert cal.median_abs_error([0.05, -0.20, 0.10, -0.30]) == pytest.approx(0.15)
    assert cal.median_abs_error([float("nan"), -0.2]) == pytest.approx(0.2)
    assert math.isnan(cal.median_abs_error([]))
    with pytest.raises(ValueError):
        cal.relative_error(1.0, 0.0)


def test_choose_fit_run_takes_the_lower_median() -> None:
    runs = pd.DataFrame({"run_id": ["a", "b", "c", "d"], "job_time_s": [30.0, 10.0, 20.0, 25.0]})
    assert cal.choose_fit_run(runs) == "c"
    with pytest.raises(cal.CalibrationError):
        cal.choose_fit_run(runs.iloc[0:0])


def _spec(udp: float, cc: str = "cubic") -> dict[str, Any]:
    return {
        "experiment": {"name": "t"},
        "topology": {"kind": "shared", "bottleneck": {"rate_mbps": 100, "queue_bytes": 250_000}},
        "hosts": {
            "master": {"roles": ["spark-master"]},
            **{f"w{i}": {"roles": ["spark-worker"]} for i in range(3)},
            "tgen": {"roles": ["traffic-source"]},
            "tsink": {"roles": ["traffic-sink"]},
        },
        "tcp": {"congestion_control": cc},
        "spark": {"worker_cores": 1},
        "workload": {"name": "sort-aggregate", "params": {"rows": 10, "partitions": 4}},
        "cross_traffic": {"udp_percent": udp},
    }


def test_cross_traffic_cpu_from_a_constant_or_measured_points() -> None:
    assert model.cross_cpu_cores(0.09, 2.0) == pytest.approx(0.18)
    pts = ((0.0, 0.0), (0.05, 0.1), (0.1, 0.5))
    assert model.cross_cpu_cores(0.0, pts) == 0.0
    assert model.cross_cpu_cores(0.075, pts) == pytest.approx(0.3)  # halfway between the points
    assert model.cross_cpu_cores(0.2, pts) == pytest.approx(1.0)  # beyond: the last point's 5 cores/Gbit/s
    p = model.platform_for(_spec(100, "cubic"), 2.0, model.HOST_CROSS_CPU_CORES, control_loss_s=0.05)
    assert p["background_cores"] == pytest.approx(dict(model.HOST_CROSS_CPU_CORES)[0.1])
    assert p["control_loss_s"] == 0.05


def test_platform_from_spec() -> None:
    p = model.platform_for(_spec(90, "bbr"), host_cores=2.0, cross_cpu=2.0)
    assert p["slots"] == 3 and p["tcp"] == "bbr" and p["host_cores"] == 2.0
    assert p["link_bytes_per_s"] == pytest.approx(C)
    assert p["cross_bytes_per_s"] == pytest.approx(0.9 * C)
    assert p["background_cores"] == pytest.approx(2.0 * 0.09)
    star = _spec(0)
    star["topology"]["kind"] = "star"
    with pytest.raises(cal.CalibrationError, match="shared"):
        model.platform_for(star, 2.0, 2.0)


def test_platform_of_a_switch_spec_models_delay_red_and_dctcp() -> None:
    sp = _spec(50, "dctcp")
    sp["topology"]["bottleneck"].update(
        {"delay_ms": 5, "discipline": "red", "red": {"min_bytes": 30_000, "max_bytes": 30_000, "max_p": 1.0}}
    )
    p = model.platform_for(sp, 2.0, 2.0)
    assert p["tcp"] == "dctcp" and p["base_rtt_s"] == pytest.approx(0.010)
    assert p["red"]["min_bytes"] == 30_000 and p["red"]["ecn"] is True
    legacy = _spec(0, "cubic")
    legacy["tcp"]["vcc"] = True
    assert model.platform_for(legacy, 2.0, 2.0)["tcp"] == "dctcp", "VCC runs DCTCP for legacy hosts"
    # the host's cross-traffic CPU profile was measured with the kernel forwarding: not for these
    assert cal._datapath(sp) == "switch" and cal._datapath(_spec(50, "cubic")) == "kernel"
    # same delay, droptail + cubic: the FIFO stands full and the UDP keeps its half; the marking
    # queue stays near K and drops the (non-ECT) UDP above it
    job = sparkjob_config(p)
    fifo_spec = _spec(50, "cubic")
    fifo_spec["topology"]["bottleneck"]["delay_ms"] = 5
    fifo = sparkjob_config(model.platform_for(fifo_spec, 2.0, 2.0))
    assert model.run_model(job)["job_time_s"] < model.run_model(fifo)["job_time_s"]


def sparkjob_config(platform: dict[str, Any]) -> dict[str, Any]:
    tasks = [{"latency_s": 0.01, "cpu_s": 0.05, "fetch_bytes": [1e6, 1e6], "control_round_trips": 10.0}] * 3
    return {"platform": platform, "stages": [{"stage_id": 0, "tasks": tasks}]}


def _store(tmp_path: Path, job_times: dict[str, list[float]]) -> Path:
    """A results file with the synthetic run as every run's event log and the given job times."""
    path = tmp_path / "r.duckdb"
    store = Store(path)
    scen = []
    for label in job_times:
        udp = float(label.split("=")[1])
        scen.append(
            {"scenario_id": label, "label": label, "values": {}, "spec_json": json.dumps(_spec(udp)), "backend": "x"}
        )
    store.add_scenarios(scen)
    run = synthetic_run()
    for label, times in job_times.items():
        for rep, jt in enumerate(times, 1):
            tables = {k: v.drop(columns=[c for c in v.columns if c not in _cols(k)]) for k, v in run.items()}
            store.write_run(
                RunRecord(
                    run={
                        "run_id": f"{label}-r{rep}",
                        "scenario_id": label,
                        "rep": rep,
                        "attempt": 1,
                        "status": "ok",
                        "job_time_s": jt,
                        "environment_json": json.dumps({"cpus": 2}),
                    },
                    tables=tables,
                )
            )
    return path


def _cols(table: str) -> set[str]:
    from dataclasses import fields

    from shufflelab.eventlog import JobRow, StageRow, TaskRow

    row = {"tasks": TaskRow, "stages": StageRow, "jobs": JobRow}[table]
    return {f.name for f in fields(row)}


def test_calibrate_reports_error_per_scenario_and_the_median(tmp_path: Path) -> None:
    path = _store(tmp_path, {"udp=0": [1.8, 1.9, 2.5], "udp=100": [3.0, 4.0]})
    c = cal.calibrate(path, cross_cpu_cores_per_gbps=0.0)
    t = c.table.set_index("scenario")
    # fitted from the median baseline run (job time 1.9 s): its event log is the synthetic run
    assert set(c.fitted.values()) == {"udp=0-r2"}
    assert t.loc["udp=0", "is_fit_scenario"]
    assert t.loc["udp=0", "real_mean_s"] == pytest.approx(2.0667, rel=1e-3)
    for label in ("udp=0", "udp=100"):
        assert t.loc[label, "rel_error"] == pytest.approx(
            (t.loc[label, "sim_s"] - t.loc[label, "real_mean_s"]) / t.loc[label, "real_mean_s"]
        )
    assert t.loc["udp=0", "sim_s"] == pytest.approx(1.9, rel=0.02)
    assert t.loc["udp=100", "sim_s"] > t.loc["udp=0", "sim_s"]  # the fetches crawl under full UDP
    assert c.median_abs_error == pytest.approx(cal.median_abs_error(list(t["rel_error"])))
    # the breakdown adds up: shuffle stage + other stages + driver gaps = job time, both sides
    for side, total in (("sim", "sim_s"), ("real", "real_mean_s")):
        parts = t[f"{side}_shuffle_stage_s"] + t[f"{side}_other_stages_s"] + t[f"{side}_driver_gaps_s"]
        assert list(parts) == pytest.approx(list(t[total]))
    md, csv = cal.write(c, tmp_path / "out", "shufflelab calibrate r.duckdb", str(path))
    text = md.read_text()
    assert "not measured" in text and "Median absolute error over 2 scenarios" in text
    assert len(pd.read_csv(csv)) == 2


def test_calibrate_as_an_ensemble_fits_every_run_without_cross_traffic(tmp_path: Path) -> None:
    path = _store(tmp_path, {"udp=0": [1.8, 1.9, 2.5], "udp=100": [3.0, 4.0]})
    one = cal.calibrate(path, cross_cpu_cores_per_gbps=0.0).table.set_index("scenario")
    c = cal.calibrate(path, cross_cpu_cores_per_gbps=0.0, ensemble=True)
    t = c.table.set_index("scenario")
    assert c.ensemble and sorted(next(iter(c.fitted.values())).split(",")) == ["udp=0-r1", "udp=0-r2", "udp=0-r3"]
    assert list(t["sim_fits"]) == [3, 3]
    # every run here carries the same event log: the fits agree with each other and with one fit
    assert list(t["sim_min_s"]) == pytest.approx(list(t["sim_max_s"]))
    assert list(t["sim_s"]) == pytest.approx(list(one.loc[t.index, "sim_s"]))
    sub = cal.calibrate(path, cross_cpu_cores_per_gbps=0.0, ensemble=True, ensemble_runs=["udp=0-r3"])
    assert set(sub.fitted.values()) == {"udp=0-r3"}
    md, _ = cal.write(c, tmp_path / "out", "shufflelab calibrate r.duckdb --ensemble", str(path))
    text = md.read_text()
    assert "each of the 3 runs without cross traffic" in text and "median [min–max] of the fits" in text
    with pytest.raises(cal.CalibrationError, match="exclude each other"):
        cal.calibrate(path, fit_run="udp=0-r1", ensemble=True)


def test_the_ensemble_takes_the_median_fit_per_scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _store(tmp_path, {"udp=0": [1.8, 1.9, 2.5], "udp=100": [3.0, 4.0]})
    fit = cal.fit_workload
    slower = {"udp=0-r1": 3.0, "udp=0-r2": 1.0, "udp=0-r3": 2.0}  # the runs' fits made to differ

    def fit_scaled(tasks: pd.DataFrame, *args: Any, **kwargs: Any) -> dict[str, Any]:
        w = fit(tasks, *args, **kwargs)
        k = slower[str(tasks["run_id"].iloc[0])]
        for st in w["stages"]:
            st["tasks"] = [{**t, "cpu_s": t["cpu_s"] * k} for t in st["tasks"]]
        return w

    monkeypatch.setattr(cal, "fit_workload", fit_scaled)
    singles = {
        rid: cal.calibrate(path, cross_cpu_cores_per_gbps=0.0, fit_run=rid).table.set_index("scenario")["sim_s"]
        for rid in slower
    }
    t = cal.calibrate(path, cross_cpu_cores_per_gbps=0.0, ensemble=True).table.set_index("scenario")
    for label in ("udp=0", "udp=100"):
        fits = sorted(float(s[label]) for s in singles.values())
        assert fits[0] < fits[1] < fits[2]
        assert t.loc[label, "sim_s"] == pytest.approx(fits[1])  # r3's fit (×2), the middle one
        assert (t.loc[label, "sim_min_s"], t.loc[label, "sim_max_s"]) == pytest.approx((fits[0], fits[2]))


def test_calibrate_refuses_a_missing_file_or_no_baseline(tmp_path: Path) -> None:
    with pytest.raises(cal.CalibrationError, match="no such results file"):
        cal.calibrate(tmp_path / "none.duckdb")
    path = _store(tmp_path, {"udp=50": [3.0]})
    with pytest.raises(cal.CalibrationError, match="without cross traffic"):
        cal.calibrate(path)


def test_cli_calibrate_prints_and_writes_the_table(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from shufflelab.cli import app

    path = _store(tmp_path, {"udp=0": [1.9], "udp=100": [3.0]})
    out = tmp_path / "cal"
    r = CliRunner().invoke(app, ["calibrate", str(path), "--out", str(out), "--cross-cpu", "0"])
    assert r.exit_code == 0, r.output
    assert "median absolute error" in r.output and "udp=100" in r.output
    text = (out / "calibration.md").read_text()
    assert f"shufflelab calibrate {path} --cross-cpu 0 --out {out}" in text
    missing = CliRunner().invoke(app, ["calibrate", str(tmp_path / "none.duckdb")])
    assert missing.exit_code == 2


def test_cli_calibrate_reports_a_malformed_spec_without_a_traceback(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from shufflelab.cli import app

    path = _store(tmp_path, {"udp=0": [1.9], "udp=100": [3.0]})
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b'[experiment]\nname = "caf\xe9"\n')
    r = CliRunner().invoke(app, ["calibrate", str(path), "--spec", str(bad), "--cross-cpu", "0"])
    assert r.exit_code == 2, r.output
    # rich wraps a long path onto a line of its own (a temporary folder under xdist's is long enough)
    assert "bad.toml:line2,column12:byte0xe9isnotUTF-8" in "".join(r.output.split())
