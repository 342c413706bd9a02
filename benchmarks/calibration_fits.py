"""Benchmark: how much the calibration's error depends on which runs the workload is fitted from.

    .venv/bin/python benchmarks/calibration_fits.py RESULTS.duckdb --spec SPEC [--subset 5] [--draws 40]

For the emulated experiment in RESULTS (e.g. seed 000's matrix, built from
``docs/results/cc-under-udp/data`` with ``Store.import_parquet``), the median absolute error of
the simulated vs real job times over all scenarios:
- fitted from **one** run: each run without cross traffic in turn (the spread the single-run rule
  is exposed to);
- fitted from an **ensemble**: all runs without cross traffic, and ``--draws`` random subsets of
  ``--subset`` of them (seeded), each scenario's simulated time the median over the ensemble's fits.
Prints both distributions (min, quartiles, max) and writes them as JSON next to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

from shufflelab.sim.calibrate import _has_cross_traffic, _load, calibrate


def quantiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return {"min": xs[0], "q1": q[0], "median": q[1], "q3": q[2], "max": xs[-1], "n": len(xs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path)
    ap.add_argument("--spec", type=Path, required=True)
    ap.add_argument("--subset", type=int, default=5, help="runs per random ensemble")
    ap.add_argument("--draws", type=int, default=40, help="random ensembles")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("/tmp/calibration-fits.json"))
    a = ap.parse_args()

    data = _load(a.results)
    runs = data["runs"]
    runs = runs[(runs["status"] == "ok") & runs["job_time_s"].notna()]
    specs = {sid: json.loads(r["spec_json"]) for sid, r in data["scenarios"].set_index("scenario_id").iterrows()}
    base = sorted(runs[[not _has_cross_traffic(specs[s]) for s in runs["scenario_id"]]]["run_id"])
    if len(base) < a.subset:
        raise SystemExit(f"{a.results}: {len(base)} runs without cross traffic, fewer than --subset {a.subset}")

    single = {rid: calibrate(a.results, a.spec, fit_run=rid).median_abs_error for rid in base}
    whole = calibrate(a.results, a.spec, ensemble=True).median_abs_error
    rng = random.Random(a.seed)
    subsets = [sorted(rng.sample(base, a.subset)) for _ in range(a.draws)]
    drawn = [calibrate(a.results, a.spec, ensemble=True, ensemble_runs=s).median_abs_error for s in subsets]
    out = {
        "results": str(a.results),
        "runs_without_cross_traffic": len(base),
        "single_run_fit": quantiles(list(single.values())),
        "single_run_fit_by_run": single,
        "ensemble_all": whole,
        f"ensemble_{a.subset}_of_{len(base)}": quantiles(drawn),
        "draws": [{"runs": sub, "median_abs_error": e} for sub, e in zip(subsets, drawn, strict=True)],
        "draws_within_10_percent": sum(e <= 0.10 for e in drawn),
    }
    a.out.write_text(json.dumps(out, indent=1))

    def line(name: str, q: dict[str, float]) -> str:
        return (
            f"{name:<28} n={q['n']:<3.0f} min {q['min'] * 100:5.1f} %  q1 {q['q1'] * 100:5.1f} %  "
            f"median {q['median'] * 100:5.1f} %  q3 {q['q3'] * 100:5.1f} %  max {q['max'] * 100:5.1f} %"
        )

    print("median |error| over the scenarios, by what the workload is fitted from:")
    print(line("one run", out["single_run_fit"]))
    print(line(f"ensemble of {a.subset} random runs", out[f"ensemble_{a.subset}_of_{len(base)}"]))
    print(f"{'ensemble of all ' + str(len(base)) + ' runs':<28} {whole * 100:.1f} %")
    print(f"ensembles of {a.subset} within 10 %: {out['draws_within_10_percent']} of {a.draws}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
