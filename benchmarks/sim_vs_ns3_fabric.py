"""Benchmark: the fabric simulator vs ns-3 on a two-tier topology with oversubscribed uplinks.

    .venv/bin/pip install ns3
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_fabric.py [--out /tmp/sim-vs-ns3-fabric.md]

Scenario: a leaf-spine fabric of 2 leaves x 4 hosts and one spine, 1 Gbit/s host links, leaf
uplinks at 4 / 2 / 1 Gbit/s (oversubscription 1:1, 2:1, 4:1), 10 µs per link, drop-tail ports of
1,000 packets (with 200, 9 of the 56 flows at 1:1 were still in exponential retransmission
backoff after 120 s: seven senders into one 1 Gbit/s port at once); an all-to-all shuffle: every
host sends 10 MB to every other host (56 flows, all starting together; Cubic without ECN). Flows
ns-3 has not finished after 120 virtual seconds are reported as stuck. ns-3 side:
``benchmarks/ns3/two_tier.cc`` (compiled like ``sim_vs_ns3.py``'s program). Simulator side:
``run_fabric`` on the same leaf-spine (``spines = 1``) with a shuffle of 8 maps and 8 reducers,
one per host, each reducer fetching all 7 remote blocks at once (no in-flight limit); its flows are
the same 56 host pairs. Compared: the shuffle's end (the last flow), the mean FCT, and each host's
last incoming flow (the reducer's finish).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_vs_ns3 import MSS, WIRE_PER_SEGMENT, compile_ns3  # noqa: E402

from shufflelab.sim.core import simulate_fabric  # noqa: E402

SOURCE = Path(__file__).resolve().parent / "ns3" / "two_tier.cc"
LEAVES, HOSTS_PER_LEAF, HOST_GBPS, DELAY_US, MEGABYTES, QUEUE = 2, 4, 1.0, 10.0, 10.0, 1000
UPLINKS_GBPS = (4.0, 2.0, 1.0)


def run_ns3(binary: Path, uplink_gbps: float) -> dict[str, Any]:
    args = [str(binary), f"--leaves={LEAVES}", f"--hostsPerLeaf={HOSTS_PER_LEAF}", f"--hostGbps={HOST_GBPS}"]
    args += [f"--uplinkGbps={uplink_gbps}", f"--delayUs={DELAY_US}", f"--megabytes={MEGABYTES}", f"--queue={QUEUE}"]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def sim_config(uplink_gbps: float) -> dict[str, Any]:
    hosts = LEAVES * HOSTS_PER_LEAF
    wire = MEGABYTES * 1e6 / MSS * WIRE_PER_SEGMENT
    return {
        "topology": {
            "kind": "leaf_spine",
            "leaves": LEAVES,
            "hosts_per_leaf": HOSTS_PER_LEAF,
            "spines": 1,
            "host_bytes_per_s": HOST_GBPS * 1e9 / 8,
            "uplink_bytes_per_s": uplink_gbps * 1e9 / 8,
            "host_delay_s": DELAY_US * 1e-6,
            "uplink_delay_s": DELAY_US * 1e-6,
        },
        "cores_per_host": 1,
        "seed": 1,
        "shuffle": {
            "maps": hosts,
            "reducers": hosts,
            "sizes": {"kind": "constant", "bytes": wire},
            "max_bytes_in_flight": 1e15,
        },
        "fct_bucket_edges_bytes": [],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("/tmp/sim-vs-ns3-fabric.md"))
    a = ap.parse_args()
    binary = compile_ns3(SOURCE, "two-tier")
    hosts = LEAVES * HOSTS_PER_LEAF
    rows = []
    for up in UPLINKS_GBPS:
        ns = run_ns3(binary, up)
        all_fcts = [f for _, _, f in ns["flows"]]
        stuck = sum(f < 0 for f in all_fcts)  # still in retransmission backoff at the time limit
        fcts = [f for f in all_fcts if f >= 0]
        nan = float("nan")
        ns_reducers = [
            nan if any(f < 0 for _, d, f in ns["flows"] if d == h) else max(f for _, d, f in ns["flows"] if d == h)
            for h in range(hosts)
        ]
        cfg = sim_config(up)
        t0 = time.perf_counter()
        sim = simulate_fabric(cfg)
        wall = time.perf_counter() - t0
        (bucket,) = sim["fct"]
        sim_end = float(sim["shuffle_completion_s"])
        sim_reducers = sorted(sim["reducer_finish_s"])
        ns_end = nan if stuck else max(fcts)
        row = {
            "oversubscription": HOSTS_PER_LEAF * HOST_GBPS / up,
            "uplink_gbps": up,
            "ns3_flows_not_done": stuck,
            "ns3_end_s": ns_end,
            "sim_end_s": sim_end,
            "end_error": (sim_end - ns_end) / ns_end,
            "ns3_mean_fct_s": statistics.mean(fcts),
            "sim_mean_fct_s": bucket["mean_s"],
            "mean_fct_error": (bucket["mean_s"] - statistics.mean(fcts)) / statistics.mean(fcts),
            "ns3_reducers_s": sorted(ns_reducers),
            "sim_reducers_s": sim_reducers,
            "reducer_max_abs_error": nan
            if stuck
            else max(abs(s - n) / n for s, n in zip(sim_reducers, sorted(ns_reducers), strict=True)),
            "ns3_wall_s": ns["wall_s"],
            "sim_wall_s": wall,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    lines = [
        "| oversubscription (uplink) | ns-3 shuffle end (s) | sim (s) | error | ns-3 mean FCT of finished flows (s) "
        "| sim (s) | error "
        "| reducers' finish, worst error | ns-3 wall (s) | sim wall (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def pct(x: float) -> str:
        return "–" if x != x else f"{x * 100:+.1f} %"

    for r in rows:
        end = (
            f"{r['ns3_end_s']:.3f}" if r["ns3_flows_not_done"] == 0 else f"{r['ns3_flows_not_done']} of 56 flows stuck"
        )
        lines.append(
            f"| {r['oversubscription']:g}:1 ({r['uplink_gbps']:g} Gbit/s) | {end} "
            f"| {r['sim_end_s']:.3f} "
            f"| {pct(r['end_error'])} | {r['ns3_mean_fct_s']:.3f} | {r['sim_mean_fct_s']:.3f} "
            f"| {pct(r['mean_fct_error'])} | {pct(r['reducer_max_abs_error'])} "
            f"| {r['ns3_wall_s']:.1f} | {r['sim_wall_s'] * 1e3:.2f} |"
        )
    a.out.write_text("\n".join(lines) + "\n")
    a.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
