"""Benchmark: a many-to-one incast through this machine's own TCP (Cubic, Reno), the kernel's
counterpart of sim_vs_ns3_packet.py's incast rows (MEASURED on namespaces, scaled down).

    .venv/bin/python benchmarks/incast_linux.py [--senders 8 16 32] [--runs 10] [--out /tmp/incast-linux.md]

N flows of 1 MB each into one 1 Gbit/s port with a 100-packet drop-tail queue, as the ns-3 rows'
receiver port (two_tier.cc: 1 MB a sender, 1 Gbit/s host links, 100-packet queues). Three
namespaces: ``snd`` holds every sender, ``sw`` forwards, its port toward ``rcv`` shaped by HTB at
1 Gbit/s (burst: ten packets) over a pfifo of 100 packets; ``rcv`` reads. Offloads are off on every
veth (the queue sees real packets). The senders connect first, then write together; a flow's FCT
runs from that instant to its last byte at the receiver (CLOCK_MONOTONIC, shared by the
namespaces). Timeouts: ``TcpExtTCPTimeouts`` of ``snd`` (nstat) over the run.

What is real: the kernel's TCP (its loss recovery: SACK, RACK, tail-loss probes, PRR; a 200 ms
minimum RTO), its HTB and pfifo. What is scaled: one namespace stands for the N hosts (their
packets reach ``sw`` over one veth at its own speed, as the two-tier's 4 Gbit/s uplinks carry
them), the base round trip is the veths' (tens of µs, ns-3's 80 µs), and HTB's ten-packet burst
lets that many pass at the veth's speed. No DCTCP: this kernel has none.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from shufflelab.emulate import netns
from shufflelab.emulate.fabric import ensure_congestion_control_allowed

PEER = Path(__file__).with_name("incast_peer.py")
MB, PORT, QUEUE, RATE = 1_000_000, 5201, 100, "1gbit"


def nstat_timeouts(ns: str) -> int:
    out = netns.run(["nstat", "-az", "TcpExtTCPTimeouts"], ns=ns)
    for line in out.splitlines():
        if line.startswith("TcpExtTCPTimeouts"):
            return int(line.split()[1])
    return 0


def build(lz: netns.NamespaceLease) -> tuple[str, str, str]:
    snd, sw, rcv = (lz.create_namespace(n) for n in ("snd", "sw", "rcv"))
    run = netns.run
    for (x, xns), (y, yns) in ((("v0", snd), ("v1", sw)), (("v2", sw), ("v3", rcv))):
        # made in the init namespace under names of the lease, then moved and renamed
        tx, ty = f"sl{lz.lease_id}{x}", f"sl{lz.lease_id}{y}"
        run(["ip", "link", "add", tx, "type", "veth", "peer", "name", ty])
        for t, name, ns in ((tx, x, xns), (ty, y, yns)):
            run(["ip", "link", "set", "dev", t, "netns", ns])
            run(["ip", "link", "set", "dev", t, "name", name], ns=ns)
    for ns, dev, addr in (
        (snd, "v0", "10.77.1.1/24"),
        (sw, "v1", "10.77.1.2/24"),
        (sw, "v2", "10.77.2.2/24"),
        (rcv, "v3", "10.77.2.1/24"),
    ):
        run(["ip", "addr", "add", addr, "dev", dev], ns=ns)
        run(["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"], ns=ns)
        run(["ip", "link", "set", "dev", dev, "up"], ns=ns)
    for ns in (snd, sw, rcv):
        run(["ip", "link", "set", "dev", "lo", "up"], ns=ns)
    run(["ip", "route", "add", "default", "via", "10.77.1.2"], ns=snd)
    run(["ip", "route", "add", "default", "via", "10.77.2.2"], ns=rcv)
    run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"], ns=sw)
    burst = str(10 * 1514)
    run(["tc", "qdisc", "add", "dev", "v2", "root", "handle", "1:", "htb", "default", "1"], ns=sw)
    run(
        [
            "tc",
            "class",
            "add",
            "dev",
            "v2",
            "parent",
            "1:",
            "classid",
            "1:1",
            "htb",
            "rate",
            RATE,
            "ceil",
            RATE,
            "burst",
            burst,
            "cburst",
            burst,
        ],
        ns=sw,
    )
    run(["tc", "qdisc", "add", "dev", "v2", "parent", "1:1", "handle", "10:", "pfifo", "limit", str(QUEUE)], ns=sw)
    return snd, sw, rcv


def drops(sw: str) -> int:
    out = json.loads(netns.run(["tc", "-s", "-j", "qdisc", "show", "dev", "v2"], ns=sw))
    return sum(int(q.get("drops", 0)) for q in out if q.get("kind") == "pfifo")


def one_run(snd: str, sw: str, rcv: str, n: int, cc: str, run_no: int) -> dict[str, Any]:
    """One incast of ``n`` flows with ``cc``: each flow's FCT, the senders' timeouts, the port's drops."""
    name = f"incast {n} {cc} run {run_no}"
    procs: list[subprocess.Popen[str]] = []
    server = subprocess.Popen(
        ["ip", "netns", "exec", rcv, sys.executable, str(PEER), "serve", str(PORT), str(n), str(MB)],
        stdout=subprocess.PIPE,
        text=True,
    )
    procs.append(server)
    try:
        assert server.stdout is not None
        server.stdout.readline()  # listening
        sender = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                snd,
                sys.executable,
                str(PEER),
                "send",
                "10.77.2.1",
                str(PORT),
                str(n),
                str(MB),
                cc,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(sender)
        assert sender.stdin is not None and sender.stdout is not None
        if sender.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{name}: the sender did not connect")
        t0, d0 = nstat_timeouts(snd), drops(sw)
        sender.stdin.write("go\n")
        sender.stdin.flush()
        start = json.loads(sender.stdout.readline())["start"]
        out = json.loads(server.stdout.readline())
        sender.wait(timeout=120)
        if "error" in out:
            raise RuntimeError(f"{name}: {out['error']}")
        fct = [e - start for e in out["ends"]]
        return {"fct_s": fct, "timeouts": nstat_timeouts(snd) - t0, "drops": drops(sw) - d0}
    finally:  # a failed run leaves neither end behind (the lease removes the namespaces after)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def p99(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(0.99 * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--senders", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--ccs", nargs="+", default=["cubic", "reno"])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out", type=Path, default=Path("/tmp/incast-linux.md"))
    a = ap.parse_args()
    ensure_congestion_control_allowed(set(a.ccs))
    rows = []
    with netns.lease() as lz:
        snd, sw, rcv = build(lz)
        for n in a.senders:
            for cc in a.ccs:
                runs = []
                for r in range(1, a.runs + 1):
                    runs.append(one_run(snd, sw, rcv, n, cc, r))
                    time.sleep(0.3)  # let the port drain and the timers settle
                means = [statistics.mean(x["fct_s"]) for x in runs]
                row = {
                    "senders": n,
                    "cc": cc,
                    "run_means_s": means,
                    "run_p99s_s": [p99(x["fct_s"]) for x in runs],
                    "timeouts": [x["timeouts"] for x in runs],
                    "drops": [x["drops"] for x in runs],
                    "ends_s": [max(x["fct_s"]) for x in runs],
                }
                rows.append(row)
                print(
                    f"incast {n} {cc}: mean {statistics.mean(means):.4f} s [{min(means):.4f}-{max(means):.4f}], "
                    f"timeouts {statistics.mean(row['timeouts']):.1f} a run, drops {statistics.mean(row['drops']):.0f}",
                    flush=True,
                )
    lines = [
        "| incast | CC | mean FCT (s) [runs' range] | p99 FCT (s) | last flow (s) | timeouts a run | drops a run |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        m = row["run_means_s"]
        lines.append(
            f"| {row['senders']} | {row['cc']} | {statistics.mean(m):.4f} [{min(m):.4f}–{max(m):.4f}] | "
            f"{statistics.mean(row['run_p99s_s']):.4f} | {statistics.mean(row['ends_s']):.4f} | "
            f"{statistics.mean(row['timeouts']):.1f} | {statistics.mean(row['drops']):.0f} |"
        )
    a.out.write_text("\n".join(lines) + "\n")
    a.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
