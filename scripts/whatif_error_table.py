#!/usr/bin/env python3
"""The what-if replay's measured error on the lab's own interventions, for both of its models.

For every committed report whose runs include the change the replay predicts (the UDP cross traffic
removed: the job's network k = rate / (rate - UDP rate) times faster), from its parquet tables:

* ``error_lab``: the lab's replay (``whatif.validate``: fetch wait plus scheduler delay and
  task-binary wait above the run's quiet floor; delay-scheduling gaps shrink), as in the reports'
  "What-if check";
* ``error_log``: the replay ``shufflelab analyze`` uses on any event log (fetch wait only, launch
  gaps kept, relative to its own k = 1 answer: ``appreport.analysis.network_prediction_s``).

error = mean predicted job time without the UDP / mean measured job time without it - 1. The
result is ``appreport.fleet.WHATIF_ERRORS`` (a unit test checks it against this script's output
committed in docs/whatif-error.tsv).

    .venv/bin/python scripts/whatif_error_table.py docs/results/{cc-under-udp,cc-under-udp-switch,\
        starvation,starvation-red,starvation-control,starvation-preliminary,user-app} > docs/whatif-error.tsv
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from results_args import results_folders

from shufflelab import diagnose, whatif
from shufflelab.appreport import analysis
from shufflelab.results import Store


def rows(folder: Path) -> list[str]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "results.duckdb")
        store.import_parquet(folder / "data")
        lab = whatif.validate(store.path).set_index("scenario")
        specs = store.scenario_specs()
        runs = store.query(
            "SELECT r.run_id, r.job_time_s, s.label FROM runs r JOIN scenarios s USING (scenario_id) "
            "WHERE r.status = 'ok'"
        )
        for s_label, b_label in diagnose.baseline_pairs(specs):
            spec = specs[s_label]
            if spec is None or spec.workload.apps != 1 or s_label not in lab.index:
                continue
            k, cores = whatif.udp_speedup(spec), whatif.spec_cores(spec)
            preds = []
            for run_id, job_s in runs[runs["label"] == s_label][["run_id", "job_time_s"]].itertuples(index=False):
                tasks, stages, jobs = whatif.run_inputs(store, run_id)
                if tasks.empty:
                    continue
                kw = {"cores": cores, "network": analysis.fetch_wait_ms, "delay_scheduling": False}
                at_one = whatif.predict(tasks, stages, jobs, 1.0, **kw).predicted_s  # type: ignore[arg-type]
                at_k = whatif.predict(tasks, stages, jobs, k, **kw).predicted_s  # type: ignore[arg-type]
                preds.append(float(job_s) * at_k / at_one)
            base = runs[runs["label"] == b_label]["job_time_s"].dropna()
            err_log = float(np.mean(preds) / base.mean() - 1)
            err_lab = float(lab.loc[s_label, "error"])
            out.append(f"{folder.name}\t{s_label}\t{k:g}\t{len(preds)}\t{err_lab:.3f}\t{err_log:.3f}")
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="whatif_error_table.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="docs/results/<name> with data/")
    folders = results_folders(parser, parser.parse_args(argv).folders)
    print("report\tscenario\tspeedup\truns\terror_lab\terror_log")
    for f in folders:
        for line in rows(f):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
