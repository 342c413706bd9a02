"""Wall time of the Rust simulator core vs the SimPy reference on the seed-003 Fig 6 and Fig 7
scenarios (same configuration, same model), side by side in one invocation.

    nice -n 10 .venv/bin/python benchmarks/sim_speed.py [--repeat 3] [--out docs/benchmarks-sim.md]

Runs the static policies (the ones the reference models), CPU jitter off so that both compute
the same thing; reports the best of ``--repeat`` wall times per engine, the ratio, and the
largest relative difference in mean job time between the two.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from shufflelab.sim import reference
from shufflelab.sim import spec as simspec
from shufflelab.sim.core import simulate

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    ("sim-fig6.toml", "cores_per_machine=1"),
    ("sim-fig6.toml", "cores_per_machine=4"),
    ("sim-fig7c.toml", "efficiency=0.5"),
    ("sim-fig7a.toml", "efficiency=1.0"),
]
POLICIES = ("no-pushdown", "filter", "full")


def best_of(n: int, fn: Any, cfg: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    best, out = float("inf"), {}
    for _ in range(n):
        t0 = time.perf_counter()
        out = fn(cfg)
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mode", default="flow", choices=["flow", "chunk"])
    ap.add_argument("--out", type=Path, default=None, help="write a Markdown table here")
    args = ap.parse_args()
    rows = []
    for name, label in CASES:
        sp = simspec.load(ROOT / "experiments" / name)
        scenario = next(s for s in simspec.expand(sp) if s.label == label)
        for policy in POLICIES:
            cfg = simspec.core_config(scenario.spec, policy, 0, mode=args.mode)
            cfg["cpu_jitter"] = 0.0
            t_rust, r = best_of(args.repeat, simulate, cfg)
            t_ref, s = best_of(1 if args.mode == "chunk" else args.repeat, reference.simulate, cfg)
            mean_r = statistics.fmean(j["duration_s"] for j in r["jobs"])
            mean_s = statistics.fmean(j["duration_s"] for j in s["jobs"])
            rows.append(
                {
                    "scenario": f"{sp.experiment.name} {label}",
                    "policy": policy,
                    "jobs": len(r["jobs"]),
                    "tasks": sum(j["tasks"] for j in r["jobs"]),
                    "rust_ms": t_rust * 1e3,
                    "simpy_ms": t_ref * 1e3,
                    "ratio": t_ref / t_rust,
                    "mean_job_s": mean_r,
                    "diff_pct": 100 * abs(mean_r - mean_s) / mean_s,
                }
            )
            print(
                f"{rows[-1]['scenario']:32s} {policy:12s} rust {t_rust * 1e3:8.1f} ms  "
                f"simpy {t_ref * 1e3:9.1f} ms  ×{t_ref / t_rust:6.0f}  "
                f"job {mean_r:9.1f} s  diff {rows[-1]['diff_pct']:.4f} %",
                flush=True,
            )
    total_r = sum(r["rust_ms"] for r in rows)
    total_s = sum(r["simpy_ms"] for r in rows)
    print(f"total: rust {total_r:.0f} ms, simpy {total_s:.0f} ms, ratio {total_s / total_r:.0f}×")
    if args.out:
        lines = [
            "| scenario | policy | jobs | tasks | Rust (ms) | SimPy (ms) | SimPy / Rust | "
            "mean job (s) | Rust vs SimPy |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['scenario']} | {r['policy']} | {r['jobs']} | {r['tasks']} | "
                f"{r['rust_ms']:.1f} | {r['simpy_ms']:.0f} | {r['ratio']:.0f}× | "
                f"{r['mean_job_s']:.1f} | {r['diff_pct']:.4f} % |"
            )
        lines.append(f"| **total** | | | | **{total_r:.0f}** | **{total_s:.0f}** | **{total_s / total_r:.0f}×** | | |")
        env = f"{platform.python_implementation()} {platform.python_version()}, {args.mode} mode"
        args.out.write_text("\n".join(lines) + f"\n\n({env}, best of {args.repeat})\n")


if __name__ == "__main__":
    main()
