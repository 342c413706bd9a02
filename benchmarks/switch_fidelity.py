"""Benchmark: fidelity and capacity of the userspace switch, side by side with the kernel path
(veth + kernel forwarding + HTB/bfifo, as ``shufflelab.emulate.fabric`` shapes a port).

    .venv/bin/python benchmarks/switch_fidelity.py [--seconds 4] [--write docs/benchmarks-switch.md]

All on a 2-host star (h1 -- r -- h2, the addressing of ``topology.star``), offloads off:
1. Goodput of one iperf3 TCP flow h1 -> h2 with h2's port shaped at 10, 100, 1000 Mbit/s.
   Goodput counts TCP payload, so the ideal ratio to the configured (L2) rate is 1448/1514 = 0.956.
2. One-way delay error: ``ping -i 0.01`` RTTs with a delay of 0.1, 2 and 10 ms on h2's port,
   minus the median RTT with no delay; error = that difference - configured delay (p50, p99).
   The kernel has no netem, so the kernel path cannot add delay at all.
3. RED onset: UDP at 2x the rate (10 Mbit/s port), packets ECT(0) (``--tos 2``), RED
   min/max = 30/90 kB on the instantaneous queue, max_p 0.1, telemetry every 1 ms: the backlog at
   the first mark and the share of packets marked per backlog band. The kernel has no red qdisc.
4. Forwarding capacity: one TCP flow through an unshaped port; Gbit/s and packets/s (the switch
   is single-threaded: one core).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from switchlab import Star, build_star, iperf3, received_mbps

from shufflelab.emulate import netns
from shufflelab.emulate.fabric import namespace_switch, rps_mask_without, steer_rx
from shufflelab.spec import Link
from shufflelab.switch import Red, Switch, SwitchConfig, SwitchPort, binary_path
from shufflelab.switch.config import SPIN_US, switch_cpu

PAYLOAD_SHARE = 1448 / 1514
RATES_MBPS = (10, 100, 1000)
DELAYS_MS = (0.1, 2.0, 10.0)


def _queue_bytes(rate_mbps: float) -> int:
    return max(100_000, int(rate_mbps * 1e6 / 8 * 0.005))  # 5 ms of the rate


def _switch(star: Star, h2: SwitchPort, period_ms: float = 100, busy_poll_us: int = 50) -> Switch:
    """The switch as a fabric runs it: pinned to the last CPU, the hosts' receive work steered to
    the others (``shufflelab.emulate.fabric.steer_rx``)."""
    cpu = switch_cpu()
    cfg = SwitchConfig(
        ports=[SwitchPort("h1"), h2],
        hosts=star.switch_hosts(),
        telemetry_period_ms=period_ms,
        cpu=cpu,
        busy_poll_us=busy_poll_us,
    )
    sw = namespace_switch(star.lease, "r", cfg, switches=Switch)
    sw.start()
    for h in star.hosts:
        steer_rx(star.ns(h), "eth0", rps_mask_without(cpu) if cpu is not None else "0", netns.run_at)
    return sw


def _rtts(star: Star, count: int) -> list[float]:
    out = netns.run(
        ["ping", "-c", str(count), "-i", "0.01", "-W", "2", star.addresses["h2"]],
        ns=star.ns("h1"),
        check=False,
        timeout=count * 0.05 + 30,
    )
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]


def _owds_ms(star: Star, count: int, log: Path) -> list[float]:
    """One-way delays h1 -> h2 in ms (kernel receive timestamp minus the sender's stamp; one clock)."""
    log.unlink(missing_ok=True)
    rx = netns.NamespaceProcess(
        star.ns("h2"), [sys.executable, "-m", "shufflelab.switch.owd", "recv", "5399", str(count)], log
    )
    try:
        deadline = time.monotonic() + 10
        while "ready" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.02)
        netns.run([sys.executable, "-m", "shufflelab.switch.owd", "send", star.addresses["h2"], "5399", str(count),
                   "0.005"], ns=star.ns("h1"), timeout=count * 0.01 + 30)  # fmt: skip
        rx.wait(timeout=35)
    finally:
        rx.stop(grace_s=1)
    return [int(x) / 1e6 for x in log.read_text().split()[1:] if x.lstrip("-").isdigit()]


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def goodput(star: Star, seconds: float) -> list[dict[str, Any]]:
    rows = []
    for rate in RATES_MBPS:
        q = _queue_bytes(rate)
        sw = _switch(star, SwitchPort("h2", rate_mbps=rate, queue_bytes=q))
        try:
            user = received_mbps(iperf3(star, "h1", "h2", seconds))
        finally:
            sw.stop()
        star.kernel_path(Link(rate_mbps=rate, queue_bytes=q))
        try:
            kern = received_mbps(iperf3(star, "h1", "h2", seconds))
        finally:
            star.kernel_path(None)
            netns.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=0"], ns=star.router_ns)
        rows.append({"rate_mbps": rate, "switch_mbps": user, "kernel_mbps": kern})
    return rows


def delay(star: Star, count: int) -> list[dict[str, Any]]:
    """Per mode -- ``sleep`` (the default: spin only within busy_poll_us of an event, else sleep)
    and ``spin`` (topology.switch_spin: never sleep) -- the one-way delay error against the
    configured delay: kernel receive timestamp minus sender stamp (one clock), minus the median of
    the same probe without delay. Also the ping RTT without delay, for reference."""
    rows = []
    log = star.lease.scratch / "owd.log"
    for mode, busy in (("sleep", 50), ("spin", SPIN_US)):
        sw = _switch(star, SwitchPort("h2", rate_mbps=1000), busy_poll_us=busy)
        try:
            base_rtts = _rtts(star, count)
            base_owds = _owds_ms(star, count, log)
        finally:
            sw.stop()
        base = statistics.median(base_owds)
        for d in DELAYS_MS:
            sw = _switch(star, SwitchPort("h2", rate_mbps=1000, delay_ms=d), busy_poll_us=busy)
            try:
                owds = _owds_ms(star, count, log)
            finally:
                sw.stop()
            err_us = [(r - base - d) * 1000 for r in owds]
            rows.append(
                {
                    "mode": mode,
                    "delay_ms": d,
                    "samples": len(owds),
                    "base_owd_ms": base,
                    "base_owd_p99_ms": _pct(base_owds, 0.99),
                    "base_rtt_ms": statistics.median(base_rtts),
                    "base_rtt_p99_ms": _pct(base_rtts, 0.99),
                    "err_p50_us": _pct(err_us, 0.5),
                    "err_p99_us": _pct(err_us, 0.99),
                    "abs_err_p99_us": _pct([abs(e) for e in err_us], 0.99),
                }
            )
    return rows


def red_onset(star: Star, seconds: float) -> dict[str, Any]:
    red = Red(min_bytes=30_000, max_bytes=90_000, max_p=0.1, ewma_weight=None, ecn=True)
    sw = _switch(star, SwitchPort("h2", rate_mbps=10, queue_bytes=150_000, red=red), period_ms=1)
    try:
        iperf3(star, "h1", "h2", seconds, ["-u", "-b", "20M", "--tos", "2", "-l", "1400"])
    finally:
        sw.stop()
    rows = [r for r in sw.telemetry() if r["dev"] == "h2"]
    first_mark = next((float(r["backlog_bytes"]) for r in rows if float(r["marks"]) > 0), None)
    bands: dict[str, list[float]] = {"< min": [0, 0], "min..max": [0, 0], ">= max": [0, 0]}
    for prev, cur in zip(rows, rows[1:], strict=False):
        b = float(prev["backlog_bytes"])
        band = "< min" if b < red.min_bytes else ("min..max" if b < red.max_bytes else ">= max")
        bands[band][0] += float(cur["marks"]) - float(prev["marks"])
        bands[band][1] += float(cur["sent_packets"]) - float(prev["sent_packets"])
    periods = [float(b["t"]) - float(a["t"]) for a, b in zip(rows, rows[1:], strict=False)]
    return {
        "min_bytes": red.min_bytes,
        "max_bytes": red.max_bytes,
        "first_mark_backlog_bytes": first_mark,
        "marked_share": {k: (v[0] / v[1] if v[1] else None) for k, v in bands.items()},
        "samples": len(rows),
        "sample_period_p50_ms": statistics.median(periods) * 1000 if periods else None,
        "sample_period_p99_ms": _pct(periods, 0.99) * 1000 if periods else None,
    }


def capacity(star: Star, seconds: float) -> dict[str, Any]:
    sw = _switch(star, SwitchPort("h2", queue_bytes=1_000_000))
    try:
        t0 = time.monotonic()
        user = received_mbps(iperf3(star, "h1", "h2", seconds))
        wall = time.monotonic() - t0
    finally:
        summary = sw.stop() or {}
    pkts = summary.get("ports", {}).get("h2", {}).get("sent_packets", 0)
    star.kernel_path(None)
    try:
        kern = received_mbps(iperf3(star, "h1", "h2", seconds))
    finally:
        netns.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=0"], ns=star.router_ns)
    return {
        "switch_gbps": user / 1000,
        "switch_kpps": pkts / seconds / 1000 if wall else None,
        "kernel_gbps": kern / 1000,
    }


def markdown(res: dict[str, Any], command: str) -> str:
    g = res["goodput"]
    lines = [
        "# Userspace switch: fidelity and capacity",
        "",
        f"Measured {res['when']} on `{res['host']}` ({os.cpu_count()} cores). "
        f"Conditions: {res.get('note') or 'not stated'}. "
        "The switch runs as a fabric runs it: pinned to the last CPU, the hosts' receive work steered to the "
        "others. Reproduce (root, after `make setup`):",
        "",
        f"    {command}",
        "",
        "Paths: *switch* = `shufflelab-switch` in the router namespace (AF_PACKET ports, switchcore "
        "queues); *kernel* = kernel forwarding with HTB + bfifo on the router port "
        "(`shufflelab.netplan.shaping_commands`). Offloads off on every veth.",
        "",
        "## Goodput vs configured rate (one iperf3 TCP flow; ideal ratio 1448/1514 = 0.956)",
        "",
        "| rate | switch Mbit/s | switch / rate | switch / ideal | kernel Mbit/s | kernel / rate |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in g:
        rate = r["rate_mbps"]
        lines.append(
            f"| {rate} Mbit/s | {r['switch_mbps']:.1f} | {r['switch_mbps'] / rate:.3f} | "
            f"{r['switch_mbps'] / rate / PAYLOAD_SHARE:.3f} | {r['kernel_mbps']:.1f} | {r['kernel_mbps'] / rate:.3f} |"
        )
    lines += [
        "",
        "## One-way delay error (one-way delay − no-delay median one-way delay − configured delay)",
        "",
        "Modes: *sleep* (default: the switch spins only within 50 µs of its next event and sleeps in "
        "ppoll otherwise) and *spin* (`topology.switch_spin = true`: it never sleeps, one core busy). "
        "One-way delay: UDP probes every 5 ms from h1 to h2, each stamped before sendto and timed by the "
        "receiver's kernel (SO_TIMESTAMPNS), one clock for both (`shufflelab.switch.owd`). "
        "No-delay one-way delay (median / p99): "
        + ", ".join(
            f"{r['mode']} {r['base_owd_ms'] * 1000:.0f} / {r['base_owd_p99_ms'] * 1000:.0f} µs"
            for r in res["delay"]
            if r["delay_ms"] == DELAYS_MS[0]
        )
        + "; ping RTT (median / p99): "
        + ", ".join(
            f"{r['mode']} {r['base_rtt_ms'] * 1000:.0f} / {r['base_rtt_p99_ms'] * 1000:.0f} µs"
            for r in res["delay"]
            if r["delay_ms"] == DELAYS_MS[0]
        )
        + ". The kernel path cannot add delay (no netem on this kernel).",
        "",
        "| mode | configured | samples | error p50 | error p99 | abs error p99 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in res["delay"]:
        lines.append(
            f"| {r['mode']} | {r['delay_ms']:g} ms | {r['samples']} | {r['err_p50_us']:+.0f} µs | "
            f"{r['err_p99_us']:+.0f} µs | {r['abs_err_p99_us']:.0f} µs |"
        )
    red = res["red"]
    share = red["marked_share"]

    def fmt(x: float | None) -> str:
        return "–" if x is None else f"{x:.3f}"

    lines += [
        "",
        "## RED onset (10 Mbit/s port, UDP ECT(0) at 20 Mbit/s, min/max 30/90 kB, max_p 0.1, instantaneous)",
        "",
        f"First mark seen at a backlog of {red['first_mark_backlog_bytes'] or 0:.0f} B (configured min "
        f"{red['min_bytes']} B; 1 ms samples, so this is the backlog at the first sample after a mark). "
        f"Telemetry at 1 ms: {red['samples']} samples, period p50 {red['sample_period_p50_ms']:.3f} ms, "
        f"p99 {red['sample_period_p99_ms']:.3f} ms. The kernel path has no RED (no red qdisc).",
        "",
        "| backlog band | share of packets marked |",
        "|---|---:|",
        f"| < min | {fmt(share['< min'])} |",
        f"| min..max | {fmt(share['min..max'])} |",
        f"| ≥ max | {fmt(share['>= max'])} |",
        "",
        "## Forwarding capacity (unshaped port, one TCP flow, MTU 1500)",
        "",
        "| path | Gbit/s (TCP goodput) | packets/s |",
        "|---|---:|---:|",
        f"| switch (one core) | {res['capacity']['switch_gbps']:.2f} | {res['capacity']['switch_kpps']:.0f} k |",
        f"| kernel forwarding | {res['capacity']['kernel_gbps']:.2f} | – |",
        "",
        "Raw results: the JSON block below (as printed by the benchmark).",
        "",
        "```json",
        json.dumps(res, indent=1),
        "```",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=4.0, help="length of each iperf3 test")
    ap.add_argument("--pings", type=int, default=300, help="pings per delay setting")
    ap.add_argument("--write", type=Path, help="write the Markdown table here")
    ap.add_argument("--note", default="", help="measurement conditions for the header (load, priority)")
    args = ap.parse_args(argv)
    if binary_path() is None:
        print("shufflelab-switch is not built (make setup)", file=sys.stderr)
        return 2
    res: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "host": platform.node(),
        "note": args.note,
    }
    with netns.lease() as lz:
        star = build_star(lz, 2)
        res["goodput"] = goodput(star, args.seconds)
        res["delay"] = delay(star, args.pings)
        res["red"] = red_onset(star, min(args.seconds, 2.0))
        res["capacity"] = capacity(star, args.seconds)
    print(json.dumps(res, indent=1))
    command = ".venv/bin/python benchmarks/switch_fidelity.py --write docs/benchmarks-switch.md --note '...'"
    md = markdown(res, command)
    print(md)
    if args.write:
        args.write.write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
