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
from shufflelab.hosts.fabric import machines_network

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


# spec host -> machine (master and w1 share one), machine -> data address
PLACES = {"master": "node1", "w1": "node1", "w2": "node2", "tgen": "node3", "tsink": "node4"}
DATA = {"node1": "10.214.5.10", "node2": "10.214.5.11", "node3": "10.214.5.12", "node4": "10.214.5.13"}
ROUTER_DATA = "10.214.5.19"


def _on_machines(sp: S.ExperimentSpec, router: str | None = "router") -> netplan.NetPlan:
    return netplan.of(sp, machines_network(T.build(sp), PLACES, {**DATA, "router": ROUTER_DATA}, router))


def _routes(plan: netplan.NetPlan, host: str) -> list[tuple[str, str | None, tuple[str, ...]]]:
    return [(r.destination, r.via, r.attributes) for r in plan.hosts[host].routes]


def test_emulated_hosts_hold_their_default_route_with_the_spec_attributes(spec_dict: dict[str, Any]) -> None:
    spec_dict["tcp"] = {"initcwnd": 10, "initrwnd": 20}
    sp = S.parse(spec_dict)
    net = T.build(sp)
    plan = netplan.of(sp, net)
    for h in sp.hosts:
        assert _routes(plan, h) == [("default", net.gateways[h], ("initcwnd", "10", "initrwnd", "20"))]


def test_on_machines_with_a_shared_bottleneck_every_host_routes_each_other_machine_through_the_router_host(
    spec_dict: dict[str, Any],
) -> None:
    spec_dict["tcp"] = {"initcwnd": 20}
    plan = _on_machines(S.parse(spec_dict))
    attrs = ("initcwnd", "20")
    # one /32 per other machine's data address: none to its own, none twice for master and w1 on node1
    for h in ("master", "w1"):
        assert _routes(plan, h) == [(DATA[m], ROUTER_DATA, attrs) for m in ("node2", "node3", "node4")]
    assert _routes(plan, "w2") == [(DATA[m], ROUTER_DATA, attrs) for m in ("node1", "node3", "node4")]
    assert plan.hosts["w2"].address == DATA["node2"]
    # without route attributes the routes are the same: they take every packet through the queue
    del spec_dict["tcp"]
    assert _routes(_on_machines(S.parse(spec_dict)), "tsink") == [
        (DATA[m], ROUTER_DATA, ()) for m in ("node1", "node2", "node3")
    ]


def test_on_machines_with_per_host_links_only_the_route_attributes_need_routes(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"]["kind"] = "star"
    places = {**PLACES, "w1": "node5"}  # a machine of its own for each host

    def plan(sp: S.ExperimentSpec) -> netplan.NetPlan:
        data = {**DATA, "node5": "10.214.5.14", "router": ROUTER_DATA}
        return netplan.of(sp, machines_network(T.build(sp), places, data, "router"))

    # the machines' own routing, untouched (the router host holds no queue on a star)
    assert all(h.routes == () for h in plan(S.parse(spec_dict)).hosts.values())
    spec_dict["tcp"] = {"initrwnd": 30}
    p = plan(S.parse(spec_dict))
    # the path the machine has (via None: its gateway, found on the host), with the attributes
    assert _routes(p, "master") == [
        (a, None, ("initrwnd", "30")) for a in ("10.214.5.14", DATA["node2"], DATA["node3"], DATA["node4"])
    ]


def test_the_plan_says_where_each_shaped_egress_is(spec_dict: dict[str, Any]) -> None:
    sp = S.parse(spec_dict)  # shared
    link = sp.topology.bottleneck
    # emulated: the router's port towards the access bridge
    assert netplan.of(sp, T.build(sp)).egress == {"sw": netplan.Egress.single("sw", link)}
    # on machines: the router host's data interface, one queue every packet leaving it goes through
    assert _on_machines(sp).egress == {T.ROUTER: netplan.Egress.single("sw", link)}
    spec_dict["topology"]["kind"] = "star"
    star = S.parse(spec_dict)
    # each host's own data interface (emulated: the router's port towards it)
    assert _on_machines(star).egress == {h: netplan.Egress.single(h, link) for h in star.hosts}
    assert netplan.of(star, T.build(star)).egress == {h: netplan.Egress.single(h, link) for h in star.hosts}
