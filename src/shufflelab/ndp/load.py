"""How loaded a storage node is, for the Net-Aware planner: completions per busy second and the
service time (:class:`DrainMeter`), and the CPUs a proxy may use."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

from shufflelab import cgroups


class DrainMeter:
    """Completions per second of *busy* time (at least one pushdown running), as an EWMA of the
    busy time between completions: idle gaps do not count, so it estimates how fast this node
    drains its queue, not how fast requests happened to arrive. Also an EWMA of the service time."""

    def __init__(self, alpha: float = 0.2, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < alpha <= 1:
            raise ValueError(f"alpha {alpha} must be in (0, 1]")
        self.alpha = alpha
        self.clock = clock
        self.active = 0
        self.busy_s = 0.0
        self._t = clock()
        self._busy_at_last = 0.0
        self.interval_s: float | None = None
        self.service_s: float | None = None

    def _advance(self) -> None:
        now = self.clock()
        if self.active > 0:
            self.busy_s += now - self._t
        self._t = now

    def start(self) -> None:
        self._advance()
        self.active += 1

    def finish(self, service_s: float | None = None) -> None:
        """One pushdown left its slot; ``service_s`` (its time in the slot) when it completed."""
        self._advance()
        self.active = max(0, self.active - 1)
        if service_s is None:  # failed: frees the slot, is not a completion
            return
        gap = self.busy_s - self._busy_at_last
        self._busy_at_last = self.busy_s
        a = self.alpha
        self.interval_s = gap if self.interval_s is None else a * gap + (1 - a) * self.interval_s
        self.service_s = service_s if self.service_s is None else a * service_s + (1 - a) * self.service_s

    @property
    def rate(self) -> float:
        """Completions per busy second (0.0 before the first completion)."""
        if self.interval_s is None:
            return 0.0
        return 1.0 / max(self.interval_s, 1e-6)


def usable_cpus() -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup CPU quota where visible
    (inside ``ip netns exec`` /sys has no cgroup hierarchy: pass ``--workers`` for a limited host)."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cgroups.cpu_quota()
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return max(1, n)
