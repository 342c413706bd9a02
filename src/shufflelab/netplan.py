"""The network's desired state, pure: one :class:`NetPlan` per scenario, built once from its spec and
the fabric's network (:func:`of`) -- the link on each shaped port, each host's TCP sysctls, routes
(with their attributes) and switch mode, the userspace switch's configuration, the cross-traffic
endpoints and rates -- with the ``tc`` commands of a link and the idempotent change from what ``tc`` shows now.
The local fabric (:mod:`shufflelab.emulate.fabric`, network namespaces) and the SSH fabric
(:mod:`shufflelab.hosts.fabric`) apply a plan; the link self-test, telemetry, the run's validity
and its record read the same plan, so a run is checked against the link it was given (a fabric
serves the scenarios of every rate that share its structure). Nothing here touches a system.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from shufflelab import shaping
from shufflelab.spec import ExperimentSpec, Link, Tcp
from shufflelab.switch.config import SPIN_US, CrossSource, Mode, SwitchConfig, SwitchHost, SwitchPort, switch_cpu
from shufflelab.switch.config import Red as SwitchRed
from shufflelab.topology import ROUTER, Datapath, Network, Port, build


@dataclass(frozen=True)
class PortCounters:
    """Cumulative egress counters of a shaped port: what left its queue, drops, current backlog,
    and (switch only; ``None`` on the kernel path) ECN marks."""

    tx_bytes: int
    tx_packets: int
    drops: int
    backlog_bytes: int
    backlog_packets: int
    marks: int | None = None

    @classmethod
    def from_switch_row(cls, row: Mapping[str, float | str] | None) -> PortCounters:
        """A port's counters from the switch's telemetry row (None: just started, nothing sampled)."""
        if row is None:
            return cls(0, 0, 0, 0, 0, marks=0)
        return cls(
            tx_bytes=int(row["sent_bytes"]),
            tx_packets=int(row["sent_packets"]),
            drops=int(row["drops"]),
            backlog_bytes=int(row["backlog_bytes"]),
            backlog_packets=int(row["backlog_packets"]),
            marks=int(row["marks"]),
        )


@dataclass(frozen=True)
class Queue:
    """One shaped queue of an interface's egress: HTB class ``1:<minor>`` at its link's rate with a
    FIFO leaf ``<minor>:`` holding the link's queue limit, standing for the bottleneck port ``port``
    (the spec's name, what telemetry calls it), and the destination addresses whose packets ``tc``
    filters into it (empty: none; it is the HTB root's default class and takes every packet)."""

    port: str
    minor: int
    link: Link
    destinations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Egress:
    """An interface's shaped egress: an HTB root (handle ``1:``) with its :class:`Queue` classes;
    a packet no filter classifies goes to class ``1:<default>`` -- a queue's, or (no queue has that
    minor) none: HTB sends it unshaped."""

    queues: tuple[Queue, ...]
    default: int = 10

    @classmethod
    def single(cls, port: str, link: Link) -> Egress:
        """One queue every packet leaving the interface goes through (class ``1:10``)."""
        return cls((Queue(port, 10, link),), 10)


def egress_commands(ns: str | None, dev: str, egress: Egress) -> list[list[str]]:
    """The ``tc`` invocations that shape ``dev``'s egress as ``egress`` (in namespace ``ns``; None:
    where the commands run): the HTB root, each queue's class and FIFO leaf, then each destination
    filter (``u32`` on the destination address; its handle ``800::<n>`` makes ``replace`` idempotent).

    The numbers come from :mod:`shufflelab.shaping`, whose limits spec validation checks."""
    tc = ["tc", "-n", ns] if ns else ["tc"]
    out = [[*tc, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", str(egress.default)]]
    for q in egress.queues:
        link = q.link
        rate_bit = shaping.rate_bits(link.rate_mbps)
        burst = shaping.htb_burst_bytes(link.rate_mbps)
        quantum = shaping.htb_quantum_bytes(link.rate_mbps)
        if link.queue_packets is not None:
            leaf = ["pfifo", "limit", str(link.queue_packets)]
        else:
            leaf = ["bfifo", "limit", str(link.effective_queue_bytes())]
        out += [
            [
                *tc, "class", "replace", "dev", dev, "parent", "1:", "classid", f"1:{q.minor}", "htb",
                "rate", f"{rate_bit}bit", "ceil", f"{rate_bit}bit",
                "burst", str(burst), "cburst", str(burst), "quantum", str(quantum),
            ],
            [*tc, "qdisc", "replace", "dev", dev, "parent", f"1:{q.minor}", "handle", f"{q.minor}:", *leaf],
        ]  # fmt: skip
    n = 0
    for q in egress.queues:
        for address in q.destinations:
            n += 1
            out.append(
                [
                    *tc, "filter", "replace", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
                    "handle", f"800::{n:x}", "u32", "match", "ip", "dst", f"{address}/32", "flowid", f"1:{q.minor}",
                ]
            )  # fmt: skip
    return out


def egress_changes(shown: str, dev: str, egress: Egress) -> tuple[list[str] | None, list[list[str]]]:
    """What takes ``dev``'s egress from its current state (``shown``: the output of ``tc qdisc show
    dev DEV``) to ``egress``, idempotently: the HTB root qdisc to create (``tc``'s arguments; None:
    it is there) and the ``tc`` arguments that then change its classes, leaves and filters live,
    in order.

    An HTB root cannot be "changed": it is created once, then its classes and leaves change live; a
    leaf of another kind (bfifo <-> pfifo) is deleted before it is replaced; filters are replaced by
    their handles."""
    root, *rest = (argv[1:] for argv in egress_commands(None, dev, egress))
    changes = []
    for argv in rest:
        if argv[0] == "qdisc":  # a queue's leaf
            parent, handle = argv[argv.index("parent") + 1], argv[argv.index("handle") + 1]
            kind = argv[argv.index("handle") + 2]
            for other in ("bfifo", "pfifo"):
                if other != kind and f" {other} {handle} " in shown:
                    changes.append(["qdisc", "del", "dev", dev, "parent", parent, "handle", handle])
        changes.append(argv)
    return (root if "htb 1: root" not in shown else None), changes


def shaping_commands(ns: str | None, dev: str, link: Link) -> list[list[str]]:
    """The ``tc`` invocations that shape ``dev``'s egress: HTB rate with a FIFO child as the queue
    (in namespace ``ns``; None: where the commands run) -- :func:`egress_commands` of one queue."""
    return egress_commands(ns, dev, Egress.single(dev, link))


def shaping_changes(shown: str, dev: str, link: Link) -> tuple[list[str] | None, list[list[str]]]:
    """:func:`egress_changes` to one queue every packet leaving ``dev`` goes through, at ``link``."""
    return egress_changes(shown, dev, Egress.single(dev, link))


def has_root_qdisc(tc_show: str) -> bool:
    """Does ``tc qdisc show dev X`` output show a root qdisc other than the default ``noqueue``?"""
    return any(
        line.startswith("qdisc ") and " root " in f"{line} " and not line.startswith("qdisc noqueue")
        for line in tc_show.splitlines()
    )


def tcp_sysctls(tcp: Tcp) -> dict[str, str]:
    """Namespace sysctls for ``tcp`` (new sockets pick them up, so set before starting JVMs).

    ``dctcp`` is DCTCP enforced by the userspace switch: the host runs cubic with ``tcp_ecn = 1``;
    a ``vcc`` host is a legacy stack with ``tcp_ecn = 0``."""
    return {
        "net.ipv4.tcp_congestion_control": tcp.kernel_congestion_control(),
        "net.ipv4.tcp_ecn": str(tcp.kernel_ecn()),
        "net.ipv4.tcp_slow_start_after_idle": "1" if tcp.slow_start_after_idle else "0",
    }


def routes(network: Network, host: str, attributes: tuple[str, ...]) -> tuple[Route, ...]:
    """The routes ``host`` holds on ``network`` (see ``Network.routing``), each with ``attributes``.

    Emulated, its default route via its gateway. On machines, a /32 route to each other machine's
    data address (one per address: spec hosts sharing a machine share it; none to the host's own)
    via the router host holding a shared bottleneck -- every host-to-host packet crosses its queue;
    on a dumbbell (:func:`through_router`) only each machine of the other rack's, a rack's machines
    reaching each other as they are -- or, with per-host links or within a rack and with route
    attributes, via the path the machine has; with neither, none: the machines' own routing is left
    as it is."""
    if network.routing == "default":
        return (Route("default", network.gateways[host], attributes),)
    own = network.host_addresses[host]
    via = network.gateways.get(host)
    out: dict[str, Route] = {}
    for peer, address in network.host_addresses.items():
        if address == own or address in out:
            continue
        gateway = via if via is not None and through_router(network, host, peer) else None
        if gateway is not None or attributes:
            out[address] = Route(address, gateway, attributes)
    return tuple(out.values())


def router_held(network: Network) -> list[Port]:
    """The bottleneck ports a router holds (not a host's own link): the shared topology's one,
    a dumbbell's two (towards each rack)."""
    return [p for p in network.bottlenecks if p.ifname not in network.host_addresses]


def through_router(network: Network, src: str, dst: str) -> bool:
    """Does a packet from host ``src`` to host ``dst`` cross a queue the router holds? A shared
    bottleneck carries every host-to-host packet; of several (a dumbbell's racks) a packet crosses
    the one behind which ``dst`` sits only from another rack: within a rack, hosts reach each other
    on their own switch. (The emulation routes a rack's own traffic through the router as well,
    see :func:`shufflelab.topology.build`; on machines it stays off the router host.)"""
    held = router_held(network)
    if not held:
        return False
    if len(held) == 1:
        return True
    return network.router_port_of(src) != network.router_port_of(dst)


def route_attributes(tcp: Any) -> list[str]:
    """The route attributes of a host's TCP settings (``initcwnd``/``initrwnd``), on each of its
    :func:`routes`."""
    out = []
    for field in ("initcwnd", "initrwnd"):
        value = getattr(tcp, field)
        if value:
            out += [field, str(value)]
    return out


@dataclass(frozen=True)
class Route:
    """A route a host holds: to ``destination`` (``"default"``, or one address: its /32) via ``via``
    (None: the gateway the machine reaches ``destination`` through as it is, found where the route
    is put; none there: on-link), with the host's route ``attributes`` (``initcwnd``/``initrwnd``)."""

    destination: str
    via: str | None
    attributes: tuple[str, ...]


@dataclass(frozen=True)
class HostNet:
    """One host's part of the plan: its address, its TCP sysctls (new sockets pick them up), the
    attributes of its routes (``initcwnd``/``initrwnd``) and the routes that carry them (every route
    a fabric puts on the host), the kernel congestion control it needs allowed, and what the
    userspace switch does with its TCP."""

    address: str
    sysctls: Mapping[str, str]
    route_attributes: tuple[str, ...]
    kernel_cc: str
    switch_mode: Mode
    routes: tuple[Route, ...] = ()


@dataclass(frozen=True)
class CrossPlan:
    """The scenario's cross traffic: from ``src`` to ``dst`` (at ``dst_address``), UDP at
    ``udp_percent`` of the link (iperf3's payload rate ``udp_payload_bps``; the in-switch source is
    the switch configuration's) and ``tcp_pairs`` bulk TCP flows."""

    generator: Literal["iperf3", "switch"]
    src: str
    dst: str
    dst_address: str
    udp_percent: float
    udp_payload_bps: int
    tcp_pairs: int


@dataclass(frozen=True)
class NetPlan:
    """What a fabric must hold for one scenario (``spec``) on ``network``; see the module."""

    spec: ExperimentSpec
    network: Network
    datapath: Datapath
    link: Link  # the bottleneck link, on every shaped port
    links: Mapping[str, Link]  # shaped port name -> its link
    hosts: Mapping[str, HostNet]
    cross: CrossPlan | None  # None: no cross traffic
    switch: SwitchConfig  # the userspace switch's configuration, MACs left blank (see switch_config)
    # where each shaped egress is -> its queues (:func:`egresses`): emulated, a router port's name;
    # on machines, the spec host whose data interface it is, or ROUTER: the router host's
    egress: Mapping[str, Egress] = dataclasses.field(default_factory=dict)

    @property
    def link_key(self) -> str:
        """What identifies the links' configuration (the self-test measures each once per fabric)."""
        return json.dumps([self.datapath, self.link.model_dump(mode="json")], sort_keys=True)

    def switch_config(self, macs: Mapping[str, str], ncpu: int | None = None) -> SwitchConfig:
        """The switch's configuration with the hosts' MAC addresses (``macs``: host -> MAC), pinned to
        the last CPU of the machine it runs on (``ncpu``: that machine's CPU count; None: this one's)."""
        by_ip = {h.address: macs[name] for name, h in self.hosts.items()}
        hosts = [dataclasses.replace(h, mac=by_ip[h.ip]) for h in self.switch.hosts]
        cpu = self.switch.cpu if ncpu is None else switch_cpu(ncpu)
        return dataclasses.replace(
            self.switch, hosts=hosts, ports=list(self.switch.ports), cross=list(self.switch.cross), cpu=cpu
        )


def bottleneck(spec: ExperimentSpec) -> Link:
    """The link ``spec`` asks for on every shaped port. Outside the spec's own validation this is
    the one reader of ``topology.bottleneck``: what runs on a fabric reads its run's plan (:func:`of`,
    built from this), what checks a spec before any fabric exists (capabilities, the hosts' doctor,
    reports of stored scenarios) reads this."""
    return spec.topology.bottleneck


def of(spec: ExperimentSpec, network: Network) -> NetPlan:
    """The plan of scenario ``spec`` on ``network`` (the fabric's network: over SSH its host
    addresses are the machines' data addresses)."""
    link = bottleneck(spec)
    hosts = {}
    for h, address in network.host_addresses.items():
        tcp = spec.tcp_for(h)
        sysctls, attrs = tcp_sysctls(tcp), tuple(route_attributes(tcp))
        hosts[h] = HostNet(
            address, sysctls, attrs, tcp.kernel_congestion_control(), tcp.switch_mode(), routes(network, h, attrs)
        )
    ct = spec.cross_traffic
    cross = None
    if ct.active:
        src, dst = spec.traffic_endpoints()
        assert src is not None and dst is not None  # the spec's validation requires them
        cross = CrossPlan(
            ct.generator, src, dst, network.host_addresses[dst], ct.udp_percent,
            shaping.udp_payload_rate_bps(link.rate_mbps, ct.udp_percent), ct.tcp_pairs,
        )  # fmt: skip
    links = {p.ifname: link for p in network.bottlenecks}
    return NetPlan(
        spec, network, spec.datapath(), link, links, hosts, cross, _switch(network, spec, link, hosts),
        egresses(network, links),
    )  # fmt: skip


def egresses(network: Network, links: Mapping[str, Link]) -> dict[str, Egress]:
    """Where ``network``'s shaped queues are (``links``: bottleneck port -> its link), each egress
    with its queues. Emulated, each bottleneck port is an interface of the router's with one queue.
    On machines (``routing = "peers"``), a per-host link is the egress of that host's data interface
    (keyed by the host); what the router holds is on the router host's one data interface (keyed
    ``ROUTER``): the shared bottleneck, a queue every packet leaving it goes through; a dumbbell's
    two directions, a queue per rack (classes ``1:11``, ``1:12``, in the order of the network's
    bottleneck ports) taking the packets to that rack's machines' addresses, and no default queue:
    the router host's own packets (ARP, its own connections) leave unshaped, and no host routes its
    own rack's traffic through it (:func:`routes`)."""
    out: dict[str, Egress] = {}
    held = router_held(network) if network.routing == "peers" else []
    for p in network.bottlenecks:
        if p not in held:
            out[p.ifname] = Egress.single(p.ifname, links[p.ifname])
    if len(held) == 1:
        out[ROUTER] = Egress.single(held[0].ifname, links[held[0].ifname])
    elif held:
        queues = []
        for k, p in enumerate(held, start=1):
            behind = dict.fromkeys(a for h, a in network.host_addresses.items() if network.router_port_of(h) == p)
            queues.append(Queue(p.ifname, 10 + k, links[p.ifname], tuple(behind)))
        out[ROUTER] = Egress(tuple(queues), default=10)
    return out


def router_line_problem(spec: ExperimentSpec, line_mbps: float | None, dev: str = "its data interface") -> str | None:
    """Why the router host cannot hold ``spec``'s bottleneck on machines when its data interface
    ``dev`` runs at ``line_mbps`` (None or not positive: unknown, nothing to say): the queues it
    holds all leave through that one interface's egress -- a shared bottleneck's one, a dumbbell's
    two (one per direction between the racks) -- and their rates together must fit its line rate,
    else the line, not the queues, sets what flows. Pure."""
    if line_mbps is None or line_mbps <= 0:
        return None
    held = router_held(build(spec))
    rate = bottleneck(spec).rate_mbps
    need = len(held) * rate
    if not held or need <= line_mbps:
        return None
    kind = spec.topology.kind
    if len(held) == 1:
        what = f"the {kind} bottleneck is the egress of the router host's {dev}"
    else:
        what = (
            f"a {kind}'s {len(held)} directions are {len(held)} queues of the router host's one {dev}'s egress, "
            f"{len(held)} x {rate:g} = {need:g} Mbit/s together"
        )
    return (
        f"topology.bottleneck.rate_mbps = {rate:g}: on machines {what}, more than its line rate of "
        f"{line_mbps:g} Mbit/s: the line, not the shaped queue, would set the rate; lower the rate or give the "
        "router host a faster data interface"
    )


def _switch(network: Network, spec: ExperimentSpec, link: Link, hosts: Mapping[str, HostNet]) -> SwitchConfig:
    """The userspace switch's configuration realizing ``spec`` on ``network``'s router ports.

    Every shaped router port gets the link (rate, delay, queue limit, RED); every host is routed to
    the router port behind which it sits (its own port on a star, the access bridge's uplink on the
    shared topology) with its TCP mode (``dctcp``, ``vcc`` or off); MACs blank."""
    red = None
    if link.discipline == "red" and link.red is not None:
        r = link.red
        red = SwitchRed(r.min_bytes, r.max_bytes, max_p=r.max_p, ewma_weight=r.ewma_weight, ecn=r.ecn)
    shaped = {(p.node, p.ifname) for p in network.bottlenecks}
    ports = []
    for p in network.ports_of(ROUTER):
        if (p.node, p.ifname) in shaped:
            ports.append(
                SwitchPort(
                    p.ifname,
                    rate_mbps=link.rate_mbps,
                    delay_ms=link.delay_ms,
                    queue_bytes=link.effective_queue_bytes(),
                    queue_packets=link.queue_packets,
                    red=red,
                )
            )
        else:
            ports.append(SwitchPort(p.ifname))
    switch_hosts = [
        SwitchHost(h.address, "", network.router_port_of(name).ifname, h.switch_mode) for name, h in hosts.items()
    ]
    config = SwitchConfig(
        ports=ports, hosts=switch_hosts, telemetry_period_ms=spec.telemetry.queue_period_ms, cpu=switch_cpu(),
        cross=_cross_sources(network, spec, link),
    )  # fmt: skip
    if spec.topology.switch_spin:
        config.busy_poll_us = SPIN_US
    return config


def switch_config(network: Network, spec: ExperimentSpec, macs: Mapping[str, str]) -> SwitchConfig:
    """The userspace switch's configuration realizing ``spec`` on ``network`` (its plan's), with
    the hosts' MACs (``macs``: host -> its ``eth0`` MAC address)."""
    return of(spec, network).switch_config(macs)


def _cross_sources(network: Network, spec: ExperimentSpec, link: Link) -> list[CrossSource]:
    """The in-switch UDP source of ``spec`` (``cross_traffic.generator = "switch"``): offered to the
    router port behind the traffic sink, where iperf3's packets from the source would queue, at
    ``udp_percent`` of the link's rate in frame bytes (iperf3's ``udp_percent`` is the same wire
    rate). Empty for iperf3 or without UDP."""
    ct = spec.cross_traffic
    if ct.generator != "switch" or ct.udp_percent <= 0:
        return []
    _, sink = spec.traffic_endpoints()
    assert sink is not None  # the spec's validation requires one
    return [
        CrossSource(
            network.router_port_of(sink).ifname,
            rate_mbps=link.rate_mbps * ct.udp_percent / 100.0,
            pattern=ct.pattern,
            on_ms=ct.on_ms if ct.pattern == "onoff" else 0.0,
            off_ms=ct.off_ms if ct.pattern == "onoff" else 0.0,
            seed=ct.seed,
        )
    ]
