"""A dumbbell over SSH, with fakes of the SSH connections (test_hosts_sharing.py's): the fabric puts
the network plan's two classes (one per rack, on the router host's one data interface), their
destination filters and the cross-rack routes, and nothing else; counts, samples and self-tests each
rack's queue; and refuses, before anything is touched, what the router host's line rate or a machine
shared across racks cannot hold."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_hosts_sharing import _leases

from shufflelab import netplan, topology
from shufflelab import spec as specmod
from shufflelab.hosts.fabric import HostsFabric, HostsLeaseInfo, refusals
from shufflelab.hosts.remote import Loop
from shufflelab.spec import SpecError

SPEC: dict[str, Any] = {
    "experiment": {"name": "t"},
    "topology": {"kind": "dumbbell", "bottleneck": {"rate_mbps": 40, "queue_bytes": 100_000}},
    "telemetry": {"selftest": "off"},
    "hosts": {
        "master": {"roles": ["spark-master"], "rack": 1},
        "w1": {"roles": ["spark-worker"], "rack": 1},
        "w2": {"roles": ["spark-worker"], "rack": 2},
        "w3": {"roles": ["spark-worker"], "rack": 2},
    },
    "workload": {"name": "sort-aggregate", "params": {"rows": 1000, "partitions": 4}},
}
PLACES = {"master": "node1", "w1": "node1", "w2": "node2", "w3": "node3"}
DATA = {"node1": "10.214.5.10", "node2": "10.214.5.11", "node3": "10.214.5.12", "router": "10.214.5.19"}


def _fabric(
    tmp_path: Path, loop: Loop, router_line: tuple[str, float | None] | None = None, places: dict[str, str] = PLACES
) -> tuple[HostsFabric, dict[str, list[str]], specmod.ExperimentSpec]:
    spec = specmod.parse(SPEC)
    leases, ran = _leases(DATA)
    fabric = HostsFabric(
        loop, topology.build(spec), places, leases, DATA, HostsLeaseInfo("abc123", tmp_path),
        {m: "/var/tmp/shufflelab-hosts/abc123" for m in DATA},
        router="router", router_line=router_line,
    )  # fmt: skip
    return fabric, ran, spec


def test_the_fabric_puts_the_plans_classes_filters_and_cross_rack_routes(tmp_path: Path) -> None:
    loop = Loop()
    try:
        fabric, ran, spec = _fabric(tmp_path, loop)
        plan = netplan.of(spec, fabric.network)
        fabric.configure(plan)
    finally:
        loop.close()
    # the router host: forwarding, and exactly the plan's egress on its data interface
    want = [" ".join(c) for c in netplan.egress_commands(None, "eth1", plan.egress[topology.ROUTER])]
    tc = [c for c in ran["router"] if c.startswith("tc ") and " show " not in c]
    assert tc == want
    assert any("classid 1:11" in c for c in tc) and any("classid 1:12" in c for c in tc)
    filters = [c for c in tc if " filter " in c]
    assert [(c.split()[c.split().index("dst") + 1], c.split()[-1]) for c in filters] == [
        ("10.214.5.10/32", "1:11"),  # rack 1 (node1: master and w1)
        ("10.214.5.11/32", "1:12"),  # rack 2
        ("10.214.5.12/32", "1:12"),
    ]
    assert any(c.startswith("sysctl -w net.ipv4.ip_forward=1") for c in ran["router"])
    # each machine routes only the other rack's machines, through the router host; no qdisc on them
    # (once per spec host on the machine: master and w1 both on node1)
    routes = {m: sorted({c.split()[3] for c in cmds if c.startswith("ip route replace")}) for m, cmds in ran.items()}
    assert routes == {
        "node1": ["10.214.5.11/32", "10.214.5.12/32"],
        "node2": ["10.214.5.10/32"],
        "node3": ["10.214.5.10/32"],
        "router": [],
    }
    assert all("via 10.214.5.19" in c for cmds in ran.values() for c in cmds if c.startswith("ip route replace"))
    assert not any(c.startswith("tc qdisc replace") for m in ("node1", "node2", "node3") for c in ran[m])


def test_each_racks_queue_is_counted_sampled_and_self_tested_on_its_own(tmp_path: Path) -> None:
    loop = Loop()
    launched: list[tuple[str, list[str]]] = []

    def launch(place: str, argv: Sequence[str], log: Path, /, env: Any = None, *, privileged: bool = False) -> Any:
        launched.append((place, list(argv)))
        return SimpleNamespace(pid=1, poll=lambda: None, stop=lambda *a, **k: 0)

    try:
        fabric, ran, spec = _fabric(tmp_path, loop)
        fabric.configure(netplan.of(spec, fabric.network))
        sw1, sw2 = fabric.network.bottlenecks
        before = len(ran["router"])
        fabric.counters(sw2)
        # the leaf of the queue towards rack 2 (all qdiscs listed; the one with handle 12: read)
        assert ran["router"][before:] == ["tc -s -j qdisc show dev eth1"]
        fabric.start_queue_sampler(spec, tmp_path / "queue_samples.csv", launch)  # type: ignore[arg-type]
        # self-test pairs: from the other rack to a host behind each queue
        assert fabric._endpoints(fabric.network, sw1) == ("w2", "master")
        assert fabric._endpoints(fabric.network, sw2) == ("master", "w2")
    finally:
        loop.close()
    ((place, argv),) = launched
    devs = [argv[i + 1] for i, a in enumerate(argv) if a == "--dev"]
    assert place == "router" and devs == ["eth1/11:", "eth1/12:"]


def test_on_the_switch_each_racks_queue_is_counted_and_sampled_by_its_name(tmp_path: Path) -> None:
    """The switch on the router host holds the dumbbell's two queues as two ports named ``sw1`` and
    ``sw2`` on its one interface: a queue's counters are its port's last telemetry row, and the
    samples keep those names (the shared topology's one port is renamed to the spec's port)."""
    from shufflelab.hosts.switch import router_switch_config

    red = {**SPEC, "topology": {"kind": "dumbbell", "bottleneck": {"rate_mbps": 40, "delay_ms": 2}}}
    spec = specmod.parse(red)
    loop = Loop()
    try:
        fabric, _, _ = _fabric(tmp_path, loop)
        plan = netplan.of(spec, fabric.network)
        cfg = router_switch_config(plan, dict.fromkeys(PLACES, "02:00:00:00:00:01"), "eth1", ncpu=2)
        rows = {
            "sw1": {"sent_bytes": 100.0, "sent_packets": 1.0, "drops": 0.0, "backlog_bytes": 0.0,
                    "backlog_packets": 0.0, "marks": 0.0},
            "sw2": {"sent_bytes": 9000.0, "sent_packets": 6.0, "drops": 2.0, "backlog_bytes": 1514.0,
                    "backlog_packets": 1.0, "marks": 3.0},
        }  # fmt: skip
        saved: list[dict[str, str] | None] = []
        switch = SimpleNamespace(
            config=cfg, process=object(), last_telemetry=lambda: rows,
            save_telemetry=lambda dest, rename=None: saved.append(rename),
            save_status=lambda dest: None, save_config_and_log=lambda run_dir: None,
        )  # fmt: skip
        fabric._switch = switch  # type: ignore[assignment]
        fabric._router_queues = {q.port: q.minor for q in plan.egress[topology.ROUTER].queues}
        sw1, sw2 = fabric.network.bottlenecks
        c1, c2 = fabric.counters(sw1), fabric.counters(sw2)
        fabric.save_telemetry(tmp_path)
    finally:
        loop.close()
    assert (c1.tx_bytes, c2.tx_bytes, c2.drops, c2.backlog_bytes, c2.marks) == (100, 9000, 2, 1514, 3)
    assert saved == [{}]  # already the spec's names


def test_counters_of_one_queue_are_its_leafs() -> None:
    from shufflelab.hosts.fabric import _counters

    text = (
        '[{"kind": "htb", "handle": "1:", "bytes": 900, "packets": 9, "drops": 3, "backlog": 0, "qlen": 0},'
        ' {"kind": "bfifo", "handle": "11:", "bytes": 100, "packets": 1, "drops": 1, "backlog": 0, "qlen": 0},'
        ' {"kind": "bfifo", "handle": "12:", "bytes": 800, "packets": 8, "drops": 2, "backlog": 1514, "qlen": 1}]'
    )
    c = _counters(text, "12:")
    assert (c.tx_bytes, c.tx_packets, c.drops, c.backlog_bytes, c.backlog_packets) == (800, 8, 2, 1514, 1)
    assert _counters(text).tx_bytes == 900  # the root: every queue together


def test_twice_the_rate_beyond_the_router_hosts_line_rate_is_refused_before_anything_is_touched(
    tmp_path: Path,
) -> None:
    loop = Loop()
    try:
        fabric, ran, spec = _fabric(tmp_path, loop, router_line=("eth1", 60.0))  # 2 x 40 > 60
        with pytest.raises(SpecError, match=r"topology\.bottleneck\.rate_mbps = 40: .*2 x 40 = 80 Mbit/s"):
            fabric.configure(netplan.of(spec, fabric.network))
        assert ran == {m: [] for m in DATA}
        ok, ran_ok, _ = _fabric(tmp_path, loop, router_line=("eth1", 80.0))  # fits
        ok.configure(netplan.of(spec, ok.network))
        assert any(c.startswith("tc ") for c in ran_ok["router"])
    finally:
        loop.close()


def test_a_machine_holding_hosts_of_both_racks_is_refused_naming_the_racks(tmp_path: Path) -> None:
    spec = specmod.parse(SPEC)
    assert refusals(spec, router=True, sharing=[["master", "w1"]]) == []
    (why,) = refusals(spec, router=True, sharing=[["master", "w2"]])
    assert why.startswith("hosts.master.rack = 1 and hosts.w2.rack = 2 on one machine"), why
    # the switch's features on a dumbbell run (a queue per rack on the router host's switch); its racks
    # on one machine are refused as the kernel's
    red = {**SPEC, "topology": {"kind": "dumbbell", "bottleneck": {"rate_mbps": 40, "delay_ms": 2}}}
    assert refusals(specmod.parse(red), router=True) == []
    (why,) = refusals(specmod.parse(red), router=True, sharing=[["master", "w2"]])
    assert why.startswith("hosts.master.rack = 1 and hosts.w2.rack = 2 on one machine"), why


def test_the_sampler_reads_one_queue_of_several_by_its_handle() -> None:
    from shufflelab.emulate.sampler import _root_stats, parse_dev

    assert parse_dev("eth1") == ("eth1", None)
    assert parse_dev("eth1/11:") == ("eth1", 0x11 << 16)  # tc's handles are hexadecimal

    class Msg(dict[str, int]):
        def __init__(self, parent: int, handle: int, sent: int) -> None:
            super().__init__(parent=parent, handle=handle)
            self.sent = sent

        def get_attr(self, name: str) -> dict[str, int]:
            return {"bytes": self.sent}

    msgs = [Msg(0xFFFFFFFF, 0x10000, 900), Msg(0x10011, 0x110000, 100), Msg(0x10012, 0x120000, 800)]
    assert _root_stats(msgs) == {"bytes": 900}
    assert _root_stats(msgs, parse_dev("eth1/12:")[1]) == {"bytes": 800}
