"""Fabric self-test: does every shaped link deliver its configured rate and round-trip time?

Before the runs of a configuration, each bottleneck port is measured once: a short iperf3 UDP
stream through it offered at :data:`OFFERED` times the port's rate (in frame terms: 1400-byte
payloads, their UDP/IP/Ethernet headers counted as the qdisc counts them) and a few pings across it
(RTT vs the configured delays). The rate check is the payload the receiver got over the payload a
perfect link delivers at the configured rate, so a correctly shaped link reads 1.0 whatever its
queue does with the excess, and an over-fast link (up to the offered 1.2) or a slow one is caught.
A TCP transfer would measure how the queue treats TCP instead: one loss-based flow cannot fill a
port that drops at a fraction of the bandwidth-delay product. A port outside the tolerances is
reported; with ``telemetry.selftest = "refuse"`` the runs of that configuration are not started
(each is recorded as failed with the reason), with ``"warn"`` they run and the report says so. Why:
a link that silently delivers 60 % of its rate (a CPU-starved switch, a mistyped qdisc left behind,
offloads turned back on) turns every conclusion about the network into noise.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shufflelab import shaping
from shufflelab.emulate import netns
from shufflelab.spec import Link
from shufflelab.topology import Network, Port

if TYPE_CHECKING:
    from shufflelab.emulate.protocols import CommandRunner, ProcessLauncher
    from shufflelab.netplan import NetPlan

Endpoints = Callable[[Network, Port], "tuple[str, str] | None"]

# the probe's payload share of its frames: what a perfect link delivers to the receiver per bit of its rate
PAYLOAD_SHARE = shaping.UDP_PAYLOAD_BYTES / (shaping.UDP_PAYLOAD_BYTES + shaping.UDP_OVERHEAD_BYTES)
OFFERED = 1.2  # the probe offers this multiple of the port's rate: the queue drops the excess; an unshaped port
# read 1.08 with 1.1 (20 Mbit/s, 1 s), too close to the 1.08 tolerance to be caught surely
IPERF_PORT = 5299


@dataclass
class LinkCheck:
    port: str  # "r:w1"
    src: str
    dst: str
    rate_mbps: float
    goodput_mbps: float | None  # the probe's payload the receiver got, Mbit/s
    rate_ratio: float | None  # goodput / (rate x payload share); 1.0 = the configured rate
    rtt_ms: float | None
    expected_rtt_ms: float
    ok: bool
    problem: str | None

    def row(self) -> dict[str, Any]:
        return asdict(self)


def _endpoints(net: Network, port: Port) -> tuple[str, str] | None:
    """(source, destination) hosts whose traffic crosses ``port`` on its way to the destination:
    the destination sits behind the port, the source preferably behind another router port (the
    other rack of a dumbbell, another host of a star; any other host of the one-armed shared link)."""
    hosts = list(net.host_addresses)
    if len(hosts) < 2:
        return None
    behind = [h for h in hosts if net.router_port_of(h) == port]
    if not behind:
        return None
    dst = behind[0]
    elsewhere = [h for h in hosts if h not in behind]
    src = elsewhere[0] if elsewhere else next(h for h in hosts if h != dst)
    return src, dst


def _ping_ms(run: CommandRunner, place: str, dst_ip: str) -> float | None:
    """The smallest RTT of 5 pings (ms): the link's delay plus the path's least processing. A reply
    held up because a forwarding process (the userspace switch) waited for a CPU raises the average,
    not the minimum; a delay above the configured one raises every reply."""
    out = run(["ping", "-n", "-q", "-c", "5", "-i", "0.2", "-W", "2", dst_ip], place=place, check=False, timeout=15)
    m = re.search(r"= ([\d.]+)/[\d.]+/", out)
    return float(m.group(1)) if m else None


def probe_argv(dst_ip: str, link: Link, seconds: int) -> list[str]:
    """The iperf3 client of the rate check: UDP at :data:`OFFERED` times ``link``'s rate in frame
    terms (``-b`` is payload bit/s, as the cross traffic sizes it), JSON out. Pure."""
    rate = shaping.udp_payload_rate_bps(link.rate_mbps, 100 * OFFERED)
    return ["iperf3", "-c", dst_ip, "-p", str(IPERF_PORT), "-u", "-b", str(rate),
            "-l", str(shaping.UDP_PAYLOAD_BYTES), "-t", str(seconds), "-J"]  # fmt: skip


def _probe_mbps(
    run: CommandRunner,
    launch: ProcessLauncher,
    places: Mapping[str, str],
    src: str,
    dst: str,
    dst_ip: str,
    link: Link,
    seconds: int,
    log_dir: Any,
) -> tuple[float, float | None]:
    """(payload Mbit/s the receiver got, payload Mbit/s the sender sent) of one probe: iperf3 3.12's
    UDP ``end.sum_received`` is the server's count (``end.sum`` holds the sender's bytes)."""
    server = launch(places[dst], ["iperf3", "-s", "-1", "-B", dst_ip, "-p", str(IPERF_PORT)],
                    log_dir / f"selftest-{dst}-server.log")  # fmt: skip
    try:
        deadline = time.monotonic() + 5
        while True:
            out = run(["ss", "-ltn", f"sport = :{IPERF_PORT}"], place=places[dst], check=False)
            if str(IPERF_PORT) in out or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        out = run(probe_argv(dst_ip, link, seconds), place=places[src], check=False, timeout=seconds + 20)
        data = json.loads(out) if out.strip().startswith("{") else {}
        end = data.get("end", {})
        bps = end.get("sum_received", {}).get("bits_per_second")
        if bps is None:
            raise RuntimeError(data.get("error", "iperf3 gave no result"))
        sent = end.get("sum_sent", {}).get("bits_per_second")
        return float(bps) / 1e6, None if sent is None else float(sent) / 1e6
    finally:
        server.stop(grace_s=1)


def check(
    fabric_ns: Mapping[str, str],
    net: Network,
    log_dir: Any,
    links: Mapping[str, Link],
    seconds: int = 2,
    min_ratio: float = 0.85,
    max_ratio: float = 1.08,
    rtt_slack_ms: float = 3.0,
    run: CommandRunner | None = None,
    launch: ProcessLauncher | None = None,
    endpoints: Endpoints | None = None,
) -> list[LinkCheck]:
    """Measure every bottleneck port of a configured fabric (idle: no Spark job, no cross traffic)
    against the link it is configured with now, ``links`` (port name -> link: the run's own, never
    what the network was built with, since a fabric serves scenarios of other rates too).
    ``fabric_ns``: host -> place; ``run``/``launch``: the backend's seams (namespaces by default);
    ``endpoints``: which hosts' traffic crosses a port (where the backend shapes it)."""
    run = run or netns.run_at
    launch = launch or netns.launch_at
    out = []
    log_dir.mkdir(parents=True, exist_ok=True)
    for port in net.bottlenecks:
        ends = (endpoints or _endpoints)(net, port)
        link = links.get(port.ifname)
        if ends is None or link is None:
            continue
        src, dst = ends
        dst_ip = net.host_addresses[dst]
        expected_rtt = 2 * link.delay_ms
        problem = None
        goodput = ratio = rtt = sent = None
        try:
            rtt = _ping_ms(run, fabric_ns[src], dst_ip)
            goodput, sent = _probe_mbps(run, launch, fabric_ns, src, dst, dst_ip, link, seconds, log_dir)
            ratio = goodput / (link.rate_mbps * PAYLOAD_SHARE)
        except (RuntimeError, netns.CommandError, ValueError, OSError) as exc:
            problem = f"measurement failed: {exc}"
        if problem is None and ratio is not None and not (min_ratio <= ratio <= max_ratio):
            problem = (f"delivered {ratio:.2f} of its configured {link.rate_mbps:g} Mbit/s "
                       f"(goodput {goodput:.1f} Mbit/s; allowed {min_ratio:g}-{max_ratio:g})")  # fmt: skip
            if sent is not None and ratio < min_ratio:  # a sender that fell short: the box, not the link
                problem += f"; the probe's sender offered {sent / (link.rate_mbps * PAYLOAD_SHARE):.2f} of it"
        if problem is None and rtt is None:
            problem = "no ping reply across the link"
        if problem is None and rtt is not None and rtt > expected_rtt + rtt_slack_ms:
            problem = f"RTT {rtt:.2f} ms, expected {expected_rtt:.2f} ms (+{rtt_slack_ms:g} ms slack)"
        out.append(
            LinkCheck(
                f"{port.node}:{port.ifname}",
                src,
                dst,
                link.rate_mbps,
                goodput,
                ratio,
                rtt,
                expected_rtt,
                problem is None,
                problem,
            )  # fmt: skip
        )
    return out


class SelftestError(RuntimeError):
    """A link deviates from its configuration and the spec says ``telemetry.selftest = "refuse"``."""


def for_run(
    plan: NetPlan,
    fabric: Any,
    run_dir: Any,
    cache: dict[str, list[LinkCheck]],
    measure: Callable[[Path, Mapping[str, Link]], list[LinkCheck]] | None = None,
) -> list[dict[str, Any]]:
    """The self-test of ``plan``'s links on the live, idle ``fabric`` (once per link configuration:
    ``cache`` maps it to its checks), written to ``run_dir/selftest.json``. Returns the rows; raises
    :class:`SelftestError` when a link deviates and the spec refuses such runs. ``measure``: how
    the backend measures its links (port name -> the link ``plan`` configures there) into a log
    folder (:func:`check` on the namespaces by default)."""
    mode = plan.spec.telemetry.selftest
    if mode == "off":
        return []
    key = plan.link_key
    if key not in cache:
        log_dir = run_dir / "selftest"
        if measure is not None:
            cache[key] = measure(log_dir, plan.links)
        else:
            cache[key] = check(fabric.ns, fabric.network, log_dir, plan.links)
    rows = [c.row() for c in cache[key]]
    (run_dir / "selftest.json").write_text(json.dumps(rows, indent=1))
    bad = [c for c in cache[key] if not c.ok]
    if bad and mode == "refuse":
        raise SelftestError(
            "link self-test failed (telemetry.selftest = 'refuse'): " + "; ".join(f"{c.port}: {c.problem}" for c in bad)
        )
    return rows
