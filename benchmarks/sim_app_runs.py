"""Per-run speed of an application spec (recorded Spark applications on a fabric): the runs
``shufflelab sim run SPEC`` does, one at a time, each timed in CPU and wall seconds with the
machine's 1-minute load average before and after (the machine is shared: read CPU seconds).

    .venv/bin/python benchmarks/sim_app_runs.py experiments/sim-app-1000.toml

Nothing is written; one JSON line per run (matrix point × seed) on stdout. The result of each run
is the one ``shufflelab sim run`` stores (``shufflelab.sim.apps_sim.run_point``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec", type=Path, help="an application spec (a TOML file with [[app]] tables)")
    a = ap.parse_args()
    from shufflelab.sim import app_spec
    from shufflelab.sim.apps_sim import run_point
    from shufflelab.sim.spec import SimSpecError

    try:
        spec = app_spec.load(a.spec)
        points = app_spec.expand(spec, str(a.spec))
    except SimSpecError as err:
        raise SystemExit(str(err)) from None
    for point in points:
        for seed in range(spec.experiment.seeds):
            before = load_average()
            c0, w0 = time.process_time(), time.perf_counter()
            run = run_point(point, seed, a.spec.parent, str(a.spec))
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            r = run["result"]
            row = {
                "run": point.label,
                "seed": seed,
                "cpu_s": round(cpu, 2),
                "wall_s": round(wall, 2),
                "load_before": before,
                "load_after": load_average(),
                "solves": r["solves"],
                "flows_solved": r["flows_solved"],
                "makespan_s": r["makespan_s"],
            }
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
