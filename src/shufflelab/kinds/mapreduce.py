"""A MapReduce shuffle replayed without Spark: transfer agents on the ``mapreduce`` hosts move a
trace's map outputs to its reducers (:mod:`shufflelab.mapreduce.replay`); the fabric's telemetry and
cross traffic are as for a Spark run, the fetches go to the ``mr_fetches`` table."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shufflelab.emulate import record, validity, waiting
from shufflelab.emulate.drivers.base import Driver, Group, Phase
from shufflelab.emulate.protocols import Backend
from shufflelab.emulate.record import ReplayOutput, RunContext
from shufflelab.results import RunRecord

if TYPE_CHECKING:
    from shufflelab.mapreduce.replay import FabricJob

# the agents give up at run_timeout_s themselves; the runner allows them this long to report
REPORT_GRACE_S = 15.0


class ReplayDriver(Driver):
    def __init__(self, ctx: RunContext, group: Group, backend: Backend) -> None:
        super().__init__(ctx, group, backend)
        self.timeout_s = ctx.spec.experiment.run_timeout_s + REPORT_GRACE_S
        self.period_s = 0.2
        self.out = ReplayOutput()
        self.job: FabricJob | None = None
        self._started: float | None = None

    def start(self, phase: Phase) -> Sequence[waiting.Job]:
        from shufflelab.mapreduce import replay as mr
        from shufflelab.mapreduce import trace as mrt

        spec = self.ctx.spec
        p = spec.workload_params()
        if p.trace:
            tr = mrt.load(p.trace)
        elif p.generator == "hadoop-sort":
            tr = mrt.hadoop_sort(p.mappers, p.reducers, p.input_mb_per_map, seed=p.seed)
        else:
            tr = mrt.synthetic(p.mappers, p.reducers, p.partition_mb, dist=p.dist, spread=p.spread,
                               map_s=p.map_s, reduce_s=p.reduce_s, seed=p.seed)  # fmt: skip
        tr = tr.model_copy(update={"parallel_copies": p.parallel_copies})
        self.out.n_tasks = len(tr.maps) + len(tr.reduces)
        nodes = spec.hosts_with("mapreduce")
        fabric = self.group.fabric
        job = mr.FabricJob(
            tr, {n: fabric.places[n] for n in nodes}, {n: fabric.network.host_addresses[n] for n in nodes},
            self.ctx.run_dir, self.backend.launch, staging=self.backend.staging, placement=p.placement,
            timeout_s=spec.experiment.run_timeout_s,
        )  # fmt: skip
        self.job = job
        phase("replaying the shuffle")
        self._started = time.time()
        job.start()
        return [waiting.GraceFree(job)]

    def collect(self, waited: waiting.Waited) -> None:
        ctx = self.ctx
        ctx.fail(waited.status, waited.cause)
        assert self.job is not None and self._started is not None
        self.out.window = validity.Window(self._started, time.time())
        result = self.out.result = self.job.result()
        if not result.ok:
            cause = "; ".join(result.errors[:3]) or "an agent failed"
            if any("deadline:" in e for e in result.errors):  # the agents gave up at run_timeout_s
                ctx.fail("timeout", f"{ctx.timeout_cause}: {cause}")
            ctx.fail("failed", cause)

    def release(self) -> None:
        if self.job is not None:
            self.job.stop()

    def record(self) -> RunRecord:
        return record.replay(self.ctx, self.out)
