"""Benchmark: how long a Spark-like control exchange takes across the bottleneck under UDP.

    sudo .venv/bin/python benchmarks/control_latency.py [--exchanges 300] [--repeat 2] [--out FILE.json]

Spark's driver and executors talk over long-lived TCP connections (task launch, status updates,
block-manager reports, broadcast pieces). On the seed-000 fabric (topology ``shared``: every
host-to-host packet leaves the router through the one shaped 100 Mbit/s port, 250 kB FIFO) those
messages share the bottleneck queue with the UDP cross traffic. This script builds that fabric,
sends iperf3 UDP exactly as the runner does at 0/50/90/100 % of the bottleneck, and measures
request/response exchanges between the ``master`` and ``w1`` namespaces on one persistent TCP
connection: a 300 B request answered by ``--small`` bytes (a status-update-sized reply) and by
``--large`` bytes (a broadcast piece), one exchange every ``--gap-ms``. No Spark runs; the result
is the latency distribution per UDP level (median, p90, p99, mean, and the share of exchanges
over 200 ms, i.e. that met a retransmission timeout), which the calibration model's control term
is compared with (docs/results/calibration/README.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from cross_traffic_cpu import _spec, start_udp  # the same seed-000 fabric and UDP (run from benchmarks/)

from shufflelab import netplan
from shufflelab import topology as T
from shufflelab.emulate import netns
from shufflelab.emulate.fabric import NamespaceFabric

PORT = 5299

SERVER = r"""
import socket, struct, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
print("ready", flush=True)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
def read(n):
    b = b""
    while len(b) < n:
        x = c.recv(n - len(b))
        if not x: raise SystemExit(0)
        b += x
    return b
while True:
    want, = struct.unpack("!I", read(4)); read(296)
    c.sendall(b"r" * want)
"""

CLIENT = r"""
import json, socket, struct, sys, time
host, port, n, gap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
small, large = int(sys.argv[5]), int(sys.argv[6])
c = socket.create_connection((host, port), timeout=30); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
out = {"small": [], "large": []}
for kind, size, count in (("small", small, n), ("large", large, max(10, n // 4))):
    for i in range(count):
        t0 = time.perf_counter()
        c.sendall(struct.pack("!I", size) + b"q" * 296)
        got = 0
        while got < size:
            x = c.recv(size - got)
            if not x: raise SystemExit("server closed")
            got += len(x)
        out[kind].append(time.perf_counter() - t0)
        time.sleep(gap)
print(json.dumps(out), flush=True)
"""


def _summary(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    q = lambda p: s[min(len(s) - 1, int(p * len(s)))]  # noqa: E731
    return {
        "n": len(s),
        "median_ms": q(0.5) * 1e3,
        "p90_ms": q(0.9) * 1e3,
        "p99_ms": q(0.99) * 1e3,
        "mean_ms": statistics.fmean(s) * 1e3,
        "over_200ms": sum(x > 0.2 for x in s) / len(s),
    }


def measure(percents: list[float], exchanges: int, gap_ms: float, small: int, large: int) -> list[dict[str, Any]]:
    sp = _spec()
    net = T.build(sp)
    rows = []
    with netns.lease() as lz, NamespaceFabric(lz, net) as fab:
        fab.configure(netplan.of(sp, fab.network))
        master = net.host_addresses["master"]
        for pct in percents:
            traffic = start_udp(fab, lz, net, pct)
            log = lz.scratch / f"server{pct}.log"
            server = netns.NamespaceProcess(fab.ns["master"], [sys.executable, "-c", SERVER, master, str(PORT)], log)
            try:
                deadline = time.monotonic() + 10
                while "ready" not in (log.read_text() if log.exists() else ""):
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError(f"echo server did not start, see {log}")
                    time.sleep(0.05)
                argv = [sys.executable, "-c", CLIENT, master, str(PORT), str(exchanges), str(gap_ms / 1000),
                        str(small), str(large)]  # fmt: skip
                out = netns.run(argv, ns=fab.ns["w1"], timeout=exchanges * (2 * gap_ms / 1000 + 5) + 60)
                lat = json.loads(out.strip().splitlines()[-1])
            finally:
                server.stop()
                if traffic is not None:
                    traffic.stop()
            row = {"udp_percent": pct, "small": _summary(lat["small"]), "large": _summary(lat["large"])}
            rows.append(row)
            print(json.dumps(row), flush=True)
            time.sleep(1.0)
    return rows


def summarize(rounds: list[list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Per level, median over the rounds: the small exchange's mean, median and their difference
    (the mean loss recovery the calibration model charges per control round trip)."""
    summary = {}
    for pct in sorted({r["udp_percent"] for rs in rounds for r in rs}):
        rows = [r for rs in rounds for r in rs if r["udp_percent"] == pct]
        med = statistics.median
        summary[f"{pct:g}"] = {
            "small_mean_ms": med([r["small"]["mean_ms"] for r in rows]),
            "small_median_ms": med([r["small"]["median_ms"] for r in rows]),
            "small_loss_recovery_ms": med([r["small"]["mean_ms"] - r["small"]["median_ms"] for r in rows]),
            "small_over_200ms": med([r["small"]["over_200ms"] for r in rows]),
            "large_median_ms": med([r["large"]["median_ms"] for r in rows]),
        }
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--exchanges", type=int, default=300, help="small exchanges per level (a quarter as many large ones)"
    )
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("--small", type=int, default=2_000, help="reply bytes of the small exchange")
    ap.add_argument("--large", type=int, default=100_000, help="reply bytes of the large exchange")
    ap.add_argument("--repeat", type=int, default=1, help="rounds over the UDP levels")
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks-control-latency.json"))
    a = ap.parse_args()
    rounds = [measure([0, 50, 90, 100], a.exchanges, a.gap_ms, a.small, a.large) for _ in range(a.repeat)]
    result = {"command": " ".join(["benchmarks/control_latency.py", *sys.argv[1:]]), "rounds": rounds,
              "summary": summarize(rounds)}  # fmt: skip
    print(json.dumps(result["summary"], indent=1))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
