"""What this host can emulate: probed once (``probe``), checked against specs (``check``, pure).

The probe really tries things -- it adds each qdisc kind to a veth in a throw-away namespace --
because a kernel's module list says little about what loads. ``check`` turns a spec's wishes into
clear refusals that say what is missing and what would provide it. Delay, RED/ECN, DCTCP and VCC
come from the userspace switch (``shufflelab-switch``) when it is built; :func:`emulation` says,
for a run's record, how a spec's network was realized.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any

from shufflelab import artifacts, netplan
from shufflelab.artifacts import SWITCH_BINARY_NAME
from shufflelab.spec import DCTCP_BASE, ExperimentSpec

QDISC_KINDS = ("htb", "pfifo", "bfifo", "netem", "red", "tbf", "fq_codel", "prio")
SWITCH_FEATURES = "the userspace switch (delay, RED/ECN, DCTCP, congestion-control virtualization)"
DCTCP_MEANS = f"DCTCP in the userspace switch over {DCTCP_BASE}"
SWITCH_MISSING = (
    f"{SWITCH_BINARY_NAME} is not built here (make setup builds target/release/{SWITCH_BINARY_NAME}; "
    "or point SHUFFLELAB_SWITCH at the binary)"
)


@dataclass
class Capabilities:
    kernel: str = ""
    root: bool = False
    netns: bool = False
    veth: bool = False
    qdiscs: list[str] = field(default_factory=list)
    congestion_controls: list[str] = field(default_factory=list)
    tools: dict[str, str | None] = field(default_factory=dict)  # tool -> version or None
    tun: bool = False
    cgroup_cpu: bool = False
    userspace_switch: bool = False
    switch_binary: str | None = None
    irq_time_accounting: bool | None = None  # None: the kernel's config is not readable
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _version(argv: list[str], pattern: str) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(pattern, p.stdout + p.stderr)
    return m.group(1) if m else "present"


def probe() -> Capabilities:
    """Inspect this host (needs root for the namespace and qdisc tries)."""
    caps = Capabilities(kernel=platform.release(), root=os.geteuid() == 0)
    caps.tools = {
        "ip": _version(["ip", "-V"], r"iproute2-([\w.]+)"),
        "tc": "present" if shutil.which("tc") else None,
        "ethtool": _version(["ethtool", "--version"], r"version ([\d.]+)"),
        "iperf3": _version(["iperf3", "--version"], r"iperf ([\d.]+)"),
        "java": _version(["java", "-version"], r'version "([^"]+)"'),
        "ss": "present" if shutil.which("ss") else None,
    }
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as fh:
            caps.congestion_controls = fh.read().split()
    except OSError:
        pass
    if "dctcp" not in caps.congestion_controls and shutil.which("modprobe"):
        subprocess.run(["modprobe", "tcp_dctcp"], capture_output=True)
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as fh:
            caps.congestion_controls = fh.read().split()
    caps.tun = os.path.exists("/dev/net/tun")
    switch = artifacts.switch_binary()
    caps.userspace_switch = switch is not None
    caps.switch_binary = str(switch) if switch else None
    caps.cgroup_cpu = os.path.isdir("/sys/fs/cgroup/cpu") or os.path.exists("/sys/fs/cgroup/cpu.max")
    caps.irq_time_accounting = _kernel_option("CONFIG_IRQ_TIME_ACCOUNTING")
    if caps.root and caps.tools["ip"]:
        _probe_netns(caps)
    return caps


def _kernel_option(name: str) -> bool | None:
    """Is ``name`` set in the running kernel's config (/proc/config.gz or /boot/config-*)? None if unknown.

    CONFIG_IRQ_TIME_ACCOUNTING matters to shufflelab: without it, interrupt work (packet
    forwarding) is charged to whichever thread runs, inflating executors' CPU time under traffic."""
    import gzip

    candidates: list[tuple[str, bool]] = [("/proc/config.gz", True), (f"/boot/config-{platform.release()}", False)]
    for path, zipped in candidates:
        try:
            opener = gzip.open if zipped else open
            with opener(path, "rt") as fh:  # type: ignore[operator]
                text = fh.read()
        except OSError:
            continue
        return f"{name}=y" in text
    return None


def _probe_netns(caps: Capabilities) -> None:
    ns = f"slprobe{os.getpid()}"
    try:
        if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode != 0:
            return
        caps.netns = True
        r = subprocess.run(
            ["ip", "-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1"],
            capture_output=True,
        )
        caps.veth = r.returncode == 0
        if not caps.veth:
            return
        for kind in QDISC_KINDS:
            r = subprocess.run(["tc", "-n", ns, "qdisc", "replace", "dev", "p0", "root", kind], capture_output=True)
            if r.returncode == 0:
                caps.qdiscs.append(kind)
                subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", "p0", "root"], capture_output=True)
    finally:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


def check(spec: ExperimentSpec, caps: Capabilities, where: str = "") -> list[str]:
    """Reasons ``spec`` cannot run on a host with ``caps`` (empty: it can). Pure."""
    pre = f"{where}: " if where else ""
    problems: list[str] = []
    if not caps.root:
        problems.append(f"{pre}the emulate backend needs root (network namespaces, qdiscs, sysctls)")
    if not caps.netns or not caps.veth:
        problems.append(f"{pre}this host cannot create network namespaces with veth pairs")
    link = netplan.bottleneck(spec)
    if spec.datapath() == "kernel":
        for needed in ("htb", "bfifo" if link.queue_packets is None else "pfifo"):
            if caps.qdiscs and needed not in caps.qdiscs:
                problems.append(f"{pre}the kernel lacks the {needed!r} qdisc needed for shaping")
    elif not caps.userspace_switch:
        have = ", ".join(caps.qdiscs) or "none probed"
        if link.delay_ms > 0:
            problems.append(
                f"{pre}topology.bottleneck.delay_ms = {link.delay_ms:g}: adding delay needs the netem qdisc "
                f"(this kernel has: {have}) or {SWITCH_FEATURES}, but {SWITCH_MISSING}; or set delay_ms = 0"
            )
        if link.discipline == "red":
            problems.append(
                f"{pre}topology.bottleneck.discipline = 'red': RED/ECN marking needs the red qdisc (missing "
                f"here) or {SWITCH_FEATURES}, but {SWITCH_MISSING}; or use 'droptail'"
            )
        for what, hosts in spec.hosts_by_switch_mode().items():
            field_value = "tcp.congestion_control = 'dctcp'" if what == "dctcp" else "tcp.vcc = true"
            problems.append(
                f"{pre}{field_value} (hosts {', '.join(hosts)}): "
                + (
                    f"this kernel offers {', '.join(caps.congestion_controls) or 'no dctcp'}; DCTCP is enforced "
                    if what == "dctcp"
                    else "congestion-control virtualization is done "
                )
                + f"by the userspace switch, but {SWITCH_MISSING}"
            )
        if link.datapath == "switch":
            problems.append(f"{pre}topology.bottleneck.datapath = 'switch': {SWITCH_MISSING}")
        if spec.telemetry.queue_period_ms < 10:
            problems.append(
                f"{pre}telemetry.queue_period_ms = {spec.telemetry.queue_period_ms:g}: sampling below 10 ms "
                f"needs the userspace switch's telemetry, but {SWITCH_MISSING}"
            )
    by_cc: dict[str, list[str]] = {}
    for host in spec.hosts:
        by_cc.setdefault(spec.tcp_for(host).kernel_congestion_control(), []).append(host)
    for cc, hosts in by_cc.items():
        if caps.congestion_controls and cc not in caps.congestion_controls:
            problems.append(
                f"{pre}tcp.congestion_control = {cc!r} (hosts {', '.join(hosts)}): the kernel offers "
                f"{', '.join(caps.congestion_controls)}"
            )
    ct = spec.cross_traffic
    if ((ct.udp_percent > 0 and ct.generator == "iperf3") or ct.tcp_pairs > 0) and not caps.tools.get("iperf3"):
        problems.append(f"{pre}cross traffic needs iperf3 (run the setup: make setup)")
    if not caps.tools.get("java"):
        problems.append(f"{pre}Spark needs Java 17 (java not found)")
    return problems


def emulation(spec: ExperimentSpec) -> dict[str, Any]:
    """How ``spec``'s network is realized on this host, for a run's environment record. Pure.

    ``datapath`` is ``kernel`` (HTB + FIFO qdiscs) or ``switch``; with the switch,
    ``emulated_by_switch`` lists, in words, what the userspace switch provides, and
    ``congestion_control`` says what a ``dctcp`` host really runs."""
    link = netplan.bottleneck(spec)
    queue = f"{link.queue_packets} packets" if link.queue_packets else f"{link.effective_queue_bytes()} bytes"
    if spec.datapath() == "kernel":
        return {
            "datapath": "kernel",
            "shaping": f"HTB {link.rate_mbps:g} Mbit/s + {'pfifo' if link.queue_packets else 'bfifo'} of {queue}",
        }
    notes = [f"emulated by the userspace switch ({SWITCH_BINARY_NAME}): {link.rate_mbps:g} Mbit/s, queue of {queue}"]
    if link.delay_ms > 0:
        notes.append(f"{link.delay_ms:g} ms one-way delay on every router port, after the queue")
    if link.discipline == "red" and link.red is not None:
        r = link.red
        notes.append(
            f"RED{'/ECN' if r.ecn else ''}: limit {queue}, min {r.min_bytes} bytes, max {r.max_bytes} bytes, "
            f"max_p {r.max_p:g}, " + (f"EWMA weight {r.ewma_weight:g}" if r.ewma_weight else "instantaneous queue")
        )
    else:
        notes.append("drop-tail queue")
    ct = spec.cross_traffic
    if ct.generator == "switch" and ct.udp_percent > 0:
        notes.append(
            f"UDP cross traffic at {ct.udp_percent:g} % made by the switch ({ct.pattern} arrivals of 1514-byte "
            "virtual frames in the sink's port queue; no host sends or receives them)"
        )
    modes = spec.hosts_by_switch_mode()
    out: dict[str, Any] = {"datapath": "switch", "emulated_by_switch": notes}
    if "dctcp" in modes:
        notes.append(f"dctcp = {DCTCP_MEANS} (tcp_ecn = 1) on hosts {', '.join(modes['dctcp'])}")
        out["congestion_control"] = {"dctcp": DCTCP_MEANS}
    if "vcc" in modes:
        notes.append(
            "vcc: legacy hosts (tcp_ecn = 0) whose flows the switch virtualizes into DCTCP: " + ", ".join(modes["vcc"])
        )
    return out
