from __future__ import annotations

from typing import Any

from shufflelab import spec as S
from shufflelab import topology as T


def test_shared_has_one_bottleneck_on_the_router_downlink(spec_dict: dict[str, Any]) -> None:
    net = T.build(S.parse(spec_dict))
    assert [(p.node, p.ifname) for p in net.bottlenecks] == [("r", "sw")]
    assert net.nodes["sw"].bridge and net.nodes["r"].forwarding
    # every host in its own /24, gateway on the router
    assert len(set(net.host_addresses.values())) == len(spec_dict["hosts"])
    for h, ip in net.host_addresses.items():
        assert net.gateways[h].rsplit(".", 1)[0] == ip.rsplit(".", 1)[0]
        assert net.gateways[h].endswith(".254")
    down = net.bottlenecks[0]
    router_addrs = [down.address, *down.extra_addresses]
    assert sorted(a.split("/")[0] for a in router_addrs) == sorted(net.gateways.values())


def test_star_shapes_every_host_port(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"]["kind"] = "star"
    net = T.build(S.parse(spec_dict))
    assert sorted(p.ifname for p in net.bottlenecks) == sorted(spec_dict["hosts"])
    assert "sw" not in net.nodes


def test_structure_key_ignores_shaping_values(spec_dict: dict[str, Any]) -> None:
    a = T.build(S.parse(spec_dict))
    spec_dict["topology"]["bottleneck"]["rate_mbps"] = 999
    b = T.build(S.parse(spec_dict))
    assert a.structure_key() == b.structure_key()
    spec_dict["topology"]["kind"] = "star"
    assert T.build(S.parse(spec_dict)).structure_key() != a.structure_key()


def test_htb_parameters() -> None:
    assert T.htb_quantum_bytes(1) == 1514
    assert T.htb_quantum_bytes(100_000) == 200_000
    assert T.htb_burst_bytes(10) == 3028
    assert T.htb_burst_bytes(5000) == 625_000


def test_router_port_of_each_host(spec_dict: dict[str, Any]) -> None:
    net = T.build(S.parse(spec_dict))  # shared: every host behind the access bridge's uplink
    assert {h: net.router_port_of(h).ifname for h in spec_dict["hosts"]} == {h: "sw" for h in spec_dict["hosts"]}
    spec_dict["topology"]["kind"] = "star"
    star = T.build(S.parse(spec_dict))
    assert {h: star.router_port_of(h).ifname for h in spec_dict["hosts"]} == {h: h for h in spec_dict["hosts"]}
    assert all(star.router_port_of(h).node == "r" for h in spec_dict["hosts"])


def test_switch_datapath_router_does_not_forward(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"]["bottleneck"]["delay_ms"] = 2
    net = T.build(S.parse(spec_dict))
    assert net.datapath == "switch" and not net.nodes["r"].forwarding
    spec_dict["topology"]["bottleneck"]["delay_ms"] = 0
    kernel = T.build(S.parse(spec_dict))
    assert kernel.datapath == "kernel" and kernel.nodes["r"].forwarding
    # one fabric serves both: Fabric.configure moves it between the datapaths
    assert kernel.structure_key() == net.structure_key()


def test_dumbbell_has_one_queue_per_direction_between_racks(spec_dict: dict[str, Any]) -> None:
    hosts = list(spec_dict["hosts"])
    spec_dict["topology"]["kind"] = "dumbbell"
    for i, h in enumerate(hosts):
        spec_dict["hosts"][h]["rack"] = 1 if i < len(hosts) // 2 else 2
    net = T.build(S.parse(spec_dict))
    assert [(p.node, p.ifname) for p in net.bottlenecks] == [("r", "sw1"), ("r", "sw2")]
    assert net.nodes["sw1"].bridge and net.nodes["sw2"].bridge and "sw" not in net.nodes
    rack = {h: spec_dict["hosts"][h]["rack"] for h in hosts}
    # a host's packets arrive through the router port of its own rack: each rack's port holds the
    # gateways of exactly that rack's hosts
    for h in hosts:
        port = net.router_port_of(h)
        assert port.ifname == f"sw{rack[h]}"
        assert f"{net.gateways[h]}/24" in (port.address, *port.extra_addresses)
    for side in (1, 2):  # every host is wired to its rack's switch only
        members = {w.a.node for w in net.wires if w.b.node == f"sw{side}" and w.a.node in rack}
        assert members == {h for h in hosts if rack[h] == side}


def test_dumbbell_racks_are_checked(spec_dict: dict[str, Any]) -> None:
    import pytest

    hosts = list(spec_dict["hosts"])
    spec_dict["topology"]["kind"] = "dumbbell"
    with pytest.raises(ValueError, match=rf"hosts\.{hosts[0]}\.rack: the dumbbell topology needs"):
        S.parse(spec_dict)
    for h in hosts:
        spec_dict["hosts"][h]["rack"] = 1
    with pytest.raises(ValueError, match="no host has rack = 2"):
        S.parse(spec_dict)
    spec_dict["topology"]["kind"] = "star"
    with pytest.raises(ValueError, match=rf"hosts\.{hosts[0]}\.rack: racks are for"):
        S.parse(spec_dict)
