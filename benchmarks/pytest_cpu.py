"""A pytest plugin: the CPU time of each test and of everything it started, for finding what makes the
test command slow (benchmarks only; never loaded by the project's own runs). Root, cgroup v1.

Each pytest process (each xdist worker, or pytest itself) moves into a cpuacct group of its own at
start, so every process it starts from then on -- the stand-in hosts' sshd and what they start, Spark's
daemons and JVMs, iperf3 -- is counted in it, whatever else runs on the machine (the other lane, tier 1
of the gates). A test's CPU is its group's usage across the test's setup, call and teardown (module
fixtures are charged to the test that makes or ends them). One JSON line per test is appended to
``$PYTEST_CPU_OUT``:

    mkdir /tmp/plugin && cp benchmarks/pytest_cpu.py /tmp/plugin/
    PYTHONPATH=/tmp/plugin PYTEST_ADDOPTS="-p pytest_cpu" PYTEST_CPU_OUT=/tmp/cpu.jsonl ./.ci/run
    .venv/bin/python benchmarks/pytest_cpu.py /tmp/cpu.jsonl      # the table, most CPU first

(the plugin alone on ``PYTHONPATH``: benchmarks/ holds folders named ``ns3`` and ``simgrid`` that would
shadow those packages in every Python process the tests start).

Processes still running in a group when its pytest ends go back to the root group (counted up to
then), so that the group can always be removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path("/sys/fs/cgroup/cpuacct")
_group: Path | None = None


def _usage() -> float | None:
    if _group is None:
        return None
    try:
        return int((_group / "cpuacct.usage").read_text()) / 1e9
    except OSError:
        return None


def pytest_configure(config: pytest.Config) -> None:
    global _group
    if not os.environ.get("PYTEST_CPU_OUT") or os.geteuid() != 0 or not ROOT.is_dir():
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    group = ROOT / f"shufflelab-pytest-cpu-{worker}-{os.getpid()}"
    group.mkdir()
    (group / "cgroup.procs").write_text(str(os.getpid()))
    _group = group


def pytest_unconfigure(config: pytest.Config) -> None:
    global _group
    if _group is None:
        return
    group, _group = _group, None
    for _ in range(50):
        pids = (group / "cgroup.procs").read_text().split()
        for pid in pids:
            with contextlib.suppress(OSError):  # ended meanwhile
                (ROOT / "cgroup.procs").write_text(pid)
        try:
            group.rmdir()
            return
        except OSError:  # a process forked while they were moved: again
            time.sleep(0.1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    c0, t0 = _usage(), time.monotonic()
    yield
    c1 = _usage()
    if c0 is None or c1 is None:
        return
    row = {
        "test": item.nodeid,
        "cpu_s": round(c1 - c0, 2),
        "wall_s": round(time.monotonic() - t0, 2),
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
    }
    with open(os.environ["PYTEST_CPU_OUT"], "a") as fh:
        fh.write(json.dumps(row) + "\n")


def table(path: Path, top: int = 40) -> str:
    """The census as a table: per test file, then the ``top`` tests, most CPU first."""
    rows: list[dict[str, Any]] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    files: dict[str, list[float]] = {}  # CPU, wall, tests
    for r in rows:
        f = files.setdefault(r["test"].split("::")[0], [0.0, 0.0, 0.0])
        f[0] += r["cpu_s"]
        f[1] += r["wall_s"]
        f[2] += 1
    total = sum(r["cpu_s"] for r in rows)
    out = [f"{len(rows)} tests, {total:.0f} CPU-s in all", ""]
    out += ["| file | tests | CPU (s) | wall (s) |", "|---|---|---|---|"]
    for name, (cpu, wall, n) in sorted(files.items(), key=lambda kv: -kv[1][0]):
        out.append(f"| {name} | {n:.0f} | {cpu:.1f} | {wall:.1f} |")
    out += ["", "| test | CPU (s) | wall (s) |", "|---|---|---|"]
    for r in sorted(rows, key=lambda r: -r["cpu_s"])[:top]:
        out.append(f"| {r['test']} | {r['cpu_s']:.1f} | {r['wall_s']:.1f} |")
    return "\n".join(out)


if __name__ == "__main__":
    print(table(Path(sys.argv[1])))
