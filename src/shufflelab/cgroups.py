"""CPU cgroups: capping a group of processes at some CPUs, and reading this process's own cap.

shufflelab creates cgroup v1 ``cpu`` groups (``cpu.cfs_quota_us = cores x cpu.cfs_period_us``) to
make weak storage machines (the HDFS daemons of one host); every group it creates is named
``shufflelab-hdfs-*`` so that ``shufflelab clean`` can find a killed run's leftovers.
:func:`local_group` is the local backend's
:class:`~shufflelab.emulate.protocols.CpuCaps` (on machines, a group under the lease there:
:class:`shufflelab.hosts.lease.LeasedCgroup`). :func:`cpu_quota` reads the cap (v1 or v2) of the
calling process, where /sys shows it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CPU_ROOT = Path(os.environ.get("SHUFFLELAB_CGROUP_CPU", "/sys/fs/cgroup/cpu"))
PREFIX = "shufflelab-hdfs-"
CFS_PERIOD_US = 100_000


class CgroupError(RuntimeError):
    """A CPU group could not be created or removed; the message names the group."""


def cfs_quota_us(cores: float, period_us: int = CFS_PERIOD_US) -> int:
    """``cpu.cfs_quota_us`` granting ``cores`` CPUs' worth of time per period (the kernel's minimum is 1 ms)."""
    if not cores > 0:
        raise CgroupError(f"cores: {cores} must be positive")
    return max(1000, round(cores * period_us))


@dataclass
class CpuCgroup:
    """One cgroup v1 ``cpu`` group capping its processes at ``cores`` CPUs."""

    path: Path
    cores: float

    def create(self) -> None:
        if not (self.path.parent / "cpu.cfs_quota_us").exists():
            raise CgroupError(
                f"cpu limit: no cgroup v1 cpu controller at {self.path.parent} (cpu.cfs_quota_us missing)"
            )
        self.path.mkdir(exist_ok=True)
        (self.path / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
        (self.path / "cpu.cfs_quota_us").write_text(str(cfs_quota_us(self.cores)))

    def add(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into the group."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def starting(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as it is: a namespace's process cannot join a group itself (``ip netns exec``
        mounts a fresh /sys without the cgroup hierarchies); :meth:`add` moves it in once started."""
        return list(argv)

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def remove(self, timeout_s: float = 5.0) -> None:
        """Remove the group once its processes are gone (moving stragglers to the root group)."""
        deadline = time.monotonic() + timeout_s
        while self.path.exists():
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    (self.path.parent / "cgroup.procs").write_text(str(pid))
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise CgroupError(f"cpu limit: could not remove cgroup {self.path}: {exc}") from None
                time.sleep(0.1)


def local_group(place: str, name: str, cores: float) -> CpuCgroup:
    """The group ``name`` of this machine's processes (every place here is one of its namespaces),
    ``shufflelab-hdfs-<name>`` below :data:`CPU_ROOT`, capped at ``cores`` once created."""
    return CpuCgroup(CPU_ROOT / f"{PREFIX}{name}", cores)


# a group is made empty and its first process moved in a moment later (CpuCgroup.starting): one made
# less than this long ago may be a live run's, not a leftover
STALE_AFTER_S = 60.0


def stale(root: Path = CPU_ROOT, min_age_s: float = STALE_AFTER_S) -> list[Path]:
    """shufflelab's cgroups with no process left (a killed run's leftovers), made at least
    ``min_age_s`` ago: a run started beside ``clean`` may have just made its group, still empty."""
    if not root.is_dir():
        return []
    now = time.time()

    def old(p: Path) -> bool:
        try:
            return now - p.stat().st_mtime >= min_age_s
        except OSError:
            return False

    return [p for p in root.glob(f"{PREFIX}*") if p.is_dir() and not CpuCgroup(p, 1).pids() and old(p)]


def cpu_quota() -> float | None:
    """This process's CPU cap in CPUs (cgroup v2 ``cpu.max`` or v1 CFS quota), None if uncapped or
    not visible (inside ``ip netns exec`` /sys has no cgroup hierarchy)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        try:
            if parts[0] == "0" and parts[1] == "":  # v2: cpu.max = "<quota|max> <period>"
                q, p = (Path("/sys/fs/cgroup") / parts[2].lstrip("/") / "cpu.max").read_text().split()
                return None if q == "max" else int(q) / int(p)
            if "cpu" in parts[1].split(","):
                d = Path("/sys/fs/cgroup/cpu") / parts[2].lstrip("/")
                q2 = int((d / "cpu.cfs_quota_us").read_text())
                return None if q2 <= 0 else q2 / int((d / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            return None
    return None
