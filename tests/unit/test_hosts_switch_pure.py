"""The hosts backend's userspace switch, its pure parts: the config built from the spec and the hosts'
data addresses and MACs, what is refused, the counters and samples read from its telemetry CSV,
the offloads recorded in a lease, what doctor says about a router host."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from shufflelab import netplan, topology
from shufflelab import spec as specmod
from shufflelab.hosts import findings, lease
from shufflelab.hosts.fabric import refusals
from shufflelab.hosts.probe import HostFacts
from shufflelab.hosts.switch import counters_from_tail, renamed_samples, router_switch_config
from shufflelab.switch.controller import TELEMETRY_HEADER

SPEC: dict[str, Any] = {
    "experiment": {"name": "t"},
    "topology": {
        "kind": "shared",
        "bottleneck": {
            "rate_mbps": 40,
            "queue_bytes": 100_000,
            "delay_ms": 5,
            "discipline": "red",
            "red": {"min_bytes": 20_000, "max_bytes": 30_000, "max_p": 0.5, "ecn": True},
        },
    },
    "telemetry": {"selftest": "off", "queue_period_ms": 50},
    "tcp": {"congestion_control": "dctcp"},
    "hosts": {
        "h1": {"roles": ["spark-master"]},
        "h2": {"roles": ["spark-worker"], "tcp": {"congestion_control": "cubic", "vcc": True}},
        "h3": {"roles": ["spark-worker"], "tcp": {"congestion_control": "cubic"}},
    },
    "workload": {"name": "sort-aggregate", "params": {"rows": 1000, "partitions": 4}},
}
DATA = {"h1": "10.214.5.10", "h2": "10.214.5.11", "h3": "10.214.5.12"}
MACS = {"h1": "02:00:00:00:00:01", "h2": "02:00:00:00:00:02", "h3": "02:00:00:00:00:03"}


def _network(spec: specmod.ExperimentSpec) -> topology.Network:
    net = topology.build(spec)
    return dataclasses.replace(net, host_addresses={h: DATA[h] for h in net.host_addresses})


def test_the_switch_config_is_the_spec_on_the_router_hosts_data_interface() -> None:
    spec = specmod.parse(SPEC)
    cfg = router_switch_config(netplan.of(spec, _network(spec)), MACS, "eth1", ncpu=8)
    (port,) = cfg.ports  # one-armed: in and out on the router host's data interface
    assert port.ifname == "eth1" and port.rate_mbps == 40 and port.delay_ms == 5 and port.queue_bytes == 100_000
    assert port.red is not None and (port.red.min_bytes, port.red.max_bytes, port.red.max_p) == (20_000, 30_000, 0.5)
    got = {(h.ip, h.mac, h.port, h.mode) for h in cfg.hosts}
    assert got == {
        ("10.214.5.10", "02:00:00:00:00:01", "eth1", "dctcp"),
        ("10.214.5.11", "02:00:00:00:00:02", "eth1", "vcc"),
        ("10.214.5.12", "02:00:00:00:00:03", "eth1", "off"),
    }
    assert cfg.cpu == 7 and cfg.telemetry_period_ms == 50  # the router host's last CPU, not the controller's
    assert router_switch_config(netplan.of(spec, _network(spec)), MACS, "eth1", ncpu=1).cpu is None
    doc = cfg.to_json(None)
    assert doc["ports"][0]["delay_us"] == 5000 and doc["ports"][0]["discipline"] == "red"


def test_the_switch_makes_its_own_cross_traffic_in_the_router_hosts_one_queue() -> None:
    hosts = {**SPEC["hosts"], "tgen": {"roles": ["traffic-source"]}, "tsink": {"roles": ["traffic-sink"]}}
    data = {**SPEC, "hosts": hosts, "cross_traffic": {"generator": "switch", "udp_percent": 50}}
    spec = specmod.parse(data)
    net = topology.build(spec)
    net = dataclasses.replace(net, host_addresses={h: f"10.214.5.{10 + i}" for i, h in enumerate(net.host_addresses)})
    macs = {h: f"02:00:00:00:00:{i:02x}" for i, h in enumerate(net.host_addresses)}
    cfg = router_switch_config(netplan.of(spec, net), macs, "eth1", ncpu=4)
    (source,) = cfg.cross  # offered to the sink's queue, which is the router host's one port
    assert source.port == "eth1" and source.rate_mbps == 20
    assert cfg.to_json(None)["cross_paused"] is True  # started with the run's cross traffic, not before


def test_a_dumbbells_switch_holds_a_queue_per_rack_on_the_router_hosts_one_interface() -> None:
    """The dumbbell's two router ports are two queues of the switch's one port, the router host's
    data interface, named as the spec's ports (``sw1`` towards rack 1, ``sw2`` towards rack 2): each
    host behind its rack's queue, the link on each, the samples named as the spec's ports already;
    spec hosts sharing a machine (one rack) are one entry."""
    hosts = {
        "h1": {"roles": ["spark-master"], "rack": 1},
        "h2": {"roles": ["spark-worker"], "rack": 1},
        "h3": {"roles": ["spark-worker"], "rack": 2, "tcp": {"congestion_control": "cubic", "vcc": True}},
    }
    spec = specmod.parse({**SPEC, "topology": {**SPEC["topology"], "kind": "dumbbell"}, "hosts": hosts})
    net = dataclasses.replace(topology.build(spec), host_addresses={**DATA, "h2": DATA["h1"]}, routing="peers")
    cfg = router_switch_config(netplan.of(spec, net), MACS, "eth1", ncpu=2)
    assert [(p.ifname, p.name, p.rate_mbps, p.delay_ms, p.queue_bytes) for p in cfg.ports] == [
        ("eth1", "sw1", 40, 5, 100_000),
        ("eth1", "sw2", 40, 5, 100_000),
    ]
    assert all(p.red is not None and p.red.min_bytes == 20_000 for p in cfg.ports)
    got = {(h.ip, h.port, h.mode) for h in cfg.hosts}
    assert got == {("10.214.5.10", "sw1", "dctcp"), ("10.214.5.12", "sw2", "vcc")}
    doc = cfg.to_json(None)
    assert [(p["ifname"], p["name"]) for p in doc["ports"]] == [("eth1", "sw1"), ("eth1", "sw2")]
    assert {h["port"] for h in doc["hosts"]} == {"sw1", "sw2"}


def test_the_switch_config_is_only_for_a_shared_bottleneck_or_a_dumbbell() -> None:
    data = {**SPEC, "topology": {**SPEC["topology"], "kind": "star"}}
    spec = specmod.parse(data)
    with pytest.raises(ValueError, match="topology.kind = 'star'"):
        router_switch_config(netplan.of(spec, _network(spec)), MACS, "eth1", ncpu=2)


def test_switch_specs_run_on_a_shared_bottleneck_with_a_router_host_only() -> None:
    shared = specmod.parse(SPEC)
    assert refusals(shared, router=True) == []
    assert any("router = 'NAME'" in p for p in refusals(shared, router=False))
    star = specmod.parse({**SPEC, "topology": {**SPEC["topology"], "kind": "star"}})
    (why,) = refusals(star, router=True)
    assert why.startswith("topology.bottleneck.delay_ms = 5, topology.bottleneck.discipline = 'red'"), why
    assert "with topology.kind = 'star'" in why and "'shared' with a router host" in why


def _csv(*rows: str) -> str:
    return TELEMETRY_HEADER + "\n" + "".join(r + "\n" for r in rows)


def test_counters_are_the_last_complete_row_of_the_telemetry() -> None:
    text = _csv("1.0,eth1,100,1,0,5000,4,0,6000,7000,2", "1.1,eth1,0,0,1,9000,8,0,9900,9800,5")
    c = counters_from_tail(text + "1.2,eth1,3", "eth1", whole=True)  # a row being written is ignored
    assert (c.tx_bytes, c.tx_packets, c.drops, c.backlog_bytes, c.marks) == (9000, 8, 1, 0, 5)
    cut = text[text.index("\n") + 5 :]  # a tail that starts mid-row
    assert counters_from_tail(cut, "eth1", whole=False).tx_bytes == 9000
    assert counters_from_tail(TELEMETRY_HEADER + "\n", "eth1", whole=True).marks == 0  # just started


def test_samples_are_named_as_the_spec_port() -> None:
    text = _csv("1.0,eth1,100,1,0,5000,4,0,6000,7000,2") + "1.1,eth1,0"
    assert renamed_samples(text, "eth1", "sw") == _csv("1.0,sw,100,1,0,5000,4,0,6000,7000,2")
    assert renamed_samples("", "eth1", "sw") == TELEMETRY_HEADER + "\n"


def test_offloads_recorded_and_restored_are_validated() -> None:
    shown = (
        "Features for eth1:\ntcp-segmentation-offload: on\n\ttx-tcp-segmentation: on\n"
        "generic-segmentation-offload: off\ngeneric-receive-offload: on [fixed]\nlarge-receive-offload: off [fixed]\n"
    )
    assert lease.offload_states(shown) == {"tso": "on", "gso": "off"}  # a fixed feature cannot change
    argv = lease.offload_args("eth1", {"tso": "on", "gso": "off"})
    assert argv == ["ethtool", "-K", "eth1", "tso", "on", "gso", "off"]
    with pytest.raises(ValueError, match="offload lro"):
        lease.offload_args("eth1", {"lro": "off"})
    with pytest.raises(ValueError, match="not an interface name"):
        lease.offload_args("eth1; reboot", {"tso": "off"})


def _facts(name: str, **kw: Any) -> HostFacts:
    f = HostFacts(name, "192.0.2.1", kernel="6.1", java="17", python="3.11.7", pyspark="4.3.0", iperf3="3.12")
    f.congestion_controls, f.qdiscs, f.tc, f.ethtool = ["reno", "cubic"], ["htb", "pfifo", "bfifo"], True, True
    f.switch_binary = "/repo/target/release/shufflelab-switch"
    for k, v in kw.items():
        setattr(f, k, v)
    return f


def test_doctor_wants_the_switch_on_the_router_host() -> None:
    spec = specmod.parse(SPEC)
    mapping = {"h1": "a", "h2": "b", "h3": "c"}
    facts = {n: _facts(n) for n in ("a", "b", "c")} | {"r": _facts("r", switch=True)}

    def doctor(router: str | None = "r") -> dict[tuple[str, str], findings.Finding]:
        found = findings.for_spec(spec, mapping, facts, router=router)
        found.append(findings.cells(found, ["base"], findings.used_hosts(spec, mapping, router)))
        return {(f.host, f.check): f for f in found}

    by = doctor()
    assert by[("*", "cells")].level == "ok", by  # dctcp over cubic, delay and RED in the switch
    assert by[("r", "switch")].level == "ok"
    facts["r"].switch = False
    by = doctor()
    assert by[("*", "cells")].level == "refuse"
    assert "missing on router host r" in by[("*", "cell base")].detail
    assert by[("r", "switch")].level == "refuse"
    assert by[("r", "switch")].detail.startswith("missing: /repo/target/release/shufflelab-switch (")
    by = doctor(None)
    assert "needs the userspace switch" in by[("*", "cell base")].detail
