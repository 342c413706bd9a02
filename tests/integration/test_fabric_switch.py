"""Root integration: the fabric on the userspace switch (no Spark). A spec asking for delay, RED/ECN
and DCTCP gets the switch datapath through the real :class:`NamespaceFabric`: the router's kernel stops
forwarding, the switch delays and marks, its telemetry carries ``marks``, and the same fabric
moves back to the kernel datapath and again to the switch."""

from __future__ import annotations

import json
import re
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from shufflelab import netplan
from shufflelab import spec as S
from shufflelab import topology as T
from shufflelab.emulate import netns
from shufflelab.emulate.fabric import NamespaceFabric
from shufflelab.emulate.telemetry import load_samples
from shufflelab.switch import Switch, binary_path

pytestmark = [
    pytest.mark.root,
    pytest.mark.fidelity,
    pytest.mark.skipif(binary_path() is None, reason="shufflelab-switch is not built (make setup)"),
    pytest.mark.skipif(shutil.which("ping") is None, reason="needs ping (iputils-ping; make setup)"),
]

DELAY_MS = 2.0
RED_LINK: dict[str, Any] = {
    "rate_mbps": 20,
    "queue_bytes": 100_000,
    "delay_ms": DELAY_MS,
    "discipline": "red",
    "red": {"min_bytes": 5_000, "max_bytes": 15_000, "max_p": 0.1},
}


def _spec(spec_dict: dict[str, Any], kind: str, link: dict[str, Any], cc: str = "dctcp") -> S.ExperimentSpec:
    spec_dict["hosts"] = {
        "master": {"roles": ["spark-master"]},
        "w1": {"roles": ["spark-worker"]},
        "w2": {"roles": ["spark-worker"]},
    }
    spec_dict["topology"] = {"kind": kind, "bottleneck": link}
    spec_dict["tcp"] = {"congestion_control": cc}
    spec_dict["telemetry"] = {"queue_period_ms": 10}
    return S.parse(spec_dict)


def _rtts_ms(fab: NamespaceFabric, src: str, dst_ip: str, count: int = 10) -> tuple[list[float], str]:
    out = netns.run(["ping", "-n", "-c", str(count), "-i", "0.05", "-W", "2", dst_ip], ns=fab.ns[src], check=False)
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)], out


def _sysctl(fab: NamespaceFabric, node: str, key: str) -> str:
    return netns.run(["sysctl", "-n", key], ns=fab.ns[node]).strip()


def _iperf(fab: NamespaceFabric, net: T.Network, src: str, dst: str, seconds: float) -> dict[str, Any]:
    ip = net.host_addresses[dst]
    server = netns.NamespaceProcess(
        fab.ns[dst], ["iperf3", "-s", "-1", "-B", ip], fab.lease.scratch / f"iperf-{dst}.log"
    )
    try:
        time.sleep(0.5)
        out = netns.run(["iperf3", "-c", ip, "-t", str(seconds), "-J"], ns=fab.ns[src], timeout=seconds + 30)
        result: dict[str, Any] = json.loads(out)
        return result
    finally:
        server.stop(grace_s=2)


def test_star_with_delay_red_and_dctcp_through_the_fabric(spec_dict: dict[str, Any], tmp_path: Path) -> None:
    sp = _spec(spec_dict, "star", RED_LINK)
    assert sp.datapath() == "switch"
    net = T.build(sp)
    with netns.lease() as lz, NamespaceFabric(lz, net, switches=Switch) as fab:
        fab.configure(netplan.of(sp, fab.network), restart_switch=True)
        assert fab.switch is not None and fab.switch.alive()
        assert _sysctl(fab, "r", "net.ipv4.ip_forward") == "0"
        for port in net.bottlenecks:  # the switch queues: no qdisc under it
            assert "htb" not in netns.run(["tc", "qdisc", "show", "dev", port.ifname], ns=fab.ns["r"])
        # dctcp = the switch's DCTCP over the host's cubic with ECN on
        assert _sysctl(fab, "w1", "net.ipv4.tcp_congestion_control") == "cubic"
        assert _sysctl(fab, "w1", "net.ipv4.tcp_ecn") == "1"

        rtts, out = _rtts_ms(fab, "w1", net.host_addresses["w2"])
        assert len(rtts) >= 8, out
        assert "ttl=63" in out  # routed once, by the switch
        # 2 ms on r:w2 for the request, 2 ms on r:w1 for the reply; never less
        assert min(rtts) >= 2 * DELAY_MS, rtts
        assert statistics.median(rtts) <= 2 * DELAY_MS + 10, rtts

        t0 = time.time()
        before = fab.counters(net.router_port_of("w2"))
        res = _iperf(fab, net, "w1", "w2", 3)
        assert res["end"]["sum_received"]["bits_per_second"] > 0.5 * 20e6
        time.sleep(0.2)  # one more telemetry period
        after = fab.counters(net.router_port_of("w2"))
        assert after.tx_bytes - before.tx_bytes > 3 * 0.5 * 20e6 / 8
        assert after.marks is not None and before.marks is not None and after.marks > before.marks

        # the run's queue samples: the kernel sampler's columns plus marks, every switch port
        fab.switch.save_telemetry(tmp_path / "queue_samples.csv")
        samples = load_samples(tmp_path / "queue_samples.csv", t0)
        assert "marks" in samples.columns and "t_rel_s" in samples.columns
        assert set(samples["dev"]) == {"master", "w1", "w2"}
        w2 = samples[samples["dev"] == "w2"]
        assert w2["marks"].max() > 0 and w2["backlog_bytes"].max() > 0


def test_one_fabric_moves_between_the_datapaths(spec_dict: dict[str, Any]) -> None:
    sp_switch = _spec(dict(spec_dict), "shared", {"rate_mbps": 50, "delay_ms": DELAY_MS}, cc="cubic")
    sp_kernel = _spec(dict(spec_dict), "shared", {"rate_mbps": 50}, cc="cubic")
    assert (sp_switch.datapath(), sp_kernel.datapath()) == ("switch", "kernel")
    net = T.build(sp_kernel)
    assert net.structure_key() == T.build(sp_switch).structure_key()
    dst = net.host_addresses["w2"]
    with netns.lease() as lz, NamespaceFabric(lz, net, switches=Switch) as fab:
        fab.configure(netplan.of(sp_kernel, fab.network))
        rtts, out = _rtts_ms(fab, "w1", dst)
        assert fab.switch is None and "ttl=63" in out and statistics.median(rtts) < 2 * DELAY_MS, rtts

        fab.configure(netplan.of(sp_switch, fab.network))  # one-armed: in and out through r:sw, 2 ms each way
        assert fab.switch is not None and _sysctl(fab, "r", "net.ipv4.ip_forward") == "0"
        assert "htb" not in netns.run(["tc", "qdisc", "show", "dev", "sw"], ns=fab.ns["r"])
        rtts, out = _rtts_ms(fab, "w1", dst)
        assert "ttl=63" in out and min(rtts) >= 2 * DELAY_MS, (rtts, out)

        fab.configure(netplan.of(sp_kernel, fab.network))
        assert fab.switch is None and _sysctl(fab, "r", "net.ipv4.ip_forward") == "1"
        assert "htb 1: root" in netns.run(["tc", "qdisc", "show", "dev", "sw"], ns=fab.ns["r"])
        rtts, out = _rtts_ms(fab, "w1", dst)
        assert "ttl=63" in out and statistics.median(rtts) < 2 * DELAY_MS, rtts
