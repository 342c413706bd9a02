"""The what-if replay on hand-made stage DAGs."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest

from conftest import BASE_SPEC
from shufflelab import whatif

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _t(stage: int, ex: str, launch: int, dur: int, wait: int = 0, remote: int = 0, tid: int = 0) -> dict:
    return {"stage_id": stage, "stage_attempt": 0, "task_id": tid, "executor_id": ex, "host": f"h{ex}",
            "launch_at_ms": launch, "finish_at_ms": launch + dur, "duration_ms": dur,
            "fetch_wait_ms": wait, "remote_bytes": remote}  # fmt: skip


def _dag(tasks: list[dict], stages: list[tuple[int, int, int]], job_end: int) -> tuple[pd.DataFrame, ...]:
    t = pd.DataFrame([{**x, "task_id": i} for i, x in enumerate(tasks)])
    s = pd.DataFrame([{"stage_id": i, "stage_attempt": 0, "submitted_at_ms": a, "completed_at_ms": b}
                      for i, a, b in stages])  # fmt: skip
    j = pd.DataFrame([{"submitted_at_ms": 0, "completed_at_ms": job_end}])
    return t, s, j


def _two_stages() -> tuple[pd.DataFrame, ...]:
    # stage 0: two map tasks per executor (1 s each); stage 1: one reduce task per executor,
    # 3 s long of which 2 s waiting on fetches; 100 ms gaps between stages and at the end
    tasks = [
        _t(0, "a", 0, 1000), _t(0, "b", 0, 1000), _t(0, "a", 1000, 1000), _t(0, "b", 1000, 1000),
        _t(1, "a", 2100, 3000, wait=2000, remote=10**9), _t(1, "b", 2100, 3000, wait=2000, remote=10**9),
    ]  # fmt: skip
    return _dag(tasks, [(0, 0, 2000), (1, 2100, 5100)], 5200)


def test_no_speedup_reproduces_the_recording() -> None:
    p = whatif.predict(*_two_stages(), speedup=1.0)
    assert p.observed_s == pytest.approx(5.2)
    assert p.predicted_s == pytest.approx(5.2)
    assert p.ratio == pytest.approx(1.0)


def test_faster_network_shrinks_only_fetch_wait_and_shifts_later_stages() -> None:
    p = whatif.predict(*_two_stages(), speedup=2.0)
    assert p.predicted_s == pytest.approx(5.2 - 1.0)  # 2 s of wait -> 1 s
    inf = whatif.predict(*_two_stages(), speedup=1e9)
    assert inf.predicted_s == pytest.approx(5.2 - 2.0)
    st = inf.stages.set_index("stage_id")
    assert st.loc[0, "predicted_end_s"] == pytest.approx(2.0)  # map stage untouched
    assert st.loc[1, "predicted_end_s"] == pytest.approx(3.1)


def test_per_host_speedup_and_the_slowest_executor_bounds_the_stage() -> None:
    p = whatif.predict(*_two_stages(), speedup={"ha": 1e9})  # only executor a's fetches get faster
    assert p.predicted_s == pytest.approx(5.2)  # b still waits 2 s: the stage ends when b ends


def test_cpu_saving_per_gb() -> None:
    p = whatif.predict(*_two_stages(), speedup=1.0, cpu_saving_per_gb_s=0.5)  # 1 GB read per reduce task
    assert p.predicted_s == pytest.approx(5.2 - 0.5)


def test_delay_scheduling_gaps_shrink_with_the_network() -> None:
    # executor b idles 3 s (locality wait) before taking its task: replayed as recorded at speed-up 1,
    # gone when the network is (nearly) infinitely faster
    tasks = [_t(0, "a", 0, 1000), _t(0, "a", 1000, 1000), _t(0, "b", 0, 10), _t(0, "b", 3010, 1000)]
    dag = _dag(tasks, [(0, 0, 4010)], 4010)
    assert whatif.predict(*dag, speedup=1.0).predicted_s == pytest.approx(4.01)
    assert whatif.predict(*dag, speedup=2.0).predicted_s == pytest.approx(2.51)
    assert whatif.predict(*dag, speedup=1e9).predicted_s == pytest.approx(2.0, abs=0.02)


def test_a_hand_off_overlap_is_not_a_second_core() -> None:
    # the driver launches each task a few ms before it records the previous one's end (one core)
    tasks = [_t(0, "a", 0, 1000), _t(0, "a", 985, 1000), _t(0, "a", 1970, 1000), _t(0, "a", 2960, 1000)]
    dag = _dag(tasks, [(0, 0, 3960)], 4000)
    assert whatif.executor_slots(dag[0]) == {"a": 1}
    assert whatif.predict(*dag, speedup=1.0).predicted_s == pytest.approx(4.0)
    # with speed-up the chain stays serial on its one core: 4 x 500 ms once the waits halve, less the
    # recorded hand-offs (15, 15, 10 ms), plus the 40 ms after the stage
    waiting = _dag([{**x, "fetch_wait_ms": 1000} for x in tasks], [(0, 0, 3960)], 4000)
    assert whatif.predict(*waiting, speedup=2.0).predicted_s == pytest.approx(2.0)


def test_stages_running_at_once_share_their_executors() -> None:
    # stage 1 is submitted while stage 0 runs; its task on b waits for b's stage-0 task to end
    tasks = [_t(0, "b", 10, 4000), _t(1, "a", 20, 4000), _t(1, "a", 4010, 1000), _t(1, "b", 4005, 1000)]
    dag = _dag(tasks, [(0, 0, 4010), (1, 15, 5010)], 5100)
    assert whatif.predict(*dag, speedup=1.0).predicted_s == pytest.approx(5.1)


def test_udp_speedup_per_topology() -> None:
    base = copy.deepcopy(BASE_SPEC)
    base["cross_traffic"] = {"udp_percent": 75}
    assert whatif.udp_speedup(base) == pytest.approx(4.0)
    star = copy.deepcopy(base)
    star["topology"]["kind"] = "star"
    assert whatif.udp_speedup(star) == 1.0  # towards tsink: shares no queue with the job
    assert whatif.udp_speedup({**star, "cross_traffic": {"udp_percent": 95, "sink": "w1"}}) == pytest.approx(20.0)
    assert whatif.udp_speedup({**base, "cross_traffic": {"udp_percent": 0}}) == 1.0
    assert whatif.udp_speedup({"source": "eventlog"}) == 1.0  # imported logs: no lab spec


def test_network_time_counts_control_waits_above_the_quiet_floor() -> None:
    # ten tasks: 100 ms of scheduler delay and 50 ms of deserialization off the CPU each when quiet;
    # the last one waited 1 s more for its launch message and 0.5 s more for its task binary
    rows = [
        {"fetch_wait_ms": 200.0, "duration_ms": 1000.0, "executor_run_ms": 850.0, "deserialize_ms": 50.0,
         "deserialize_cpu_ms": 0.0, "result_serialization_ms": 0.0}
        for _ in range(9)
    ] + [{"fetch_wait_ms": 200.0, "duration_ms": 2500.0, "executor_run_ms": 850.0, "deserialize_ms": 550.0,
          "deserialize_cpu_ms": 0.0, "result_serialization_ms": 0.0}]  # fmt: skip
    net = whatif.network_ms(pd.DataFrame(rows))
    assert list(net) == [200.0] * 9 + [200.0 + 1000.0 + 500.0]
    # without the timing breakdown (a hand-made DAG), only the fetch wait counts
    assert list(whatif.network_ms(pd.DataFrame([{"fetch_wait_ms": 7.0, "duration_ms": 10.0}]))) == [7.0]


def test_whatif_on_a_mapreduce_store_is_refused_by_name(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from shufflelab.cli import app
    from shufflelab.results import RunRecord, Store
    from shufflelab.spec import expand, load

    spec = load(EXPERIMENTS / "vcc-mapreduce.toml")
    db = tmp_path / "mr.duckdb"
    store = Store(db)
    store.init_experiment(spec.experiment.name, "mr", json.dumps(spec.model_dump(mode="json")), "vcc-mapreduce.toml")
    scenarios = expand(spec)
    store.add_scenarios(
        [
            {"scenario_id": s.scenario_id, "label": s.label, "values": s.values,
             "spec_json": json.dumps(s.spec.model_dump(mode="json")), "backend": "emulate"}
            for s in scenarios
        ]
    )  # fmt: skip
    for s in scenarios:  # a MapReduce replay records job times, no Spark tasks
        run = {"run_id": f"{s.label}-1", "scenario_id": s.scenario_id, "rep": 1, "attempt": 1, "status": "ok",
               "backend": "emulate", "job_time_s": 10.0, "n_apps": 1}  # fmt: skip
        store.write_run(RunRecord(run=run, tables={}))
    before = sorted(tmp_path.iterdir())
    r = CliRunner().invoke(app, ["whatif", str(db)], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
    assert f"{db}: a MapReduce replay has no Spark tasks and no stage DAG" in " ".join(r.output.split())
    assert sorted(tmp_path.iterdir()) == before


def test_whatif_names_a_run_it_cannot_replay_and_replays_the_others(tmp_path: Path) -> None:
    from synthetic_store import build
    from typer.testing import CliRunner

    from shufflelab.cli import app
    from shufflelab.results import Store

    db = build(tmp_path / "s.duckdb", 3)
    with Store(db).connect() as con:  # one run's tasks lost
        con.execute("DELETE FROM tasks WHERE run_id = 'udp=75-r2'")
    r = CliRunner().invoke(app, ["whatif", str(db)], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "not replayed: udp=75-r2 (udp=75): a prediction needs the run's tasks and jobs" in said
    assert "│ udp=75 │ 2 │" in said and "│ udp=0 │ 3 │" in said
