"""The fabric on real hosts: per-host links shaped with HTB on each host's data interface, and the
spec's TCP settings as each host's sysctls, every change under the hosts' leases.

On the emulated ``star`` topology each host has its own shaped link; here a host's link is its
data interface, shaped on its egress (the emulation shapes the router's port towards the host,
i.e. the host's ingress; for a shuffle, where every host sends and receives, both bound the same
all-to-all traffic). A ``shared`` bottleneck is held by the inventory's router host: every host
routes each other host's data address through it (/32 routes), it forwards (one-armed, no ICMP
redirects), and its data interface's egress -- which every host-to-host packet leaves through,
as the emulated router's downlink -- is the one shaped queue. What needs the userspace switch
(delay, RED/ECN, DCTCP, VCC) runs there too: the switch on the router host's data interface
instead of the kernel's forwarding and HTB (:mod:`shufflelab.hosts.switch`). A ``dumbbell`` is two
racks joined by one link, a queue per direction: both are HTB classes of the router host's one data
interface's egress, filtered by the destination's rack (its machines' addresses) -- or, on the
switch datapath, two queues of the switch's one port there, each host behind its rack's; every host
routes the other rack's machines through the router host and reaches its own rack's as it does,
so a rack's own traffic never crosses the router host (the network plan, :mod:`shufflelab.netplan`,
holds the classes, filters and routes; this module applies them). Both directions share that
interface's line rate: a run is refused when twice the rate exceeds it, where the interface reports
one. The switch on per-host links (a switch in each host's own path) is refused: :func:`refusals`
names the spec field that asks for it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Collection, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from shufflelab import netplan
from shufflelab.emulate import selftest as link_selftest
from shufflelab.hosts.control import HostError, Session
from shufflelab.hosts.inventory import TRAFFIC_ROLES, idle_traffic_hosts, machine_groups
from shufflelab.hosts.lease import HostLease
from shufflelab.hosts.safety import SafetyError, control_interface
from shufflelab.hosts.sampling import HostSamplers
from shufflelab.hosts.switch import (
    OFFLOADS_OFF,
    HostsLauncher,
    mac_address,
    prepare_router,
    router_switch,
    router_switch_config,
    start_router_switch,
)
from shufflelab.netplan import Egress, NetPlan, PortCounters, egress_changes
from shufflelab.spec import ExperimentSpec, Link, SpecError, TpchParams
from shufflelab.topology import ROUTER, Network, Port

if TYPE_CHECKING:
    from shufflelab.emulate.protocols import CommandRunner, Process, ProcessLauncher, Switches, UserspaceSwitch
    from shufflelab.hosts.remote import Loop

T = TypeVar("T")


async def settled(*steps: Coroutine[Any, Any, T]) -> list[T]:
    """Run ``steps`` concurrently and wait for *all* of them before raising the first failure: a
    step still running on one host while the others are restored would undo the restoring."""
    results = await asyncio.gather(*steps, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return list(results)  # type: ignore[arg-type]


def refusals(
    spec: ExperimentSpec,
    router: bool = False,
    sharing: Collection[Collection[str]] = (),
    router_line: tuple[str, float | None] | None = None,
    machine_cpus: Mapping[str, tuple[str, int | None]] | None = None,
) -> list[str]:
    """What in ``spec`` the hosts backend cannot do, each naming the field and why; empty: it runs.
    ``router``: the inventory names a router host (a shared bottleneck or a dumbbell can be held);
    ``sharing``: the groups of spec hosts that run on one machine
    (:func:`shufflelab.hosts.inventory.machine_groups`); ``router_line``: the router host's data
    interface and its line rate in Mbit/s (None: unknown), once read from it
    (:func:`shufflelab.netplan.router_line_problem`); ``machine_cpus``: each spec host's machine and
    its CPU count (None: unknown), once read."""
    out = []
    kind = spec.topology.kind
    if kind in ("shared", "dumbbell") and not router:
        what = (
            "a shared bottleneck needs a router host holding it"
            if kind == "shared"
            else "the link between its two racks, a queue per direction, needs a router host holding it"
        )
        out.append(
            f"topology.kind = {kind!r}: {what}; name one in the inventory (router = 'NAME', a host no spec host "
            "maps to), or use topology.kind = 'star' (each host's own link, its data interface)"
        )
    if router_line is not None:
        problem = netplan.router_line_problem(spec, router_line[1], router_line[0])
        if problem:
            out.append(problem)
    features = spec.switch_features()
    if spec.datapath() == "switch" and kind == "star":
        why = ", ".join(features) or "topology.bottleneck.datapath = 'switch'"
        out.append(
            f"{why} with topology.kind = 'star': on machines the userspace switch runs on the router host, which "
            "is in the path of every packet only with topology.kind = 'shared'; per-host links are each host's "
            "own data interface, and each would need a switch of its own on that host, in its own traffic's path; "
            "use 'shared' with a router host"
        )
    src, dst = spec.traffic_endpoints()
    if kind == "star" and spec.cross_traffic.active and src in spec.hosts and dst in spec.hosts:
        in_job = {h: bool(set(spec.hosts[h].roles) - TRAFFIC_ROLES) for h in (src, dst)}
        if in_job[dst] and not in_job[src]:
            out.append(
                f"cross_traffic.sink = {dst!r} with topology.kind = 'star': the cross traffic is to share {dst}'s "
                "link with the job (the emulation shapes each host's port from the router, its ingress), but on "
                f"machines a host's link is its data interface's egress -- a machine queues only what it sends -- so "
                f"the traffic from {src}, which runs none of the job, would share no queue with it; send it from a "
                "host of the job, or use topology.kind = 'shared' with a router host"
            )
    for group in sharing:
        names = " and ".join(", ".join(group).rsplit(", ", 1))
        racks = {h: r for h in group if h in spec.hosts and (r := spec.hosts[h].rack) is not None}
        if kind == "dumbbell" and len(set(racks.values())) > 1:
            first = {r: h for h, r in reversed(racks.items())}  # each rack's first host in the group
            said = " and ".join(f"hosts.{h}.rack = {r}" for r, h in sorted(first.items()))
            out.append(
                f"{said} on one machine: their traffic to each other would not cross the link between the racks; "
                "map each rack's hosts to machines of their own rack"
            )
        if kind == "star":
            out.append(
                f"topology.kind = 'star' with {names} on one machine: each host has a link of its own (its data "
                "interface's egress), and on one machine they would share one; map them to machines of their own"
            )
        traffic = [h for h in group if TRAFFIC_ROLES & set(spec.hosts[h].roles)]
        if traffic and not idle_traffic_hosts(spec):
            out.append(
                f"cross_traffic.generator = {spec.cross_traffic.generator!r} with {', '.join(traffic)} sharing a "
                "machine: its cross traffic must cross the network and take no CPU from the job (only with "
                "generator = 'switch', which makes the UDP in the router host's queue, may they share one)"
            )
        settings = {h: spec.tcp_for(h) for h in group}
        if len({t.model_dump_json() for t in settings.values()}) > 1:
            out.append(
                f"tcp: {names} share one machine but not their TCP settings, which are the machine's (sysctls "
                "and routes); give them the same, or machines of their own"
            )
        downed = [f.host for f in spec.faults if f.kind == "link-down" and f.host in group]
        if downed:
            out.append(
                f"faults: link-down of {downed[0]} takes down the data interface it shares with "
                f"{', '.join(h for h in group if h != downed[0])} (one machine)"
            )
    if spec.workload.name == "tpch":  # the storage hosts' CPUs
        p = spec.workload_params()
        cpus = p.storage_cores * p.core_scale if isinstance(p, TpchParams) else 1.0
        known = {h: mc for h in spec.hosts_with("storage") if (mc := (machine_cpus or {}).get(h)) and mc[1]}
        above = {h: mc for h, mc in known.items() if mc[1] is not None and cpus > mc[1]}
        if above:
            said = ", ".join(f"{n} of {h}'s machine {m}" for h, (m, n) in above.items())
            out.append(
                f"workload.params.storage_cores x core_scale = {cpus:g} CPU, more than its machines have ({said}): "
                "on machines a storage host runs on its machine's own CPUs, which a cap (a CPU cgroup there) can "
                "only lower; give the storage at most that many, or machines with as many"
            )
    return out


def machines_network(
    network: Network, places: Mapping[str, str], data_addresses: Mapping[str, str], router: str | None
) -> Network:
    """The spec's ``network`` on machines: its hosts at their machines' data addresses (``places``:
    spec host -> inventory host; ``data_addresses``: inventory host -> address), what Spark binds to
    and the records use, and routed to each other as machines on one data network are
    (``routing = "peers"``): through the router host when it holds a shared bottleneck. The plan's
    routes on each host (:func:`shufflelab.netplan.routes`) follow from it."""
    shared = any(p.ifname not in network.host_addresses for p in network.bottlenecks)
    via = data_addresses.get(router) if router is not None and shared else None
    return dataclasses.replace(
        network,
        host_addresses={h: data_addresses[places[h]] for h in network.host_addresses},
        gateways={h: via for h in network.host_addresses} if via is not None else {},
        routing="peers",
    )


@dataclasses.dataclass(frozen=True)
class HostsLeaseInfo:
    """The fabric's lease: its id (the same on every host) and a scratch folder on the controller."""

    lease_id: str
    scratch: Path


def _counters(tc_json: str, handle: str | None = None) -> PortCounters:
    """The counters of the first qdisc ``tc -s -j qdisc show`` lists (``handle``: of the one with it)."""
    found = [q for q in json.loads(tc_json or "[]") if handle is None or q.get("handle") == handle]
    q: dict[str, Any] = found[0] if found else {}
    return PortCounters(
        tx_bytes=int(q.get("bytes", 0)),
        tx_packets=int(q.get("packets", 0)),
        drops=int(q.get("drops", 0)),
        backlog_bytes=int(q.get("backlog", 0)),
        backlog_packets=int(q.get("qlen", 0)),
    )


class HostsFabric:
    """The spec's hosts on inventory hosts (``places``: spec host -> inventory host), their data
    addresses as the network's host addresses, their links and TCP settings under ``leases``;
    ``switches`` makes the router host's userspace switch (:class:`shufflelab.switch.Switch`, handed
    by who builds the backend; None: the kernel datapath only)."""

    def __init__(
        self,
        loop: Loop,
        network: Network,
        places: Mapping[str, str],
        leases: Mapping[str, HostLease],
        data_addresses: Mapping[str, str],
        lease: HostsLeaseInfo,
        scratch: Mapping[str, str],
        router: str | None = None,
        seams: tuple[CommandRunner, HostsLauncher] | None = None,
        router_line: tuple[str, float | None] | None = None,
        switches: Switches | None = None,
    ) -> None:
        self._loop = loop
        self._switches = switches
        self._router_line = router_line  # the router host's data interface and line rate (see refusals)
        self._seams = seams  # the backend's run and launch (the self-test's commands and iperf3 server)
        self._selftests: dict[str, Any] = {}  # link self-tests done, by link configuration
        self._places = dict(places)
        self.leases = dict(leases)  # inventory host -> its lease
        self.remote_scratch = dict(scratch)  # inventory host -> the lease's folder there
        self._lease = lease
        self._data = dict(data_addresses)  # inventory host -> its data address
        # a bottleneck port -> the spec host whose data interface is that link (per-host links), or
        # None: the router host's data interface (the shared bottleneck)
        self._port_host: dict[str, str | None] = {
            p.ifname: (p.ifname if p.ifname in network.host_addresses else None) for p in network.bottlenecks
        }
        self.router = router
        self._network = machines_network(network, places, data_addresses, router)
        self._switch: UserspaceSwitch | None = None  # on the router host, while the datapath is the switch
        self._macs: dict[str, str] = {}  # spec host -> its data interface's MAC (for the switch)
        self._may_go_down: set[str] = set()  # spec hosts whose data interface a link-down fault may take down
        # a dumbbell's ports -> the minor of their queue (HTB class 1:<minor>, leaf <minor>:) on the
        # router host's data interface (the plan's egress; empty: one queue there, its root)
        self._router_queues: dict[str, int] = {}
        if None in self._port_host.values() and (router is None or router not in self.leases):
            kind = "dumbbell" if len(netplan.router_held(network)) > 1 else "shared"
            raise SpecError(f"topology.kind = {kind!r}: the inventory names no router host (router = 'NAME')")

    @property
    def network(self) -> Network:
        return self._network

    @property
    def lease(self) -> HostsLeaseInfo:
        return self._lease

    @property
    def places(self) -> Mapping[str, str]:
        return self._places

    @property
    def data_addresses(self) -> frozenset[str]:
        """The inventory hosts' data addresses (the only targets of cross traffic)."""
        return frozenset(self._data.values())

    def session(self, spec_host: str) -> Session:
        return self.leases[self._places[spec_host]].session

    def interface(self, host: str) -> str:
        """The data interface of the machine spec host ``host`` runs on."""
        return self.session(host).host.data_interface

    def set_link(self, host: str, up: bool) -> None:
        """The data interface of ``host``'s machine down (recorded in its lease, with the routes it
        takes along, before it goes down), or up again with them."""
        hl = self.leases[self._places[host]]
        dev = hl.session.host.data_interface
        self._loop.call(hl.link_up(dev) if up else hl.link_down(dev))

    async def _check_link_down(self, host: str) -> None:
        """A link-down fault takes down ``host``'s data interface: refused when that interface carries
        the SSH control connection (the controller would lose the machine, whatever the inventory
        allows for shaping)."""
        s = self.session(host)
        dev = s.host.data_interface
        if await control_interface(s) == dev:
            raise SafetyError(
                f"host {s.name} ({s.host.address}): faults: link-down of {host} would take down {dev}, which carries "
                "the SSH control connection; give the host a data interface of its own"
            )
        self._may_go_down.add(host)

    # -- configuration -------------------------------------------------------------------------
    def configure(self, plan: NetPlan, restart_switch: bool = False) -> None:
        """Apply ``plan``'s TCP settings, routes and datapath on every host (idempotent). On the
        switch datapath the router host's switch is (re)started when its config changed, when it
        is not running, or when ``restart_switch`` asks for fresh counters (each run, as locally)."""
        problems = refusals(
            plan.spec, self.router is not None, machine_groups(dict(self._places)), router_line=self._router_line
        )
        if problems:
            raise SpecError("the hosts backend cannot run this spec: " + "; ".join(problems))
        downed = sorted({f.host for f in plan.spec.faults if f.kind == "link-down" and f.host} - self._may_go_down)
        if downed:  # before any change: a link that goes down must not carry the controller's connection
            self._loop.call(settled(*(self._check_link_down(h) for h in downed)))
        egress = plan.egress  # a spec host's data interface's, or ROUTER: the router host's
        held = egress[ROUTER].queues if ROUTER in egress else ()
        self._router_queues = {q.port: q.minor for q in held} if len(held) > 1 else {}
        router = self.leases[self.router] if ROUTER in egress and self.router is not None else None
        if plan.network.routing != "peers":
            raise ValueError("a plan of the hosts' network (HostsFabric.network) was expected")
        switch = plan.datapath == "switch"
        if not switch and self._switch is not None:
            self._switch.stop()  # before the kernel forwards again: one copy of every packet

        async def machine(hosts: list[str]) -> None:
            for host in hosts:  # one after the other: one lease (and equal settings, see refusals)
                await one(host)

        async def one(host: str) -> None:
            hl = self.leases[self._places[host]]
            want = plan.hosts[host]
            for name, value in want.sysctls.items():
                await hl.set_sysctl(name, value)
            if host in egress:
                await self._shape(hl, egress[host])
            dev = hl.session.host.data_interface
            if switch:  # the switch forwards frames, not GSO segments
                await hl.set_offloads(dev, OFFLOADS_OFF)
            for route in want.routes:
                via = route.via if route.via is not None else await _gateway(hl.session, route.destination, dev)
                await hl.add_route(route.destination, via, dev, route.attributes)
            # a route of an earlier scenario the plan no longer holds (its initcwnd): the path as it
            # is, without attributes, until the lease removes it
            for address in hl.routes():
                if address not in {r.destination for r in want.routes}:
                    await hl.add_route(address, await _gateway(hl.session, address, dev), dev)

        async def forward(hl: HostLease) -> int:
            dev = hl.session.host.data_interface
            await hl.set_sysctl("net.ipv4.ip_forward", "1")
            # one-armed: packets leave through the interface they came in on; no redirects that
            # would send the hosts around the bottleneck
            for scope in ("all", dev):
                await hl.set_sysctl(f"net.ipv4.conf.{scope}.send_redirects", "0")
            await self._shape(hl, egress[ROUTER])
            return 0

        by_machine: dict[str, list[str]] = {}
        for h in self._network.host_addresses:
            by_machine.setdefault(self._places[h], []).append(h)
        steps: list[Coroutine[Any, Any, Any]] = [machine(hosts) for hosts in by_machine.values()]
        if router is not None:
            steps.append(prepare_router(router) if switch else forward(router))
        done = self._loop.call(settled(*steps))
        if switch and router is not None:
            self._start_switch(plan, router, int(done[-1]), restart_switch)

    def _start_switch(self, plan: NetPlan, router: HostLease, ncpu: int, restart: bool) -> None:
        if self._seams is None:
            raise RuntimeError("the switch needs the backend's process launcher")
        if self._switches is None:
            raise RuntimeError(
                "the switch datapath needs the userspace switch, and this fabric was given none "
                "(HostsBackend(..., switches=shufflelab.switch.Switch))"
            )
        if not self._macs:
            hosts = list(self._network.host_addresses)
            macs = self._loop.call(settled(*(mac_address(self.session(h)) for h in hosts)))
            self._macs = dict(zip(hosts, macs, strict=True))
        dev = router.session.host.data_interface
        cfg = router_switch_config(plan, self._macs, dev, ncpu)
        if self._switch is not None and self._switch.alive() and not restart and self._switch.config == cfg:
            return
        if self._switch is not None:
            self._switch.stop()
        assert self.router is not None
        run, launch = self._seams
        self._switch = router_switch(
            cfg, router, self.router, self.remote_scratch[self.router], self._lease.scratch, run, launch, self._switches
        )
        start_router_switch(self._switch, router)

    def close(self) -> None:
        """Stop the router host's switch (its log fetched); the leases restore the rest."""
        if self._switch is not None:
            self._switch.stop()

    def _switching(self) -> UserspaceSwitch | None:
        """The router host's switch while it is the datapath."""
        return self._switch if self._switch is not None and self._switch.process is not None else None

    async def _shape(self, hl: HostLease, egress: Egress) -> None:
        dev = hl.session.host.data_interface
        shown = (await hl.session.run(f"shape {dev}", ["tc", "qdisc", "show", "dev", dev])).stdout
        root, changes = egress_changes(shown, dev, egress)
        if root is not None:  # not yet, or removed for the switch
            await hl.replace_root_qdisc(dev, root[root.index("root") + 1 :])
        for args in changes:
            await hl.tc(dev, args)

    # -- observation ---------------------------------------------------------------------------
    def counters(self, port: Port) -> PortCounters:
        """The egress counters of the data interface of the host whose link ``port`` is (the router
        host's for the shared bottleneck)."""
        host = self._port_host[port.ifname]
        switch = self._switching()
        if host is None and switch is not None:  # a dumbbell's queue by its name, else the one port
            name = port.ifname if port.ifname in self._router_queues else switch.config.ports[0].port_name
            return PortCounters.from_switch_row(switch.last_telemetry().get(name))
        if host is None:
            assert self.router is not None
            s = self.leases[self.router].session
        else:
            s = self.session(host)
        dev = s.host.data_interface
        minor = self._router_queues.get(port.ifname) if host is None else None
        which = ["root"] if minor is None else []  # one queue of several: its leaf's counters

        async def read() -> str:
            return (
                await s.run(f"read {dev}'s counters", ["tc", "-s", "-j", "qdisc", "show", "dev", dev, *which])
            ).stdout

        return _counters(self._loop.call(read()), None if minor is None else f"{minor}:")

    def switch_failure(self) -> str | None:
        """What breaks this fabric mid-run: a host whose SSH connection is gone (noticed by
        keepalives), or the userspace switch on the router host having exited; the run fails at
        once with that as its cause."""
        for name, hl in sorted(self.leases.items()):
            why = hl.session.lost
            if why is not None:
                return f"host {name} ({hl.session.host.address}) dropped off during the run: connection lost: {why}"
        switch = self._switching()
        if switch is None or switch.alive():
            return None
        return f"the userspace switch on router host {self.router} exited: {switch.log_tail(500) or 'no output'}"

    def selftest(self, plan: NetPlan, run_dir: Path) -> list[dict[str, Any]]:
        """The local backend's link self-test over SSH (ping and a short iperf3 transfer across each
        shaped link), once per link configuration, written to ``run_dir/selftest.json``."""
        if self._seams is None:
            raise RuntimeError("the self-test needs the backend's seams (run, launch)")
        run, launch = self._seams

        def measure(log_dir: Path, links: Mapping[str, Link]) -> list[link_selftest.LinkCheck]:
            return link_selftest.check(
                self._places, self._network, log_dir, links, run=run, launch=launch, endpoints=self._endpoints
            )

        return link_selftest.for_run(plan, self, run_dir, self._selftests, measure=measure)

    def _endpoints(self, net: Network, port: Port) -> tuple[str, str] | None:
        """(source, destination) whose packets leave through ``port``'s queue here: a host's own
        link is its egress (it sends), the router host's shared queue carries any pair, a dumbbell's
        queue towards a rack a pair from the other rack to it."""
        hosts = sorted(net.host_addresses)
        if len(hosts) < 2 or port.ifname not in self._port_host:
            return None
        if port.ifname in self._router_queues:
            behind = [h for h in hosts if net.router_port_of(h) == port]
            pairs = [(s, d) for d in behind for s in hosts if netplan.through_router(net, s, d)]
            return pairs[0] if pairs else None
        src = self._port_host[port.ifname] or hosts[0]
        others = [h for h in hosts if self._places[h] != self._places[src]]  # across the network
        return (src, others[0]) if others else None

    def start_queue_sampler(self, spec: ExperimentSpec, out: Path, launch: ProcessLauncher) -> Process | None:
        """The local backend's queue sampler on each host holding a bottleneck (its data interface:
        the router host's for the shared one), merged into ``out`` when stopped
        (:mod:`shufflelab.hosts.sampling`); None on the switch datapath (the switch samples its
        queue itself, see :meth:`save_telemetry`)."""
        if self._switching() is not None:
            return None
        by_place: dict[str, dict[str, str]] = {}
        for port, host in self._port_host.items():
            place = self.router if host is None else self._places[host]
            assert place is not None
            dev = self.leases[place].session.host.data_interface
            if port in self._router_queues:  # one of the router host's queues: its leaf
                dev = f"{dev}/{self._router_queues[port]}:"
            by_place.setdefault(place, {})[dev] = port
        samplers = HostSamplers(self._loop, out)
        max_s = spec.experiment.run_timeout_s + 120
        try:
            for place, ports in sorted(by_place.items()):
                hl = self.leases[place]
                samplers.start(
                    launch, place, hl.session, self.remote_scratch[place], ports, spec.telemetry.queue_period_ms, max_s
                )
        except BaseException:
            samplers.stop()
            raise
        return samplers

    def start_cross_traffic(self) -> None:
        """Start the router host's switch's own UDP source (``cross_traffic.generator = "switch"``;
        configured paused, so that the link self-test runs on an idle fabric); nothing without it."""
        switch = self._switching()
        if switch is not None and switch.config.cross:
            switch.start_cross()

    def save_telemetry(self, run_dir: Path) -> None:
        """On the switch datapath: the router host's switch's samples as ``queue_samples.csv``, its
        status (``switch_status.csv``), config and log, in ``run_dir`` (as the local fabric keeps
        them); else nothing."""
        switch = self._switching()
        if switch is None:
            return
        port = next(p for p, h in self._port_host.items() if h is None)  # the spec's name of the router's queue
        # a dumbbell's queues are named as the spec's ports already; the one port of 'shared' is the interface
        rename = {} if self._router_queues else {switch.config.ports[0].port_name: port}
        switch.save_telemetry(run_dir / "queue_samples.csv", rename=rename)
        switch.save_status(run_dir / "switch_status.csv")  # its lag, and its own UDP source's counters
        switch.save_config_and_log(run_dir)


async def _gateway(session: Session, address: str, dev: str) -> str | None:
    """The gateway the host reaches ``address`` through on ``dev`` (None: on-link); refused when
    the host would reach it through another interface."""
    step = f"find the route to {address}"
    r = await session.run(step, ["ip", "-j", "route", "get", address])
    routes = json.loads(r.stdout or "[]")
    if not routes or routes[0].get("dev") != dev:
        found = routes[0].get("dev") if routes else None
        raise HostError(
            session.name,
            session.host.address,
            step,
            f"{address} is reached through {found}, not the data interface {dev}",
        )
    gw = routes[0].get("gateway")
    return str(gw) if gw else None


async def data_address(session: Session) -> str:
    """The IPv4 address of the host's data interface (what Spark binds to)."""
    dev = session.host.data_interface
    r = await session.run(f"read {dev}'s address", ["ip", "-j", "-4", "addr", "show", "dev", dev])
    for link in json.loads(r.stdout or "[]"):
        for a in link.get("addr_info", []):
            if a.get("family") == "inet" and a.get("local"):
                return str(a["local"])
    raise HostError(session.name, session.host.address, f"read {dev}'s address", f"{dev} has no IPv4 address")
