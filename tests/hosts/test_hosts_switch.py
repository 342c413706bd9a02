"""The userspace switch on a router host over SSH: a small quickstart (three hosts, ``shared``) with
5 ms of delay, RED with ECN marking and DCTCP (the switch's DCTCP over the hosts' cubic), through
``shufflelab-switch`` on a fourth stand-in host. The switch's counters and samples in the record,
the RTT of the delay in the link self-test, every host as before afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from shufflelab.switch import binary_path

from .conftest import Lab, sh, stand_in_hosts
from .test_hosts_quickstart import routing
from .test_hosts_run import ENV, _driver_running, cli, host_state, quickstart, tagged_running

pytestmark = [
    pytest.mark.root,
    pytest.mark.spark,
    pytest.mark.skipif(binary_path() is None, reason="shufflelab-switch is not built (make setup)"),
]

DELAY_MS = 5.0
LINK = (
    '{ rate_mbps = 40, queue_bytes = 100000, delay_ms = 5, discipline = "red", '
    "red = { min_bytes = 20000, max_bytes = 20000, max_p = 1.0, ecn = true } }"
)


@pytest.fixture(scope="module")
def lab4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    with stand_in_hosts(tmp_path_factory.mktemp("slsshs"), 4) as lab:
        yield lab


def offloads(lab: Lab) -> list[str]:
    """Every host's data interface's TSO/GSO/GRO (the switch turns them off while it runs)."""
    wanted = ("tcp-segmentation-offload:", "generic-segmentation-offload:", "generic-receive-offload:")
    return [
        " ".join(line.strip() for line in sh("ethtool", "-k", "data0", ns=h.ns).splitlines() if line.startswith(wanted))
        for h in lab.hosts
    ]


def switch_spec(tmp_path: Path, lab: Lab, selftest: str = "warn") -> tuple[Path, Path]:
    """The inventory (host4 the router) and the three-host quickstart with the switch's link and DCTCP."""
    inv = lab.inventory(tmp_path / "inv.toml")
    text = inv.read_text()
    inv.write_text('router = "host4"\n' + text.replace('h4 = "host4"\n', ""))
    spec = quickstart(tmp_path / "switch.toml", reps=1, kind="shared")
    body = spec.read_text()
    body = body.replace("bottleneck = { rate_mbps = 40, queue_bytes = 100000 }", f"bottleneck = {LINK}")
    body = body.replace('congestion_control = "cubic"', 'congestion_control = "dctcp"')
    body = body.replace('selftest = "off"', f'selftest = "{selftest}"')
    spec.write_text(body.replace('name = "quickstart-hosts"', 'name = "switch-hosts"'))
    return inv, spec


def switch_running(lab: Lab) -> bool:
    """A lease-tagged shufflelab-switch runs on the router host."""
    return tagged_running(lab, 3, b"shufflelab-switch")


def test_delay_red_and_dctcp_through_the_switch_on_a_router_host(lab4: Lab, tmp_path: Path) -> None:
    inv, spec = switch_spec(tmp_path, lab4)  # the self-test's ping reads the RTT through the switch
    before, routes, offs = host_state(lab4), routing(lab4), offloads(lab4)

    r = cli("run", str(spec), "--hosts", str(inv), "--results", str(tmp_path / "res"), "--no-report", timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # every host as before: qdiscs, TCP sysctls, no tagged process, routes and forwarding, offloads
    assert host_state(lab4) == before and routing(lab4) == routes and offloads(lab4) == offs

    db = tmp_path / "res" / "switch-hosts.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        run = con.execute(
            "SELECT run_id, status, cause, job_time_s, bottleneck_tx_bytes, bottleneck_drops, bottleneck_marks, "
            "bottleneck_max_backlog_bytes FROM runs"
        ).fetchall()
        remote = con.execute("SELECT sum(remote_bytes) FROM tasks").fetchone()
        samples = con.execute(
            "SELECT dev, count(*), max(backlog_bytes), max(marks) FROM queue_samples GROUP BY dev"
        ).fetchall()
    assert len(run) == 1, run
    run_id, status, cause, job_s, tx, drops, marks, backlog = run[0]
    assert status == "ok", cause
    assert remote is not None and remote[0]
    run_dir = tmp_path / "res" / "switch-hosts" / "runs" / run_id
    checks = json.loads((run_dir / "selftest.json").read_text())
    config = json.loads((run_dir / "switch.json").read_text())
    log = (run_dir / "switch.log").read_text()
    print(
        f"job {job_s:.2f} s; bottleneck sent {tx} B (shuffle remote {remote[0]} B), drops {drops}, "
        f"ECN marks {marks}, max backlog {backlog} B; samples {samples}; self-test {checks}"
    )
    # the switch ran on the router host's data interface, one-armed, with the spec's link and DCTCP hosts
    assert [p["ifname"] for p in config["ports"]] == ["data0"], config["ports"]
    port = config["ports"][0]
    assert port["delay_us"] == DELAY_MS * 1000 and port["discipline"] == "red" and port["red"]["ecn"]
    assert {h["port"] for h in config["hosts"]} == {"data0"} and {h["mode"] for h in config["hosts"]} == {"dctcp"}
    assert {h["ip"] for h in config["hosts"]} == {json.loads(sh("ip", "-j", "-4", "addr", "show", "dev", "data0",
            ns=h.ns))[0]["addr_info"][0]["local"] for h in lab4.hosts[:3]}  # fmt: skip
    assert log.startswith("ready"), log[-2000:]
    # its counters are the record's bottleneck: every remote shuffle byte crossed it, DCTCP was marked
    assert tx is not None and tx >= remote[0], (tx, remote)
    assert marks is not None and marks > 0, marks
    # its samples are the run's queue samples, named as the emulated router's downlink
    assert len(samples) == 1 and samples[0][0] == "sw" and samples[0][1] > 0 and samples[0][2] > 0, samples
    # the delay is in the path: ping across it reads at least the two crossings of the 5 ms queue
    assert len(checks) == 1 and checks[0]["rtt_ms"] is not None, checks
    assert checks[0]["rtt_ms"] >= 2 * DELAY_MS * 0.95, checks

    r = cli("clean", "--hosts", str(inv), timeout=120)
    assert r.returncode == 0 and "restored 0 leases" in r.stdout, r.stdout + r.stderr


def test_a_killed_runner_leaves_the_switch_to_clean(lab4: Lab, tmp_path: Path) -> None:
    """SIGKILL mid-job: the switch keeps running on the router host (tagged), ``clean --hosts`` stops
    it and sets forwarding, offloads, routes, sysctls back on every host."""
    inv, spec = switch_spec(tmp_path, lab4, selftest="off")
    before, routes, offs = host_state(lab4), routing(lab4), offloads(lab4)
    runner = subprocess.Popen(
        [sys.executable, "-m", "shufflelab.cli", "run", str(spec), "--hosts", str(inv),
         "--results", str(tmp_path / "res"), "--no-report"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not (_driver_running(lab4) and switch_running(lab4)):
            assert runner.poll() is None, f"the runner ended before its job started: {runner.stderr.read()}"  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the job did not start within 240 s"
            time.sleep(0.3)
        assert offloads(lab4) != offs  # the switch's offloads are off while it runs
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert switch_running(lab4)  # nothing stopped it: the controller is gone
    r = cli("clean", "--hosts", str(inv), timeout=120)
    assert r.returncode == 0 and "restored 4 leases" in r.stdout, r.stdout + r.stderr
    assert not switch_running(lab4)
    assert host_state(lab4) == before and routing(lab4) == routes and offloads(lab4) == offs
    r = cli("clean", "--hosts", str(inv), timeout=120)
    assert "restored 0 leases" in r.stdout, r.stdout
