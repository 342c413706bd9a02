"""Compute times of a recording made on an oversubscribed machine (3 one-core executors on a 2-core
box): corrected for processor sharing from the recording's own accounting, or used as recorded with
the bias stated; and the reports' headline on what the model can and cannot answer."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from shufflelab.sim import app_dag, apps_sim
from shufflelab.sim.apps_report import report
from shufflelab.sim.spec import SimSpecError

T0 = 1_800_000_000_000
USER_APP = Path(__file__).resolve().parents[2] / "docs" / "results" / "user-app" / "data"


def _task(tid: int, ex: int, launch: int, wall: int, cpu: float | None) -> dict[str, object]:
    row: dict[str, object] = {
        "run_id": "r1", "app_index": 0, "stage_id": 0, "stage_attempt": 0, "task_id": tid, "task_index": tid,
        "attempt": 0, "executor_id": str(ex), "host": f"10.0.0.{ex}", "launch_at_ms": T0 + launch,
        "finish_at_ms": T0 + launch + wall, "duration_ms": wall, "successful": True, "executor_run_ms": wall,
        "deserialize_ms": 0.0, "fetch_wait_ms": 0.0, "remote_bytes": 0, "local_bytes": 0,
        "shuffle_write_bytes": 0,
    }  # fmt: skip
    if cpu is not None:
        row["executor_cpu_ms"] = cpu
        row["deserialize_cpu_ms"] = 0.0
    return row


def recording(path: Path, *, cpus: int | None = 2, with_cpu: bool = True) -> Path:
    """Three tasks at once on three executors for 3 s (2/3 of a core each on 2 cores), one of them
    with 2.9 s of thread CPU; then one task alone for 1 s."""
    path.mkdir(parents=True, exist_ok=True)
    tasks = [
        _task(0, 0, 0, 3000, 1500.0 if with_cpu else None),
        _task(1, 1, 0, 3000, 1500.0 if with_cpu else None),
        _task(2, 2, 0, 3000, 2900.0 if with_cpu else None),
        _task(3, 0, 3000, 1000, 900.0 if with_cpu else None),
    ]
    stages = [{"run_id": "r1", "app_index": 0, "stage_id": 0, "stage_attempt": 0, "name": "map", "num_tasks": 4,
               "submitted_at_ms": T0, "completed_at_ms": T0 + 4000, "parent_ids": ""}]  # fmt: skip
    jobs = [{"run_id": "r1", "app_index": 0, "job_id": 0, "submitted_at_ms": T0, "completed_at_ms": T0 + 4000,
             "stage_ids": "0"}]  # fmt: skip
    tables: dict[str, list[dict[str, object]]] = {"tasks": tasks, "stages": stages, "jobs": jobs}
    if cpus is not None:
        tables["runs"] = [{"run_id": "r1", "environment_json": json.dumps({"cpus": cpus, "kernel": "6.1"})}]
    for name, rows in tables.items():
        pd.DataFrame(rows).to_parquet(path / f"{name}.parquet")
    return path


def _compute(dag: app_dag.AppDag) -> list[float]:
    return [round(t.compute_s, 9) for t in dag.stages[0].tasks]


def test_an_oversubscribed_recording_is_corrected_for_processor_sharing(tmp_path: Path) -> None:
    dag = app_dag.load_app(recording(tmp_path / "d"))
    # 3 tasks on 2 cores: 3 s of wall time is 2 s of a core; the task whose thread used 2.9 s of CPU
    # keeps 2.9 s (a task cannot have used less of the machine than its thread's CPU); alone: as recorded
    assert _compute(dag) == [2.0, 2.0, 2.9, 1.0]
    assert dag.cpu is not None and dag.cpu.compute == "shared"
    assert dag.cpu.recorded_s == pytest.approx(10.0) and dag.cpu.shared_s == pytest.approx(7.9)
    assert dag.cpu.thread_cpu_s == pytest.approx(6.8) and dag.cpu.peak_tasks == 3
    text = dag.cpu.statement()
    assert "2 physical cores on the box, up to 3 tasks at once" in text and "the corrected times are used" in text
    # the other readings of the same recording
    assert _compute(app_dag.load_app(tmp_path / "d", compute="recorded")) == [3.0, 3.0, 3.0, 1.0]
    assert _compute(app_dag.load_app(tmp_path / "d", compute="thread_cpu")) == [1.5, 1.5, 2.9, 0.9]
    # the no-network makespan on the recorded 3 cores follows: 2.9 + 1.0 instead of 3 + 1
    assert app_dag.makespan_no_network(dag) == pytest.approx(2.0 + 1.0)


def test_without_the_machines_cores_the_bias_is_stated(tmp_path: Path) -> None:
    dag = app_dag.load_app(recording(tmp_path / "d", cpus=None))
    assert dag.cpu is not None and dag.cpu.compute == "recorded"
    assert _compute(dag) == [3.0, 3.0, 3.0, 1.0]
    assert "cores are unknown" in dag.cpu.statement() and "biased long" in dag.cpu.statement()
    with pytest.raises(app_dag.AppDagError, match="compute 'shared' needs the recorded machines' physical cores"):
        app_dag.load_app(tmp_path / "d", compute="shared")
    # given per recorded host: each executor here has a host of its own, so nobody waited for a core
    per_host = app_dag.load_app(tmp_path / "d", cpus=1)
    assert per_host.cpu is not None and per_host.cpu.machines == "per host"
    assert _compute(per_host) == [3.0, 3.0, 3.0, 1.0] and "not oversubscribed" in per_host.cpu.statement()


def test_thread_cpu_needs_the_recorded_cpu_time(tmp_path: Path) -> None:
    recording(tmp_path / "d", with_cpu=False)
    with pytest.raises(app_dag.AppDagError, match="no per-task CPU time"):
        app_dag.load_app(tmp_path / "d", compute="thread_cpu")
    dag = app_dag.load_app(tmp_path / "d")
    assert _compute(dag) == [2.0, 2.0, 2.0, 1.0], "shared, without a CPU floor"
    assert dag.cpu is not None and "no per-task CPU time" in dag.cpu.statement()
    with pytest.raises(app_dag.AppDagError, match="compute: 'fast'"):
        app_dag.load_app(tmp_path / "d", compute="fast")  # type: ignore[arg-type]


def test_the_lab_recording_is_three_executors_on_two_cores() -> None:
    dag = app_dag.load_app(USER_APP, "e896bbeb7c6e-r1-a1")
    cpu = dag.cpu
    assert cpu is not None and cpu.compute == "shared" and cpu.machine_cores == 2 and cpu.peak_tasks == 3
    assert cpu.thread_cpu_s is not None and cpu.shared_s is not None
    assert cpu.thread_cpu_s <= cpu.shared_s < cpu.recorded_s
    recorded = app_dag.load_app(USER_APP, "e896bbeb7c6e-r1-a1", compute="recorded")
    assert app_dag.makespan_no_network(dag) < app_dag.makespan_no_network(recorded)


SPEC = """
[experiment]
name = "sim-app-compute"
[topology]
kind = "leaf_spine"
leaves = 1
hosts_per_leaf = 4
spines = 1
host_gbps = 1
oversubscription = 1
[[app]]
source = "d"
task_factor = 1
"""


def test_the_spec_chooses_and_the_report_states_it(tmp_path: Path) -> None:
    recording(tmp_path / "d")
    (tmp_path / "s.toml").write_text(SPEC)
    out = apps_sim.run_experiment(tmp_path / "s.toml", tmp_path / "res")
    app = out.doc["runs"][0]["apps"][0]
    assert app["compute"] == "shared" and "corrected for processor sharing" in app["compute_times"]
    md = report(out.path, tmp_path / "rep").read_text()
    assert "Compute times (shared):" in md
    headline = md.split("## Headline")[1].split("##")[0]
    assert "Flow-level max-min model" in headline
    assert "incast" in headline and "retransmission timeouts (RTOs)" in headline and "slow start" in headline
    assert "Compute times of the recording: shared" in headline
    (tmp_path / "s.toml").write_text(SPEC + 'compute = "recorded"\n')
    out = apps_sim.run_experiment(tmp_path / "s.toml", tmp_path / "res")
    md = report(out.path, tmp_path / "rep").read_text()
    assert "Compute times of the recording: recorded (as recorded: longer than one-core times" in md


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('compute = "fast"', r"s\.toml: app\[0\]\.compute: "),
        ("recorded_cpus = 0", r"s\.toml: app\[0\]\.recorded_cpus: "),
    ],
)
def test_compute_errors_name_the_field(tmp_path: Path, line: str, message: str) -> None:
    recording(tmp_path / "d")
    (tmp_path / "s.toml").write_text(SPEC + line + "\n")
    with pytest.raises(SimSpecError, match=message):
        apps_sim.run_experiment(tmp_path / "s.toml", tmp_path / "res")
