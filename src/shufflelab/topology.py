"""The emulated network as a pure graph: nodes, ports, links, addresses and routes; which ports are
the bottlenecks (their shaping is each scenario's, in its :class:`shufflelab.netplan.NetPlan`).

:func:`build` turns a spec into a :class:`Network`; the ``emulate`` backend applies it to the
kernel. Nothing here touches the system. Names are predictable (Mininet style): hosts keep their
spec names, the router is ``r``, the access bridge (a Linux bridge) is ``sw``; inside every namespace a host's
interface is ``eth0`` and a router/bridge port is named after the node on its other end.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Literal

from shufflelab.shaping import htb_burst_bytes, htb_quantum_bytes  # noqa: F401 - re-exported
from shufflelab.spec import ExperimentSpec

NodeKind = Literal["host", "router", "bridge"]  # "switch" is only the userspace switch
Datapath = Literal["kernel", "switch"]

ROUTER = "r"
BRIDGE = "sw"
SUBNET_BASE = ipaddress.ip_network("10.77.0.0/16")


@dataclass(frozen=True)
class Port:
    """One end of a link: ``node``'s interface ``ifname`` with optional address."""

    node: str
    ifname: str
    address: str | None = None  # "10.77.1.1/24"
    extra_addresses: tuple[str, ...] = ()
    monitored: bool = False  # sample this port's queue


@dataclass(frozen=True)
class Wire:
    a: Port
    b: Port


@dataclass(frozen=True)
class Node:
    name: str
    kind: NodeKind
    bridge: bool = False  # every port is enslaved to one Linux bridge "br0"
    forwarding: bool = False  # a router whose kernel forwards (ip_forward on); redirects are off on routers


@dataclass
class Network:
    nodes: dict[str, Node]
    wires: list[Wire]
    host_addresses: dict[str, str]  # host -> bare IPv4 address
    gateways: dict[str, str]  # host -> default gateway address
    bottlenecks: list[Port] = field(default_factory=list)  # the shaped ports (each plan's links)
    # kernel: the router forwards, its ports are shaped with HTB + FIFO; switch: the userspace switch
    # forwards and queues on the router's ports (the router's kernel keeps ARP/ICMP for its addresses).
    # The spec's the network was built from; a live fabric's datapath is its current plan's.
    datapath: Datapath = "kernel"
    # how a host reaches the others (the plan's routes, :func:`shufflelab.netplan.routes`): "default",
    # emulated -- its default route via its gateway, the router's address on its own subnet; "peers",
    # machines on one data network -- a /32 route to each other machine's address via the host's
    # entry in ``gateways`` (the router host holding a shared bottleneck) or, without one, the path the
    # machine already has (only to give it the spec's route attributes)
    routing: Literal["default", "peers"] = "default"

    def router_port_of(self, host: str) -> Port:
        """The router port behind which ``host`` sits: its own port (star) or the access bridge's
        uplink (shared, one-armed)."""
        for w in self.wires:
            for near, far in ((w.a, w.b), (w.b, w.a)):
                if self.nodes[near.node].kind != "router":
                    continue
                if far.node == host:
                    return near
                if self.nodes[far.node].kind == "bridge" and any(
                    {x.node for x in (v.a, v.b)} == {far.node, host} for v in self.wires
                ):
                    return near
        raise KeyError(f"no router port leads to host {host!r}")

    def ports_of(self, node: str) -> list[Port]:
        out = []
        for w in self.wires:
            for p in (w.a, w.b):
                if p.node == node:
                    out.append(p)
        return out

    def structure_key(self) -> tuple[object, ...]:
        """What must match for a live fabric to be reused: everything but shaping values and the
        datapath (``Fabric.configure`` moves a live fabric between the kernel and the switch)."""
        wires = tuple(sorted((w.a.node, w.a.ifname, w.b.node, w.b.ifname) for w in self.wires))
        return (tuple(sorted(self.nodes)), wires, tuple(sorted(self.host_addresses.items())))


def _subnet(index: int) -> ipaddress.IPv4Network:
    if not 1 <= index <= 250:
        raise ValueError("host index out of range")
    return ipaddress.IPv4Network(f"{SUBNET_BASE.network_address + (index << 8)}/24")


def build(spec: ExperimentSpec) -> Network:
    """The network of ``spec``: every host in its own /24 behind router ``r``.

    ``shared``: hosts hang off bridge ``sw`` whose single uplink reaches ``r``; hosts route to each
    other via ``r`` (one-armed router), so every host-to-host packet leaves ``r`` through its
    downlink port ``r:sw`` -- the one bottleneck queue, like a cluster's shared uplink.
    ``star``: each host has its own port on ``r``; each ``r:<host>`` port is shaped.
    ``dumbbell``: two access bridges ``sw1``/``sw2`` (the hosts' racks), each with an uplink to ``r``;
    traffic from one rack to the other leaves ``r`` through the far rack's port ``r:sw<k>``, so each
    direction of the inter-rack link has its own shaped queue (data one way, its ACKs the other);
    traffic within a rack is routed as well and leaves through that rack's own port.
    With the userspace switch (``spec.datapath() == "switch"``) the same ports are the switch's ports
    and the router's kernel does not forward.
    """
    hosts = list(spec.hosts)
    datapath = spec.datapath()
    nodes: dict[str, Node] = {h: Node(h, "host") for h in hosts}
    nodes[ROUTER] = Node(ROUTER, "router", forwarding=datapath == "kernel")
    wires: list[Wire] = []
    addresses: dict[str, str] = {}
    gateways: dict[str, str] = {}
    bottlenecks: list[Port] = []
    router_addresses: list[str] = []
    for i, h in enumerate(hosts, start=1):
        net = _subnet(i)
        addresses[h] = str(net.network_address + 1)
        gateways[h] = str(net.network_address + 254)
        router_addresses.append(f"{net.network_address + 254}/24")

    if spec.topology.kind == "shared":
        nodes[BRIDGE] = Node(BRIDGE, "bridge", bridge=True)
        for h in hosts:
            wires.append(Wire(Port(h, "eth0", f"{addresses[h]}/24"), Port(BRIDGE, h)))
        down = Port(
            ROUTER,
            BRIDGE,
            address=router_addresses[0],
            extra_addresses=tuple(router_addresses[1:]),
            monitored=True,
        )
        wires.append(Wire(down, Port(BRIDGE, "uplink")))
        bottlenecks.append(down)
    elif spec.topology.kind == "dumbbell":
        for side in (1, 2):
            sw = f"{BRIDGE}{side}"
            nodes[sw] = Node(sw, "bridge", bridge=True)
            members = [i for i, h in enumerate(hosts) if spec.hosts[h].rack == side]
            for i in members:
                wires.append(Wire(Port(hosts[i], "eth0", f"{addresses[hosts[i]]}/24"), Port(sw, hosts[i])))
            down = Port(
                ROUTER,
                sw,
                address=router_addresses[members[0]],
                extra_addresses=tuple(router_addresses[i] for i in members[1:]),
                monitored=True,
            )
            wires.append(Wire(down, Port(sw, "uplink")))
            bottlenecks.append(down)
    else:
        for i, h in enumerate(hosts):
            port = Port(ROUTER, h, address=router_addresses[i], monitored=True)
            wires.append(Wire(Port(h, "eth0", f"{addresses[h]}/24"), port))
            bottlenecks.append(port)
    return Network(nodes, wires, addresses, gateways, bottlenecks, datapath)
