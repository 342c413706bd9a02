"""Speed of the fabric simulator (crates/simcore fabric.rs + maxmin.rs): all-to-all shuffles on a
k=8 fat tree (128 hosts) and a 1,000-host leaf-spine, incremental vs from-scratch max-min
recomputation side by side in one invocation.

    nice -n 10 .venv/bin/python benchmarks/sim_scale.py [--repeat 3] [--full-1000] [--out FILE.md]

Modes: ``incremental`` (the default: the changed components, or every flow once the search has
reached half of them), ``components`` (the changed components however large) and ``full``
(every flow at every change, the from-scratch reference).

Per case: wall and CPU seconds of one core run (best of ``--repeat``; JSON in/out included),
fetches simulated per wall second, rate recomputations (solves), flows re-solved in total and per
solve (the work the incremental recomputation saves, if any), the simulated shuffle completion
(virtual seconds: the two modes must agree) and the process's peak RSS after the case.
"""

from __future__ import annotations

import argparse
import platform
import resource
import time
from pathlib import Path
from typing import Any

from shufflelab.sim import fabric_spec
from shufflelab.sim.core import simulate_fabric

LOGNORMAL_10MB = {"kind": "lognormal", "mean_mib": 10e6 / 2**20, "sigma": 1.0}

FAT_TREE_K8: dict[str, Any] = {
    "experiment": {"name": "sim-scale-k8"},
    "topology": {"kind": "fat_tree", "k": 8, "host_gbps": 10},
    "shuffle": {"maps": 128, "reducers": 128, "size": LOGNORMAL_10MB, "max_reqs_in_flight": 5},
}
# the scenario: 25 racks x 40 hosts, 4 spines, every link 10 Gbit/s (10:1 at the leaves),
# ~100,000 fetches (317 map x 316 reduce tasks) of lognormal size, mean 10 MB, sigma 1, 5 in flight
LEAF_SPINE_1000: dict[str, Any] = {
    "experiment": {"name": "sim-scale-1000"},
    "topology": {
        "kind": "leaf_spine",
        "leaves": 25,
        "hosts_per_leaf": 40,
        "spines": 4,
        "host_gbps": 10,
        "uplink_gbps": 10,
    },
    "shuffle": {"maps": 317, "reducers": 316, "size": LOGNORMAL_10MB, "max_reqs_in_flight": 5},
}


MODES = ("incremental", "components", "full")


def run_case(doc: dict[str, Any], recompute: str, repeat: int) -> dict[str, Any]:
    spec = fabric_spec.parse(doc)
    cfg = fabric_spec.core_config(spec, 0, Path("."), recompute=recompute)
    best_wall, best_cpu, result = float("inf"), float("inf"), {}
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        result = simulate_fabric(cfg)
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return {
        "case": doc["experiment"]["name"],
        "hosts": result["hosts"],
        "recompute": recompute,
        "fetches": result["remote_fetches"],
        "wall_s": best_wall,
        "cpu_s": best_cpu,
        "fetches_per_s": result["remote_fetches"] / best_wall,
        "solves": result["solves"],
        "flows_solved": result["flows_solved"],
        "per_solve": result["flows_solved"] / max(result["solves"], 1),
        "completion_s": result["shuffle_completion_s"],
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| case | hosts | recompute | fetches | wall (s) | CPU (s) | fetches/s | solves | flows re-solved "
        "| per solve | completion (virtual s) | peak RSS (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['case']} | {r['hosts']} | {r['recompute']} | {r['fetches']:,} | {r['wall_s']:.2f} | "
            f"{r['cpu_s']:.2f} | {r['fetches_per_s']:,.0f} | {r['solves']:,} | {r['flows_solved']:,} | "
            f"{r['per_solve']:.0f} | {r['completion_s']:.4f} | {r['rss_mib']:.0f} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--full-1000", action="store_true", help="run the 1,000-host case in every mode (slow)")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown table here")
    args = ap.parse_args()
    rows = [run_case(FAT_TREE_K8, mode, args.repeat) for mode in MODES]
    big = MODES if args.full_1000 else ("incremental",)
    rows += [run_case(LEAF_SPINE_1000, mode, 1) for mode in big]
    text = table(rows) + f"\n\n(CPython {platform.python_version()}, {platform.machine()}, best of {args.repeat})\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
