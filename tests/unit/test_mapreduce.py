"""MapReduce shuffle replay: traces, placement, and a real replay over loopback TCP."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from pydantic import ValidationError

import fakes
from shufflelab.mapreduce import replay, trace

# the loopback replays' time from the release to the job's start: these tests check the bytes, and
# `make test` runs them at the lowest priority beside Spark's JVMs, where an agent waited 1.8 s for a
# CPU before it read the start instant (the 0.2 s default made that fresh-clone pass fail: "ready only
# 1.61 s after the job's start"); a late agent's verdict has tests of its own below
LOOPBACK_MARGIN_S = 5.0


def test_trace_validation_names_the_bad_map() -> None:
    with pytest.raises(ValidationError, match=r"maps\[1\].output_bytes has 1 entries, expected 2"):
        trace.Trace(
            maps=[trace.MapTask(duration_s=1, output_bytes=[1, 2]), trace.MapTask(duration_s=1, output_bytes=[1])],
            reduces=[trace.ReduceTask(), trace.ReduceTask()],
        )


def test_synthetic_is_seeded_and_shaped() -> None:
    a = trace.synthetic(6, 4, 2.0, seed=7, waves=2)
    b = trace.synthetic(6, 4, 2.0, seed=7, waves=2)
    assert a == b and a != trace.synthetic(6, 4, 2.0, seed=8, waves=2)
    assert len(a.maps) == 6 and all(len(m.output_bytes) == 4 for m in a.maps)
    assert 0.5 * 48e6 < a.shuffle_bytes < 1.5 * 48e6
    first_wave_end = max(m.start_s + m.duration_s for m in a.maps[:3])
    assert all(m.start_s == pytest.approx(first_wave_end) for m in a.maps[3:])
    c = trace.synthetic(2, 2, 1.0, dist="constant", map_s=1.0, map_spread=0)
    assert all(b == 1_000_000 for m in c.maps for b in m.output_bytes)


def test_hadoop_sort_conserves_bytes() -> None:
    t = trace.hadoop_sort(mappers=8, reducers=4, input_mb_per_map=10)
    for m in t.maps:
        assert sum(m.output_bytes) == pytest.approx(10e6, rel=1e-6)
        assert max(m.output_bytes) / min(m.output_bytes) < 1.11


def test_slowstart_instant() -> None:
    maps = [trace.MapTask(duration_s=d, output_bytes=[1]) for d in (4.0, 1.0, 2.0, 3.0)]
    t = trace.Trace(maps=maps, reduces=[trace.ReduceTask()], slowstart=0.5)
    assert t.slowstart_s() == 2.0  # two of four maps are done at t = 2
    assert t.model_copy(update={"slowstart": 1.0}).slowstart_s() == 4.0
    assert t.model_copy(update={"slowstart": 0.0}).slowstart_s() == 0.0


def test_save_load_round_trip(tmp_path: Path) -> None:
    t = trace.hadoop_sort(mappers=2, reducers=2, input_mb_per_map=1)
    assert trace.load(trace.save(t, tmp_path / "t.json")) == t
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="cannot read trace"):
        trace.load(tmp_path / "bad.json")


def test_split_placement_puts_every_fetch_across_halves() -> None:
    t = trace.synthetic(4, 4, 0.1)
    nodes = {f"h{i}": (f"10.0.0.{i}", 1) for i in range(4)}
    p = replay.plan(t, nodes, t0=0.0, placement="split")
    assert set(p["map_node"]) == {"h0", "h1"} and set(p["reduce_node"]) == {"h2", "h3"}
    rr = replay.plan(t, nodes, t0=0.0)
    assert rr["map_node"] == ["h0", "h1", "h2", "h3"] and rr["reduce_node"] == ["h3", "h2", "h1", "h0"]


def test_replay_over_loopback_moves_every_byte(tmp_path: Path) -> None:
    t = trace.synthetic(4, 3, 0.2, map_s=0.2, reduce_s=0.1, parallel_copies=2, seed=3)
    r = replay.run_local(t, 3, tmp_path, base_port=17650, start_margin_s=LOOPBACK_MARGIN_S)
    assert r.ok, r.errors
    assert len(r.fetches) == 12 and int(r.fetches["bytes"].sum()) == t.shuffle_bytes
    assert (r.fetches["fct_s"] >= 0).all()
    # no fetch of a map's output can finish before the map did
    ends = {i: t.map_end_s(i) for i in range(len(t.maps))}
    assert all(row.t_end - r.fetches["t_request"].min() >= 0 for row in r.fetches.itertuples())
    assert all(row.start_s >= ends[row.map] - 0.05 for row in r.fetches.itertuples())
    assert r.job_time_s is not None and r.job_time_s >= max(ends.values()) + 0.1
    s = r.summary()
    assert s["fetches"] == 12 and s["shuffle_bytes"] == t.shuffle_bytes


def test_large_partitions_arrive_whole(tmp_path: Path) -> None:
    """Partitions far above asyncio's write buffer arrive whole and each map agent exits after its
    last fetch. (Loopback drains too fast to show the truncation race a slow shaped path exposed —
    an agent exiting with bytes still in asyncio's buffer; the fabric runs of vcc-mapreduce do.)"""
    t = trace.synthetic(2, 2, 8.0, map_s=0.01, reduce_s=0.01, parallel_copies=2, seed=5)
    r = replay.run_local(t, 2, tmp_path, base_port=17690, start_margin_s=LOOPBACK_MARGIN_S)
    assert r.ok, r.errors
    assert int(r.fetches["bytes"].sum()) == t.shuffle_bytes


def test_a_missing_agent_makes_the_job_not_ok() -> None:
    t = trace.synthetic(2, 2, 0.1)
    p = replay.plan(t, {"a": ("127.0.0.1", 1), "b": ("127.0.0.1", 2)}, t0=0.0)
    r = replay.collect(p, [{"node": "a", "ok": True, "fetches": [], "reducers": []}])
    assert not r.ok and r.job_time_s is None and any("0 of 4 fetches" in e for e in r.errors)


def _run_to_the_end(job: replay.FabricJob, here: fakes.Here) -> None:
    """Start ``job``'s agents (``here``'s processes), wait for each to exit, stop the job."""
    try:
        job.start()
        for p in here.procs:
            p.popen.wait(timeout=70)
    finally:
        job.stop()


def test_the_shipped_hadoop_sort_trace_is_the_generators() -> None:
    """experiments/traces/ ships the trace vcc-mapreduce generates (8 maps x 12 MB, 4 reduces), so it
    can be replayed, edited or compared by other tools without shufflelab's generator."""
    root = Path(__file__).resolve().parents[2]
    shipped = trace.load(root / "experiments" / "traces" / "hadoop-sort-8x4-12MB.json")
    assert shipped == trace.hadoop_sort(mappers=8, reducers=4, input_mb_per_map=12.0)
    assert shipped.shuffle_bytes == pytest.approx(96e6, rel=1e-6)


def test_a_replay_on_a_fabric_starts_its_agents_through_the_launcher(tmp_path: Path) -> None:
    """FabricJob reaches its hosts only through the backend's process launcher: here one that runs
    the agents on this machine, each host an address of the loopback network and one port, as
    each host of a fabric has its own address."""
    t = trace.synthetic(3, 3, 0.1, map_s=0.05, reduce_s=0.05, parallel_copies=2, seed=4)
    here = fakes.Here()
    places = {f"h{i}": f"place-h{i}" for i in range(3)}
    addresses = {f"h{i}": f"127.0.0.{i + 2}" for i in range(3)}
    job = replay.FabricJob(
        t, places, addresses, tmp_path, here.launch, timeout_s=60, port=17720, start_margin_s=LOOPBACK_MARGIN_S
    )
    _run_to_the_end(job, here)
    assert here.places == set(places.values())
    r = job.result()
    assert r.ok, r.errors
    assert int(r.fetches["bytes"].sum()) == t.shuffle_bytes and set(r.fetches["map"]) == {0, 1, 2}


def test_a_replay_on_machines_ships_its_plan_and_brings_the_results_back(tmp_path: Path) -> None:
    """On machines that share no folder with the controller (``fakes.Machines``: each place's files
    its own), the agents read the plan from their machine's folder -- shipped there through the
    backend's staging -- write their results there, and the results come back into the run's
    ``mapreduce/`` folder through it; the job is assembled from those copies."""
    t = trace.synthetic(3, 2, 0.1, map_s=0.05, reduce_s=0.05, parallel_copies=2, seed=6)
    here = fakes.Here()
    machines = fakes.Machines(tmp_path / "machines")
    places = {f"h{i}": f"place-h{i}" for i in range(3)}
    addresses = {f"h{i}": f"127.0.0.{i + 2}" for i in range(3)}
    run_dir = tmp_path / "run"
    job = replay.FabricJob(t, places, addresses, run_dir, here.launch, staging=machines, timeout_s=60,
                           port=17740, start_margin_s=LOOPBACK_MARGIN_S)  # fmt: skip
    _run_to_the_end(job, here)
    folders = dict(machines.folders)
    assert set(folders) == set(places.values())
    # each agent was started on its plan and result paths in its own machine's folder
    for proc, (n, place) in zip(here.procs, places.items(), strict=True):
        argv = [str(a) for a in proc.popen.args]  # type: ignore[union-attr]
        assert argv[-3:] == [f"{folders[place]}/plan.json", n, f"{folders[place]}/{n}.json"], argv
    # the plan, then (once every agent listened) the job's start instant, to each machine
    assert sorted(machines.puts) == sorted((p, f"{f}/{name}") for p, f in folders.items()
                                           for name in ("plan.json", "start.json"))  # fmt: skip
    assert json.loads(Path(folders["place-h0"], "start.json").read_text())["t0"] == job.plan["t0"]
    assert json.loads((run_dir / "mapreduce" / "plan.json").read_text())["t0"] == job.plan["t0"]
    assert not list((run_dir / "mapreduce").glob("h*.json"))  # nothing came back by itself
    r = job.result()
    assert r.ok, r.errors
    assert int(r.fetches["bytes"].sum()) == t.shuffle_bytes
    assert sorted(p.name for p in (run_dir / "mapreduce").glob("h*.json")) == ["h0.json", "h1.json", "h2.json"]
    assert sorted(r for _, r in machines.gets if r.endswith("json")) == sorted(
        f"{folders[place]}/{n}.json" for n, place in places.items()
    )


def test_a_replay_on_machines_without_an_agents_result_is_not_ok(tmp_path: Path) -> None:
    """An agent that left no result on its machine (it never ran): the job says which fetches are
    missing, and nothing is read from the run's folder that did not come from the machine."""
    t = trace.synthetic(2, 2, 0.1)
    machines = fakes.Machines(tmp_path / "machines")
    backend = fakes.Backend(tmp_path / "scratch")
    places = {"a": "place-a", "b": "place-b"}
    job = replay.FabricJob(t, places, {"a": "127.0.0.2", "b": "127.0.0.3"}, tmp_path / "run", backend.launch,
                           staging=machines, timeout_s=5, ready_s=0.2)  # fmt: skip
    job.start()  # the fake launcher runs nothing: no agent listens, the job starts after ready_s
    (tmp_path / "run" / "mapreduce" / "a.json").write_text('{"node": "a", "ok": true}')  # not the machine's
    r = job.result()
    assert not r.ok and r.job_time_s is None and any("0 of 4 fetches" in e for e in r.errors), r.errors
    assert sorted(p for p, r in machines.gets if r.endswith(".json")) == ["place-a", "place-b"]


def test_an_agent_listening_after_it_was_needed_makes_the_job_not_ok() -> None:
    """An agent that started listening after its first map's output was due (a slow start on a
    machine): every fetch from it waited, so the replay's times are not the trace's -- the job is
    not ok and says which agent and how late (before, such a job was ok, its fetch times inflated).
    An agent with nothing due yet may start later."""
    t = trace.Trace(
        maps=[trace.MapTask(duration_s=1.0, output_bytes=[10]), trace.MapTask(duration_s=5.0, output_bytes=[10])],
        reduces=[trace.ReduceTask()],
        slowstart=1.0,
    )
    p = replay.plan(t, {"a": ("127.0.0.1", 1), "b": ("127.0.0.1", 2), "c": ("127.0.0.1", 3)}, t0=100.0)
    p["map_node"], p["reduce_node"] = ["a", "b"], ["c"]  # a's map ends at 1 s, b's at 5 s, c reduces at 5 s

    def agent(node: str, listening: float, fetches: int = 0) -> dict[str, object]:
        rows = [{"map": m, "reduce": 0, "bytes": 10, "t_request": 105.0, "t_end": 105.5} for m in range(fetches)]
        reducers = [{"reduce": 0, "t_shuffle_end": 105.5, "t_end": 105.5}] if node == "c" else []
        return {"node": node, "ok": True, "t_listening": listening, "fetches": rows, "reducers": reducers}

    on_time = [agent("a", 100.9), agent("b", 104.0), agent("c", 104.9, fetches=2)]
    assert replay.collect(p, on_time).ok
    late = [agent("a", 101.5), agent("b", 104.0), agent("c", 104.9, fetches=2)]
    r = replay.collect(p, late)
    assert not r.ok and r.job_time_s is None
    assert any(e.startswith("a: ready only 1.50 s after the job's start") for e in r.errors), r.errors
    assert replay.late_agents(p, t, late) == {"a": pytest.approx(1.5)}
    assert replay.late_agents(p, t, [agent("c", 105.2)]) == {"c": pytest.approx(5.2)}


def test_a_replay_starts_when_its_slowest_agent_listens(tmp_path: Path) -> None:
    """The job starts once every agent listens, however long an agent took to start (here one 3 s
    late, as an interpreter starting on a busy machine or over SSH): the job is ok and its times
    are the trace's. Before, the job started at a fixed instant after the plan and such an agent
    made it not ok (it was listening after its first output was due)."""
    t = trace.synthetic(2, 2, 0.1, map_s=0.05, reduce_s=0.05, parallel_copies=2, seed=8)
    here = fakes.Here()

    def slow_first(
        place: str, argv: Sequence[str], log: Path, /, env: Mapping[str, str] | None = None
    ) -> fakes.HereProcess:
        if place == "place-h0":
            argv = ["sh", "-c", 'sleep 3; exec "$@"', "sh", *argv]
        return here.launch(place, argv, log, env=env)

    places = {f"h{i}": f"place-h{i}" for i in range(2)}
    addresses = {f"h{i}": f"127.0.0.{i + 2}" for i in range(2)}
    job = replay.FabricJob(
        t, places, addresses, tmp_path, slow_first, timeout_s=60, port=17760, start_margin_s=LOOPBACK_MARGIN_S
    )
    _run_to_the_end(job, here)
    r = job.result()
    assert r.ok, r.errors
    assert int(r.fetches["bytes"].sum()) == t.shuffle_bytes
    ready = [json.loads((tmp_path / "mapreduce" / f"h{i}.json").read_text())["t_ready"] for i in range(2)]
    assert all(x <= job.plan["t0"] for x in ready), (ready, job.plan["t0"])
