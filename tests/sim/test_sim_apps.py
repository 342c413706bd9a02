"""Recorded Spark applications as stage DAGs (app_dag), their specs, and runs on the fabric core."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from tests.unit.synthetic_store import build

from shufflelab.sim import app_dag, app_spec, apps_sim
from shufflelab.sim.apps_report import report
from shufflelab.sim.spec import SimSpecError

T0 = 1_800_000_000_000


def _task(stage: int, tid: int, idx: int, ex: int, launch: int, run: float, *, wait: float = 0.0,
          remote: int = 0, local: int = 0, written: int = 0, ok: bool = True) -> dict[str, object]:  # fmt: skip
    return {
        "run_id": "r1", "app_index": 0, "stage_id": stage, "stage_attempt": 0, "task_id": tid, "task_index": idx,
        "attempt": 0, "executor_id": str(ex), "host": f"w{ex}", "launch_at_ms": T0 + launch,
        "finish_at_ms": T0 + launch + int(run) + 10, "duration_ms": run + 10, "successful": ok,
        "executor_run_ms": run, "deserialize_ms": 10.0, "fetch_wait_ms": wait, "remote_bytes": remote,
        "local_bytes": local, "shuffle_write_bytes": written,
    }  # fmt: skip


def data_folder(path: Path) -> Path:
    """Two jobs: job 0 = stages 0 and 1 in parallel (maps), 2 joins them; job 1 = stage 4 reads the
    output of a skipped stage 3 (= stage 2's output), on 2 one-core executors."""
    path.mkdir(parents=True, exist_ok=True)
    tasks = [
        _task(0, 0, 0, 0, 0, 990, written=300),
        _task(0, 1, 1, 1, 0, 1990, written=100),
        _task(1, 2, 0, 0, 1000, 490, written=600),
        _task(0, 9, 1, 0, 1000, 100, ok=False),  # a failed attempt: left out
        _task(2, 3, 0, 0, 2600, 1190, wait=200, remote=400, local=100, written=50),
        _task(2, 4, 1, 1, 2600, 1190, wait=200, remote=100, local=400, written=50),
        _task(4, 5, 0, 1, 4200, 290, remote=100),
    ]
    stages = [
        {"run_id": "r1", "app_index": 0, "stage_id": 0, "stage_attempt": 0, "name": "map a", "num_tasks": 2,
         "submitted_at_ms": T0, "completed_at_ms": T0 + 2000, "parent_ids": ""},
        {"run_id": "r1", "app_index": 0, "stage_id": 1, "stage_attempt": 0, "name": "map b", "num_tasks": 1,
         "submitted_at_ms": T0 + 1000, "completed_at_ms": T0 + 1500, "parent_ids": ""},
        {"run_id": "r1", "app_index": 0, "stage_id": 2, "stage_attempt": 0, "name": "join", "num_tasks": 2,
         "submitted_at_ms": T0 + 2100, "completed_at_ms": T0 + 3800, "parent_ids": "0,1"},
        {"run_id": "r1", "app_index": 0, "stage_id": 4, "stage_attempt": 0, "name": "count", "num_tasks": 1,
         "submitted_at_ms": T0 + 4000, "completed_at_ms": T0 + 4500, "parent_ids": "3"},
    ]  # fmt: skip
    jobs = [
        {"run_id": "r1", "app_index": 0, "job_id": 0, "submitted_at_ms": T0, "completed_at_ms": T0 + 3850,
         "stage_ids": "0,1,2"},
        {"run_id": "r1", "app_index": 0, "job_id": 1, "submitted_at_ms": T0 + 3900, "completed_at_ms": T0 + 4600,
         "stage_ids": "3,4"},
    ]  # fmt: skip
    for name, rows in (("tasks", tasks), ("stages", stages), ("jobs", jobs)):
        pd.DataFrame(rows).to_parquet(path / f"{name}.parquet")
    return path


def test_dag_from_a_data_folder(tmp_path: Path) -> None:
    dag = app_dag.load_app(data_folder(tmp_path / "data"))
    assert [s.stage_id for s in dag.stages] == [0, 1, 2, 4]
    s0, s1, s2, s4 = dag.stages
    assert s0.reads_from == () and s1.after == ()
    assert s2.reads_from == (0, 1) and s2.after == (0, 1)
    # the skipped parent 3 is stage 2's output; job 1 waits for all of job 0
    assert s4.reads_from == (2,) and s4.after == (0, 1, 2)
    assert len(s0.tasks) == 2  # the failed attempt is not a task
    assert s2.tasks[0] == app_dag.TaskCost(compute_s=1.0, write_bytes=50, read_bytes=500)
    assert s0.tasks[0].compute_s == pytest.approx(1.0)
    assert s2.delay_s == pytest.approx(0.1) and s4.delay_s == pytest.approx(0.2)
    assert dag.slots == 2 and dag.job_time_s == pytest.approx(4.6) and dag.tail_s == pytest.approx(0.1)
    assert dag.shuffle_bytes == 1100


def test_no_network_makespan_by_hand(tmp_path: Path) -> None:
    dag = app_dag.load_app(data_folder(tmp_path / "data"))
    # 2 cores: stage 0's tasks (1 s, 2 s) from 0; stage 1 (0.5 s) waits for a core until 1.0 → 1.5;
    # stage 2 ready at 2.0 + 0.1, two 1.0 s tasks → 3.1; stage 4 at 3.3, 0.3 s → 3.6; + tail 0.1
    assert app_dag.makespan_no_network(dag) == pytest.approx(3.7)
    assert app_dag.makespan_no_network(dag, slots=3) == pytest.approx(3.7)
    assert app_dag.makespan_no_network(dag, slots=1) == pytest.approx(1 + 2 + 0.5 + 0.1 + 2 + 0.2 + 0.3 + 0.1)


def test_scale_states_how_tasks_and_bytes_grow(tmp_path: Path) -> None:
    dag = app_dag.load_app(data_folder(tmp_path / "data"))
    big = app_dag.scale(dag, 10, 2, task_factor=5, bytes_factor=2)
    assert [len(s.tasks) for s in big.stages] == [10, 1, 10, 1]  # single-task stages stay single
    assert big.stages[0].tasks[3] == app_dag.TaskCost(2.0, 200, 0)
    assert big.stage(2).read_bytes == 5 * 2 * dag.stage(2).read_bytes
    assert big.stage(4).read_bytes == 2 * dag.stage(4).read_bytes
    assert big.scaling is not None and "5× more and 5× smaller" in big.scaling.statement(dag.slots)
    default = app_dag.scale(dag, 10, 2)
    assert default.scaling is not None and default.scaling.task_factor == 10
    with pytest.raises(app_dag.AppDagError, match="hosts and cores_per_host"):
        app_dag.scale(dag, 0)


def test_dag_from_a_lab_store_infers_sources(tmp_path: Path) -> None:
    store = build(tmp_path / "r.duckdb", reps=1)
    dag = app_dag.load_app(store, "udp=0-r1")
    assert [s.stage_id for s in dag.stages] == [0, 1]
    assert dag.stages[1].reads_from == (0,)
    assert any("inferred" in n for n in dag.notes)
    assert len(dag.stages[1].tasks) == 3 and dag.stages[1].read_bytes == 3 * 7_500_000
    assert app_dag.load_app(store).run_id in {"udp=0-r1", "udp=75-r1"}


def test_bad_sources_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(app_dag.AppDagError, match="no such store"):
        app_dag.load_app(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(app_dag.AppDagError, match="no stages.parquet"):
        app_dag.load_app(tmp_path / "empty")
    (tmp_path / "x.duckdb").write_text("not a store")
    with pytest.raises(app_dag.AppDagError, match="x.duckdb"):
        app_dag.load_app(tmp_path / "x.duckdb")
    with pytest.raises(app_dag.AppDagError, match="run_id='nope'"):
        app_dag.load_app(data_folder(tmp_path / "data"), "nope")


SPEC = """
[experiment]
name = "sim-app-test"
[topology]
kind = "leaf_spine"
leaves = 2
hosts_per_leaf = 4
spines = 1
host_gbps = 0.000008
oversubscription = 1
[hosts]
cores = 1
[[app]]
source = "data"
task_factor = 2
[fetch]
max_reqs_in_flight = 2
initial_window_bytes = 0
[matrix]
"topology.oversubscription" = [1, 4]
"""


def test_spec_runs_on_the_core_and_reports(tmp_path: Path) -> None:
    data_folder(tmp_path / "data")
    (tmp_path / "s.toml").write_text(SPEC)
    out = apps_sim.run_experiment(tmp_path / "s.toml", tmp_path / "res")
    rows = apps_sim.summary_rows(out.doc)
    assert len(rows) == 2
    t1, t4 = (r["job time s"] for r in rows)
    no_net = rows[0]["no-network time s"]
    # 1 kB/s host links: the shuffle's bytes take seconds; 4:1 uplinks take longer still
    assert t1 > no_net and t4 > t1
    run = out.doc["runs"][0]
    assert run["result"]["tasks"] == 4 + 1 + 4 + 1
    assert run["apps"][0]["scaled_no_network_s"] == pytest.approx(no_net)
    assert json.loads(out.path.read_text())["kind"] == "apps"
    md = report(out.path, tmp_path / "rep").read_text()
    assert "SIMULATED" in md and "weak scaling" in md and "equal times" in md
    assert "Mode: max-min (flow level) for every run" in md


def test_poisson_copies_and_pack(tmp_path: Path) -> None:
    data_folder(tmp_path / "data")
    spec = SPEC.replace("task_factor = 2", 'task_factor = 2\ncopies = 3\nplacement = "pack"\nexecutors = 4')
    spec = spec.replace("[fetch]", "[arrival]\nkind = 'poisson'\nmean_gap_s = 1\n[fetch]")
    (tmp_path / "s.toml").write_text(spec)
    out = apps_sim.run_experiment(tmp_path / "s.toml", tmp_path / "res")
    apps = out.doc["runs"][0]["result"]["apps"]
    assert len(apps) == 3 and apps[0]["arrival_s"] == 0 and apps[2]["arrival_s"] > apps[1]["arrival_s"] > 0
    assert all(a["job_time_s"] is not None for a in apps)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('source = "data"', 'source = "nowhere"'), "app[0].source: .*nowhere"),
        (("task_factor = 2", "task_factor = -1"), "app[0].task_factor: Input should be greater than 0"),
        (("task_factor = 2", "executors = 9"), "app[0].executors: 9 hosts"),
        (("[fetch]", "[arrival]\nkind = 'poisson'\n[fetch]"), "arrival.mean_gap_s"),
        (('"topology.oversubscription"', '"app.3.bytes_factor"'), "not an index below 1"),
    ],
)
def test_spec_errors_name_the_field(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    data_folder(tmp_path / "data")
    (tmp_path / "s.toml").write_text(SPEC.replace(*change))
    with pytest.raises(SimSpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        apps_sim.run_experiment(tmp_path / "s.toml", tmp_path / "res")


def test_small_blocks_take_one_round_trip(tmp_path: Path) -> None:
    data_folder(tmp_path / "data")
    (tmp_path / "s.toml").write_text(SPEC.replace("initial_window_bytes = 0", "initial_window_bytes = 14480"))
    out = apps_sim.run_experiment(tmp_path / "s.toml", tmp_path / "res")
    r = out.doc["runs"][1]["result"]
    assert r["initial_window_fetches"] == r["remote_fetches"] > 0
    # off the solver, oversubscription no longer matters
    assert r["apps"][0]["job_time_s"] == out.doc["runs"][0]["result"]["apps"][0]["job_time_s"]


def test_is_apps() -> None:
    assert app_spec.is_apps({"app": []}) and not app_spec.is_apps({"shuffle": {}})


def test_every_committed_app_spec_loads() -> None:
    from shufflelab.spec import read_toml

    root = Path(__file__).resolve().parents[2] / "experiments"
    paths = [p for p in sorted(root.glob("sim-*.toml")) if app_spec.is_apps(read_toml(p))]
    assert "sim-app-1000.toml" in {p.name for p in paths}
    for p in paths:
        spec = app_spec.load(p)
        for i, a in enumerate(spec.app):
            assert app_spec.recorded(a, i, p.parent).tasks > 0
