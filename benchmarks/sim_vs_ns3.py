"""Benchmark: the simulator's bottleneck model vs ns-3, congestion controls x UDP load x marking.

    .venv/bin/pip install ns3          # the PyPI wheel ships ns-3's C++ headers and libraries
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3.py [--flows 4] [--out /tmp/sim-vs-ns3.md]

Scenario: 4 (``--flows``) TCP flows x 20 MB (ECN-capable Reno, Cubic or DCTCP) through a 1 Gbit/s bottleneck next
to constant-rate, non-ECN UDP at 0 / 50 / 90 / 100 % of the link; the bottleneck is RED on the
average queue (min/max 20/60 packets, max_p 0.1, EWMA weight 0.002, not gentle, marks ECT above
max) or step marking at K = 20 packets on the instantaneous queue (DCTCP's switch setting); both
drop what is not ECN-capable where they would mark, and hold 200 packets. ns-3 side:
``benchmarks/ns3/bottleneck.cc``, compiled here with g++ against the wheel's headers and libraries
(cached by source hash under ``~/.cache/shufflelab/ns3-bench``); ns-3's runs are deterministic, so
one run per row. Simulator side: the calibration model (``run_spark``, Rust core): one stage of 4
tasks, each one flow of 20 MB plus TCP/IP/PPP headers; the bottleneck's operating point (TCP's
share, the UDP that RED drops, the queue) from the packet-level probe on the switch's own RED and
window logic, with ECN-capable senders and the Reno/Cubic window rules. Reported: each side's mean
flow completion time (FCT), the error relative to ns-3, ns-3's delivered UDP, and the wall-time
ratio (ns-3 wall / simulator wall).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from shufflelab.artifacts import cache_root

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "ns3" / "bottleneck.cc"
CACHE = cache_root() / "ns3-bench"
FLOWS, MEGABYTES, RATE_GBPS = 4, 20.0, 1.0  # FLOWS: the default of --flows
DELAY_US = 50.0  # one-way, each of the three links on a path
LIMIT_PACKETS = 200
RED = {"minTh": 20, "maxTh": 60, "maxP": 0.1, "qw": 0.002}
STEP_K = 20
CCS = {"reno": "ns3::TcpLinuxReno", "cubic": "ns3::TcpCubic", "dctcp": "ns3::TcpDctcp"}
UDP_SHARES = (0.0, 0.5, 0.9, 1.0)
QUEUES = ("red", "red-gentle", "step")
MSS, WIRE_PER_SEGMENT = 1448, 1448 + 32 + 20 + 2  # TCP payload; + TCP (timestamps) + IPv4 + PPP headers


def find_ns3() -> tuple[Path, Path, list[str]]:
    """(include dir, lib dir, library names) of the installed ``ns3`` wheel."""
    roots = {Path(sysconfig.get_paths()["purelib"]), Path(sysconfig.get_paths()["platlib"])}
    header = None
    for root in roots:
        for p in root.rglob("core-module.h"):
            if p.parent.name == "ns3":
                header = p
                break
        if header:
            break
    if header is None:
        raise SystemExit("ns-3 headers not found: install the wheel with `.venv/bin/pip install ns3`")
    include = header.parent.parent
    libs: list[Path] = []
    for root in roots:
        libs += [p for p in root.rglob("libns3*.so") if p.is_file() or p.is_symlink()]
    if not libs:
        raise SystemExit("ns-3 libraries (libns3*.so) not found next to the wheel's headers")
    libdir = sorted({p.parent for p in libs}, key=lambda d: -sum(1 for q in libs if q.parent == d))[0]
    names = sorted({p.name[3:-3] for p in libs if p.parent == libdir})
    return include, libdir, names


def add_host_options(ap: argparse.ArgumentParser) -> None:
    """The hosts' options the packet mode's ns-3 checks share (sim_vs_ns3_packet.py, sim_vs_ns3_loops.py):
    ns-3's loss recovery and receivers, and the model's receivers."""
    ap.add_argument(
        "--prr-sack-fix",
        action="store_true",
        help="ns-3's PRR without 3.44's extra segment per duplicate ACK on top of the SACKed bytes",
    )
    ap.add_argument(
        "--linux-acks",
        action="store_true",
        help="ns-3's receivers ACK as Linux's (quick ACKs; at once on CWR, a classic CE mark, a change of DCTCP's "
        "CE state)",
    )
    ap.add_argument(
        "--linux-cwnd-count",
        action="store_true",
        help="ns-3's Reno and DCTCP clear their additive increase's count at a window reduction, as Linux's "
        "(ns-3.44 keeps it, so the first ACK after a cut may add a segment)",
    )
    ap.add_argument(
        "--linux-cwr-recovery",
        action="store_true",
        help="ns-3's senders enter fast recovery from an ECN reduction (CWR) when they find a loss, as Linux's "
        "(ns-3.44 stays in CWR until the timer)",
    )
    ap.add_argument(
        "--linux-dctcp-loss",
        action="store_true",
        help="ns-3's DCTCP answers a loss by halving its window, as Linux's (ns-3.44 cuts by alpha / 2)",
    )
    ap.add_argument(
        "--linux-rack",
        action="store_true",
        help="ns-3's senders find a loss from a segment sent after it being delivered, as Linux's RACK (ns-3.44 "
        "only from three segments SACKed above it, so a lost tail or retransmission waits for the timer)",
    )
    ap.add_argument(
        "--linux-rack-prr",
        action="store_true",
        help="with --linux-rack: in a recovery what RACK finds lost is sent again only as PRR allows, as Linux's "
        "(without it every lost segment it finds goes again at once, a burst)",
    )
    ap.add_argument(
        "--linux-rack-reo",
        action="store_true",
        help="with --linux-rack: RACK's reordering as Linux's: its timer (a segment sent just before a delivered "
        "one, within the reordering window, is marked lost when the window has passed; without it, where no later "
        "ACK comes, the sender waits for its retransmission timer) and its window (none in a recovery or once "
        "three segments are SACKed; 'sent before' by time, then sequence)",
    )
    ap.add_argument(
        "--linux-tlp",
        action="store_true",
        help="ns-3's senders send Linux's tail loss probe 2 SRTT after their last send or ACK (ns-3.44 has none, "
        "so a window whose last segments or last ACK were dropped waits for the timer)",
    )
    ap.add_argument(
        "--queue-bytes",
        action="store_true",
        help="two_tier.cc's ports count their limit and DCTCP's K in bytes of full segments, as a switch and "
        "Linux's sch_red count them (ns-3's packet mode counts a 66-byte pure ACK as a whole packet: where a port "
        "carries one direction's data and the other's ACKs, the data queue DCTCP keeps is shorter)",
    )
    ap.add_argument(
        "--send-jitter",
        type=float,
        default=0.0,
        metavar="J",
        help="two_tier.cc's hosts' packets reach their leaf U[0, J) of a packet time late (0..1), as a real host's "
        "and the model's do (without it ns-3's hosts are perfectly regular, and a full drop-tail port locks to their "
        "phases: one sender's windows are dropped whole again and again)",
    )
    ap.add_argument(
        "--linux-host-queue",
        action="store_true",
        help="two_tier.cc's hosts' own ports a FIFO that neither marks nor drops (--hostFifo=true), as a Linux "
        "sender's qdisc and the model's sending host links (ns-3's default: a port like a switch's, marking at K)",
    )
    ap.add_argument(
        "--sim-delayed-ack",
        type=int,
        nargs=2,
        metavar=("QUICK", "IDLE_QUICK"),
        default=None,
        help="the model's receivers delay their ACKs as Linux's (40 ms timer), QUICK segments ACKed one by one at "
        "a flow's start and IDLE_QUICK after a silence longer than the RTO (Linux: 5 16; ns-3: 0 0)",
    )
    ap.add_argument(
        "--sim-queued-acks",
        action="store_true",
        help="the model's ACKs wait behind the other direction's data (the spec's tcp.queued_acks: each link "
        "simulated with its cable's other direction), as ns-3's do; without it they cross no queue",
    )
    ap.add_argument(
        "--sim-path-acks",
        action="store_true",
        help="the model's ACKs wait at the loaded links of their own way back, behind what those links sent in "
        "the pass before (the spec's tcp.path_acks)",
    )


CWND_COUNT_RESET, CWR_RECOVERY, DCTCP_LOSS = "--cwndCntReset=true", "--cwrRecovery=true", "--dctcpLossHalves=true"
RACK, RACK_PRR, RACK_REO, TLP = "--rackLoss=true", "--rackPrr=true", "--rackReo=true", "--lossProbe=true"
QUEUE_BYTES = "--queueBytes=true"


def two_tier_switch(a: argparse.Namespace) -> list[str]:
    """For :func:`add_host_options`' ``--queue-bytes``, ``--send-jitter`` and ``--linux-host-queue``: two_tier.cc's
    extra arguments for its ports and its hosts' links."""
    if not 0 <= a.send_jitter <= 1:
        raise SystemExit("--send-jitter must be in [0, 1] (of a packet time of a host's link)")
    jitter = [f"--sendJitter={a.send_jitter:g}"] if a.send_jitter > 0 else []
    fifo = ["--hostFifo=true"] if getattr(a, "linux_host_queue", False) else []
    return ([QUEUE_BYTES] if a.queue_bytes else []) + jitter + fifo


def sim_tcp_extra(a: argparse.Namespace) -> dict[str, Any]:
    """For :func:`add_host_options`' ``--sim-queued-acks``: what the model's fabric and applications specs
    add to their ``tcp`` table."""
    if getattr(a, "sim_queued_acks", False) and getattr(a, "sim_path_acks", False):
        raise SystemExit("--sim-queued-acks and --sim-path-acks exclude each other")
    if getattr(a, "sim_path_acks", False):
        return {"path_acks": True}
    return {"queued_acks": True} if getattr(a, "sim_queued_acks", False) else {}


def hosts_for(hosts: list[str], cc: str, ecn: bool = True) -> list[str]:
    """``hosts`` (:func:`host_settings`' ns-3 arguments) for a flow of ``cc``, ECN-capable or not, without
    what cannot change it, so that ns-3's runs of it stay the same runs, and cached: the count's reset
    for Cubic (TcpCubic keeps its own), DCTCP's loss answer for the others, the recovery from CWR
    for a flow without ECN (it never enters CWR). RACK and the loss probe go to every flow (any may lose a
    segment)."""
    drop = {CWND_COUNT_RESET} if cc == "cubic" else set()
    drop |= {DCTCP_LOSS} if cc != "dctcp" else set()
    drop |= {CWR_RECOVERY} if not ecn else set()
    return [h for h in hosts if h not in drop]


def host_settings(a: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    """For the options of :func:`add_host_options`: the ns-3 programs' extra arguments
    (``--prrSackFix=true``: class TcpPrrSackFix in ns3/hosts.h, without it ns-3.44's TcpPrrRecovery;
    ``--linuxAcks=true``: class TcpSocketLinuxAcks, without it ns-3's own receivers; ``--cwndCntReset=true``:
    LinuxCwndCount, without it ns-3.44's count kept across a reduction; ``--cwrRecovery=true``: fast
    recovery from CWR; ``--dctcpLossHalves=true``: DCTCP halves at a loss; ``--rackLoss=true``: losses
    found as Linux's RACK finds them; ``--rackPrr=true``: what it finds in a recovery sent again as PRR
    allows; ``--rackReo=true``: RACK's reordering timer and window as Linux's; ``--lossProbe=true``:
    Linux's tail loss probe) and the model's ``delayed_ack`` table (the spec's ``tcp.delayed_ack``; empty:
    every segment ACKed at once)."""
    for refined, given in (("--linux-rack-prr", a.linux_rack_prr), ("--linux-rack-reo", a.linux_rack_reo)):
        if given and not a.linux_rack:
            raise SystemExit(f"{refined} refines --linux-rack: give both")
    ns3 = (["--prrSackFix=true"] if a.prr_sack_fix else []) + (["--linuxAcks=true"] if a.linux_acks else [])
    ns3 += [CWND_COUNT_RESET] if a.linux_cwnd_count else []
    ns3 += [CWR_RECOVERY] if a.linux_cwr_recovery else []
    ns3 += [DCTCP_LOSS] if a.linux_dctcp_loss else []
    ns3 += [RACK] if a.linux_rack else []
    ns3 += [RACK_PRR] if a.linux_rack_prr else []
    ns3 += [RACK_REO] if a.linux_rack_reo else []
    ns3 += [TLP] if a.linux_tlp else []
    delayed: dict[str, Any] = {}
    if a.sim_delayed_ack is not None:
        quick, idle = a.sim_delayed_ack
        delayed = {"timeout_s": 0.04, "quick_acks": quick, "idle_quick_acks": idle}
    return ns3, delayed


def compile_ns3(source: Path = SOURCE, name: str = "bottleneck") -> Path:
    """``source`` compiled against the wheel, cached under ``name``-<hash of source, the headers beside it
    (``hosts.h``, which the programs include) and libraries>."""
    include, libdir, names = find_ns3()
    text = source.read_bytes() + b"".join(h.read_bytes() for h in sorted(source.parent.glob("*.h")))
    key = hashlib.sha256(text + str(libdir).encode() + " ".join(names).encode()).hexdigest()[:16]
    binary = CACHE / f"{name}-{key}"
    if binary.exists():
        return binary
    CACHE.mkdir(parents=True, exist_ok=True)
    gxx = shutil.which("g++") or "g++"
    cmd = [gxx, "-std=c++20", "-O2", str(source), "-I", str(include), "-L", str(libdir), f"-Wl,-rpath,{libdir}"]
    # built beside it and renamed into place: two benchmarks compiling the same program at once
    # (their own copies) never run or overwrite a half-written binary ("Text file busy")
    part = binary.with_name(f"{binary.name}.{os.getpid()}.part")
    cmd += [f"-l{n}" for n in names] + ["-o", str(part)]
    print("compiling:", " ".join(cmd[:8]), "...", flush=True)
    try:
        subprocess.run(cmd, check=True)
        os.replace(part, binary)
    finally:
        part.unlink(missing_ok=True)
    return binary


def run_ns3(binary: Path, cc: str, queue: str, udp_share: float, stop_s: float, flows: int) -> dict[str, Any]:
    args = [str(binary), f"--flows={flows}", f"--megabytes={MEGABYTES}", f"--rateGbps={RATE_GBPS}"]
    args += [f"--stopS={stop_s}"]
    args += [f"--udpShare={udp_share}", f"--cc={CCS[cc]}", f"--limit={LIMIT_PACKETS}"]
    args += [f"--delayUs={DELAY_US}"]
    if queue.startswith("red"):
        args += ["--queue=red"] + [f"--{k}={v}" for k, v in RED.items()]
        args += ["--gentle=true"] if queue == "red-gentle" else []
    else:
        args += ["--queue=step", f"--minTh={STEP_K}"]
    t0 = time.perf_counter()
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["process_wall_s"] = time.perf_counter() - t0
    return result


def sim_config(cc: str, queue: str, udp_share: float, flows: int) -> dict[str, Any]:
    c = RATE_GBPS * 1e9 / 8
    pkt = float(WIRE_PER_SEGMENT)
    wire = MEGABYTES * 1e6 / MSS * WIRE_PER_SEGMENT
    task = {"latency_s": 0.0, "cpu_s": 0.0, "fetch_bytes": [wire], "local_fraction": 0.0}
    if queue.startswith("red"):
        red = {"min_bytes": RED["minTh"] * pkt, "max_bytes": RED["maxTh"] * pkt, "max_p": RED["maxP"]}
        red |= {"ewma_weight": RED["qw"], "ecn": True, "gentle": queue == "red-gentle"}
    else:
        red = {"min_bytes": STEP_K * pkt, "max_bytes": STEP_K * pkt, "max_p": 1.0, "ecn": True}
    # base round trip: 3 links each way, plus a segment's serialization on the bottleneck
    base_rtt = 6 * DELAY_US * 1e-6 + pkt / c
    return {
        "platform": {
            "slots": flows,
            "host_cores": 1.0,
            "link_bytes_per_s": c,
            "cross_bytes_per_s": udp_share * c,
            "queue_bytes": LIMIT_PACKETS * pkt,
            "tcp": "dctcp" if cc == "dctcp" else "loss",
            "ecn_capable": True,
            "growth": "cubic" if cc == "cubic" else "reno",
            "red": red,
            "base_rtt_s": base_rtt,
            "mss_wire_bytes": pkt,
        },
        "stages": [{"stage_id": 0, "gap_s": 0.0, "tasks": [dict(task) for _ in range(flows)]}],
        "tail_s": 0.0,
    }


def run_sim(cc: str, queue: str, udp_share: float, flows: int, calls: int = 20) -> dict[str, Any]:
    sys.path.insert(0, str(HERE.parent / "src"))
    from shufflelab.sim.calibration_model import run_model

    cfg = sim_config(cc, queue, udp_share, flows)
    res = run_model(cfg)
    t0 = time.perf_counter()
    for _ in range(calls):
        run_model(cfg)
    wall = (time.perf_counter() - t0) / calls
    return {"fct_s": [t["end_s"] for t in res["tasks"]], "wall_s": wall, "engine": res["engine"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("/tmp/sim-vs-ns3.md"))
    ap.add_argument("--cc", nargs="*", choices=sorted(CCS), default=list(CCS))
    ap.add_argument("--queue", nargs="*", choices=QUEUES, default=["red", "step"])
    ap.add_argument("--udp", nargs="*", type=float, default=list(UDP_SHARES), help="UDP shares of the link")
    ap.add_argument("--flows", type=int, default=FLOWS, help="TCP flows through the bottleneck")
    ap.add_argument("--stop-s", type=float, default=60.0, help="ns-3 virtual seconds before a flow counts as starved")
    a = ap.parse_args()
    binary = compile_ns3()
    rows = []
    for queue in a.queue:
        for cc in a.cc:
            for share in a.udp:
                ns = run_ns3(binary, cc, queue, share, a.stop_s, a.flows)
                sim = run_sim(cc, queue, share, a.flows)
                done = all(f >= 0 for f in ns["fct_s"])
                ns_fct = statistics.mean(ns["fct_s"]) if done else float("nan")
                sim_fct = statistics.mean(sim["fct_s"])
                # TCP goodput of all flows together from 25 % to 75 % of their bytes: ns-3's steady
                # state without slow start's overshoot and its recovery; the model has no
                # transient, so its goodput is the payload over its last FCT
                mid = ns["mid_s"]
                ns_mid = 0.5 * a.flows * MEGABYTES * 8 / mid if done and mid > 0 else float("nan")
                sim_mid = a.flows * MEGABYTES * 8 / max(sim["fct_s"])
                row = {
                    "flows": a.flows,
                    "queue": queue,
                    "cc": cc,
                    "udp_share": share,
                    "ns3_finished": done,
                    "ns3_fct_s": ns_fct,
                    "ns3_fct_range_s": [min(ns["fct_s"]), max(ns["fct_s"])],
                    "ns3_udp_rx_mbps": ns["udp_rx_bps"] / 1e6,
                    "sim_fct_s": sim_fct,
                    "fct_error": (sim_fct - ns_fct) / ns_fct,
                    "ns3_mid_goodput_mbps": ns_mid,
                    "sim_goodput_mbps": sim_mid,
                    "goodput_error": (sim_mid - ns_mid) / ns_mid,
                    "ns3_wall_s": ns["wall_s"],
                    "sim_wall_s": sim["wall_s"],
                    "speed_ratio": ns["wall_s"] / sim["wall_s"],
                    "sim_engine": sim["engine"],
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    lines = [
        "| queue | CC | UDP | ns-3 mean FCT (s) [min–max] | sim FCT (s) | FCT error | ns-3 mid-transfer goodput "
        "(Mbit/s) | sim goodput (Mbit/s) | goodput error | ns-3 UDP rx (Mbit/s) | ns-3 wall (s) | sim wall (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def pct(x: float) -> str:
        return "–" if x != x else f"{x * 100:+.1f} %"

    for r in rows:
        lo, hi = r["ns3_fct_range_s"]
        fct = (
            f"{r['ns3_fct_s']:.3f} [{lo:.3f}–{hi:.3f}]"
            if r["ns3_finished"]
            else f"not done in {a.stop_s:g} s (starved)"
        )
        mid = "–" if r["ns3_mid_goodput_mbps"] != r["ns3_mid_goodput_mbps"] else f"{r['ns3_mid_goodput_mbps']:.0f}"
        lines.append(
            f"| {r['queue']} | {r['cc']} | {r['udp_share'] * 100:g} % | {fct} | {r['sim_fct_s']:.3f} | "
            f"{pct(r['fct_error'])} | {mid} | {r['sim_goodput_mbps']:.0f} | {pct(r['goodput_error'])} | "
            f"{r['ns3_udp_rx_mbps']:.0f} | {r['ns3_wall_s']:.2f} | {r['sim_wall_s'] * 1e3:.2f} |"
        )
    for key, label in (("fct_error", "FCT"), ("goodput_error", "goodput")):
        errs = [abs(r[key]) for r in rows if r[key] == r[key]]
        within = sum(e <= 0.10 for e in errs)
        lines.append("")
        lines.append(
            f"{label}: {len(errs)} rows compared, {within} within 10 %; |error| median "
            f"{statistics.median(errs) * 100:.1f} %, max {max(errs) * 100:.1f} %."
        )
    walls = [r["ns3_wall_s"] / r["sim_wall_s"] for r in rows if r["ns3_finished"]]
    lines.append("")
    lines.append(f"ns-3 wall / simulator wall (finished rows): median {statistics.median(walls):,.0f}×.")
    a.out.write_text("\n".join(lines) + "\n")
    (a.out.with_suffix(".json")).write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
