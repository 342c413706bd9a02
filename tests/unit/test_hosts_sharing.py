"""Spec hosts sharing a machine over SSH (a Spark master with one worker), with fakes of the SSH
connections (never used by the product): the fabric configures each machine once, never routes a
host to an address on its own machine, and refuses, before anything is touched, what one machine
cannot be for two hosts."""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from shufflelab import netplan, topology
from shufflelab import spec as specmod
from shufflelab.hosts import lease
from shufflelab.hosts.control import Session, _Watch
from shufflelab.hosts.fabric import HostsFabric, HostsLeaseInfo, refusals
from shufflelab.hosts.inventory import InventoryHost
from shufflelab.hosts.lease import HostLease
from shufflelab.hosts.remote import Loop
from shufflelab.hosts.safety import SafetyError
from shufflelab.spec import SpecError
from shufflelab.switch.controller import STATUS_HEADER, TELEMETRY_HEADER, Switch

SPEC: dict[str, Any] = {
    "experiment": {"name": "t"},
    "topology": {"kind": "shared", "bottleneck": {"rate_mbps": 40, "queue_bytes": 100_000}},
    "telemetry": {"selftest": "off"},
    "tcp": {"initcwnd": 20},
    "hosts": {
        "master": {"roles": ["spark-master"]},
        "w1": {"roles": ["spark-worker"]},
        "w2": {"roles": ["spark-worker"]},
    },
    "workload": {"name": "sort-aggregate", "params": {"rows": 1000, "partitions": 4}},
}
PLACES = {"master": "node1", "w1": "node1", "w2": "node2"}
DATA = {"node1": "10.214.5.10", "node2": "10.214.5.11", "router": "10.214.5.19"}


class _Conn:
    """A host that answers every command (the lease file written, no route of its own, the kernel's
    default qdisc) and records them."""

    def __init__(self, ran: list[str], control: str = "ctl0") -> None:
        self.ran, self.control = ran, control

    def is_closed(self) -> bool:
        return False

    async def run(self, command: str, input: str | None = None, check: bool = False) -> Any:
        self.ran.append(command)
        words = shlex.split(command)
        out = ""
        if words[:2] == ["sysctl", "-n"]:
            out = "0\n"
        elif "SSH_CONNECTION" in command:  # the controller's connection arrives on ctl0, not eth1
            out = "192.0.2.100 50000 192.0.2.1 22"
        elif words[:4] == ["ip", "-j", "link", "show"]:
            out = json.dumps([{"address": "02:00:00:00:00:%02x" % (len(self.ran) % 256)}])
        elif words[:4] == ["ip", "-j", "route", "get"]:
            out = json.dumps([{"dev": self.control}])
        elif words[:2] == ["ip", "-j"]:
            out = "[]"
        elif words[:3] == ["ip", "route", "show"]:  # the default route went with data0, and stays away
            downed = any(c.startswith("ip link set dev eth1 down") for c in self.ran)
            out = "10.214.5.0/24 dev eth1 proto kernel\n" + ("" if downed else "default via 10.214.5.1 dev eth1\n")
        elif words[:3] == ["tc", "-j", "qdisc"]:
            out = '[{"kind": "noqueue", "handle": "0:", "root": true}]'
        return SimpleNamespace(stdout=out, stderr="", exit_status=0, exit_signal=None)


def _leases(machines: Iterable[str], control: str = "ctl0") -> tuple[dict[str, HostLease], dict[str, list[str]]]:
    """A lease of lease id abc123 on each of ``machines`` (over a _Conn whose commands are recorded
    per machine), and those records."""
    ran: dict[str, list[str]] = {m: [] for m in machines}
    leases = {
        m: HostLease(
            Session(
                m,
                InventoryHost(address=f"192.0.2.{i}", data_interface="eth1", agent=True),
                _Conn(ran[m], control),
                5.0,
                _Watch(),
            ),  # type: ignore[arg-type]
            "abc123",
            "/var/lib/shufflelab/leases",
        )  # fmt: skip
        for i, m in enumerate(ran, start=1)
    }
    return leases, ran


def _fabric(tmp_path: Path, loop: Loop, control: str = "ctl0") -> tuple[HostsFabric, dict[str, list[str]]]:
    spec = specmod.parse(SPEC)
    leases, ran = _leases(DATA, control)
    fabric = HostsFabric(
        loop, topology.build(spec), PLACES, leases, DATA, HostsLeaseInfo("abc123", tmp_path), {}, router="router"
    )
    return fabric, ran


def test_two_hosts_on_one_machine_are_configured_once_and_never_routed_to_themselves(tmp_path: Path) -> None:
    loop = Loop()
    try:
        fabric, ran = _fabric(tmp_path, loop)
        spec = specmod.parse(SPEC)
        fabric.configure(netplan.of(spec, fabric.network))
    finally:
        loop.close()
    routes = {m: [c for c in cmds if c.startswith("ip route replace")] for m, cmds in ran.items()}
    # node1 (master and w1) routes only node2's address through the router, once per host on it
    assert {r.split()[3] for r in routes["node1"]} == {"10.214.5.11/32"}
    assert all("via 10.214.5.19" in r and "initcwnd 20" in r for r in routes["node1"])
    assert {r.split()[3] for r in routes["node2"]} == {"10.214.5.10/32"}
    # node1's lease recorded one route and each sysctl once, though two spec hosts live there
    node1 = fabric.leases["node1"].changes
    assert [c["destination"] for c in node1 if c["kind"] == "route"] == ["10.214.5.11"]
    names = [c["name"] for c in node1 if c["kind"] == "sysctl"]
    assert len(names) == len(set(names)) > 0


def test_the_fabric_puts_on_each_machine_exactly_the_routes_of_the_plan(tmp_path: Path) -> None:
    """The routes come from the network plan (netplan.routes), not from the fabric: what each machine
    is told to route is the union of its spec hosts' planned routes."""
    loop = Loop()
    try:
        fabric, ran = _fabric(tmp_path, loop)
        plan = netplan.of(specmod.parse(SPEC), fabric.network)
        fabric.configure(plan)
    finally:
        loop.close()
    for machine in ("node1", "node2"):
        planned = {
            " ".join(["ip route replace", f"{r.destination}/32", "via", str(r.via), "dev eth1", *r.attributes])
            for h, m in PLACES.items()
            if m == machine
            for r in plan.hosts[h].routes
        }
        assert planned and {c for c in ran[machine] if c.startswith("ip route replace")} == planned
    assert not any(c.startswith("ip route replace") for c in ran["router"])


def test_what_one_machine_cannot_be_for_two_hosts_is_refused_naming_the_field() -> None:
    shared = specmod.parse(SPEC)
    assert refusals(shared, router=True, sharing=[["master", "w1"]]) == []
    star = specmod.parse({**SPEC, "topology": {**SPEC["topology"], "kind": "star"}})
    (why,) = refusals(star, sharing=[["master", "w1"]])
    assert why.startswith("topology.kind = 'star' with master and w1 on one machine: each host has a link of its own")
    hosts = {**SPEC["hosts"], "w1": {"roles": ["spark-worker"], "tcp": {"congestion_control": "reno"}}}
    (why,) = refusals(specmod.parse({**SPEC, "hosts": hosts}), router=True, sharing=[["master", "w1"]])
    assert why.startswith("tcp: master and w1 share one machine but not their TCP settings")
    # the traffic hosts on a machine of the job's: only while the switch makes the UDP (they run nothing)
    hosts = {**SPEC["hosts"], "tgen": {"roles": ["traffic-source"]}, "tsink": {"roles": ["traffic-sink"]}}
    link = {"rate_mbps": 40, "queue_bytes": 100_000, "delay_ms": 2}
    data = {**SPEC, "hosts": hosts, "topology": {"kind": "shared", "bottleneck": link}}
    group = [["master", "w1", "tgen", "tsink"]]
    iperf3 = specmod.parse({**data, "cross_traffic": {"udp_percent": 50}})
    (why,) = refusals(iperf3, router=True, sharing=group)
    assert why.startswith("cross_traffic.generator = 'iperf3' with tgen, tsink sharing a machine"), why
    switch = specmod.parse({**data, "cross_traffic": {"generator": "switch", "udp_percent": 50}})
    assert refusals(switch, router=True, sharing=group) == []


def test_the_fabric_refuses_a_scenario_it_cannot_run_before_touching_a_machine(tmp_path: Path) -> None:
    loop = Loop()
    try:
        fabric, ran = _fabric(tmp_path, loop)
        hosts = {**SPEC["hosts"], "w1": {"roles": ["spark-worker"], "tcp": {"congestion_control": "reno"}}}
        spec = specmod.parse({**SPEC, "hosts": hosts})
        with pytest.raises(SpecError, match="tcp: master and w1 share one machine"):
            fabric.configure(netplan.of(spec, dataclasses.replace(fabric.network)))
    finally:
        loop.close()
    assert ran == {m: [] for m in DATA}


def test_a_link_down_fault_on_the_interface_carrying_ssh_is_refused_before_any_change(tmp_path: Path) -> None:
    """A link-down fault takes the host's data interface down: not the one the controller reaches the
    machine through (then nothing is changed on any machine)."""
    fault = [{"kind": "link-down", "at_s": 1, "host": "w2", "duration_s": 2}]
    spec = specmod.parse({**SPEC, "faults": fault})
    loop = Loop()
    try:
        fabric, ran = _fabric(tmp_path, loop, control="eth1")
        with pytest.raises(SafetyError, match=r"node2 \(192.0.2.2\): faults: link-down of w2 would take down eth1"):
            fabric.configure(netplan.of(spec, fabric.network))
        assert not any(c.startswith(("sysctl -w", "ip route replace", "tc ")) for cmds in ran.values() for c in cmds)
        ok, ran_ok = _fabric(tmp_path, loop)  # the data interface is not the control one: it goes on
        ok.configure(netplan.of(spec, ok.network))
        assert any(c.startswith("ip route replace") for c in ran_ok["node2"])
    finally:
        loop.close()


def test_a_link_down_is_in_the_lease_so_a_crash_mid_fault_leaves_it_to_clean(tmp_path: Path) -> None:
    """The data interface goes down only once its lease records it with the routes it takes along;
    restoring the lease (the run's end, or ``clean --hosts`` after the controller died mid-fault)
    brings it up and puts the routes back."""
    loop = Loop()
    try:
        fabric, ran = _fabric(tmp_path, loop)
        fabric.set_link("w2", up=False)
        (change,) = [c for c in fabric.leases["node2"].changes if c["kind"] == "link"]
        assert change == {"kind": "link", "interface": "eth1", "routes": [
            "10.214.5.0/24 dev eth1 proto kernel", "default via 10.214.5.1 dev eth1"]}  # fmt: skip
        wrote = [i for i, c in enumerate(ran["node2"]) if "lease" in c and c.startswith("sh -c")]
        assert wrote and wrote[-1] < ran["node2"].index("ip link set dev eth1 down")  # recorded first
        hl = fabric.leases["node2"]
        problems = loop.call(lease.restore_changes(hl.session, hl.lease_id, hl.changes, hl.path))
    finally:
        loop.close()
    assert problems == []
    after = ran["node2"][ran["node2"].index("ip link set dev eth1 down") + 1 :]
    assert after[0] == "ip link set dev eth1 up"
    assert "ip route replace default via 10.214.5.1 dev eth1" in after


def test_the_router_hosts_switch_is_the_one_switch_control_through_the_backends_seams(tmp_path: Path) -> None:
    """The switch datapath with the switch's own UDP on the router host: configure starts
    switch.controller.Switch there through the backend's launcher as root, every command of it at
    the router host; the run's cross traffic signals it there; its samples come back named as the
    spec's port, with its status (the in-switch source's counters)."""
    hosts = {**SPEC["hosts"], "tgen": {"roles": ["traffic-source"]}, "tsink": {"roles": ["traffic-sink"]}}
    link = {"rate_mbps": 40, "queue_bytes": 100_000, "delay_ms": 2}
    data = {**SPEC, "hosts": hosts, "topology": {"kind": "shared", "bottleneck": link}}
    spec = specmod.parse({**data, "cross_traffic": {"generator": "switch", "udp_percent": 50}})
    places = {**PLACES, "tgen": "node3", "tsink": "node4"}
    machines = {**DATA, "node3": "10.214.5.12", "node4": "10.214.5.13"}
    leases, ran = _leases(machines)
    seams: list[tuple[str | None, list[str]]] = []
    launched: list[tuple[str, list[str], bool]] = []
    csv = TELEMETRY_HEADER + "\n1.0,eth1,100,1,0,5000,4,0,6000,7000,2\n"

    def run(argv: Sequence[str], *, place: str | None = None, check: bool = True, timeout: float = 60) -> str:
        seams.append((place, list(argv)))
        if argv[0] == "tail" and argv[2].startswith("+"):
            return "ready\n"  # this start's log
        if argv[0] == "cat" and argv[1].endswith("-queues.csv"):
            return csv
        if argv[0] == "cat" and argv[1].endswith("-status.csv"):
            return STATUS_HEADER + "\n"
        return "0\n" if argv[0] == "sh" else ""

    def launch(place: str, argv: Sequence[str], log: Path, /, env: Any = None, *, privileged: bool = False) -> Any:
        launched.append((place, list(argv), privileged))
        return SimpleNamespace(pid=4321, poll=lambda: None, stop=lambda *a, **k: 0)

    loop = Loop()
    try:
        fabric = HostsFabric(
            loop, topology.build(spec), places, leases, machines, HostsLeaseInfo("abc123", tmp_path),
            {"router": "/var/tmp/shufflelab-hosts/abc123"}, router="router", seams=(run, launch), switches=Switch,
        )  # fmt: skip
        fabric.configure(netplan.of(spec, fabric.network), restart_switch=True)
        fabric.start_cross_traffic()
        fabric.save_telemetry(tmp_path)
    finally:
        loop.close()
    ((place, argv, privileged),) = launched
    assert place == "router" and privileged and argv[0] == "env"
    assert argv[1] == "SHUFFLELAB_SWITCH_LOG=/var/tmp/shufflelab-hosts/abc123/switch.log"
    assert argv[-1] == "/var/tmp/shufflelab-hosts/abc123/switch.json"
    assert {p for p, _ in seams} == {"router"}
    written = next(a for _, a in seams if a[0] == "sh")
    config = json.loads(written[4])
    assert [p["ifname"] for p in config["ports"]] == ["eth1"] and config["cross"][0]["port"] == "eth1"
    ips = [h["ip"] for h in config["hosts"]]  # master and w1 share node1: one entry for its address
    assert sorted(ips) == ["10.214.5.10", "10.214.5.11", "10.214.5.12", "10.214.5.13"]
    assert ["sh", "-c", 'kill -s "$0" -- "-$1"', "USR2", "4321"] in [a for _, a in seams]
    assert (tmp_path / "queue_samples.csv").read_text().splitlines()[1].split(",")[1] == "sw"
    assert (tmp_path / "switch_status.csv").read_text() == STATUS_HEADER + "\n"
