"""Was the emulation host itself the bottleneck of a run? The fidelity of the box, per run.

Every host, switch and traffic generator of the local fabric shares this machine's cores. When
they want more than the cores give, the run measures the box, not the network it emulates. During
a run a thread samples ``/proc/stat`` (``procs_running``: threads running or runnable right now, and
the CPU time per mode, softirq included: the network stack's receive and transmit work); the record
then judges the run on four signs, each with a threshold (module constants, reasoned below):

- **run queue**: the mean number of runnable threads per core (``procs_running`` minus the sampler
  itself, over the cores) above ``RUNQ_PER_CORE``: the cores were oversubscribed by half for the
  whole run, so every busy thread got at most two thirds of a core on average;
- **softirq**: packet processing above ``SOFTIRQ_SHARE`` of all CPU time: a quarter of the box
  went to moving packets between namespaces (veth delivery runs in softirq), i.e. the network's
  cost is no longer small next to the job's;
- **switch lag**: the userspace switch's mean lateness behind its schedule (over every frame it
  sent and every in-switch arrival) above ``SWITCH_LAG_MEAN_MS``. Its normal lateness is tens of
  µs (a sleeping loop wakes 36-93 µs late at p99, docs/design-switch.md); half a millisecond on
  average is 5-15 times that, as much delay again as a short emulated link adds: departures stay
  exact in the model, but the frames reach the wire late (the 99th percentile of the per-sample
  maxima is recorded too, not judged: single descheduling spikes of a few ms are common on a shared
  box and do not make a run);
- **self-test**: a link self-test before the run found a port off its configuration.

A run over any threshold is labelled ``box_bottleneck`` with its reasons; the report shows the
label next to the verdicts built on such runs. Everything here but :class:`BoxSampler` is pure.
"""

from __future__ import annotations

import contextlib
import csv
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# mean runnable threads per core over the run above which the cores were oversubscribed
RUNQ_PER_CORE = 1.5
# share of all CPU time spent in softirq (packet processing) above which the box's network work
# competes with the job for the cores
SOFTIRQ_SHARE = 0.25
# the switch's mean lag behind its schedule over the run (ms)
SWITCH_LAG_MEAN_MS = 0.5
# how often the sampler reads /proc/stat (s)
PERIOD_S = 0.5

CSV_HEADER = ("t", "procs_running", "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class ProcStat:
    """One reading of ``/proc/stat``: runnable threads and the cumulative CPU jiffies per mode (all
    cores)."""

    t: float
    procs_running: int
    jiffies: dict[str, int]

    def row(self) -> list[Any]:
        return [self.t, self.procs_running, *(self.jiffies.get(k, 0) for k in CSV_HEADER[2:])]


def parse_proc_stat(text: str, t: float) -> ProcStat:
    """``/proc/stat``'s aggregate ``cpu`` line and ``procs_running``. Pure."""
    jiffies: dict[str, int] = {}
    running = 0
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            jiffies = dict(zip(CSV_HEADER[2:], (int(x) for x in parts[1:9]), strict=False))
        elif parts and parts[0] == "procs_running":
            running = int(parts[1])
    return ProcStat(t, running, jiffies)


def _read_proc_stat() -> str:
    with open("/proc/stat") as fh:
        return fh.read()


class BoxSampler:
    """Samples ``/proc/stat`` every ``period_s`` in a thread until :meth:`stop`; the samples go to a
    CSV (``CSV_HEADER``)."""

    def __init__(
        self,
        period_s: float = PERIOD_S,
        read: Callable[[], str] = _read_proc_stat,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.period_s = period_s
        self._read, self._clock = read, clock
        self.samples: list[ProcStat] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="box-sampler", daemon=True)

    def start(self) -> BoxSampler:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while True:
            with contextlib.suppress(OSError, ValueError):  # a reading lost is a sample lost, not a failed run
                self.samples.append(parse_proc_stat(self._read(), self._clock()))
            if self._stop.wait(self.period_s):
                return

    def stop(self, out: Path | None = None) -> list[ProcStat]:
        """Stop sampling (one last sample is taken) and write the CSV to ``out``."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if out is not None:
            with open(out, "w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(CSV_HEADER)
                w.writerows(s.row() for s in self.samples)
        return self.samples


@dataclass
class BoxLoad:
    """What the box did during a run (None where unknown)."""

    runq_per_core: float | None = None
    softirq_share: float | None = None
    switch_lag_mean_ms: float | None = None
    switch_lag_p99_ms: float | None = None
    selftest_failed: list[str] = field(default_factory=list)

    def verdict(self) -> tuple[bool, list[str]]:
        """Whether the box was the bottleneck, and why (the signs over their thresholds). Pure."""
        why = []
        if self.runq_per_core is not None and self.runq_per_core > RUNQ_PER_CORE:
            why.append(f"run queue {self.runq_per_core:.2f} runnable threads per core (> {RUNQ_PER_CORE:g})")
        if self.softirq_share is not None and self.softirq_share > SOFTIRQ_SHARE:
            why.append(f"softirq {100 * self.softirq_share:.0f} % of CPU time (> {100 * SOFTIRQ_SHARE:.0f} %)")
        if self.switch_lag_mean_ms is not None and self.switch_lag_mean_ms > SWITCH_LAG_MEAN_MS:
            why.append(
                f"switch {self.switch_lag_mean_ms:.2f} ms behind its schedule on average (> {SWITCH_LAG_MEAN_MS:g} ms)"
            )
        why += [f"link self-test: {p}" for p in self.selftest_failed]
        return bool(why), why


def from_samples(samples: pd.DataFrame, ncpu: int) -> tuple[float | None, float | None]:
    """Mean runnable threads per core (the sampler's own thread taken off) and the share of CPU
    time in softirq between the first and the last sample. Pure."""
    if samples.empty or ncpu < 1:
        return None, None
    runq = float(np.mean(np.maximum(samples["procs_running"].to_numpy(dtype=float) - 1, 0))) / ncpu
    modes = list(CSV_HEADER[2:])
    delta = samples[modes].iloc[-1].astype(float) - samples[modes].iloc[0].astype(float)
    total = float(delta.sum())
    softirq = float(delta["softirq"]) / total if len(samples) > 1 and total > 0 else None
    return runq, softirq


def switch_lag_ms(status: pd.DataFrame) -> tuple[float | None, float | None]:
    """The switch's mean lag behind its schedule (ms, weighted by events) and the 99th percentile
    of its per-sample maximum lag (ms), from its status CSV. Pure."""
    if status.empty or "lag_max_us" not in status.columns:
        return None, None
    busy = status[status["lag_events"] > 0]
    if busy.empty:
        return None, None
    events = busy["lag_events"].to_numpy(dtype=float)
    mean = float(np.sum(busy["lag_mean_us"].to_numpy(dtype=float) * events) / np.sum(events)) / 1000
    return mean, float(np.percentile(busy["lag_max_us"], 99)) / 1000


def assess(run_dir: Path, ncpu: int, selftest: Sequence[dict[str, Any]]) -> BoxLoad:
    """The box's load during the run in ``run_dir`` (``box_load.csv``, ``switch_status.csv``) and its
    link self-test rows."""
    runq, softirq = from_samples(_csv(run_dir / "box_load.csv"), ncpu)
    lag_mean, lag_p99 = switch_lag_ms(_csv(run_dir / "switch_status.csv"))
    return BoxLoad(
        runq_per_core=runq,
        softirq_share=softirq,
        switch_lag_mean_ms=lag_mean,
        switch_lag_p99_ms=lag_p99,
        selftest_failed=[f"{r.get('port')}: {r.get('problem')}" for r in selftest if r.get("ok") is False],
    )


def columns(load: BoxLoad) -> dict[str, Any]:
    """The ``runs`` columns of a run's box load."""
    bad, why = load.verdict()
    return {
        "box_runq_per_core": load.runq_per_core,
        "box_softirq_share": load.softirq_share,
        "box_switch_lag_ms": load.switch_lag_mean_ms,
        "box_switch_lag_p99_ms": load.switch_lag_p99_ms,
        "box_bottleneck": bad,
        "box_reasons": "; ".join(why) or None,
    }


def _csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (OSError, ValueError):
        return pd.DataFrame()
