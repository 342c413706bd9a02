"""The runner's one wait loop, with fakes: jobs that end, a deadline, a dying switch, Ctrl-C."""

from __future__ import annotations

import pytest

from fakes import Clock, FakeFabric, Job
from shufflelab.emulate import waiting


def _wait(jobs: list[Job], fabric: FakeFabric, clock: Clock, timeout_s: float = 60.0, **kw: object) -> waiting.Waited:
    return waiting.wait(jobs, fabric, timeout_s, "job exceeded run_timeout_s=60", clock=clock, sleep=clock.sleep, **kw)  # type: ignore[arg-type]


def test_jobs_that_end_by_themselves_are_ok_and_not_stopped() -> None:
    c = Clock()
    jobs = [Job(c, 3.0), Job(c, 7.5)]
    assert _wait(jobs, FakeFabric(c), c) == waiting.Waited("ok")
    assert all(not j.stopped_with for j in jobs)
    assert 7.5 <= c.now < 7.5 + 0.25 + 1e-9  # returned within one period of the last end


def test_the_deadline_stops_every_job_with_the_timeout_grace() -> None:
    c = Clock()
    jobs = [Job(c, None), Job(c, 5.0)]
    w = _wait(jobs, FakeFabric(c), c, timeout_s=60.0)
    assert w == waiting.Waited("timeout", "job exceeded run_timeout_s=60")
    assert jobs[0].stopped_with == [10.0] and 60.0 < c.now <= 60.25 + 1e-9


def test_a_dying_switch_fails_the_run_at_once_with_its_cause() -> None:
    c = Clock()
    jobs = [Job(c, None)]
    w = _wait(jobs, FakeFabric(c, dies_at=12.0), c)
    assert w.status == "failed" and w.cause is not None and "port r:sw1 gone" in w.cause
    assert jobs[0].stopped_with == [5.0] and 12.0 <= c.now < 12.5  # not at the 60 s timeout


def test_ticks_run_every_period_and_every_throttles_them() -> None:
    c = Clock()
    calls: list[float] = []
    probes: list[float] = []
    every = waiting.Every(3.0, lambda: probes.append(c.now), first_s=2.0, clock=c)

    def tick() -> None:
        calls.append(c.now)
        every()

    _wait([Job(c, 10.0)], FakeFabric(c), c, tick=tick)
    assert len(calls) == 40  # 10 s at 0.25 s
    assert probes[0] == pytest.approx(2.0) and all(
        b - a >= 3.0 - 1e-9 for a, b in zip(probes, probes[1:], strict=False)
    )


def test_ctrl_c_is_left_to_the_caller() -> None:
    c = Clock()

    def interrupted(_s: float) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        waiting.wait([Job(c, None)], FakeFabric(c), 60, "t", clock=c, sleep=interrupted)


def test_adapters_present_processes_and_replays_as_jobs() -> None:
    class Proc:
        def __init__(self) -> None:
            self.code: int | None = None
            self.grace: float | None = None

        def poll(self) -> int | None:
            return self.code

        def stop(self, *, grace_s: float) -> None:
            self.grace, self.code = grace_s, -15

    p = Proc()
    job = waiting.ProcessJob(p)
    assert job.running()
    job.stop(7.0)
    assert not job.running() and p.grace == 7.0

    class Replay:
        stopped = False

        def running(self) -> bool:
            return not self.stopped

        def stop(self) -> None:
            self.stopped = True

    r = Replay()
    g = waiting.GraceFree(r)
    g.stop(3.0)
    assert r.stopped and not g.running()
