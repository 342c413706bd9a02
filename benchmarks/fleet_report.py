"""The fleet page at scale: generate N applications (eventlog.fleet), ingest them, write the fleet page.

    .venv/bin/python benchmarks/fleet_report.py --n 1000 [--seed 0] [--dir /tmp/fleet-bench]

Prints wall and CPU time of each step, the process's peak resident memory after each, the store's
and the page's sizes. Results in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import time
from pathlib import Path

from shufflelab.appreport import fleet as fleet_report
from shufflelab.eventlog import fleet
from shufflelab.eventlog.ingest import ingest


def step(label: str, fn):  # type: ignore[no-untyped-def]
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{label:<12} wall {time.perf_counter() - w:7.1f} s  cpu {time.process_time() - c:7.1f} s  "
        f"peak RSS {peak:6.0f} MB"
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/fleet-bench"))
    a = ap.parse_args()
    shutil.rmtree(a.dir, ignore_errors=True)
    truth = step("generate", lambda: fleet.generate(a.dir, a.n, a.seed))
    logs = sum(p.stat().st_size for p in (a.dir / "logs").iterdir())
    db = a.dir / "fleet.duckdb"
    step("ingest", lambda: ingest([a.dir / "logs"], db))
    html, md = step("fleet page", lambda: fleet_report.write(db, a.dir / "out"))
    figs = sum(p.stat().st_size for p in (a.dir / "out" / "figures").glob("fleet-*.png"))
    print(
        f"{len(truth.apps)} applications, logs {logs / 1e6:.1f} MB, store {db.stat().st_size / 1e6:.1f} MB, "
        f"fleet.html {html.stat().st_size / 1e3:.0f} kB, fleet.md {md.stat().st_size / 1e3:.0f} kB, "
        f"figures {figs / 1e3:.0f} kB"
    )


if __name__ == "__main__":
    main()
