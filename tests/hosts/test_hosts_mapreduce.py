"""The MapReduce shuffle replay (seed 002's workload) over SSH on the session's stand-in hosts
(``lab6``): experiments/vcc-mapreduce.toml and experiments/vcc-mapreduce-red.toml themselves,
trimmed to their ``ecn`` case without cross traffic -- the dumbbell with the file's marking (step
marking at K = 30 kB; RED's probabilistic marking on the average backlog) and DCTCP enforced in the
userspace switch on the router host, which holds a queue per direction between the racks on its one
data interface; four of the eight ``mapreduce`` hosts, two per rack, and no iperf3 pairs (the lab
has six machines); the link at 40 Mbit/s instead of 100 and a smaller trace -- maps in rack 1 and
reduces in rack 2 (``placement = "split"``) so every fetch crosses the switch's queue towards rack 2
-- run by ``shufflelab run --hosts``. The agents' plan is shipped to each machine's lease folder and
their results fetched back with SFTP (the stand-ins' scratch folders are their own: nothing they
write there reaches the controller otherwise); the run's record holds every fetch and each queue's
samples, and every host is as before afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from shufflelab.mapreduce import trace

from . import shipped
from .conftest import Lab
from .test_hosts_quickstart import ROUTER, routing
from .test_hosts_run import cli, host_state

pytestmark = [pytest.mark.root]

# the shipped specs' first two hosts of each rack: maps on rack 1's, reduces on rack 2's
MACHINES = {"m1": "host1", "m2": "host2", "m5": "host3", "m6": "host4"}  # racks 1, 1, 2, 2
MAPPERS, REDUCERS, INPUT_MB = 4, 2, 2.0
SPECS = ["vcc-mapreduce.toml", "vcc-mapreduce-red.toml"]  # step marking at K, and RED's probabilistic marking


def trimmed(name: str, path: Path) -> Path:
    """experiments/``name``'s ``ecn`` case without cross traffic (``tcp_pairs = 0``), one repetition:
    four of its MapReduce hosts, its dumbbell at 40 Mbit/s with the file's queue and marking, a trace
    of ``MAPPERS`` maps of ``INPUT_MB`` MB and ``REDUCERS`` reducers, no link self-test."""
    data = shipped.load(name)
    data["experiment"].update(repetitions=1, run_timeout_s=60)
    data["topology"]["bottleneck"]["rate_mbps"] = 40
    data["hosts"] = {h: data["hosts"][h] for h in MACHINES}  # no iperf3 pairs: tgen and tsink go too
    data["telemetry"] = {"selftest": "off"}
    data["workload"]["params"].update(mappers=MAPPERS, reducers=REDUCERS, input_mb_per_map=INPUT_MB, parallel_copies=2)
    del data["matrix"]  # cross_traffic.tcp_pairs = 0
    data["cases"] = {"ecn": data["cases"]["ecn"]}  # DCTCP enforced in the switch
    return shipped.write(data, path)


def _inventory(lab: Lab, tmp_path: Path) -> Path:
    return lab.inventory_on(tmp_path / "inv.toml", MACHINES, ROUTER)


@pytest.mark.parametrize("name", SPECS)
def test_the_mapreduce_replay_runs_on_machines_and_its_results_come_back(lab6: Lab, tmp_path: Path, name: str) -> None:
    spec = trimmed(name, tmp_path / name)
    inv = _inventory(lab6, tmp_path)
    results = tmp_path / "results"
    before, routes = host_state(lab6), routing(lab6)
    r = cli("run", str(spec), "--hosts", str(inv), "--results", str(results), timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    shuffle = trace.hadoop_sort(MAPPERS, REDUCERS, INPUT_MB).shuffle_bytes
    with duckdb.connect(str(results / name.replace(".toml", ".duckdb")), read_only=True) as con:
        runs = con.execute("SELECT status, cause, job_time_s, run_dir, bottleneck_tx_bytes FROM runs").fetchall()
        fetches = con.execute("SELECT src, dst, bytes, fct_s FROM mr_fetches").fetchall()
        sent = dict(con.execute("SELECT dev, max(sent_bytes) FROM queue_samples GROUP BY dev").fetchall())
        env = json.loads(con.execute("SELECT environment_json FROM runs").fetchone()[0])  # type: ignore[index]
    assert len(runs) == 1 and runs[0][0] == "ok", runs
    status, cause, job_s, run_dir, tx = runs[0]
    print(f"{name} over SSH: job {job_s:.2f} s, {len(fetches)} fetches, queues sent {sent} bytes")
    # every (map, reduce) pair fetched, whole, from rack 1's machines to rack 2's
    assert len(fetches) == MAPPERS * REDUCERS and sum(f[2] for f in fetches) == shuffle, fetches
    assert {f[0] for f in fetches} == {"m1", "m2"} and {f[1] for f in fetches} == {"m5", "m6"}, fetches
    assert all(f[3] > 0 for f in fetches)
    # it crossed the switch's queue towards rack 2; the one towards rack 1 carried only the ACKs
    assert tx is not None and tx >= shuffle, (tx, shuffle)
    assert set(sent) == {"sw1", "sw2"} and sent["sw2"] >= shuffle and sent["sw1"] < shuffle / 10, sent
    cfg = json.loads((Path(run_dir) / "switch.json").read_text())
    assert [(p["ifname"], p["name"]) for p in cfg["ports"]] == [("data0", "sw1"), ("data0", "sw2")], cfg["ports"]
    assert {h["port"] for h in cfg["hosts"]} == {"sw1", "sw2"} and {h["mode"] for h in cfg["hosts"]} == {"dctcp"}
    # the agents' results and logs are in the run's folder, fetched from the machines
    folder = Path(run_dir) / "mapreduce"
    assert sorted(p.name for p in folder.glob("m*.json")) == ["m1.json", "m2.json", "m5.json", "m6.json"]
    agents = {m: json.loads((folder / f"{m}.json").read_text()) for m in MACHINES}
    assert all(a["ok"] for a in agents.values()), agents
    # every agent ready (listening, the start instant received) before the job's start
    ahead = {m: round(a["t0"] - a["t_ready"], 2) for m, a in agents.items()}
    print(f"agents ready ahead of the job's start: {ahead} s")
    assert all(s > 0 for s in ahead.values()), ahead
    assert sorted(p.name for p in folder.glob("m*.log")) == ["m1.log", "m2.log", "m5.log", "m6.log"]
    # the run's record says which machine each spec host ran on
    assert {h: m["machine"] for h, m in env["machines"].items()} == {**MACHINES, "(router)": "host6"}, env
    assert host_state(lab6) == before and routing(lab6) == routes
