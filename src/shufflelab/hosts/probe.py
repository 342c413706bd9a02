"""What each inventory host has, found over SSH: the kernel's qdiscs (tried for real in a
throw-away namespace when root), congestion controls (available and loadable), Java, Python and
pyspark versions (of the interpreter at the controller's ``sys.executable`` path, the one runs
start on every host), the userspace switch binary at the controller's path and ethtool (what a
router host needs for the switch), the cgroup v1 ``cpu`` controller (what caps a TPC-H/NDP storage
machine's CPUs), root or sudo, listening ports, the data and control interfaces, and the clock
offset to the controller (several ``date +%s.%N`` round trips; offset = remote - midpoint of the
tightest one, uncertainty = half its round trip)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import asyncssh

from shufflelab.hosts.control import HostError, Session
from shufflelab.hosts.lease import CGROUP_CPU_ROOT
from shufflelab.hosts.paths import HostPaths
from shufflelab.hosts.safety import control_interface

QDISC_KINDS = ("htb", "pfifo", "bfifo", "netem", "red", "fq_codel", "tbf")
CLOCK_ROUNDS = 7

# One script, one round trip: sections "==name" followed by their output.
_SCRIPT = r"""
echo ==kernel; uname -r
echo ==uid; id -u
echo ==sudo; if sudo -n true 2>/dev/null; then echo yes; else echo no; fi
echo ==cc_available; cat /proc/sys/net/ipv4/tcp_available_congestion_control 2>/dev/null
echo ==cc_loadable
ls /lib/modules/"$(uname -r)"/kernel/net/ipv4/ 2>/dev/null \
  | sed -n 's/^tcp_\([a-z0-9_]*\)\.ko.*/\1/p' | tr '\n' ' '; echo
echo ==java; java -version 2>&1 | grep -m1 'version "'
echo ==python; "$2" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>&1
echo ==pyspark; "$2" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null || echo missing
echo ==iperf3; iperf3 --version 2>/dev/null | head -1
echo ==tc; command -v tc || echo missing
echo ==switch; if [ -x "$3" ]; then echo yes; else echo no; fi
echo ==ethtool; command -v ethtool || echo missing
echo ==listening; ss -Htln 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -un | tr '\n' ' '; echo
echo ==data_interface; ip -j link show dev "$1" 2>/dev/null || echo missing
echo ==data_address; ip -j -4 addr show dev "$1" 2>/dev/null
echo ==cpus; nproc 2>/dev/null
echo ==cgroup_cpu; if [ -f CGROUP_CPU/cpu.cfs_quota_us ]; then echo yes; else echo no; fi
echo ==qdiscs
if [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; then
  S=; [ "$(id -u)" = 0 ] || S="sudo -n"
  ns=slprobe-$$
  if $S ip netns add "$ns" 2>/dev/null; then
    trap '$S ip netns delete "$ns" 2>/dev/null' EXIT; trap 'exit 1' HUP INT TERM
    $S ip -n "$ns" link add p0 type veth peer name p1 2>/dev/null
    for k in QDISCS; do
      if $S tc -n "$ns" qdisc replace dev p0 root $k 2>/dev/null; then
        printf '%s ' "$k"; $S tc -n "$ns" qdisc del dev p0 root 2>/dev/null
      fi
    done
    echo
  else echo unknown; fi
else echo unknown; fi
""".replace("QDISCS", " ".join(QDISC_KINDS)).replace("CGROUP_CPU", CGROUP_CPU_ROOT)


@dataclass
class HostFacts:
    host: str
    address: str
    reachable: bool = True
    error: str | None = None
    kernel: str = ""
    root: bool = False
    sudo: bool = False
    qdiscs: list[str] | None = None  # None: could not try (no root)
    congestion_controls: list[str] = field(default_factory=list)
    loadable_congestion_controls: list[str] = field(default_factory=list)
    java: str | None = None
    python: str | None = None
    pyspark: str | None = None
    iperf3: str | None = None
    tc: bool = False
    switch: bool = False  # the userspace switch binary at the controller's path (a router host runs it)
    switch_binary: str = ""  # that path
    ethtool: bool = False
    listening_ports: list[int] = field(default_factory=list)
    data_interface: str = ""
    data_interface_present: bool = False
    data_interface_mtu: int | None = None
    data_address: str | None = None  # its IPv4 address (what Spark binds to)
    cpus: int | None = None  # nproc
    # the cgroup v1 cpu controller at hosts.lease.CGROUP_CPU_ROOT (a storage machine's CPU cap is a
    # group there); None: not probed
    cgroup_cpu: bool | None = None
    control_interface: str | None = None
    clock_offset_s: float | None = None  # remote - controller
    clock_uncertainty_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sections(text: str) -> dict[str, str]:
    """``==name`` headed sections of the probe script's output."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("=="):
            current = line[2:].strip()
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return {k: "\n".join(v).strip() for k, v in out.items()}


def parse_facts(host: str, address: str, data_interface: str, text: str) -> HostFacts:
    import json
    import re

    s = sections(text)
    f = HostFacts(host=host, address=address, data_interface=data_interface)
    f.kernel = s.get("kernel", "")
    f.root = s.get("uid") == "0"
    f.sudo = s.get("sudo") == "yes"
    f.congestion_controls = s.get("cc_available", "").split()
    f.loadable_congestion_controls = sorted(set(s.get("cc_loadable", "").split()) - {"diag"})
    m = re.search(r'version "([^"]+)"', s.get("java", ""))
    f.java = m.group(1) if m else None
    f.python = s.get("python") if re.fullmatch(r"\d+\.\d+\.\d+", s.get("python", "")) else None
    f.pyspark = None if s.get("pyspark", "missing") in ("missing", "") else s["pyspark"]
    m = re.search(r"iperf ([\d.]+)", s.get("iperf3", ""))
    f.iperf3 = m.group(1) if m else None
    f.tc = s.get("tc", "missing") not in ("missing", "")
    f.switch = s.get("switch") == "yes"
    f.ethtool = s.get("ethtool", "missing") not in ("missing", "")
    f.listening_ports = sorted(int(p) for p in s.get("listening", "").split() if p.isdigit())
    link = s.get("data_interface", "missing")
    if link != "missing":
        try:
            info = json.loads(link)
            f.data_interface_present = bool(info)
            f.data_interface_mtu = int(info[0]["mtu"]) if info else None
        except (ValueError, KeyError, IndexError):
            f.data_interface_present = False
    try:
        f.data_address = next(
            str(a["local"])
            for link in json.loads(s.get("data_address") or "[]")
            for a in link.get("addr_info", [])
            if a.get("family") == "inet" and a.get("local")
        )
    except (ValueError, StopIteration, AttributeError, TypeError):
        f.data_address = None
    f.cpus = int(s["cpus"]) if s.get("cpus", "").isdigit() else None
    f.cgroup_cpu = {"yes": True, "no": False}.get(s.get("cgroup_cpu", ""))
    q = s.get("qdiscs", "unknown")
    f.qdiscs = None if q == "unknown" else q.split()
    return f


# from one host, every other data address at once, each ping waiting at most 1 s: bounded by ~1 s
_REACH = r"""
command -v ping >/dev/null 2>&1 || { echo noping; exit 0; }
for a in "$@"; do
  ( if ping -n -c1 -W1 "$a" >/dev/null 2>&1; then echo "$a yes"; else echo "$a no"; fi ) &
done
wait
"""


def parse_reach(text: str, addresses: list[str]) -> dict[str, bool | None]:
    """``address -> reached`` from the reach script's output (None for every one without ping)."""
    if text.strip() == "noping":
        return dict.fromkeys(addresses)
    said = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
    return {a: said.get(a) == "yes" for a in addresses}


async def reach(session: Session, addresses: list[str]) -> dict[str, bool | None]:
    """Which of ``addresses`` (other hosts' data addresses) answer a ping from ``session``'s host."""
    if not addresses:
        return {}
    r = await session.run("ping the other hosts' data addresses", ["sh", "-c", _REACH, "sh", *addresses])
    return parse_reach(r.stdout, addresses)


async def reach_all(sessions: dict[str, Session], facts: dict[str, HostFacts]) -> dict[str, dict[str, bool | None]]:
    """From each host in ``sessions``, whether each other one's data address answers (hosts without
    a data address, or whose probe failed, are left out)."""
    addr = {h: f.data_address for h, f in facts.items() if f.error is None and f.data_address and h in sessions}
    hosts = sorted(addr)

    async def one(h: str) -> dict[str, bool | None]:
        others = [o for o in hosts if o != h]
        got = await reach(sessions[h], [addr[o] for o in others])
        return {o: got[addr[o]] for o in others}

    results = await asyncio.gather(*(one(h) for h in hosts))
    return dict(zip(hosts, results, strict=True))


async def clock_offset(session: Session, rounds: int = CLOCK_ROUNDS) -> tuple[float, float]:
    """(offset, uncertainty) of the host's clock against this one, from the tightest round trip.

    The rounds go through one shell kept open on the host, so a round trip is a line each way
    and one ``date`` (not an SSH channel set-up, which takes hundreds of ms on a busy host)."""
    step = "read the clock"
    try:
        proc = await session.conn.create_process("exec sh")
    except (asyncssh.Error, OSError) as exc:
        raise HostError(session.name, session.host.address, step, f"cannot open a shell: {exc}") from None
    best: tuple[float, float] | None = None
    try:
        for _ in range(rounds):
            t0 = time.time()
            proc.stdin.write("date +%s.%N\n")
            async with asyncio.timeout(session.timeout_s):
                line = await proc.stdout.readline()
            t1 = time.time()
            try:
                remote = float(str(line).strip())
            except ValueError:
                raise HostError(session.name, session.host.address, step, f"`date +%s.%N` said {line!r}") from None
            if best is None or (t1 - t0) / 2 < best[1]:
                best = (remote - (t0 + t1) / 2, (t1 - t0) / 2)
    except TimeoutError:
        raise HostError(session.name, session.host.address, step, "no answer from `date`") from None
    finally:
        proc.close()
    assert best is not None
    return best


async def cpu_count(session: Session) -> int | None:
    """The host's CPU count (``nproc``; None if it says something else)."""
    out = (await session.run("count the CPUs", ["nproc"])).stdout.strip()
    return int(out) if out.isdigit() else None


async def line_rate_mbps(session: Session) -> float | None:
    """The line rate of the host's data interface in Mbit/s, as its driver reports it
    (``/sys/class/net/DEV/speed``); None when it reports none (an unknown or virtual link whose
    driver does not say, a link that is down)."""
    dev = session.host.data_interface
    r = await session.run(f"read {dev}'s line rate", ["cat", f"/sys/class/net/{dev}/speed"], check=False)
    out = r.stdout.strip()
    return float(out) if r.exit_status == 0 and out.isdigit() and int(out) > 0 else None


async def probe_host(session: Session) -> HostFacts:
    # the interpreter the run starts on the host: the controller's at the same path, or the deployed one
    paths = HostPaths.of(session.host)
    binary = paths.switch
    argv = ["sh", "-c", _SCRIPT, "sh", session.host.data_interface, paths.python, binary]
    r = await session.run("probe", argv)
    facts = parse_facts(session.name, session.host.address, session.host.data_interface, r.stdout)
    facts.switch_binary = binary
    facts.control_interface = await control_interface(session)
    facts.clock_offset_s, facts.clock_uncertainty_s = await clock_offset(session)
    return facts


async def probe_all(sessions: dict[str, Session]) -> dict[str, HostFacts]:
    """Probe every host concurrently; a host whose probe fails is reported with its error."""
    results = await asyncio.gather(*(probe_host(s) for s in sessions.values()), return_exceptions=True)
    out: dict[str, HostFacts] = {}
    for (name, s), r in zip(sessions.items(), results, strict=True):
        if isinstance(r, HostFacts):
            out[name] = r
        elif isinstance(r, HostError | ValueError):
            out[name] = HostFacts(host=name, address=s.host.address, reachable=True, error=str(r))
        else:
            raise r
    return out
