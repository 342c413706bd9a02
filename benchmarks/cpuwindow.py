"""CPU used over a window, for the cross-traffic benchmarks (``cross_traffic_cpu.py`` and
``cross_cpu_generator.py``, which import it as ``cpuwindow``): the whole host's busy time from
``/proc/stat`` and chosen processes' user + system time from ``/proc/<pid>/stat``, read with the
box-fidelity sampler's parsers (:mod:`shufflelab.emulate.boxload`). Scaffolding, not part of the
product package.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from shufflelab.emulate import boxload

# /proc/stat's modes that are work (idle and iowait are not)
BUSY_MODES = ("user", "nice", "system", "irq", "softirq", "steal")


def busy_jiffies() -> int:
    """Busy clock ticks over all cores since boot."""
    stat = boxload.parse_proc_stat(boxload.read_proc_stat(), 0.0)
    return sum(stat.jiffies.get(m, 0) for m in BUSY_MODES)


def proc_jiffies(pid: int) -> int:
    """user + system CPU of ``pid`` (clock ticks)."""
    return boxload.parse_pid_stat(Path(f"/proc/{pid}/stat").read_text()).cpu


def cores(seconds: float, groups: Mapping[str, Sequence[int]] | None = None) -> dict[str, float]:
    """Cores used over ``seconds`` by each group of processes (``<name>_cores``) and by the whole
    host (``busy_cores``)."""
    groups = groups or {}

    def now() -> tuple[list[int], int, float]:
        return [sum(map(proc_jiffies, pids)) for pids in groups.values()], busy_jiffies(), time.monotonic()

    g0, b0, t0 = now()
    time.sleep(seconds)
    g1, b1, t1 = now()
    dt = t1 - t0
    out = {f"{name}_cores": (b - a) / boxload.HZ / dt for name, a, b in zip(groups, g0, g1, strict=True)}
    out["busy_cores"] = (b1 - b0) / boxload.HZ / dt
    return out
