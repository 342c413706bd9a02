"""A small star fabric for the switch's benchmarks (``switch_fidelity.py``, ``switch_queue.py``, which
import it as ``switchlab``) and its root integration test (``tests/switch``, as
``benchmarks.switchlab``): hosts ``h1..hN`` each on their own port of router ``r`` (the addressing
of ``topology.star``: host i is 10.77.i.1/24 behind gateway 10.77.i.254). Namespaces come from a
:class:`~shufflelab.emulate.netns.NamespaceLease`, so its release (and ``shufflelab clean``) removes
everything. Scaffolding, not part of the product package.

The router either forwards in the kernel (``kernel_path``: ip_forward on, optional HTB shaping
from :func:`shufflelab.netplan.shaping_commands`) or leaves forwarding to the userspace
switch (:class:`~shufflelab.switch.Switch` started by the caller).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shufflelab.emulate.fabric import interface_mac, steer_rx, sysctl
from shufflelab.emulate.netns import NamespaceLease, run, run_at
from shufflelab.netplan import shaping_commands
from shufflelab.spec import Link
from shufflelab.switch.config import Mode, SwitchHost

ROUTER = "r"


@dataclass
class Star:
    lease: NamespaceLease
    hosts: list[str]
    addresses: dict[str, str] = field(default_factory=dict)
    macs: dict[str, str] = field(default_factory=dict)

    def ns(self, node: str) -> str:
        return self.lease.ns(node)

    @property
    def router_ns(self) -> str:
        return self.lease.ns(ROUTER)

    def switch_hosts(self, modes: dict[str, Mode] | None = None) -> list[SwitchHost]:
        modes = modes or {}
        return [SwitchHost(self.addresses[h], self.macs[h], h, modes.get(h, "off")) for h in self.hosts]

    def kernel_path(self, link: Link | None) -> None:
        """Let the kernel route (ip_forward on) and shape every router port with HTB + FIFO."""
        sysctl(self.router_ns, {"net.ipv4.ip_forward": "1"})
        for h in self.hosts:  # kernel forwarding: receive work where it arrives (no steering)
            steer_rx(self.ns(h), "eth0", "0", run_at)
        for h in self.hosts:
            if link is None:
                run(["tc", "-n", self.router_ns, "qdisc", "del", "dev", h, "root"], check=False)
                continue
            for argv in shaping_commands(self.router_ns, h, link):
                run(argv)

    def host_sysctl(self, host: str, values: dict[str, str]) -> None:
        sysctl(self.ns(host), values)


def build_star(lease: NamespaceLease, n_hosts: int = 2) -> Star:
    """Create ``r`` and ``h1..hN`` with veths, addresses, default routes; offloads off."""
    star = Star(lease, [f"h{i}" for i in range(1, n_hosts + 1)])
    r = lease.create_namespace(ROUTER)
    run(["ip", "-n", r, "link", "set", "lo", "up"])
    sysctl(
        r,
        {
            "net.ipv4.ip_forward": "0",
            "net.ipv4.conf.all.send_redirects": "0",
            "net.ipv4.conf.default.send_redirects": "0",
        },
    )
    for i, h in enumerate(star.hosts, start=1):
        ns = lease.create_namespace(h)
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(["ip", "-n", r, "link", "add", h, "type", "veth", "peer", "name", "eth0", "netns", ns])
        run(["ip", "-n", r, "addr", "add", f"10.77.{i}.254/24", "dev", h])
        run(["ip", "-n", ns, "addr", "add", f"10.77.{i}.1/24", "dev", "eth0"])
        run(["ip", "-n", r, "link", "set", h, "up"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        run(["ip", "-n", ns, "route", "add", "default", "via", f"10.77.{i}.254"])
        for where, dev in ((ns, "eth0"), (r, h)):
            run(["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"], ns=where, check=False)
        star.addresses[h] = f"10.77.{i}.1"
        star.macs[h] = interface_mac(ns, "eth0", run_at)
    return star


def iperf3(star: Star, src: str, dst: str, seconds: float, args: list[str] | None = None) -> dict[str, object]:
    """One bounded iperf3 test from ``src`` to ``dst`` (server started for this test only);
    returns iperf3's JSON result."""
    import json
    import secrets
    import time

    from shufflelab.emulate.netns import NamespaceProcess

    port = str(20000 + secrets.randbelow(20000))
    log = star.lease.scratch / f"iperf3-{dst}-{port}.log"
    server = NamespaceProcess(star.ns(dst), ["iperf3", "-s", "-1", "-p", port], log)
    try:
        out = ""
        for _ in range(50):  # the server needs a moment to listen
            time.sleep(0.05)
            if "listening" in log.read_text(errors="replace").lower():
                break
        out = run(
            ["iperf3", "-c", star.addresses[dst], "-p", port, "-t", str(seconds), "-J", *(args or [])],
            ns=star.ns(src),
            timeout=seconds + 30,
            check=False,
        )
        result: dict[str, object] = json.loads(out) if out.strip() else {}
        return result
    finally:
        server.stop(grace_s=2)


def received_mbps(result: dict[str, object]) -> float:
    """Receiver-side goodput of an iperf3 TCP result in Mbit/s (0 if the test failed)."""
    end = result.get("end")
    if not isinstance(end, dict) or "sum_received" not in end:
        return 0.0
    return float(end["sum_received"]["bits_per_second"]) / 1e6
