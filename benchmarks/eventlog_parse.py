"""Benchmark: the event-log parser alone (no store), on task events -- the bulk of a big log.

The task start and end lines of the Spark 4.3 plain fixture are repeated ``--times`` times in
memory and fed to ``Parser.feed_stream`` in 1 MiB chunks; the best CPU time of ``--repeat`` runs is
printed with MB/s of uncompressed log. Task starts are passed over undecoded but checked to be whole
(a torn line inside a log is damage: docs/design.md, "Bad input"); compare two checkouts by running
this with each one's ``src`` first on ``PYTHONPATH``. Task ends are decoded by the Rust core
(``crates/eventlogcore``) when it is installed; ``--python`` reads with the Python path instead:

    .venv/bin/python benchmarks/eventlog_parse.py [--python]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from shufflelab.eventlog import events
from shufflelab.eventlog.events import Parser

FIXTURE = Path(__file__).resolve().parents[1] / "tests/fixtures/eventlogs/spark-4.3/plain/app-20261124131230-0000"
TASK_EVENTS = (b'{"Event":"SparkListenerTaskStart"', b'{"Event":"SparkListenerTaskEnd"')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--times", type=int, default=4000, help="repetitions of the fixture's task events")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--python", action="store_true", help="the Python path, not the Rust core")
    args = ap.parse_args()
    if args.python:
        events.RUST = None
    tasks = [x for x in FIXTURE.read_bytes().split(b"\n") if x.startswith(TASK_EVENTS)]
    body = b"\n".join(tasks * args.times) + b"\n"
    chunks = [body[i : i + (1 << 20)] for i in range(0, len(body), 1 << 20)]
    best = float("inf")
    for _ in range(args.repeat):
        p = Parser(on_tasks=lambda cols, log: None)
        t = time.process_time()
        p.feed_stream(iter(chunks), "bench")
        p.finish()
        best = min(best, time.process_time() - t)
    mb = len(body) / 1e6
    path = "Python path" if events.RUST is None else "Rust core"
    print(f"{mb:.0f} MB of task events ({p.log.lines} lines, {path}): best CPU {best:.3f} s, {mb / best:.0f} MB/s")


if __name__ == "__main__":
    main()
