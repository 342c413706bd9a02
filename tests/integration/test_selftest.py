"""Root integration: the fabric self-test passes a well-shaped star and catches a mis-shaped port."""

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

pytestmark = [
    pytest.mark.root,
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
        checks = selftest.check(fab.ns, net, tmp_path, links, seconds=1.0)
        assert len(checks) == len(net.bottlenecks) and all(c.ok for c in checks), [c.problem for c in checks]
        for c in checks:
            assert 0.85 <= c.rate_ratio <= 1.08 and c.rtt_ms is not None and c.rtt_ms < 3
        # mis-shape one port behind the fabric's back: 5 Mbit/s instead of 20
        victim = next(p for p in net.bottlenecks if p.ifname == "w2")
        netns.run(["tc", "class", "change", "dev", victim.ifname, "parent", "1:", "classid", "1:10", "htb",
                   "rate", "5mbit", "ceil", "5mbit"], ns=fab.ns[victim.node])  # fmt: skip
        again = {c.port: c for c in selftest.check(fab.ns, net, tmp_path, links, seconds=1.0)}
        bad = again[f"{victim.node}:{victim.ifname}"]
        assert not bad.ok and bad.rate_ratio is not None and bad.rate_ratio < 0.4
        assert "of its configured 20 Mbit/s" in (bad.problem or "")
        assert all(c.ok for port, c in again.items() if port != bad.port)
