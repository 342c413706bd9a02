"""Speed of the fabric simulator (crates/simcore fabric.rs + maxmin.rs): all-to-all shuffles on a
k=8 fat tree (128 hosts), the issue's 1,000-host leaf-spine and optionally a 10,000-host one,
recomputation modes and two builds of the core side by side in one invocation.

    nice -n 10 .venv/bin/python benchmarks/sim_scale.py [--repeat 3] [--full-1000]
        [--baseline DIR [--baseline-label main]] [--scale-10k] [--peer-1000] [--out FILE.md]

Modes: ``incremental`` (the default, local repair: the flows a change reaches through the
bottlenecks, filled over what the others leave and grown until every flow has a bottleneck),
``level_cut`` (the changed components, or every flow once the search has reached half of them, and
of those every flow at or above the lowest level a change reaches), ``components`` (the changed
components however large) and ``full`` (every flow at every change, the from-scratch reference).
A ``--baseline`` build older than local repair has no ``level_cut``: leave it out with ``--modes``.

``--baseline DIR``: a directory holding another build of the core's module ``shufflelab_simcore``
(e.g. main's: ``git archive main Cargo.toml Cargo.lock crates | tar -x -C /tmp/main-src`` then
``.venv/bin/pip install --target DIR /tmp/main-src/crates/simcore``); every case then also runs
with it, in the same invocation, so both builds see the same machine load.

Every case runs in a fresh child process (so its peak RSS is its own). Per case: wall and CPU
seconds of one core run (best of ``--repeat``; JSON in/out included), fetches simulated per wall
second, rate recomputations (solves), flows re-solved in total and per solve, the simulated
shuffle completion (virtual seconds) and the child's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

LOGNORMAL_10MB = {"kind": "lognormal", "mean_mib": 10e6 / 2**20, "sigma": 1.0}


def leaf_spine(name: str, leaves: int, maps: int, reducers: int) -> dict[str, Any]:
    """40 hosts per leaf, 4 spines, every link 10 Gbit/s (10:1 at the leaves), lognormal blocks
    (mean 10 MB, sigma 1), 5 fetches in flight per reducer."""
    return {
        "experiment": {"name": name},
        "topology": {
            "kind": "leaf_spine",
            "leaves": leaves,
            "hosts_per_leaf": 40,
            "spines": 4,
            "host_gbps": 10,
            "uplink_gbps": 10,
        },
        "shuffle": {"maps": maps, "reducers": reducers, "size": LOGNORMAL_10MB, "max_reqs_in_flight": 5},
    }


def peer_1000() -> dict[str, Any]:
    """The nearest the fabric spec comes to SimGrid's own 1,000-host scenario (each of 1,000 hosts
    fetches from 100 distinct random hosts, 5 in flight, no byte cap, 10 us links), which a
    ``[shuffle]`` of maps x reducers cannot express: 1,000 reducers fetch from the same 100 map
    hosts (every 10th host), so 100 hosts send 1,000 blocks each instead of every host sending 100.
    The same fetches (~100,000) and flows in flight (5,000), not the same traffic matrix."""
    doc = leaf_spine("sim-scale-1000-peer", 25, 100, 1000)
    doc["topology"] |= {"host_delay_us": 10, "uplink_delay_us": 10}
    doc["shuffle"]["max_mib_in_flight"] = 1e9  # the largest the spec takes: no cap in practice
    return doc


CASES: dict[str, dict[str, Any]] = {
    "sim-scale-k8": {
        "experiment": {"name": "sim-scale-k8"},
        "topology": {"kind": "fat_tree", "k": 8, "host_gbps": 10},
        "shuffle": {"maps": 128, "reducers": 128, "size": LOGNORMAL_10MB, "max_reqs_in_flight": 5},
    },
    # the scenario: 25 racks x 40 hosts, ~100,000 fetches (317 map x 316 reduce tasks)
    "sim-scale-1000": leaf_spine("sim-scale-1000", 25, 317, 316),
    # 250 racks x 40 hosts, 1,000 map x 1,000 reduce tasks: ~1,000,000 fetches
    "sim-scale-10k": leaf_spine("sim-scale-10k", 250, 1000, 1000),
    "sim-scale-1000-peer": peer_1000(),
}
MODES = ("incremental", "level_cut", "components", "full")


def child(case: str, recompute: str, repeat: int) -> dict[str, Any]:
    """One case in this process (the child side)."""
    import resource

    from shufflelab.sim import fabric_spec
    from shufflelab.sim.core import simulate_fabric

    spec = fabric_spec.parse(CASES[case])
    cfg = fabric_spec.core_config(spec, 0, Path("."), recompute=recompute)
    best_wall, best_cpu, result = float("inf"), float("inf"), {}
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        result = simulate_fabric(cfg)
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return {
        "case": case,
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


def run(case: str, recompute: str, repeat: int, build: str, module_dir: Path | None) -> dict[str, Any]:
    """One case in a child process, with the core from `module_dir` if given."""
    env = dict(os.environ)
    if module_dir is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(module_dir), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, __file__, "--child", case, recompute, str(repeat)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    row: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    row["build"] = build
    return row


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| case | hosts | build | recompute | fetches | wall (s) | CPU (s) | fetches/s | solves "
        "| flows re-solved | per solve | completion (virtual s) | peak RSS (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['case']} | {r['hosts']:,} | {r['build']} | {r['recompute']} | {r['fetches']:,} | "
            f"{r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['fetches_per_s']:,.0f} | {r['solves']:,} | "
            f"{r['flows_solved']:,} | {r['per_solve']:.0f} | {r['completion_s']:.4f} | {r['rss_mib']:.0f} |"
        )
    return "\n".join(out)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs for the k=8 case")
    ap.add_argument("--full-1000", action="store_true", help="run the 1,000-host case in every mode (slow)")
    ap.add_argument("--baseline", type=Path, default=None, help="a directory with another build's shufflelab_simcore")
    ap.add_argument("--baseline-label", default="baseline", help="its name in the table")
    ap.add_argument("--label", default="this", help="the name of the installed build in the table")
    ap.add_argument("--scale-10k", action="store_true", help="also the 10,000-host, 1,000,000-fetch case (minutes)")
    ap.add_argument(
        "--peer-1000",
        action="store_true",
        help="also 100 map hosts x 1,000 reducers without a byte cap, the nearest to SimGrid's own scenario "
        "(not that scenario: see peer_1000)",
    )
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown table here")
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="recompute modes to run")
    args = ap.parse_args()
    if args.baseline is not None and not (args.baseline / "shufflelab_simcore").exists():
        ap.error(f"--baseline {args.baseline}: no shufflelab_simcore module in it")
    builds: list[tuple[str, Path | None]] = [(args.label, None)]
    if args.baseline is not None:
        builds.insert(0, (args.baseline_label, args.baseline))
    plan = [("sim-scale-k8", mode, args.repeat) for mode in args.modes]
    big = args.modes if args.full_1000 else [m for m in args.modes if m != "components"]
    plan += [("sim-scale-1000", mode, 1) for mode in big]
    rows = []
    for case, mode, repeat in plan:
        for build, module_dir in builds:  # the builds alternate, so both see the same load
            rows.append(run(case, mode, repeat, build, module_dir))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    if args.peer_1000:
        for build, module_dir in builds:
            rows.append(run("sim-scale-1000-peer", "incremental", 1, build, module_dir))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    if args.scale_10k:
        rows.append(run("sim-scale-10k", "incremental", 1, args.label, None))
    note = f"(CPython {platform.python_version()}, {platform.machine()}, k=8: best of {args.repeat})"
    text = f"{table(rows)}\n\n{note}\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
