"""The Parquet tables of ``analyze --engine spark`` read through Store, against the same applications
in a DuckDB file: N synthetic applications (eventlog.fleet) ingested both ways -- the Spark engine's
two halves run here, without Spark -- then the same queries timed on both.

    .venv/bin/python benchmarks/parquet_tables.py --n 200 [--seed 1] [--dir /tmp/parquet-tables-bench]

Prints each step's CPU time and each query's wall time (one run each: rough). Results in docs/design.md
("When one machine is not enough").
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from shufflelab.eventlog import dataset, fleet
from shufflelab.eventlog.files import discover
from shufflelab.eventlog.ingest import ingest
from shufflelab.results import Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/parquet-tables-bench"))
    a = ap.parse_args()
    shutil.rmtree(a.dir, ignore_errors=True)
    fleet.generate(a.dir / "logs", a.n, a.seed)
    local, tables = a.dir / "local.duckdb", a.dir / "tables.parquet"
    c = time.process_time()
    ingest([a.dir / "logs"], local, workers=1)
    print(f"local ingest: {time.process_time() - c:.1f} CPU-s")
    c = time.process_time()
    found, _ = discover([a.dir / "logs"])
    staging = dataset.staging_for(tables)
    staging.mkdir()
    done = dict(dataset.parse_items(str(staging), 10_000, [(i, s.display, s.key) for i, s in enumerate(found)]))
    parsed = time.process_time() - c
    dataset.assemble(staging, found, done)
    dataset.publish(staging, tables)
    print(f"engine without Spark: parse {parsed:.1f} + tables {time.process_time() - c - parsed:.1f} CPU-s")
    for db in (local, tables):
        store = Store(db)
        ids = list(store.query("SELECT run_id FROM apps ORDER BY run_id")["run_id"])
        for q in ("SELECT count(*) FROM apps", "SELECT * FROM stages", "SELECT * FROM tasks"):
            w = time.perf_counter()
            store.query(q)
            print(f"{db.name:<15} {q:<28} {time.perf_counter() - w:6.3f} s")
        w = time.perf_counter()
        for run_id in ids[:50]:
            store.query("SELECT * FROM stages WHERE run_id = ? AND coalesce(app_index, 0) = ?", [run_id, 0])
        print(f"{db.name:<15} {'50 per-application queries':<28} {time.perf_counter() - w:6.3f} s")


if __name__ == "__main__":
    main()
