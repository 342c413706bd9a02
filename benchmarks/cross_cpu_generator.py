"""Benchmark: host CPU taken by UDP cross traffic, iperf3 vs the userspace switch's own source, on the
same spec (no Spark running).

    sudo .venv/bin/python benchmarks/cross_cpu_generator.py [--seconds 10] [--repeat 2] [--out FILE.json]

The fabric of ``benchmarks/cross_traffic_cpu.py`` (seed 000's ``shared`` topology at 100 Mbit/s, the
cc-under-udp hosts) on the switch datapath. For each generator and level (50/90/100 % of the link)
the switch is restarted with the level's configuration, the traffic started as the runner starts it
(iperf3 from tgen to tsink through :class:`~shufflelab.emulate.traffic.CrossTraffic`; the switch's
source on tsink's router port, SIGUSR2), and over the window the script reads the CPU time
(user + system, ``/proc/PID/stat``) of the processes that make the traffic: the iperf3 client and
server (``gen_cores``; none for the in-switch source) and the switch (``switch_cores``; it forwards
iperf3's packets, or queues the virtual ones). This kernel charges the veth's receive work (softirq)
to whatever thread runs, i.e. mostly to these senders. ``cross_cores`` = ``gen_cores`` + the
switch's CPU above its idle level (the same fabric with no cross traffic, measured in every round):
what the generator costs the machine the executors run on, in cores. Per-process accounting is used
because the machine is shared: its whole busy time (``/proc/stat``, ``busy_cores``, recorded too)
saturates at the core count when other work runs, and says nothing then.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
from shufflelab.emulate.traffic import CrossTraffic, udp_payload_rate_bps
from shufflelab.switch import Switch

RATE_MBPS = 100
LEVELS = (50.0, 90.0, 100.0)


def _spec(generator: str, pct: float) -> S.ExperimentSpec:
    return S.parse(
        {
            "experiment": {"name": "bench-cross-generator"},
            "topology": {
                "kind": "shared",
                "bottleneck": {"rate_mbps": RATE_MBPS, "queue_bytes": 250_000, "datapath": "switch"},
            },
            "hosts": {
                "master": {"roles": ["spark-master"]},
                "w1": {"roles": ["spark-worker"]},
                "w2": {"roles": ["spark-worker"]},
                "w3": {"roles": ["spark-worker"]},
                "tgen": {"roles": ["traffic-source"]},
                "tsink": {"roles": ["traffic-sink"]},
            },
            "cross_traffic": {"udp_percent": pct, "generator": generator},
            "workload": {"name": "sort-aggregate", "params": {"rows": 1000, "partitions": 3}},
        }
    )


def _level(
    fab: NamespaceFabric, lz: netns.NamespaceLease, net: T.Network, generator: str, pct: float, seconds: float
) -> dict[str, Any]:
    sp = _spec(generator, pct)
    fab.configure(netplan.of(sp, fab.network), restart_switch=True)
    traffic = None
    if pct > 0 and generator == "iperf3":
        traffic = CrossTraffic(
            fab.ns["tgen"], fab.ns["tsink"], net.host_addresses["tsink"], lz.scratch / f"u{pct}", 600
        )
        traffic.start(udp_payload_rate_bps(RATE_MBPS, pct), 0)
    elif pct > 0:
        fab.start_cross_traffic()
    time.sleep(2.0)  # settle
    assert fab.switch is not None and fab.switch.process is not None
    gen = [p.pid for f in traffic.flows for p in (f.client, f.server)] if traffic is not None else []
    row: dict[str, Any] = {"generator": generator if pct > 0 else "none", "udp_percent": pct}
    row.update(cpuwindow.cores(seconds, {"gen": gen, "switch": [fab.switch.process.pid]}))
    if traffic is not None:
        res = traffic.stop()
        bps = res[0].get("bits_per_second") if res else None
        if not bps:
            raise RuntimeError(f"iperf3 at {pct} % reported nothing ({res})")
        row["sent_payload_mbps"] = bps / 1e6
    elif pct > 0:
        status = Path(fab.switch.status_path).read_text().splitlines()
        last = dict(zip(status[0].split(","), status[-1].split(","), strict=True))
        row["offered_packets"] = int(last["cross_offered_packets"])
        row["switch_drops"] = int(last["cross_drops"])
    print(row, flush=True)
    return row


def measure(seconds: float) -> list[dict[str, Any]]:
    net = T.build(_spec("iperf3", 0))
    rows = []
    with netns.lease() as lz, NamespaceFabric(lz, net, switches=Switch) as fab:
        rows.append(_level(fab, lz, net, "iperf3", 0, seconds))
        for pct in LEVELS:
            for gen in ("iperf3", "switch"):
                rows.append(_level(fab, lz, net, gen, pct, seconds))
        rows.append(_level(fab, lz, net, "iperf3", 0, seconds))
    idle = statistics.mean(r["switch_cores"] for r in rows if r["generator"] == "none")
    for r in rows:
        r["cross_cores"] = r["gen_cores"] + r["switch_cores"] - idle
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks-cross-cpu-generator.json"))
    a = ap.parse_args()
    rounds = [measure(a.seconds) for _ in range(a.repeat)]
    summary: dict[str, dict[str, float]] = {}
    for gen in ("iperf3", "switch"):
        for pct in LEVELS:
            vals = [
                r["cross_cores"] for rows in rounds for r in rows if r["generator"] == gen and r["udp_percent"] == pct
            ]
            summary.setdefault(gen, {})[f"{pct:g}"] = statistics.median(vals)
    result = {
        "command": " ".join(["benchmarks/cross_cpu_generator.py", *sys.argv[1:]]),
        "cpus": os.cpu_count(),
        "rounds": rounds,
        "cross_cores_median": summary,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
