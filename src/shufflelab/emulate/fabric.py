"""Applies a :class:`~shufflelab.topology.Network` to the kernel: namespaces, veths, bridges,
addresses, routes (pyroute2) and shaping (``tc``: pyroute2 0.9 cannot create a bfifo child).

Two datapaths shape the router's ports. ``kernel``: the router forwards and each port has HTB +
a FIFO. ``switch``: the userspace switch (:mod:`shufflelab.switch`) forwards and queues on those
ports (rate, delay, droptail or RED/ECN, DCTCP/VCC per host), the router's kernel does not forward
(``ip_forward = 0``; it still answers ARP and ICMP for the gateway addresses) and the ports have no
qdisc. Shaping, the datapath and TCP settings can be changed on a live fabric
(:meth:`NamespaceFabric.configure`), so runs of different scenarios reuse one fabric and one Spark cluster
when only those values differ.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyroute2 import NetNS

from shufflelab.emulate import selftest as link_selftest
from shufflelab.emulate.netns import NamespaceLease, launch_at, run, run_at
from shufflelab.netplan import NetPlan, PortCounters, has_root_qdisc, shaping_changes
from shufflelab.routes import routes_to_restore
from shufflelab.spec import ExperimentSpec
from shufflelab.topology import ROUTER, Network, Port

if TYPE_CHECKING:
    from shufflelab.emulate.protocols import CommandRunner, Process, ProcessLauncher, Switches, UserspaceSwitch
    from shufflelab.switch.config import SwitchConfig


def sysctl(ns: str, values: dict[str, str]) -> None:
    run(["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in values.items())], ns=ns)


_PROC_IPV4 = "/proc/sys/net/ipv4"


def available_congestion_controls() -> list[str]:
    with open(f"{_PROC_IPV4}/tcp_available_congestion_control") as fh:
        return fh.read().split()


def ensure_congestion_control_allowed(names: set[str]) -> None:
    """A namespace may pick only CCs the init namespace allows; add ``names`` to that list.

    This is the one host-wide setting shufflelab changes (it widens a list, never narrows it).
    """
    with open(f"{_PROC_IPV4}/tcp_allowed_congestion_control") as fh:
        allowed = fh.read().split()
    missing = [n for n in sorted(names) if n not in allowed]
    if missing:
        run(
            [
                "sysctl",
                "-q",
                "-w",
                f"net.ipv4.tcp_allowed_congestion_control={' '.join(allowed + missing)}",
            ]
        )


def interface_mac(place: str, ifname: str, run: CommandRunner) -> str:
    """MAC address of ``ifname`` at ``place`` (reached through ``run``)."""
    info = json.loads(run(["ip", "-j", "link", "show", "dev", ifname], place=place))
    return str(info[0]["address"])


def rps_mask_without(cpu: int, ncpu: int | None = None) -> str:
    """Hex CPU mask of every CPU but ``cpu`` (for /sys/class/net/IF/queues/rx-N/rps_cpus)."""
    n = ncpu or os.cpu_count() or 1
    return format(((1 << n) - 1) & ~(1 << cpu), "x")


def steer_rx(place: str, ifname: str, mask: str, run: CommandRunner) -> None:
    """Receive packet steering on ``ifname`` at ``place``: its receive processing runs on the CPUs
    of ``mask`` ("0" = where the packet arrived). On a veth the receive side of a frame the switch
    sends runs inside the switch's own send() unless steered away; measured: 1.1-1.3 Gbit/s of one
    TCP flow through the switch without, 2.3-2.5 Gbit/s with (docs/design-switch.md)."""
    run(["sh", "-c", f'for f in /sys/class/net/"$1"/queues/rx-*/rps_cpus; do echo {mask} > "$f"; done', "sh",
         ifname], place=place, check=False)  # fmt: skip


def namespace_switch(
    lease: NamespaceLease, node: str, cfg: SwitchConfig, offloads: bool = False, *, switches: Switches
) -> UserspaceSwitch:
    """The userspace switch with ``cfg`` in namespace ``lease.ns(node)`` (made by ``switches``:
    :class:`shufflelab.switch.Switch`), ready to start: the namespace's kernel does not forward (the
    switch does; the kernel keeps answering ARP and ICMP for the router's addresses), no redirects,
    and (unless ``offloads``) no offloads on the switch's ports (it forwards frames). Its files are
    in the lease's scratch folder."""
    ns = lease.ns(node)
    sysctl(
        ns,
        {
            "net.ipv4.ip_forward": "0",
            "net.ipv4.conf.all.send_redirects": "0",
            "net.ipv4.conf.default.send_redirects": "0",
        },
    )
    if not offloads:
        for p in cfg.ports:
            run(["ethtool", "-K", p.ifname, "tso", "off", "gso", "off", "gro", "off"], ns=ns, check=False)
    return switches(cfg, ns, str(lease.scratch), lease.scratch, run_at, launch_at, name=f"switch-{node}")


class NamespaceFabric:
    """A live emulated network. Use as a context manager or call :meth:`up` / :meth:`down`.

    ``switches`` makes the userspace switch of the switch datapath (:class:`shufflelab.switch.Switch`,
    handed by who builds the fabric; None: the fabric runs the kernel datapath only)."""

    def __init__(
        self, lease: NamespaceLease, network: Network, offloads: bool = False, switches: Switches | None = None
    ) -> None:
        self.lease = lease
        self.network = network
        self.offloads = offloads
        self.switches = switches
        self.ns = {name: lease.ns(name) for name in network.nodes}
        self.switch: UserspaceSwitch | None = None  # the userspace switch, while the datapath is the switch
        self._macs: dict[str, str] = {}
        self._up = False
        # link self-tests done on this fabric, by link configuration (see emulate.selftest.for_run)
        self.selftest_cache: dict[str, Any] = {}
        self._routes_before_down: dict[str, list[str]] = {}  # host -> its routes before a link-down fault

    @property
    def places(self) -> Mapping[str, str]:
        """Host name -> its namespace (where its commands run)."""
        return self.ns

    def interface(self, host: str) -> str:
        """A host's one interface, its link to the router or its rack's bridge."""
        return "eth0"  # topology.build names every host's one port so

    def set_link(self, host: str, up: bool) -> None:
        """``host``'s link down, or up again with the routes that went with it (its default route);
        the namespaces go with the fabric, downed links too."""
        ns, dev = self.ns[host], self.interface(host)
        if not up:
            self._routes_before_down[host] = run(["ip", "route", "show"], ns=ns).splitlines()
            run(["ip", "link", "set", "dev", dev, "down"], ns=ns)
            return
        run(["ip", "link", "set", "dev", dev, "up"], ns=ns)
        for args in routes_to_restore(self._routes_before_down.pop(host, []), run(["ip", "route", "show"], ns=ns)):
            run(["ip", "route", "replace", *args], ns=ns)

    # -- lifecycle -------------------------------------------------------------------------
    def up(self) -> None:
        for name in self.network.nodes:
            self.lease.create_namespace(name)
        for node in self.network.nodes.values():
            if node.kind == "router":
                sysctl(
                    self.ns[node.name],
                    {
                        # with the userspace switch the router's kernel must not forward a second copy
                        "net.ipv4.ip_forward": "1" if node.forwarding else "0",
                        "net.ipv4.conf.all.send_redirects": "0",
                        "net.ipv4.conf.default.send_redirects": "0",
                    },
                )
            elif node.kind == "host":
                sysctl(
                    self.ns[node.name],
                    {
                        "net.ipv4.conf.all.accept_redirects": "0",
                        "net.ipv4.conf.default.accept_redirects": "0",
                    },
                )
        handles = {name: NetNS(ns) for name, ns in self.ns.items()}
        try:
            for name, nl in handles.items():
                lo = nl.link_lookup(ifname="lo")[0]
                nl.link("set", index=lo, state="up")
                if self.network.nodes[name].bridge:
                    nl.link("add", ifname="br0", kind="bridge")
                    nl.link("set", index=nl.link_lookup(ifname="br0")[0], state="up")
            for wire in self.network.wires:
                a, b = wire.a, wire.b
                handles[a.node].link(
                    "add",
                    ifname=a.ifname,
                    kind="veth",
                    peer={"ifname": b.ifname, "net_ns_fd": self.ns[b.node]},
                )
                for port in (a, b):
                    self._setup_port(handles[port.node], port)
            for host, gw in self.network.gateways.items():
                handles[host].route("add", dst="0.0.0.0/0", gateway=gw)
        finally:
            for nl in handles.values():
                nl.close()
        if not self.offloads:
            for wire in self.network.wires:
                for port in (wire.a, wire.b):
                    run(
                        ["ethtool", "-K", port.ifname, "tso", "off", "gso", "off", "gro", "off"],
                        ns=self.ns[port.node],
                        check=False,
                    )
        self._up = True

    def _setup_port(self, nl: NetNS, port: Port) -> None:
        idx = nl.link_lookup(ifname=port.ifname)[0]
        node = self.network.nodes[port.node]
        if node.bridge:
            nl.link("set", index=idx, master=nl.link_lookup(ifname="br0")[0])
        for addr in ([port.address] if port.address else []) + list(port.extra_addresses):
            ip, plen = addr.split("/")
            nl.addr("add", index=idx, address=ip, prefixlen=int(plen))
        nl.link("set", index=idx, state="up")

    def down(self) -> None:
        if self.switch is not None:
            with contextlib.suppress(Exception):  # its summary goes to its log; the lease kills it anyway
                self.switch.stop()
            self.switch = None
        self.lease.release()
        self._up = False

    def __enter__(self) -> NamespaceFabric:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # -- live configuration ------------------------------------------------------------------
    def configure(self, plan: NetPlan, restart_switch: bool = False) -> None:
        """Apply ``plan``'s datapath, shaping and per-host TCP settings to the live fabric (idempotent).

        On the switch datapath the switch is (re)started when its configuration changed, when it is
        not running, or when ``restart_switch`` asks for it (fresh telemetry and zeroed counters,
        e.g. for a new run; a restart takes well under a second)."""
        if plan.datapath == "switch":
            self._configure_switch(plan, restart_switch)
        else:
            self._stop_switch()
            self._configure_kernel(plan)
        ensure_congestion_control_allowed({h.kernel_cc for h in plan.hosts.values()})
        for host, want in plan.hosts.items():
            sysctl(self.ns[host], dict(want.sysctls))
            ns = self.ns[host]
            for route in want.routes:  # its default route, with the spec's attributes
                assert route.via is not None
                run(["ip", "-n", ns, "route", "replace", route.destination, "via", route.via, *route.attributes])

    def _configure_switch(self, plan: NetPlan, restart: bool) -> None:
        if self.switches is None:
            raise RuntimeError(
                "the switch datapath needs the userspace switch, and this fabric was given none "
                "(NamespaceFabric(..., switches=shufflelab.switch.Switch))"
            )
        ns = self.ns[ROUTER]
        for port in self.network.ports_of(ROUTER):  # the switch queues: no qdisc under it
            if has_root_qdisc(run(["tc", "-n", ns, "qdisc", "show", "dev", port.ifname])):
                run(["tc", "-n", ns, "qdisc", "del", "dev", port.ifname, "root"])
        if not self._macs:
            self._macs = {h: interface_mac(self.ns[h], "eth0", run_at) for h in self.network.host_addresses}
        cfg = plan.switch_config(self._macs)
        if self.switch is not None and self.switch.alive() and not restart and self.switch.config == cfg:
            return
        if self.switch is not None:
            self.switch.stop()
        self.switch = namespace_switch(self.lease, ROUTER, cfg, self.offloads, switches=self.switches)
        self.switch.start()
        if cfg.cpu is not None:  # the hosts' receive work off the switch's CPU (see steer_rx)
            self._steer_router_peers(rps_mask_without(cfg.cpu))

    def _steer_router_peers(self, mask: str) -> None:
        for wire in self.network.wires:
            for near, far in ((wire.a, wire.b), (wire.b, wire.a)):
                if near.node == ROUTER:
                    steer_rx(self.ns[far.node], far.ifname, mask, run_at)

    def _stop_switch(self) -> None:
        if self.switch is None:
            return
        self.switch.stop()
        self.switch = None
        self._steer_router_peers("0")  # kernel forwarding: receive work where it arrives again
        sysctl(self.ns[ROUTER], {"net.ipv4.ip_forward": "1"})

    def switch_failure(self) -> str | None:
        """Why the userspace switch is gone while the fabric needs it (``None``: all is well)."""
        if self.switch is None or self.switch.alive():
            return None
        return f"the userspace switch exited: {self.switch.log_tail(500) or 'no output'}"

    def _configure_kernel(self, plan: NetPlan) -> None:
        for port in self.network.bottlenecks:
            ns = self.ns[port.node]
            shown = run(["tc", "-n", ns, "qdisc", "show", "dev", port.ifname])
            root, changes = shaping_changes(shown, port.ifname, plan.links[port.ifname])
            for args in ([root] if root else []) + changes:
                run(["tc", "-n", ns, *args])

    # -- observation -----------------------------------------------------------------------------
    def selftest(self, plan: NetPlan, run_dir: Path) -> list[dict[str, Any]]:
        """The link self-test of ``plan`` on this idle fabric, once per link configuration
        (:func:`shufflelab.emulate.selftest.for_run`), written to ``run_dir/selftest.json``."""
        return link_selftest.for_run(plan, self, run_dir, self.selftest_cache)

    def start_queue_sampler(self, spec: ExperimentSpec, out: Path, launch: ProcessLauncher) -> Process | None:
        """The kernel datapath's queue sampler on the bottleneck ports, writing ``out`` (None on the
        switch datapath: the switch samples its queues itself, see :meth:`save_telemetry`)."""
        if self.switch is not None:
            return None
        args = [sys.executable, "-m", "shufflelab.emulate.sampler",
                "--period-ms", str(spec.telemetry.queue_period_ms),
                "--max-s", str(spec.experiment.run_timeout_s + 120),
                "--out", str(out)]  # fmt: skip
        for p in self.network.bottlenecks:
            args += ["--dev", p.ifname]
        return launch(self.ns[ROUTER], args, out.parent / "sampler.log")

    def save_telemetry(self, run_dir: Path) -> None:
        """On the switch datapath: the switch's telemetry (the kernel sampler's columns + marks) as
        ``queue_samples.csv``, its configuration and log, in ``run_dir``."""
        if self.switch is None:
            return
        with contextlib.suppress(OSError):
            self.switch.save_telemetry(run_dir / "queue_samples.csv")
            self.switch.save_status(run_dir / "switch_status.csv")
            self.switch.save_config_and_log(run_dir)

    def start_cross_traffic(self) -> None:
        """Start the switch's own cross-traffic sources (configured paused, so that the link self-test
        runs on an idle fabric); nothing without them."""
        if self.switch is not None and self.switch.config.cross:
            self.switch.start_cross()

    def counters(self, port: Port) -> PortCounters:
        """Cumulative egress counters of ``port``: its root qdisc's on the kernel path; on the switch
        datapath the switch's latest telemetry row (counted since the switch's last start)."""
        if self.switch is not None and port.node == ROUTER:
            return PortCounters.from_switch_row(self.switch.last_telemetry().get(port.ifname))
        with contextlib.closing(NetNS(self.ns[port.node])) as nl:
            idx = nl.link_lookup(ifname=port.ifname)[0]
            q = next(q for q in nl.get_qdiscs(index=idx) if q.get("parent") == 0xFFFFFFFF)
            st = q.get_attr("TCA_STATS") or {}
            return PortCounters(
                tx_bytes=int(st.get("bytes", 0)),
                tx_packets=int(st.get("packets", 0)),
                drops=int(st.get("drop", 0)),
                backlog_bytes=int(st.get("backlog", 0)),
                backlog_packets=int(st.get("qlen", 0)),
            )
