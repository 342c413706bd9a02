"""Root integration: the fabric self-test passes a well-shaped star, one whose RED drops far below the
bandwidth-delay product too, and catches a slow and an over-fast port."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from shufflelab import netplan
from shufflelab import spec as S
from shufflelab import topology as T
from shufflelab.emulate import netns, selftest
from shufflelab.emulate.fabric import NamespaceFabric
from shufflelab.switch import Switch, binary_path

pytestmark = [
    pytest.mark.root,
    pytest.mark.fidelity,
    pytest.mark.skipif(not shutil.which("iperf3"), reason="iperf3 not installed (make setup)"),
]


def test_selftest_flags_a_mis_shaped_port(spec_dict: dict[str, Any], tmp_path: Path) -> None:
    spec_dict["topology"] = {"kind": "star", "bottleneck": {"rate_mbps": 20, "queue_bytes": 100_000}}
    sp = S.parse(spec_dict)
    net = T.build(sp)
    with netns.lease() as lz, NamespaceFabric(lz, net) as fab:
        plan = netplan.of(sp, fab.network)
        fab.configure(plan)
        links = plan.links
        checks = selftest.check(fab.ns, net, tmp_path, links, seconds=1)
        assert len(checks) == len(net.bottlenecks) and all(c.ok for c in checks), [c.problem for c in checks]
        for c in checks:
            assert 0.85 <= c.rate_ratio <= 1.08 and c.rtt_ms is not None and c.rtt_ms < 3
        # mis-shape one port behind the fabric's back: 5 Mbit/s instead of 20
        victim = next(p for p in net.bottlenecks if p.ifname == "w2")
        netns.run(["tc", "class", "change", "dev", victim.ifname, "parent", "1:", "classid", "1:10", "htb",
                   "rate", "5mbit", "ceil", "5mbit"], ns=fab.ns[victim.node])  # fmt: skip
        again = {c.port: c for c in selftest.check(fab.ns, net, tmp_path, links, seconds=1)}
        bad = again[f"{victim.node}:{victim.ifname}"]
        assert not bad.ok and bad.rate_ratio is not None and bad.rate_ratio < 0.4
        assert "of its configured 20 Mbit/s" in (bad.problem or "")
        assert all(c.ok for port, c in again.items() if port != bad.port)
        # and another at 40 Mbit/s: the probe's 1.2 x 20 Mbit/s gets through whole
        fast = next(p for p in net.bottlenecks if p.ifname == "w1")
        netns.run(["tc", "class", "change", "dev", fast.ifname, "parent", "1:", "classid", "1:10", "htb",
                   "rate", "40mbit", "ceil", "40mbit"], ns=fab.ns[fast.node])  # fmt: skip
        third = {c.port: c for c in selftest.check(fab.ns, net, tmp_path, links, seconds=1)}
        over = third[f"{fast.node}:{fast.ifname}"]
        print("over-fast port:", over.rate_ratio, over.problem)
        assert not over.ok and over.rate_ratio is not None and over.rate_ratio > 1.08


@pytest.mark.skipif(binary_path() is None, reason="shufflelab-switch is not built (make setup)")
def test_selftest_passes_a_port_that_drops_below_its_bdp(spec_dict: dict[str, Any], tmp_path: Path) -> None:
    # experiments/cc-under-udp-switch.toml's port (seed 000): RED drops non-ECT packets from 30 kB, a
    # quarter of the 125 kB bandwidth-delay product -- one TCP flow cannot fill it, the link is fine
    red = {"min_bytes": 30_000, "max_bytes": 30_000, "max_p": 1.0, "ecn": True}
    link = {"rate_mbps": 100, "queue_bytes": 250_000, "delay_ms": 5, "discipline": "red", "red": red}
    spec_dict["topology"] = {"kind": "shared", "bottleneck": link}
    sp = S.parse(spec_dict)
    assert sp.datapath() == "switch"
    net = T.build(sp)
    with netns.lease() as lz, NamespaceFabric(lz, net, switches=Switch) as fab:
        plan = netplan.of(sp, fab.network)
        fab.configure(plan)
        checks = selftest.check(fab.ns, net, tmp_path, plan.links)
        print("shallow RED port:", [(c.port, c.rate_ratio, c.rtt_ms) for c in checks])
        assert len(checks) == len(net.bottlenecks) and all(c.ok for c in checks), [c.problem for c in checks]
