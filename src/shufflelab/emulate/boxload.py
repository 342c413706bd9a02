"""Was the emulation host itself the bottleneck of a run? The fidelity of the box, per run.

Every host, switch and traffic generator of the local fabric shares this machine's cores. When
they want more than the cores give, the run measures the box, not the network it emulates. During
a run a thread samples ``/proc/stat`` (``procs_running``: threads running or runnable right now, and
the CPU time per mode, softirq and nice included) and every process's ``/proc/<pid>/stat`` (its CPU
time, split between the lab and other work); the record then judges the run on four signs, each
with a threshold (module constants, reasoned below):

- **other work**: the CPU time used during the run by processes outside the lab, above
  ``FOREIGN_SHARE`` of the box (all cores over the run). The lab is the running shufflelab process
  with its descendants and every process in one of the network namespaces it leased (Spark's
  daemons leave the process tree but not their namespace); kernel threads are left out (their
  packet work is the softirq sign's). Other work competes with the lab for the cores unequally
  across the arms of a comparison; above a tenth of the box it could by itself move a CPU-bound
  job's time by as much as the 10 % that the strict starvation rule allows CPU to change;
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

Recorded, not judged: the mean run queue per core (``procs_running`` minus the sampler itself,
over the cores) -- the lab oversubscribes the cores by design (one-core executors, the driver and
the switch on two cores: 2-3.5 runnable threads per core on an idle machine), equally in both arms
of a comparison, so on its own it cannot tell a loaded box from the design; the share of CPU time
at positive nice (``/proc/stat``'s ``nice``: niced work, the lab's or not, which the scheduler
weighs far below the lab's: it tells how much of the other work mostly filled idle time); and the
sampler's own CPU time.

Other work is counted from the processes' ``utime + stime`` between consecutive samples; a process
first seen in a sample counts from its start (``starttime`` with the pid names a process, so a
reused pid is a new one), and children reaped since the previous sample count through their
surviving ancestor's ``cutime + cstime`` (less what was already counted of them and of their gone
descendants, or had been reaped before the window): a short-lived compiler or test process is not
missed, and a whole subtree exiting at once is not counted twice, nor a child reaped while a scan
ran (gone from one sample, in its parent's ``cutime`` at the next). A lab daemon reaped by ``init``
has its last interval (at most ``PERIOD_S``) counted as other work.

Cost: one sample reads ``/proc/stat``, each process's ``stat`` and, for those outside the lab's
process tree, its ``ns/net`` link: about 3 ms of CPU with ~110 processes on this machine, 0.6 % of
one core at a 0.5 s period (docs/benchmarks.md, ``benchmarks/box_sampler_cost.py``, which also
checks that the split adds up to ``/proc/stat``'s busy time: within 1 % over 2 min; the CSV's
``sampler_cpu_s`` records the cost per run, ``runs.box_sampler_share``).

A run over any threshold is labelled ``box_bottleneck`` with its reasons; the report shows the
label next to the verdicts built on such runs. Everything here but :class:`BoxSampler` and the
``read_*`` functions is pure.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shufflelab.emulate.netns import LEASE_DIR

# share of the box's CPU time (all cores over the run) used by processes outside the lab above
# which other work competed with the run
FOREIGN_SHARE = 0.10
# share of all CPU time spent in softirq (packet processing) above which the box's network work
# competes with the job for the cores
SOFTIRQ_SHARE = 0.25
# the switch's mean lag behind its schedule over the run (ms)
SWITCH_LAG_MEAN_MS = 0.5
# how often the sampler reads /proc (s)
PERIOD_S = 0.5
# a kernel thread (include/linux/sched.h): /proc/<pid>/stat's flags
PF_KTHREAD = 0x00200000
NETNS_DIR = Path("/run/netns")
# clock ticks per second of /proc's times (USER_HZ)
HZ = os.sysconf("SC_CLK_TCK")

MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
# lab_cpu, foreign_cpu: clock ticks (as /proc/stat's modes) used by the lab and by other work since
# the first sample; sampler_cpu_s: the sampler thread's own CPU time since it started
CSV_HEADER = ("t", "procs_running", *MODES, "lab_cpu", "foreign_cpu", "sampler_cpu_s")


@dataclass(frozen=True)
class ProcStat:
    """One reading of ``/proc/stat``: runnable threads and the cumulative CPU jiffies per mode (all
    cores)."""

    t: float
    procs_running: int
    jiffies: dict[str, int]


def parse_proc_stat(text: str, t: float) -> ProcStat:
    """``/proc/stat``'s aggregate ``cpu`` line and ``procs_running``. Pure."""
    jiffies: dict[str, int] = {}
    running = 0
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            jiffies = dict(zip(MODES, (int(x) for x in parts[1:9]), strict=False))
        elif parts and parts[0] == "procs_running":
            running = int(parts[1])
    return ProcStat(t, running, jiffies)


@dataclass(frozen=True)
class Proc:
    """A process at one sample, from its ``/proc/<pid>/stat`` (times in clock ticks)."""

    pid: int
    ppid: int
    start: int  # starttime (ticks since boot): with the pid, names the process
    cpu: int  # utime + stime
    reaped: int  # cutime + cstime: its reaped children's CPU time
    kthread: bool
    netns: int | None = None  # the inode of its network namespace (None: not read)

    @property
    def key(self) -> tuple[int, int]:
        return self.pid, self.start


def parse_pid_stat(text: str, netns: int | None = None) -> Proc:
    """One ``/proc/<pid>/stat`` line (proc(5)); the command name may hold spaces and parentheses. Pure."""
    head, tail = text.rsplit(")", 1)
    f = tail.split()  # f[0] is field 3 (state)
    return Proc(
        pid=int(head.split("(", 1)[0]),
        ppid=int(f[1]),
        start=int(f[19]),
        cpu=int(f[11]) + int(f[12]),
        reaped=int(f[13]) + int(f[14]),
        kthread=bool(int(f[6]) & PF_KTHREAD),
        netns=netns,
    )


def lab_of(procs: Iterable[Proc], root: int, lab_netns: Collection[int]) -> set[tuple[int, int]]:
    """The processes of the lab: ``root`` and its descendants, and every process in one of the
    lab's network namespaces (with its descendants). Pure."""
    procs = list(procs)
    kids: dict[int, list[Proc]] = {}
    for p in procs:
        kids.setdefault(p.ppid, []).append(p)
    todo = [p for p in procs if p.pid == root or (p.netns is not None and p.netns in lab_netns)]
    lab: set[tuple[int, int]] = set()
    while todo:
        p = todo.pop()
        if p.key in lab:
            continue
        lab.add(p.key)
        todo += kids.get(p.pid, [])
    return lab


@dataclass(frozen=True)
class Snapshot:
    """The processes at one sample (kernel threads left out) and which of them are the lab's."""

    procs: dict[tuple[int, int], Proc]
    lab: frozenset[tuple[int, int]]


def snapshot(procs: Iterable[Proc], root: int, lab_netns: Collection[int]) -> Snapshot:
    """Pure."""
    users = [p for p in procs if not p.kthread]
    return Snapshot({p.key: p for p in users}, frozenset(lab_of(users, root, lab_netns)))


Owed = dict[tuple[int, int], int]


def cpu_between(prev: Snapshot, cur: Snapshot, owed: Owed | None = None) -> tuple[int, int, Owed]:
    """CPU ticks used between two samples by the lab and by other work: each process's
    ``utime + stime`` since ``prev`` (from its start if it is new), plus what its reaped children
    used that was not counted while they lived. A subtree that exits between the samples reaches the
    surviving ancestor's ``cutime`` in one piece, so what was counted of every gone process under a
    gone child (and what they had reaped before) is taken off too. What cannot be taken off yet (a
    scan reads the parent, then the child is reaped before its own entry is read: gone from this
    sample, in the parent's ``cutime`` only at the next) is ``owed`` by the parent to later samples:
    the third value, to pass back with the next pair. Pure."""
    gone_kids: dict[int, list[Proc]] = {}  # pid -> its children (as last seen) that have gone
    for key, p in prev.procs.items():
        if key not in cur.procs:
            gone_kids.setdefault(p.ppid, []).append(p)
    memo: dict[tuple[int, int], int] = {}

    def counted(g: Proc, seen: frozenset[tuple[int, int]] = frozenset()) -> int:
        """What ``g`` and its gone descendants showed at ``prev``: counted already, or before the window."""
        if g.key not in memo:
            below = [c for c in gone_kids.get(g.pid, []) if c.key not in seen and c.key != g.key]
            memo[g.key] = g.cpu + g.reaped + sum(counted(c, seen | {g.key}) for c in below)
        return memo[g.key]

    lab = other = 0
    still: Owed = {}
    for key, p in cur.procs.items():
        was = prev.procs.get(key)
        own = p.cpu - (was.cpu if was else 0)
        reaped = p.reaped - (was.reaped if was else 0)
        if was is not None:  # a new process cannot have reaped one seen before it existed
            debt = (owed or {}).get(key, 0) + sum(counted(c) for c in gone_kids.get(p.pid, []))
            paid = min(debt, max(reaped, 0))
            reaped -= paid
            if debt > paid:
                still[key] = debt - paid
        used = max(own, 0) + max(reaped, 0)
        if key in cur.lab:
            lab += used
        else:
            other += used
    return lab, other, still


@dataclass(frozen=True)
class Sample:
    """One sample: ``/proc/stat``, and the CPU ticks the lab and other work used since the first
    sample, and the sampler's own CPU seconds."""

    stat: ProcStat
    lab_cpu: int = 0
    foreign_cpu: int = 0
    sampler_cpu_s: float = 0.0

    def row(self) -> list[Any]:
        s = self.stat
        return [
            s.t, s.procs_running, *(s.jiffies.get(k, 0) for k in MODES),
            self.lab_cpu, self.foreign_cpu, round(self.sampler_cpu_s, 6),
        ]  # fmt: skip


def read_proc_stat() -> str:
    with open("/proc/stat") as fh:
        return fh.read()


def _netns_inode(pid: int) -> int | None:
    try:
        link = os.readlink(f"/proc/{pid}/ns/net")  # "net:[4026531840]"
    except OSError:
        return None
    return int(link[5:-1]) if link.startswith("net:[") else None


def read_procs(inside: Callable[[Proc], bool] | None = None) -> list[Proc]:
    """Every process in ``/proc`` (one that exits while it is read is left out); the network
    namespace is read only for those ``inside`` does not already place in the lab."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:  # os.read, not open(): half the cost of a sample is Python's file objects otherwise
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                p = parse_pid_stat(os.read(fd, 4096).decode(errors="replace"))
            finally:
                os.close(fd)
        except (OSError, ValueError, IndexError):
            continue
        if not p.kthread and not (inside is not None and inside(p)):
            p = Proc(p.pid, p.ppid, p.start, p.cpu, p.reaped, p.kthread, _netns_inode(p.pid))
        out.append(p)
    return out


def leased_namespaces(owner: int, lease_dir: Path = LEASE_DIR) -> list[str]:
    """The network namespaces of the leases ``owner`` holds (:class:`shufflelab.emulate.netns.NamespaceLease`)."""
    names: list[str] = []
    for f in sorted(lease_dir.glob("*.json")) if lease_dir.is_dir() else []:
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            info = json.loads(f.read_text())
            if int(info.get("pid", 0)) == owner:
                names += [str(n) for n in info.get("namespaces", [])]
    return names


def read_lab_netns(owner: int) -> set[int]:
    """The inodes of the network namespaces ``owner`` leased (those that exist now)."""
    out = set()
    for name in leased_namespaces(owner):
        with contextlib.suppress(OSError):
            out.add(os.stat(NETNS_DIR / name).st_ino)
    return out


class BoxSampler:
    """Samples ``/proc`` every ``period_s`` in a thread until :meth:`stop`; the samples go to a
    CSV (``CSV_HEADER``). The lab is process ``root`` (this one) with its descendants and the
    processes in the namespaces it leased."""

    def __init__(
        self,
        period_s: float = PERIOD_S,
        read: Callable[[], str] = read_proc_stat,
        clock: Callable[[], float] = time.time,
        procs: Callable[[Callable[[Proc], bool]], list[Proc]] = read_procs,
        lab_netns: Callable[[int], set[int]] = read_lab_netns,
        root: int | None = None,
    ) -> None:
        self.period_s = period_s
        self._read, self._clock, self._procs, self._lab_netns = read, clock, procs, lab_netns
        self.root = os.getpid() if root is None else root
        self.samples: list[Sample] = []
        self._prev: Snapshot | None = None
        self._owed: Owed = {}
        self._lab_cpu = self._foreign_cpu = 0
        self._cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="box-sampler", daemon=True)

    def start(self) -> BoxSampler:
        self._thread.start()
        return self

    @property
    def last(self) -> Snapshot | None:
        """The processes at the latest sample (None before the first)."""
        return self._prev

    def sample(self) -> None:
        """Take one sample (the thread's step; a reading lost is a sample lost, not a failed run)."""
        t0 = time.thread_time()
        with contextlib.suppress(OSError, ValueError):
            stat = parse_proc_stat(self._read(), self._clock())
            snap = self._scan()
            if self._prev is not None:
                lab, other, self._owed = cpu_between(self._prev, snap, self._owed)
                self._lab_cpu += lab
                self._foreign_cpu += other
            self._prev = snap
            self._cpu_s += time.thread_time() - t0
            self.samples.append(Sample(stat, self._lab_cpu, self._foreign_cpu, self._cpu_s))
            return
        self._cpu_s += time.thread_time() - t0

    def _scan(self) -> Snapshot:
        tree: set[int] = {self.root}  # the root's process tree so far: its netns need not be read

        def inside(p: Proc) -> bool:
            return p.pid in tree or p.ppid in tree

        # /proc lists pids in increasing order, so a child usually comes after its parent; one that
        # does not gets its namespace read, which costs a readlink, not a wrong answer
        def track(p: Proc) -> bool:
            if inside(p):
                tree.add(p.pid)
                return True
            return False

        return snapshot(self._procs(track), self.root, self._lab_netns(self.root))

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.period_s):
                self.sample()  # the run's end
                return

    def stop(self, out: Path | None = None) -> list[Sample]:
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

    runq_per_core: float | None = None  # recorded, not judged (see the module's docstring)
    softirq_share: float | None = None
    foreign_share: float | None = None
    nice_share: float | None = None  # recorded, not judged
    sampler_share: float | None = None  # the sampler's own CPU time over the box's
    switch_lag_mean_ms: float | None = None
    switch_lag_p99_ms: float | None = None
    selftest_failed: list[str] = field(default_factory=list)

    def verdict(self) -> tuple[bool, list[str]]:
        """Whether the box was the bottleneck, and why (the signs over their thresholds). Pure."""
        why = []
        if self.foreign_share is not None and self.foreign_share > FOREIGN_SHARE:
            why.append(
                f"other work on the box: {100 * self.foreign_share:.0f} % of its CPU time outside the lab "
                f"(> {100 * FOREIGN_SHARE:.0f} %)"
            )
        if self.softirq_share is not None and self.softirq_share > SOFTIRQ_SHARE:
            why.append(f"softirq {100 * self.softirq_share:.0f} % of CPU time (> {100 * SOFTIRQ_SHARE:.0f} %)")
        if self.switch_lag_mean_ms is not None and self.switch_lag_mean_ms > SWITCH_LAG_MEAN_MS:
            why.append(
                f"switch {self.switch_lag_mean_ms:.2f} ms behind its schedule on average (> {SWITCH_LAG_MEAN_MS:g} ms)"
            )
        why += [f"link self-test: {p}" for p in self.selftest_failed]
        return bool(why), why


def from_samples(samples: pd.DataFrame, ncpu: int) -> BoxLoad:
    """The box's load between the first and the last sample: mean runnable threads per core (the
    sampler's own thread taken off), and the shares of all CPU time in softirq, at positive nice,
    used by other work than the lab's and by the sampler (None where the samples do not tell: a
    single sample, or a CSV from before the column). Pure."""
    if samples.empty or ncpu < 1:
        return BoxLoad()
    runq = float(np.mean(np.maximum(samples["procs_running"].to_numpy(dtype=float) - 1, 0))) / ncpu
    first, last = samples.iloc[0], samples.iloc[-1]
    total = float(sum(float(last[m]) - float(first[m]) for m in MODES if m in samples.columns))

    def share(col: str, per_tick: float = 1.0) -> float | None:
        if len(samples) < 2 or total <= 0 or col not in samples.columns or samples[col].isna().any():
            return None
        return (float(last[col]) - float(first[col])) * per_tick / total

    return BoxLoad(
        runq_per_core=runq,
        softirq_share=share("softirq"),
        foreign_share=share("foreign_cpu"),
        nice_share=share("nice"),
        sampler_share=share("sampler_cpu_s", per_tick=HZ),
    )


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


def assess(run_dir: Path, ncpu: int, selftest: Sequence[Mapping[str, Any]]) -> BoxLoad:
    """The box's load during the run in ``run_dir`` (``box_load.csv``, ``switch_status.csv``) and its
    link self-test rows."""
    load = from_samples(_csv(run_dir / "box_load.csv"), ncpu)
    load.switch_lag_mean_ms, load.switch_lag_p99_ms = switch_lag_ms(_csv(run_dir / "switch_status.csv"))
    load.selftest_failed = [f"{r.get('port')}: {r.get('problem')}" for r in selftest if r.get("ok") is False]
    return load


def columns(load: BoxLoad) -> dict[str, Any]:
    """The ``runs`` columns of a run's box load."""
    bad, why = load.verdict()
    return {
        "box_runq_per_core": load.runq_per_core,
        "box_softirq_share": load.softirq_share,
        "box_foreign_share": load.foreign_share,
        "box_nice_share": load.nice_share,
        "box_sampler_share": load.sampler_share,
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
