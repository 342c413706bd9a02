"""What this host can emulate: probed once (``probe``), checked against specs (``check``, pure).

The probe really tries things -- it adds each qdisc kind to a veth in a throw-away namespace --
because a kernel's module list says little about what loads. ``check`` turns a spec's wishes into
clear refusals that say what is missing and what would provide it.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any

from shufflelab.spec import ExperimentSpec

QDISC_KINDS = ("htb", "pfifo", "bfifo", "netem", "red", "tbf", "fq_codel", "prio")
SWITCH_FEATURES = "the userspace switch (delay, RED/ECN, DCTCP, congestion-control virtualization)"


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
    caps.cgroup_cpu = os.path.isdir("/sys/fs/cgroup/cpu") or os.path.exists("/sys/fs/cgroup/cpu.max")
    if caps.root and caps.tools["ip"]:
        _probe_netns(caps)
    return caps


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
    for needed in ("htb", "bfifo" if spec.topology.bottleneck.queue_packets is None else "pfifo"):
        if caps.qdiscs and needed not in caps.qdiscs:
            problems.append(f"{pre}the kernel lacks the {needed!r} qdisc needed for shaping")
    link = spec.topology.bottleneck
    if link.delay_ms > 0:
        problems.append(
            f"{pre}topology.bottleneck.delay_ms = {link.delay_ms:g}: adding delay needs the netem qdisc "
            f"(this kernel has: {', '.join(caps.qdiscs) or 'none probed'}) or {SWITCH_FEATURES}, "
            "which is not available yet; set delay_ms = 0"
        )
    if link.discipline == "red":
        problems.append(
            f"{pre}topology.bottleneck.discipline = 'red': RED/ECN marking needs the red qdisc "
            f"(missing here) or {SWITCH_FEATURES}, which is not available yet; use 'droptail'"
        )
    by_cc: dict[str, list[str]] = {}
    for host in spec.hosts:
        by_cc.setdefault(spec.tcp_for(host).congestion_control, []).append(host)
    for cc, hosts in by_cc.items():
        if caps.congestion_controls and cc not in caps.congestion_controls:
            problems.append(
                f"{pre}tcp.congestion_control = {cc!r} (hosts {', '.join(hosts)}): the kernel offers "
                f"{', '.join(caps.congestion_controls)}"
                + (f"; emulated DCTCP will come from {SWITCH_FEATURES}" if cc == "dctcp" else "")
            )
    ct = spec.cross_traffic
    if (ct.udp_percent > 0 or ct.tcp_pairs > 0) and not caps.tools.get("iperf3"):
        problems.append(f"{pre}cross traffic needs iperf3 (run the setup: make setup)")
    if not caps.tools.get("java"):
        problems.append(f"{pre}Spark needs Java 17 (java not found)")
    return problems
