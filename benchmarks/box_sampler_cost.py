"""Benchmark: the CPU cost of the box-fidelity sampler (``shufflelab.emulate.boxload``).

    .venv/bin/python benchmarks/box_sampler_cost.py [--samples 60] [--out FILE.json]

Takes ``--samples`` samples the way a run does (``/proc/stat``, every process's ``/proc/<pid>/stat``,
the network namespace of those outside the lab's process tree, the lab's leased namespaces), one
every ``boxload.PERIOD_S``, and reports the sampler thread's own CPU time per sample
(``time.thread_time``, so the machine's other load changes it little) and what that is as a share of
one core at the sampling period; and how well the per-process accounting adds up: the CPU ticks it
split between the lab and other work over the window against ``/proc/stat``'s busy ticks (user +
nice + system + steal; kernel threads' and interrupt time are in neither). Needs no root and no
fabric; it reads only ``/proc`` and the lease folder.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from shufflelab.emulate import boxload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    sampler = boxload.BoxSampler()
    cost_ms, procs = [], []
    for _ in range(args.samples):
        t0 = time.thread_time()
        sampler.sample()
        cost_ms.append(1000 * (time.thread_time() - t0))
        procs.append(len(sampler.last.procs) if sampler.last else 0)
        time.sleep(boxload.PERIOD_S)
    per = float(np.mean(cost_ms))
    first, last = sampler.samples[0], sampler.samples[-1]
    busy = sum(last.stat.jiffies[m] - first.stat.jiffies[m] for m in ("user", "nice", "system", "steal"))
    counted = last.lab_cpu + last.foreign_cpu
    out = {
        "samples": args.samples,
        "processes_mean": float(np.mean(procs)),
        "cpu_ms_per_sample_mean": round(per, 3),
        "cpu_ms_per_sample_p95": round(float(np.percentile(cost_ms, 95)), 3),
        "share_of_one_core": round(per / 1000 / boxload.PERIOD_S, 5),
        "counted_ticks": counted,
        "busy_ticks": busy,
        "counted_over_busy": round(counted / busy, 4) if busy else None,
    }
    print(json.dumps(out, indent=2))
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
