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


def _dumbbell(spec_dict: dict[str, Any]) -> S.ExperimentSpec:
    """The base spec as a dumbbell: master, w1 (node1) and w2 (node2) in rack 1, tgen (node3) and
    tsink (node4) in rack 2."""
    spec_dict["topology"]["kind"] = "dumbbell"
    for h, rack in {"master": 1, "w1": 1, "w2": 1, "tgen": 2, "tsink": 2}.items():
        spec_dict["hosts"][h]["rack"] = rack
    return S.parse(spec_dict)


def test_on_machines_a_dumbbell_is_a_class_per_rack_on_the_router_host_and_only_cross_rack_routes(
    spec_dict: dict[str, Any],
) -> None:
    sp = _dumbbell(spec_dict)
    link = sp.topology.bottleneck
    plan = _on_machines(sp)
    rack1, rack2 = (DATA["node1"], DATA["node2"]), (DATA["node3"], DATA["node4"])
    # both directions of the rack-to-rack link on the router host's one data interface: the queue
    # towards rack 1 (the emulated port r:sw1) takes the packets to rack 1's machines, and the other
    # way; no default class (minor 10 is none of them: the router host's own packets leave unshaped)
    assert plan.egress == {
        T.ROUTER: netplan.Egress(
            (netplan.Queue("sw1", 11, link, rack1), netplan.Queue("sw2", 12, link, rack2)), default=10
        )
    }
    assert plan.links == {"sw1": link, "sw2": link}
    # each machine routes the other rack's machines through the router host, its own rack's not at all
    for h in ("master", "w1"):
        assert _routes(plan, h) == [(a, ROUTER_DATA, ()) for a in rack2]
    assert _routes(plan, "w2") == [(a, ROUTER_DATA, ()) for a in rack2]
    assert _routes(plan, "tgen") == [(a, ROUTER_DATA, ()) for a in rack1]
    assert _routes(plan, "tsink") == [(a, ROUTER_DATA, ()) for a in rack1]
    # with route attributes, its own rack's machines on the path the machine has (via None)
    spec_dict["tcp"] = {"initcwnd": 10}
    attrs = ("initcwnd", "10")
    p = _on_machines(S.parse(spec_dict))
    assert _routes(p, "w2") == [(DATA["node1"], None, attrs), *((a, ROUTER_DATA, attrs) for a in rack2)]
    assert _routes(p, "tsink") == [*((a, ROUTER_DATA, attrs) for a in rack1), (DATA["node3"], None, attrs)]


def test_a_dumbbell_egress_becomes_two_classes_and_their_destination_filters(spec_dict: dict[str, Any]) -> None:
    egress = _on_machines(_dumbbell(spec_dict)).egress[T.ROUTER]
    cmds = netplan.egress_commands(None, "eth1", egress)
    assert cmds[0] == ["tc", "qdisc", "replace", "dev", "eth1", "root", "handle", "1:", "htb", "default", "10"]
    classes = [c for c in cmds if c[1] == "class"]
    assert [c[c.index("classid") + 1] for c in classes] == ["1:11", "1:12"]
    assert all(c[c.index("rate") + 1] == "50000000bit" for c in classes)  # each direction at the link's rate
    leaves = [c for c in cmds if c[1] == "qdisc" and "parent" in c]
    assert [c[c.index("parent") + 1 :] for c in leaves] == [
        ["1:11", "handle", "11:", "bfifo", "limit", "100000"],
        ["1:12", "handle", "12:", "bfifo", "limit", "100000"],
    ]
    filters = [c for c in cmds if c[1] == "filter"]
    assert [(c[c.index("handle") + 1], c[c.index("dst") + 1], c[-1]) for c in filters] == [
        ("800::1", f"{DATA['node1']}/32", "1:11"),
        ("800::2", f"{DATA['node2']}/32", "1:11"),
        ("800::3", f"{DATA['node3']}/32", "1:12"),
        ("800::4", f"{DATA['node4']}/32", "1:12"),
    ]
    # live: no new root; the classes, leaves and filters again (each replaced in place, by its handle)
    live = "qdisc htb 1: root refcnt 2 r2q 10 default 0x10\nqdisc bfifo 11: parent 1:11 limit 100000b\n"
    assert netplan.egress_changes(live, "eth1", egress) == (None, [c[1:] for c in cmds[1:]])
    # a leaf of another kind goes first, for each queue
    packets = dataclasses.replace(
        egress, queues=tuple(dataclasses.replace(q, link=S.Link(rate_mbps=50, queue_packets=20)) for q in egress.queues)
    )
    _, changes = netplan.egress_changes(live, "eth1", packets)
    assert ["qdisc", "del", "dev", "eth1", "parent", "1:11", "handle", "11:"] in changes
    assert ["qdisc", "del", "dev", "eth1", "parent", "1:12", "handle", "12:"] not in changes  # not there


def test_the_emulated_dumbbell_keeps_a_router_port_per_rack(spec_dict: dict[str, Any]) -> None:
    sp = _dumbbell(spec_dict)
    plan = netplan.of(sp, T.build(sp))
    link = sp.topology.bottleneck
    assert plan.egress == {"sw1": netplan.Egress.single("sw1", link), "sw2": netplan.Egress.single("sw2", link)}


def test_the_router_host_line_rate_must_hold_every_queue_it_holds(spec_dict: dict[str, Any]) -> None:
    sp = _dumbbell(spec_dict)  # 50 Mbit/s each way
    problem = netplan.router_line_problem(sp, 80, "data0")
    assert problem is not None and problem.startswith("topology.bottleneck.rate_mbps = 50:"), problem
    assert "2 x 50 = 100 Mbit/s" in problem and "80 Mbit/s" in problem and "data0" in problem
    assert netplan.router_line_problem(sp, 100) is None  # both directions fit
    assert netplan.router_line_problem(sp, None) is None  # unknown: the documented limit
    spec_dict["topology"]["kind"] = "shared"
    for h in spec_dict["hosts"].values():
        del h["rack"]
    shared = S.parse(spec_dict)  # one queue
    assert netplan.router_line_problem(shared, 80) is None
    assert "topology.bottleneck.rate_mbps = 50" in (netplan.router_line_problem(shared, 40) or "")
    spec_dict["topology"]["kind"] = "star"  # no queue on the router host
    assert netplan.router_line_problem(S.parse(spec_dict), 1) is None
