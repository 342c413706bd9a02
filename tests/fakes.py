"""Fakes for unit tests of the runner's control logic (never used by the product)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Clock:
    """A monotonic clock that moves only when something sleeps."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


@dataclass
class Job:
    """A job that ends by itself at ``ends_at`` (never when None); records how it was stopped."""

    clock: Clock
    ends_at: float | None
    stopped_with: list[float] = field(default_factory=list)

    def running(self) -> bool:
        if self.stopped_with:
            return False
        return self.ends_at is None or self.clock() < self.ends_at

    def stop(self, grace_s: float) -> None:
        self.stopped_with.append(grace_s)


@dataclass
class Fabric:
    """A fabric whose switch dies at ``dies_at`` (never when None)."""

    clock: Clock
    dies_at: float | None = None
    why: str = "switch exited with status 1: port r:sw1 gone"

    def switch_failure(self) -> str | None:
        return self.why if self.dies_at is not None and self.clock() >= self.dies_at else None
