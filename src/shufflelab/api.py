"""Python API over a results file: every table as a pandas DataFrame.

from shufflelab.api import open_results
r = open_results("results/cc-under-udp.duckdb")
r.runs()                 # one row per run, with the scenario's matrix values as columns
r.tasks(status="ok")     # one row per Spark task (units: see shufflelab.eventlog)
r.sql("SELECT ...")      # anything else
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from shufflelab.results import Store


@dataclass
class Results:
    store: Store

    def sql(self, query: str, params: list[object] | None = None) -> pd.DataFrame:
        return self.store.query(query, params)

    def runs(self) -> pd.DataFrame:
        df, _ = self.store.runs_with_values()
        return df.drop(columns=["values_json", "environment_json"], errors="ignore")

    def _per_run(self, table: str, status: str | None) -> pd.DataFrame:
        if status is None:
            return self.sql(f"SELECT * FROM {table}")
        return self.sql(f"SELECT t.* FROM {table} t JOIN runs r USING (run_id) WHERE r.status = ?", [status])

    def tasks(self, status: str | None = None) -> pd.DataFrame:
        return self._per_run("tasks", status)

    def stages(self, status: str | None = None) -> pd.DataFrame:
        return self._per_run("stages", status)

    def jobs(self, status: str | None = None) -> pd.DataFrame:
        return self._per_run("jobs", status)

    def queue_samples(self, run_id: str | None = None) -> pd.DataFrame:
        if run_id is None:
            return self.sql("SELECT * FROM queue_samples ORDER BY run_id, t")
        return self.sql("SELECT * FROM queue_samples WHERE run_id = ? ORDER BY t", [run_id])

    def cross_traffic(self) -> pd.DataFrame:
        return self.sql("SELECT * FROM cross_traffic")


def open_results(path: str | Path) -> Results:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such results file")
    return Results(Store(p))
