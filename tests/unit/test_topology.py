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
