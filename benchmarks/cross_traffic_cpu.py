"""Benchmark: host CPU taken by UDP cross traffic on the emulated fabric (no Spark running).

    sudo .venv/bin/python benchmarks/cross_traffic_cpu.py [--seconds 20] [--repeat 2] [--out FILE.json]

The calibration model (``shufflelab calibrate``, docs/design-sim.md) needs the CPU cores that
cross traffic takes from the executors on this host. iperf3 reports only its own processes'
CPU; the forwarding after the bottleneck queue (HTB dequeue, the router, the bridge, the sink's
veth) runs in softirq context, charged to whatever process is interrupted, so iperf3's figure is
a lower bound. This script builds the seed-000 fabric (topology ``shared``, 100 Mbit/s, the
cc-under-udp hosts), sends iperf3 UDP exactly as the runner does (same payload size and
wire-rate scaling) at 0/50/90/100 % of the bottleneck, and measures the whole host's busy CPU
from ``/proc/stat`` (all cores: user + nice + system + irq + softirq + steal). The idle fabric
(0 %) is subtracted; the result is cores per Gbit/s of UDP on the wire.

``--method work`` measures the same cost the way the executors feel it: three CPU-bound worker
processes (SHA-256 over a 64 KiB buffer in a loop, like three one-core executors on the host's
cores) run for the whole window and count the work they finish; the cores the cross traffic takes
are ``cores × (1 − work with UDP / work on the idle fabric)``. It needs no CPU accounting at all
(``/proc/stat`` samples on timer ticks and undercounts short softirq bursts), but it is disturbed
by anything else running on the machine, so run it on an otherwise idle host.

``--method spark`` asks the question the calibration model needs answered: local-mode Spark jobs of
the seed-000 workload (3 task threads, a fresh JVM each, no network use) run back to back for the
window; the cores the cross traffic takes are ``cores × (1 − job rate with UDP / job rate on the
idle fabric)``. A JVM job loses about twice what the CPU-bound loops of ``--method work`` lose.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import cpuwindow

from shufflelab import netplan
from shufflelab import spec as S
from shufflelab import topology as T
from shufflelab.emulate import netns
from shufflelab.emulate.fabric import NamespaceFabric
from shufflelab.emulate.traffic import UDP_PAYLOAD_BYTES, CrossTraffic, udp_payload_rate_bps

RATE_MBPS = 100
# wire bytes per UDP payload byte: Ethernet (14) + IP (20) + UDP (8) headers on each datagram
UDP_WIRE_PER_PAYLOAD = (UDP_PAYLOAD_BYTES + 42) / UDP_PAYLOAD_BYTES


def _spec() -> S.ExperimentSpec:
    return S.parse(
        {
            "experiment": {"name": "bench-cross-cpu"},
            "topology": {"kind": "shared", "bottleneck": {"rate_mbps": RATE_MBPS, "queue_bytes": 250_000}},
            "hosts": {
                "master": {"roles": ["spark-master"]},
                "w1": {"roles": ["spark-worker"]},
                "w2": {"roles": ["spark-worker"]},
                "w3": {"roles": ["spark-worker"]},
                "tgen": {"roles": ["traffic-source"]},
                "tsink": {"roles": ["traffic-sink"]},
            },
            "workload": {"name": "sort-aggregate", "params": {"rows": 1000, "partitions": 3}},
        }
    )


def _spin(seconds: float, out: Any) -> None:
    import hashlib

    buf = b"x" * 65536
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(16):
            hashlib.sha256(buf).digest()
        n += 16
    out.put(n)


def _work_rate(seconds: float, workers: int = 3) -> float:
    """Work the workers finished in ``seconds``, in SHA-256 blocks per second (all workers)."""
    import multiprocessing as mp

    q: Any = mp.Queue()
    procs = [mp.Process(target=_spin, args=(seconds, q)) for _ in range(workers)]
    for pr in procs:
        pr.start()
    total = sum(q.get(timeout=seconds + 60) for _ in procs)
    for pr in procs:
        pr.join()
    return total / seconds


SPARK_JOB = r"""
import json, sys, time
from pyspark.sql import SparkSession
from shufflelab.spec import SortAggregateParams
from shufflelab.workloads.sort_aggregate import run
spark = (SparkSession.builder.master("local[3]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "1g").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
t = time.time()
run(spark, SortAggregateParams(rows=200_000, partitions=12, payload_bytes=100))
print(json.dumps({"job_s": time.time() - t}))
spark.stop()
"""


def _spark_rate(seconds: float) -> float:
    """Local-mode Spark jobs (the seed-000 workload at its cc-under-udp size, 3 task threads, fresh
    JVM each) finished per second, over as many jobs as fit in ``seconds`` (at least two)."""
    import subprocess

    times: list[float] = []
    t0 = time.monotonic()
    while len(times) < 2 or time.monotonic() - t0 < seconds:
        out = subprocess.run([sys.executable, "-c", SPARK_JOB], capture_output=True, text=True, timeout=600, check=True)
        times.append(json.loads(out.stdout.strip().splitlines()[-1])["job_s"])
    print(f"  spark job times: {[round(x, 2) for x in times]}", flush=True)
    return len(times) / sum(times)


def start_udp(
    fab: NamespaceFabric, lz: netns.NamespaceLease, net: T.Network, pct: float, settle_s: float = 2.0
) -> CrossTraffic | None:
    """UDP at ``pct`` % of the bottleneck from ``tgen`` to ``tsink`` through the runner's own
    cross-traffic driver (server listening before the client starts, JSON result kept, so a level
    whose client did not send is seen, not averaged in); None at 0 %."""
    if pct <= 0:
        return None
    traffic = CrossTraffic(fab.ns["tgen"], fab.ns["tsink"], net.host_addresses["tsink"], lz.scratch / f"udp{pct}", 600)
    traffic.start(udp_payload_rate_bps(RATE_MBPS, pct), 0)
    time.sleep(settle_s)
    return traffic


def measure(seconds: float, percents: list[float], settle_s: float = 2.0, method: str = "stat") -> list[dict[str, Any]]:
    sp = _spec()
    net = T.build(sp)
    rows = []
    with netns.lease() as lz, NamespaceFabric(lz, net) as fab:
        fab.configure(netplan.of(sp, fab.network))
        for pct in percents:
            traffic = start_udp(fab, lz, net, pct, settle_s)
            if method == "stat":
                busy = cpuwindow.cores(seconds)["busy_cores"]
            elif method == "work":
                busy = _work_rate(seconds)
            else:
                busy = _spark_rate(seconds)
            sent_gbps = 0.0
            if traffic is not None:
                res = traffic.stop()
                bps = res[0].get("bits_per_second") if res else None
                if not bps:
                    raise RuntimeError(f"UDP at {pct} %: iperf3 reported nothing ({res})")
                sent_gbps = bps / 1e9 * UDP_WIRE_PER_PAYLOAD
            rows.append({"udp_percent": pct, "wire_gbps": RATE_MBPS * pct / 100 / 1000, "sent_wire_gbps": sent_gbps,
                         "busy_cores": busy})  # fmt: skip
            print(rows[-1], flush=True)
            time.sleep(1.0)
    idles = [r["busy_cores"] for r in rows if r["udp_percent"] == 0]
    idle = sum(idles) / len(idles)
    import os

    cores = os.cpu_count() or 1
    for r in rows:
        if method == "stat":
            r["cross_cores"] = r["busy_cores"] - idle
        else:  # busy_cores holds the work rate: the share of it lost, in cores
            r["work_per_s"] = r.pop("busy_cores")
            r["cross_cores"] = cores * (1 - r["work_per_s"] / idle)
        r["cores_per_gbps"] = r["cross_cores"] / r["sent_wire_gbps"] if r["sent_wire_gbps"] > 0 else None
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=2, help="rounds over the UDP levels (idle measured each round)")
    ap.add_argument("--out", type=Path, default=Path("docs/results/calibration/cross-traffic-cpu.json"))
    ap.add_argument(
        "--method",
        choices=["stat", "work", "spark"],
        default="stat",
        help="stat: /proc/stat busy time; work: lost work of CPU-bound workers; spark: lost local-mode Spark jobs",
    )
    a = ap.parse_args()
    rounds = [measure(a.seconds, [0, 50, 90, 100, 0], method=a.method) for _ in range(a.repeat)]
    per_level: dict[float, list[float]] = {}
    for rows in rounds:
        for r in rows:
            if r["cores_per_gbps"] is not None:
                per_level.setdefault(r["udp_percent"], []).append(r["cores_per_gbps"])
    import statistics

    summary = {str(k): statistics.median(v) for k, v in sorted(per_level.items())}
    allv = [x for v in per_level.values() for x in v]
    result = {
        "command": " ".join(["benchmarks/cross_traffic_cpu.py", *sys.argv[1:]]),
        "rounds": rounds,
        "cores_per_gbps_by_level": summary,
        "cores_per_gbps_median": statistics.median(allv) if allv else None,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: result[k] for k in ("cores_per_gbps_by_level", "cores_per_gbps_median")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
