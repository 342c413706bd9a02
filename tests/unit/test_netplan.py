"""The network plan (shufflelab.netplan): one scenario's desired state on a fabric's network, and the
guard that keeps it the one owner of the spec's bottleneck."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from shufflelab import netplan
from shufflelab import spec as S
from shufflelab import topology as T

SRC = Path(netplan.__file__).parent


def test_a_plan_holds_each_port_link_and_each_host_settings(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"] = {"kind": "star", "bottleneck": {"rate_mbps": 20, "queue_bytes": 50_000}}
    spec_dict["tcp"] = {"congestion_control": "reno", "initcwnd": 10}
    spec_dict["hosts"]["w1"]["tcp"] = {"congestion_control": "cubic"}
    spec_dict["cross_traffic"] = {"udp_percent": 50}
    sp = S.parse(spec_dict)
    # the fabric's network: over SSH its hosts have the machines' data addresses
    net = T.build(sp)
    net = dataclasses.replace(net, host_addresses={h: f"192.0.2.{i}" for i, h in enumerate(net.host_addresses, 1)})
    plan = netplan.of(sp, net)
    assert plan.links == {h: sp.topology.bottleneck for h in sp.hosts} and plan.datapath == "kernel"
    assert plan.hosts["w1"].kernel_cc == "cubic" and plan.hosts["w2"].kernel_cc == "reno"
    assert plan.hosts["w2"].sysctls["net.ipv4.tcp_congestion_control"] == "reno"
    assert plan.hosts["w2"].route_attributes == ("initcwnd", "10")
    assert plan.cross is not None and (plan.cross.src, plan.cross.dst) == ("tgen", "tsink")
    assert plan.cross.dst_address == net.host_addresses["tsink"]
    assert plan.cross.udp_payload_bps == int(20e6 * 0.5 * 1400 / 1442)
    macs = {h: f"02:00:00:00:00:{i:02x}" for i, h in enumerate(sp.hosts, 1)}
    cfg = plan.switch_config(macs)
    assert [(h.ip, h.mac) for h in cfg.hosts] == [(net.host_addresses[h], macs[h]) for h in sp.hosts]
    assert plan.switch.hosts[0].mac == ""  # the plan's own copy is left as it was


def test_two_scenarios_of_one_structure_get_their_own_links(spec_dict: dict[str, Any]) -> None:
    spec_dict["matrix"] = {"topology.bottleneck.rate_mbps": [100, 1000]}
    slow, fast = (sc.spec for sc in S.expand(S.parse(spec_dict)))
    net = T.build(slow)  # one fabric for both: built from the first
    assert net.structure_key() == T.build(fast).structure_key()
    assert {link.rate_mbps for link in netplan.of(fast, net).links.values()} == {1000}
    assert netplan.of(slow, net).link_key != netplan.of(fast, net).link_key


def test_nothing_but_the_spec_and_the_plan_reads_the_bottleneck() -> None:
    # an attribute read (``x.topology.bottleneck``), not a field named in a message
    reads = re.compile(r"\.topology\.bottleneck\b")
    found = [
        f"{p.relative_to(SRC)}:{n}"
        for p in sorted(SRC.rglob("*.py"))
        if p.parent.name != "spec" and p.name != "netplan.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if reads.search(line)
    ]
    assert found == [], f"read the run's plan (netplan.of) or netplan.bottleneck(spec) instead: {found}"
