"""Seed 001's experiment over SSH on the session's stand-in hosts (``lab6``): experiments/starvation.toml
itself, one cell -- the network-heavy workload (small records), one application, its ``control`` case
(UDP from tgen to tsink, outside the job) -- which is also a cell of experiments/starvation-control.toml
(whose cells are starvation's: tests/unit/test_shipped_cells.py). Its ``shared`` case is refused on
machines (tests/unit/test_hosts_refused.py). Trimmed to fit the lab and one run: one repetition, the
tests' quicker JVMs (``spark.fast_jvm``), five of its seven hosts (the master, two workers, the traffic
source and sink; ``star``: each on a machine of its own, its link its data interface's egress), 20 k
records in 8 partitions instead of 1.5 M in 24, the UDP at 75 % of the port instead of 95 % (see
:func:`trimmed`), and no link self-test. A run that failed only because the UDP sender fell short of
its rate during the job (run validity's judgement) is run again once.

The master's own TCP settings (initcwnd/initrwnd on its routes, no slow start after idle) are on its
machine while the run lasts, the UDP reaches tsink's machine, both workers run tasks, and every host is
as before afterwards."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from . import shipped
from .conftest import Lab, sh
from .test_hosts_quickstart import data_address, routing
from .test_hosts_run import ENV, cli, host_state, job_times, udp_rate_missed

pytestmark = [pytest.mark.root, pytest.mark.spark]

MACHINES = {"master": "host1", "w1": "host2", "w2": "host3", "tgen": "host4", "tsink": "host5"}  # a machine each
Routes = list[dict[str, object]]  # `ip -j route` rows


def trimmed(path: Path) -> Path:
    """experiments/starvation.toml's cell ``workload=small-records,apps=1,case=control``, trimmed (see
    the module)."""
    data = shipped.load("starvation.toml")
    data["experiment"].update(repetitions=1, run_timeout_s=240)
    data["hosts"] = {h: data["hosts"][h] for h in MACHINES}
    data["spark"]["fast_jvm"] = True  # C1 only and the serial collector: half the CPU of a run
    data["telemetry"] = {"selftest": "off"}  # the link self-test over SSH: test_hosts_deploy.py's star
    (small,) = [w for w in data["matrix"]["workload"] if w["name"] == "small-records"]
    small["params"].update(records=20_000, partitions=8)
    data["matrix"] = {"workload": [small], "workload.apps": [1]}
    data["cases"] = {"control": data["cases"]["control"]}  # its `only`: small records, one application
    # 75 % of the port, not 95 %: iperf3 on the stand-ins shares two cores with the other lane's Spark, and
    # a sender held up for a moment at 95 % has 5 % of the port left to catch up in (the shaped link caps
    # it): it stays behind, and run validity fails the run (0.934 of the rate in a 6 s job, intervals
    # down to 12.4 Mbit/s of 18.45); at 75 % it catches up within the job
    data["cases"]["control"]["cross_traffic.udp_percent"] = 75
    return shipped.write(data, path)


def _inventory(lab: Lab, path: Path) -> Path:
    text = lab.inventory(path).read_text()
    path.write_text(text[: text.index("[map]")] + "[map]\n" + "".join(f'{h} = "{m}"\n' for h, m in MACHINES.items()))
    return path


def _master_routes_while_running(lab: Lab, runner: subprocess.Popen[str]) -> Routes:
    """host1's routes with metrics while ``runner`` runs, once it has any."""
    deadline = time.monotonic() + 600
    while runner.poll() is None and time.monotonic() < deadline:
        routes = [r for r in json.loads(sh("ip", "-j", "route", "show", ns=lab.hosts[0].ns)) if r.get("metrics")]
        if routes:
            return routes
        time.sleep(0.5)
    return []


def _run(spec: Path, inv: Path, res: Path, lab: Lab) -> tuple[subprocess.CompletedProcess[str], Routes]:
    """``shufflelab run`` of ``spec`` on the lab, and the master's routes seen while it ran."""
    runner = subprocess.Popen(
        [sys.executable, "-m", "shufflelab.cli", "run", str(spec), "--hosts", str(inv), "--results", str(res),
         "--no-report"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True,
    )  # fmt: skip
    try:
        seen = _master_routes_while_running(lab, runner)
        out, err = runner.communicate(timeout=600)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
    return subprocess.CompletedProcess(runner.args, runner.returncode, out, err), seen


def test_a_cell_of_starvation_runs_on_machines(lab6: Lab, tmp_path: Path) -> None:
    spec = trimmed(tmp_path / "starvation.toml")
    inv = _inventory(lab6, tmp_path / "inv.toml")
    res = tmp_path / "res"
    before, routes = host_state(lab6), routing(lab6)
    r, seen = _run(spec, inv, res, lab6)
    # the UDP sender's rate over the short job is the one promise a CPU that the other lane's Spark holds
    # can break (run validity judges it, rightly; `run` then exits 1): such a run is run again, once, from
    # scratch
    missed = (res / "starvation.duckdb").is_file() and udp_rate_missed(res / "starvation.duckdb")
    if missed:
        print(f"run again: {missed}")
        shutil.rmtree(res)
        r, seen = _run(spec, inv, res, lab6)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # the master's own TCP settings on its machine's routes while the run was on (the workers have none)
    assert seen and all(route["metrics"] == [{"initcwnd": 850, "initrwnd": 1000}] for route in seen), seen
    assert host_state(lab6) == before and routing(lab6) == routes  # shaping, sysctls, routes: back
    db = res / "starvation.duckdb"
    assert len(job_times(db)) == 1  # one run, ok
    with duckdb.connect(str(db), read_only=True) as con:
        udp = con.execute("SELECT kind, bytes, error FROM cross_traffic").fetchall()
        hosts = {str(row[0]) for row in con.execute("SELECT DISTINCT host FROM tasks").fetchall()}
        remote = con.execute("SELECT sum(remote_bytes) FROM tasks").fetchone()
        samples = con.execute("SELECT dev, count(*) FROM queue_samples GROUP BY dev ORDER BY dev").fetchall()
        env = json.loads(con.execute("SELECT environment_json FROM runs").fetchone()[0])  # type: ignore[index]
    print(f"starvation over SSH: UDP {udp}; task hosts {hosts}; remote {remote}; samples {samples}")
    assert len(udp) == 1 and udp[0][0] == "udp" and udp[0][1] > 0 and udp[0][2] is None, udp
    # both workers' machines ran tasks, and their shuffle crossed the network
    assert {data_address(lab6, 1), data_address(lab6, 2)} <= hosts, hosts
    assert remote is not None and remote[0], remote
    # each host's own link sampled (star: its data interface's egress, named as the spec's port)
    assert {s[0] for s in samples} >= {"master", "w1", "w2"} and all(s[1] > 0 for s in samples), samples
    assert {h: m["machine"] for h, m in env["machines"].items()} == MACHINES, env
    r = cli("clean", "--hosts", str(inv), timeout=120)
    assert r.returncode == 0 and "restored 0 leases" in r.stdout, r.stdout + r.stderr
