"""Queue sampling on real hosts: the local backend's sampler (``python -m
shufflelab.emulate.sampler``) on each host whose data interface holds a bottleneck (the router
host's for a shared bottleneck, each host's own for per-host links), its CSV written on that host
and fetched back when the run's telemetry stops, merged into the run's ``queue_samples.csv`` with
each row's ``dev`` the bottleneck port's name (as the local backend writes it).

Sample times are each host's wall clock; :mod:`shufflelab.hosts.probe` measures the hosts' offsets
against the controller (``doctor --hosts``), which bounds how far a sample can be misplaced.
"""

from __future__ import annotations

import contextlib
import csv
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from shufflelab.emulate.sampler import HEADER
from shufflelab.hosts.control import HostError, Session
from shufflelab.hosts.paths import HostPaths, pythonpath

if TYPE_CHECKING:
    from shufflelab.emulate.protocols import Process, ProcessLauncher
    from shufflelab.hosts.remote import Loop


@dataclass
class _Part:
    proc: Process
    session: Session
    remote_csv: str
    local_csv: Path
    ports: Mapping[str, str]  # the host's device -> the bottleneck port it stands for


def sampler_argv(
    devs: Sequence[str], period_ms: float, max_s: float, out: str, python: str = sys.executable
) -> list[str]:
    argv = [python, "-m", "shufflelab.emulate.sampler", "--period-ms", str(period_ms),
            "--max-s", str(max_s), "--out", out]  # fmt: skip
    for d in devs:
        argv += ["--dev", d]
    return argv


class HostSamplers:
    """The samplers of one run on their hosts, stopped (and their CSVs merged) as one process."""

    def __init__(self, loop: Loop, out: Path) -> None:
        self._loop, self.out = loop, out
        self.parts: list[_Part] = []

    def start(
        self,
        launch: ProcessLauncher,
        place: str,
        session: Session,
        scratch: str,
        ports: Mapping[str, str],
        period_ms: float,
        max_s: float,
    ) -> None:
        n = len(self.parts)
        remote_csv = f"{scratch}/queue-samples-{n}.csv"
        paths = HostPaths.of(session.host)
        env = {"PYTHONPATH": pythonpath(paths)}
        argv = sampler_argv(sorted(ports), period_ms, max_s, remote_csv, paths.python)
        proc = launch(place, argv, self.out.parent / f"sampler-{place}.log", env=env)
        self.parts.append(_Part(proc, session, remote_csv, self.out.parent / f"queue-samples-{place}.csv", ports))

    @property
    def pid(self) -> int:
        return self.parts[0].proc.pid if self.parts else 0

    def poll(self) -> int | None:
        """As one process: ended with the first failure of a host's sampler as soon as one has
        failed (the others may still run), else running while any runs."""
        codes = [p.proc.poll() for p in self.parts]
        failed = next((c for c in codes if c), None)
        if failed is not None:
            return failed
        return None if any(c is None for c in codes) else 0

    def stop(self, sig: int = signal.SIGTERM, grace_s: float = 5.0) -> int | None:
        """Stop every sampler, fetch its CSV and merge them into :attr:`out` (sorted by time)."""
        codes = [p.proc.stop(sig, grace_s) for p in self.parts]
        rows: list[list[str]] = []
        for p in self.parts:
            with contextlib.suppress(HostError):
                self._loop.call(p.session.get("fetch the queue samples", p.remote_csv, p.local_csv))
            rows += _rows(p.local_csv, p.ports)
        rows.sort(key=lambda r: float(r[0]))
        with open(self.out, "w", newline="") as fh:
            fh.write(HEADER + "\n")
            csv.writer(fh, lineterminator="\n").writerows(rows)
        return next((c for c in codes if c), 0)


def _rows(path: Path, ports: Mapping[str, str]) -> list[list[str]]:
    """A host's samples with ``dev`` renamed to its bottleneck port (none if it wrote nothing)."""
    try:
        with open(path, newline="") as fh:
            lines = list(csv.reader(fh))
    except OSError:
        return []
    if not lines or ",".join(lines[0]) != HEADER:
        return []
    return [[r[0], ports.get(r[1], r[1]), *r[2:]] for r in lines[1:] if len(r) == len(lines[0])]
