"""The protocol every workload driver follows, and what a group of runs shares."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from shufflelab import netplan
from shufflelab.emulate import waiting
from shufflelab.emulate.protocols import Backend, Cluster, Fabric
from shufflelab.emulate.record import RunContext
from shufflelab.results import RunRecord
from shufflelab.spec import ExperimentSpec, Scenario

Phase = Callable[[str], None]  # tells the user what the run is doing now


@dataclass
class Group:
    """What the runs of one group share: the fabric, the Spark cluster (when the workload needs one;
    the runner starts it and restarts it when it must) and the workload's own group resources
    (``storage``: HDFS and the NDP proxies of a tpch group)."""

    fabric: Fabric
    cluster: Cluster | None = None
    storage: Any = None
    plans: dict[str, netplan.NetPlan] = field(default_factory=dict)  # scenario id -> its plan here

    def plan(self, sc: Scenario) -> netplan.NetPlan:
        """The network plan of scenario ``sc`` on the group's fabric, built once."""
        if sc.scenario_id not in self.plans:
            self.plans[sc.scenario_id] = netplan.of(sc.spec, self.fabric.network)
        return self.plans[sc.scenario_id]


class WorkloadDriver(Protocol):
    """One run of one workload kind, as the runner drives it (see the package docstring)."""

    timeout_s: float  # the wait loop's deadline
    period_s: float  # the wait loop's period (``tick`` runs once per period)

    def start(self, phase: Phase) -> Sequence[waiting.Job]: ...

    def tick(self) -> None: ...

    def collect(self, waited: waiting.Waited) -> None: ...

    def release(self) -> None: ...

    def keep_artifacts(self) -> None: ...

    def record(self) -> RunRecord: ...


class Driver:
    """A base for drivers: the hooks a kind may leave alone do nothing; ``start``, ``collect``,
    ``release`` and ``record`` are the kind's own."""

    needs_cluster: ClassVar[bool] = False  # the runner starts a Spark cluster for the group

    def __init__(self, ctx: RunContext, group: Group, backend: Backend) -> None:
        self.ctx, self.group, self.backend = ctx, group, backend
        self.timeout_s = ctx.spec.experiment.run_timeout_s
        self.period_s = 0.25

    @classmethod
    def open_group(cls, spec: ExperimentSpec, group: Group, backend: Backend, phase: Phase) -> None:
        """Start what the group's runs share besides fabric and cluster (once per group), on the
        group's fabric through ``backend``'s seams."""

    @classmethod
    def close_group(cls, group: Group, phase: Phase) -> None:
        """Stop what :meth:`open_group` started (also after a failure or an interrupt)."""

    def start(self, phase: Phase) -> Sequence[waiting.Job]:
        """Launch the run's job(s); the fabric is configured, telemetry and cross traffic run."""
        raise NotImplementedError

    def tick(self) -> None:
        """Once per wait period (fault injection, probes)."""

    def collect(self, waited: waiting.Waited) -> None:
        """After the wait: read what the jobs left; the run may fail here (``ctx.fail``)."""
        raise NotImplementedError

    def release(self) -> None:
        """Always (also after a failure or an interrupt), before telemetry stops: stop what
        :meth:`start` left running. Must work whatever :meth:`start` got to."""
        raise NotImplementedError

    def keep_artifacts(self) -> None:
        """Always, after telemetry stopped: copy what the run left elsewhere into its folder."""

    def record(self) -> RunRecord:
        """The run's record, assembled from ``ctx`` and the driver's output (no side effects)."""
        raise NotImplementedError
