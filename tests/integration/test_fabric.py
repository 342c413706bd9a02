"""Root integration: the fabric on the real kernel (no Spark)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from shufflelab import netplan
from shufflelab import spec as S
from shufflelab import topology as T
from shufflelab.emulate import netns
from shufflelab.emulate.fabric import NamespaceFabric
from shufflelab.switch import Switch

pytestmark = pytest.mark.root


def _ours(prefix: str) -> set[str]:
    """The namespaces of one lease (another test may make or remove its own meanwhile)."""
    return {n for n in netns.namespaces() if netns.NS_PATTERN.match(n) and n.startswith(prefix)}


def test_fabric_routes_through_the_shaped_router(spec_dict: dict[str, Any]) -> None:
    sp = S.parse(spec_dict)
    net = T.build(sp)
    with netns.lease() as lz, NamespaceFabric(lz, net) as fab:
        fab.configure(netplan.of(sp, fab.network))
        out = netns.run(["ping", "-c", "1", "-W", "2", net.host_addresses["w2"]], ns=fab.ns["w1"])
        assert "ttl=63" in out  # one routed hop: through r, not straight across the switch
        tc = netns.run(["tc", "qdisc", "show", "dev", "sw"], ns=fab.ns["r"])
        assert "htb 1: root" in tc and "bfifo 10:" in tc and "limit 100000b" in tc.replace("Kb", "000b")
        cc = netns.run(["sysctl", "-n", "net.ipv4.tcp_congestion_control"], ns=fab.ns["w1"]).strip()
        assert cc == "cubic"
        c = fab.counters(net.bottlenecks[0])
        assert c.tx_packets >= 2  # the echo request and reply both left through the bottleneck
        created = _ours(lz.prefix)
        assert len(created) == len(net.nodes) and created == set(fab.ns.values())
        # no name server inside the fabric: lookups fail at once instead of leaving through the router
        assert netns.run(["cat", "/etc/resolv.conf"], ns=fab.ns["w1"]) == netns.RESOLV_CONF
        assert all((netns.NETNS_ETC / n / "resolv.conf").exists() for n in created)
    assert not _ours(lz.prefix)
    assert not any((netns.NETNS_ETC / n).exists() for n in created)


def test_live_reconfiguration(spec_dict: dict[str, Any]) -> None:
    sp = S.parse(spec_dict)
    net = T.build(sp)
    with netns.lease() as lz, NamespaceFabric(lz, net) as fab:
        fab.configure(netplan.of(sp, fab.network))
        spec_dict["topology"]["bottleneck"] = {"rate_mbps": 7, "queue_packets": 20}
        spec_dict["tcp"] = {"congestion_control": "reno", "initcwnd": 20, "initrwnd": 30}
        sp2 = S.parse(spec_dict)
        fab.configure(netplan.of(sp2, fab.network))
        cls = netns.run(["tc", "class", "show", "dev", "sw"], ns=fab.ns["r"])
        assert "rate 7Mbit" in cls
        assert "pfifo 10:" in netns.run(["tc", "qdisc", "show", "dev", "sw"], ns=fab.ns["r"])
        assert netns.run(["sysctl", "-n", "net.ipv4.tcp_congestion_control"], ns=fab.ns["w2"]).strip() == "reno"
        route = netns.run(["ip", "route", "show", "default"], ns=fab.ns["w2"])
        assert "initcwnd 20" in route and "initrwnd 30" in route


@pytest.mark.fidelity
def test_link_fidelity_tcp_goodput(spec_dict: dict[str, Any]) -> None:
    """Fidelity tier: TCP goodput through a 20 Mbit/s bottleneck is close to the configured rate."""
    spec_dict["topology"]["bottleneck"] = {"rate_mbps": 20}
    sp = S.parse(spec_dict)
    net = T.build(sp)
    with netns.lease() as lz, NamespaceFabric(lz, net) as fab:
        fab.configure(netplan.of(sp, fab.network))
        server = netns.NamespaceProcess(
            fab.ns["w2"],
            ["iperf3", "-s", "-1", "-B", net.host_addresses["w2"]],
            lz.scratch / "s.log",
        )
        time.sleep(0.5)
        out = netns.run(
            ["iperf3", "-c", net.host_addresses["w2"], "-t", "4", "-O", "1", "-J"],
            ns=fab.ns["w1"],
            timeout=30,
        )
        server.stop()
        bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
        assert 0.85 * 20e6 < bps < 1.02 * 20e6


def _marker() -> str:
    return f"300.{secrets.randbelow(10**9):09d}"


def test_exception_inside_fabric_removes_everything(spec_dict: dict[str, Any]) -> None:
    net = T.build(S.parse(spec_dict))
    marker = _marker()  # a duration no other process on the machine runs
    prefixes = []
    with pytest.raises(RuntimeError, match="boom"), netns.lease() as lz, NamespaceFabric(lz, net) as fab:
        prefixes.append(lz.prefix)
        netns.NamespaceProcess(fab.ns["w1"], ["sleep", marker], lz.scratch / "sleep.log")
        assert _ours(lz.prefix)
        raise RuntimeError("boom")
    assert not _ours(prefixes[0])
    assert not subprocess.run(["pgrep", "-f", f"sleep {marker}$"], capture_output=True).stdout


def test_clean_after_sigkill(spec_dict: dict[str, Any], tmp_path: Any) -> None:
    """A runner killed with SIGKILL leaves namespaces and processes; ``clean`` removes them."""
    script = tmp_path / "victim.py"
    marker = _marker()
    script.write_text(
        "import json, sys, time\n"
        "from shufflelab import spec as S, topology as T\n"
        "from shufflelab.emulate import netns\n"
        "from shufflelab.emulate.fabric import NamespaceFabric\n"
        f"sp = S.parse(json.loads({json.dumps(json.dumps(spec_dict))}))\n"
        "with netns.lease() as lz, NamespaceFabric(lz, T.build(sp)) as fab:\n"
        f"    netns.NamespaceProcess(fab.ns['w1'], ['sleep', '{marker}'], lz.scratch / 'x.log')\n"
        "    print('ready', lz.prefix, flush=True)\n"
        "    time.sleep(120)\n"
    )
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    ready, prefix = p.stdout.readline().split()
    assert ready == "ready"
    left = _ours(prefix)
    assert left
    # the live runner's resources are protected from a plain clean
    report = netns.clean()
    assert set(report.skipped_live) >= left
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert _ours(prefix) == left  # SIGKILL cannot clean up
    assert all((netns.NETNS_ETC / n).exists() for n in left)
    netns.clean()
    assert not _ours(prefix)
    assert not any((netns.NETNS_ETC / n).exists() for n in left)
    assert not subprocess.run(["pgrep", "-f", f"sleep {marker}$"], capture_output=True).stdout


@pytest.mark.parametrize("datapath", ["kernel", "switch"])
def test_dumbbell_sends_each_direction_through_its_own_port(spec_dict: dict[str, Any], datapath: str) -> None:
    """Rack 1 -> rack 2 leaves the router through r:sw2 and the reply through r:sw1; traffic within a
    rack is routed too (every host has its own subnet) and leaves through its own rack's port only."""
    hosts = list(spec_dict["hosts"])
    spec_dict["topology"]["kind"] = "dumbbell"
    spec_dict["topology"]["bottleneck"]["datapath"] = datapath
    for i, h in enumerate(hosts):
        spec_dict["hosts"][h]["rack"] = 1 if i < len(hosts) // 2 else 2
    sp = S.parse(spec_dict)
    net = T.build(sp)
    one = [h for h in hosts if spec_dict["hosts"][h]["rack"] == 1]
    two = [h for h in hosts if spec_dict["hosts"][h]["rack"] == 2]
    with netns.lease() as lz, NamespaceFabric(lz, net, switches=Switch) as fab:
        fab.configure(netplan.of(sp, fab.network), restart_switch=True)
        ports = {p.ifname: p for p in net.bottlenecks}
        before = {k: fab.counters(p).tx_packets for k, p in ports.items()}
        out = netns.run(["ping", "-c", "5", "-i", "0.2", "-W", "2", net.host_addresses[two[0]]], ns=fab.ns[one[0]])
        assert " 0% packet loss" in out
        time.sleep(0.4)  # the switch's counters come from its telemetry (one row per 100 ms)
        mid = {k: fab.counters(p).tx_packets for k, p in ports.items()}
        assert mid["sw2"] - before["sw2"] >= 5 and mid["sw1"] - before["sw1"] >= 5  # requests / replies
        netns.run(["ping", "-c", "3", "-i", "0.2", "-W", "2", net.host_addresses[one[1]]], ns=fab.ns[one[0]])
        time.sleep(0.4)
        after = {k: fab.counters(p).tx_packets for k, p in ports.items()}
        # within rack 1: through r:sw1 (r:sw2 may carry a neighbour probe or two, nothing of the pings)
        assert after["sw1"] - mid["sw1"] >= 6 and after["sw2"] - mid["sw2"] <= 3
