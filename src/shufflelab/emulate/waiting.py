"""The one wait loop of a run: until its jobs end, the run's deadline passes or the fabric breaks.

Every workload kind waits the same way -- Spark drivers and the MapReduce replay alike -- so the
rules are written once and tested without root (tests/unit/test_waiting.py, with fakes):

* every ``period_s`` the ``tick`` callbacks run (fault injection, telemetry probes);
* past ``timeout_s`` every job is stopped (``timeout_grace_s``) and the run is a ``timeout``;
* a broken fabric (``switch_failure()`` says why: nothing crosses the router any more) stops the
  jobs at once (``failure_grace_s``) and the run ``failed`` with that cause, without waiting for
  the timeout;
* Ctrl-C (KeyboardInterrupt) is not caught here: the caller records the run as interrupted and
  tears everything down. One that Python swallowed (raised inside an at-fork callback, see
  ``shufflelab.interrupts``) is raised again at the next period.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from shufflelab import interrupts


class Job(Protocol):
    """Something a run waits for: a driver process, the replay's agents."""

    def running(self) -> bool: ...

    def stop(self, grace_s: float) -> None: ...


class Watched(Protocol):
    """The part of a fabric the loop watches."""

    def switch_failure(self) -> str | None: ...


@dataclass(frozen=True)
class Waited:
    status: str  # "ok" (every job ended by itself), "timeout" or "failed"
    cause: str | None = None


def wait(
    jobs: Sequence[Job],
    fabric: Watched,
    timeout_s: float,
    timeout_cause: str,
    *,
    tick: Callable[[], None] | None = None,
    period_s: float = 0.25,
    timeout_grace_s: float = 10.0,
    failure_grace_s: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Waited:
    """Wait for ``jobs`` (see the module doc); ``timeout_cause`` is the run's cause on a timeout."""
    deadline = clock() + timeout_s
    while any(j.running() for j in jobs):
        interrupts.check()
        if tick is not None:
            tick()
        if clock() > deadline:
            for j in jobs:
                j.stop(timeout_grace_s)
            return Waited("timeout", timeout_cause)
        failure = fabric.switch_failure()
        if failure is not None:
            for j in jobs:
                j.stop(failure_grace_s)
            return Waited("failed", failure[:500])
        sleep(period_s)
    return Waited("ok")


class Every:
    """A callback run at most every ``period_s`` (by ``clock``), for ``tick``."""

    def __init__(
        self,
        period_s: float,
        fn: Callable[[], None],
        first_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.period_s, self.fn, self.clock = period_s, fn, clock
        self.next = clock() + (period_s if first_s is None else first_s)

    def __call__(self) -> None:
        if self.clock() >= self.next:
            self.next = self.clock() + self.period_s
            self.fn()


class ProcessJob:
    """A process (``poll()`` / ``stop(grace_s=...)``, as ``netns.NamespaceProcess``) as a Job."""

    def __init__(self, proc: _Process) -> None:
        self.proc = proc

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace_s: float) -> None:
        self.proc.stop(grace_s=grace_s)


class GraceFree:
    """A job whose ``stop()`` takes no grace period (it has its own), as a Job."""

    def __init__(self, job: _GraceFree) -> None:
        self.job = job

    def running(self) -> bool:
        return self.job.running()

    def stop(self, grace_s: float) -> None:
        self.job.stop()


class _Process(Protocol):
    def poll(self) -> int | None: ...

    def stop(self, *, grace_s: float) -> object: ...


class _GraceFree(Protocol):
    def running(self) -> bool: ...

    def stop(self) -> None: ...
