"""A dumbbell over SSH on the session's stand-in hosts (``lab6``): two racks of two machines each
(host1, host2 in rack 1; host3, host4 in rack 2) joined through the router host (host6), whose one
data interface holds both directions of the link as two HTB classes (the network plan's). Measured
with iperf3 between the stand-ins' namespaces: traffic from one rack to the other, either way, is
held to the link's rate; traffic within a rack never crosses the router host and is not. The
per-class counters and queue samples say the same. Every host as before afterwards."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shufflelab import netplan, topology
from shufflelab import spec as specmod
from shufflelab.hosts import commands

from .conftest import Lab, sh
from .test_hosts_quickstart import ROUTER, routing
from .test_hosts_run import host_state

pytestmark = [pytest.mark.root, pytest.mark.fidelity]

RATE = 20  # Mbit/s each way
MACHINES = {"master": "host1", "w1": "host2", "w2": "host3", "w3": "host4"}  # racks 1, 1, 2, 2
SPEC = f"""
[experiment]
name = "dumbbell-hosts"
repetitions = 1
[topology]
kind = "dumbbell"
bottleneck = {{ rate_mbps = {RATE}, queue_bytes = 100_000 }}
[hosts]
master = {{ roles = ["spark-master"], rack = 1 }}
w1 = {{ roles = ["spark-worker"], rack = 1 }}
w2 = {{ roles = ["spark-worker"], rack = 2 }}
w3 = {{ roles = ["spark-worker"], rack = 2 }}
[workload]
name = "sort-aggregate"
params = {{ rows = 1000, partitions = 4 }}
"""
PORT = 5299


def _inventory(lab: Lab, tmp_path: Path) -> Path:
    return lab.inventory_on(tmp_path / "inv.toml", MACHINES, ROUTER)


@pytest.fixture
def servers(lab6: Lab) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The iperf3 servers a test starts in the stand-ins' namespaces, stopped after it."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        p.kill()
        p.wait(timeout=10)


def _iperf3_mbps(lab: Lab, servers: list[subprocess.Popen[bytes]], src: str, dst: str, address: str) -> float:
    """TCP goodput in Mbit/s of a 2 s iperf3 transfer from spec host ``src``'s stand-in to ``dst``'s
    data ``address`` (as the receiver counts it)."""
    ns = {h.name: h.ns for h in lab.hosts}
    server = subprocess.Popen(
        ["ip", "netns", "exec", ns[MACHINES[dst]], "iperf3", "-s", "-1", "-B", address, "-p", str(PORT)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    servers.append(server)
    deadline = time.monotonic() + 10
    while f":{PORT} " not in sh("ss", "-Htln", ns=ns[MACHINES[dst]]):
        assert time.monotonic() < deadline, "the iperf3 server did not listen within 10 s"
        time.sleep(0.1)
    out = sh("timeout", "30", "iperf3", "-c", address, "-p", str(PORT), "-t", "2", "-J", ns=ns[MACHINES[src]])
    server.wait(timeout=10)
    return float(json.loads(out)["end"]["sum_received"]["bits_per_second"]) / 1e6


def test_a_dumbbell_holds_cross_rack_traffic_to_the_rate_and_leaves_a_racks_own_alone(
    lab6: Lab, tmp_path: Path, servers: list[subprocess.Popen[bytes]]
) -> None:
    path = tmp_path / "dumbbell.toml"
    path.write_text(SPEC)
    spec = specmod.load(path)
    inv = _inventory(lab6, tmp_path)
    before, routes = host_state(lab6), routing(lab6)
    router_ns = lab6.hosts[ROUTER].ns
    with commands.open_backend(inv, spec, str(path)) as hb:
        assert hb.router_line == ("data0", 10000.0)  # a veth's reported speed: 2 x 20 Mbit/s fits
        with hb.open_fabric(topology.build(spec), offloads=False) as fabric:
            plan = netplan.of(spec, fabric.network)
            fabric.configure(plan)
            address = fabric.network.host_addresses
            # the router host's data interface: the plan's two classes and their destination filters
            classes = sh("tc", "class", "show", "dev", "data0", ns=router_ns)  # (no JSON for HTB classes)
            assert sorted(re.findall(r"^class htb (\S+) .* rate 20Mbit ", classes, re.M)) == ["1:11", "1:12"], classes
            filters = sh("tc", "filter", "show", "dev", "data0", ns=router_ns)
            assert filters.count("flowid 1:11") == 2 and filters.count("flowid 1:12") == 2, filters
            sw1, sw2 = fabric.network.bottlenecks
            samples = tmp_path / "queue_samples.csv"
            sampler = fabric.start_queue_sampler(spec, samples, hb.launch)
            assert sampler is not None
            try:
                cross = _iperf3_mbps(lab6, servers, "master", "w2", address["w2"])  # rack 1 -> rack 2
                back = _iperf3_mbps(lab6, servers, "w3", "w1", address["w1"])  # rack 2 -> rack 1
                at = fabric.counters(sw1), fabric.counters(sw2)
                intra = _iperf3_mbps(lab6, servers, "master", "w1", address["w1"])  # within rack 1
                after = fabric.counters(sw1), fabric.counters(sw2)
            finally:
                sampler.stop()
    print(f"dumbbell at {RATE} Mbit/s: rack 1 -> 2 {cross:.1f}, 2 -> 1 {back:.1f}, within rack 1 {intra:.1f} Mbit/s")
    # each direction between the racks is held to the link's rate (HTB cannot exceed it) and gets most of it
    for mbps in (cross, back):
        assert 0.5 * RATE < mbps <= 1.05 * RATE, (cross, back)
    # within a rack: not through the router host (its queues saw none of it), so not held to the rate
    assert intra > 3 * RATE, intra
    moved = sum(a.tx_bytes - b.tx_bytes for a, b in zip(after, at, strict=True))
    assert moved < 0.01 * intra * 1e6 / 8 * 2, moved  # (ARP and the like; the transfer moved ~2 s of intra)
    # each queue's samples are its class's: the one towards rack 2 sent the first transfer's data
    with open(samples, newline="") as fh:
        rows = list(csv.DictReader(fh))
    sent = {port: max(int(r["sent_bytes"]) for r in rows if r["dev"] == port) for port in ("sw1", "sw2")}
    assert sent["sw2"] > 0.5 * RATE * 1e6 / 8 * 2, sent  # at least half of 2 s at the rate
    assert sent["sw1"] > 0.5 * RATE * 1e6 / 8 * 2, sent  # and the second transfer's, towards rack 1
    assert {sw1.ifname, sw2.ifname} == {"sw1", "sw2"}
    assert host_state(lab6) == before and routing(lab6) == routes
