"""Net-Aware's engine costs on this machine, fitted from real NDP runs.

    shufflelab run experiments/ndp-costs.toml
    python benchmarks/ndp_costs.py results/ndp-costs.duckdb

The calibration experiment runs each query once per static policy on a fast link with strong
storage hosts, so neither side waits for the other. From its runs:

* ``parquet_s_per_byte`` and ``arrow_s_per_byte``: a least-squares fit of Spark's executor CPU
  seconds (event log, all tasks) per run = a constant per query (planning, joins, the final
  aggregate: the same whatever is pushed) + Parquet bytes downloaded (``none``: Spark decodes and
  evaluates everything) and Arrow IPC bytes received (``filter``, ``filter+project``) times their costs;
* ``storage_overhead``: the proxies' measured busy time per pushdown (read from the DataNode +
  execute, ``X-NDP-Read/Exec-Seconds``) times the CPUs each worker had, over the profile's
  single-core DuckDB seconds for the same plan and file count.

It prints the fitted numbers as JSON (the shape of ``shufflelab.ndp.advisor.DEFAULT_COSTS``) with the
per-run values they come from.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from shufflelab.ndp import tpch
from shufflelab.results import Store


def fit(db: Path) -> dict[str, object]:
    store = Store(db)
    runs, _ = store.runs_with_values()
    runs = runs[runs["status"] == "ok"]
    reads = store.query(
        "SELECT run_id, sum(body_bytes) AS body, sum(exec_s + read_s) AS busy_s, count(*) AS files FROM ndp_reads "
        "WHERE path LIKE '%/lineitem/%' GROUP BY 1"
    )
    runs = runs.merge(reads, on="run_id")
    per_run = []
    parquet, arrow, overhead = [], [], []
    for _, r in runs.iterrows():
        spec = json.loads(store.query("SELECT spec_json FROM scenarios WHERE scenario_id = ?", [r["scenario_id"]])
                          ["spec_json"][0])  # fmt: skip
        p = spec["workload"]["params"]
        policy, q = p["policy"], p["query"]
        cpu = float(r["executor_cpu_s"] or 0.0)
        row = {"query": q, "policy": policy, "executor_cpu_s": cpu, "received_bytes": int(r["body"])}
        if policy == "none":
            parquet.append(cpu / r["body"])
        elif policy in ("filter", "filter+project"):
            arrow.append(cpu / r["body"])
        if policy != "none":
            data = tpch.cache_dir(p["scale_factor"], p["file_mb"])
            prof = tpch.profile(data)["queries"][q][policy]
            real_per_worker = p["storage_cores"] * p.get("core_scale", 0.25) / max(1, int(-(-p["storage_cores"] // 1)))
            ratio = float(r["busy_s"]) * real_per_worker / max(1e-9, prof["storage_cpu_s"])
            overhead.append(ratio)
            row["storage_overhead"] = round(ratio, 3)
        per_run.append(row)
    # executor CPU = per-query constant (planning, the join, the final aggregate: the same whatever
    # is pushed, so it never changes a decision) + parquet_s_per_byte·Parquet + arrow_s_per_byte·Arrow
    queries = sorted({r["query"] for r in per_run})
    a = np.zeros((len(per_run), len(queries) + 2))
    y = np.zeros(len(per_run))
    for i, r in enumerate(per_run):
        a[i, queries.index(r["query"])] = 1.0
        a[i, len(queries) + (0 if r["policy"] == "none" else 1)] = r["received_bytes"]
        y[i] = r["executor_cpu_s"]
    coef = np.linalg.lstsq(a, y, rcond=None)[0] if len(per_run) >= a.shape[1] else None
    out: dict[str, object] = {
        "parquet_s_per_byte": float(coef[-2]) if coef is not None else None,
        "arrow_s_per_byte": float(coef[-1]) if coef is not None else None,
        "per_query_constant_s": dict(zip(queries, map(float, coef[: len(queries)]), strict=True))
        if coef is not None
        else None,
        "median_ratio_parquet": statistics.median(parquet) if parquet else None,
        "median_ratio_arrow": statistics.median(arrow) if arrow else None,
        "storage_overhead": statistics.median(overhead) if overhead else None,
        "runs": per_run,
    }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("db", type=Path, help="results of experiments/ndp-costs.toml")
    a = ap.parse_args(argv)
    print(json.dumps(fit(a.db), indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
