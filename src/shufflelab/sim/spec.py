"""Simulation experiment specs: typed, validated TOML descriptions of a cluster, a network and a
stream of jobs, with a matrix of values to vary and the pushdown policies to compare.

Pure: no clock, no system state. Units are in every field name (``core_ghz``, ``input_gib``,
``inter_cluster_gbps``); ``gib``/``mib`` are binary (2^30, 2^20 bytes), ``gbps`` is 10^9 bit/s.
A spec becomes one core configuration per (matrix point, policy, seed) with :func:`core_config`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from shufflelab.spec.loader import SpecError, check_nesting, field_path, read_toml
from shufflelab.spec.matrix import point_documents

GIB = 2**30
MIB = 2**20

POLICIES = (
    "no-pushdown",
    "filter",
    "filter+project",
    "full",
    "net-aware",
    "net-aware-chain",
    "net-aware-fluid",
    "oracle",
)
POLICY_LABELS = {
    "no-pushdown": "No-Pushdown",
    "filter": "Filter",
    "filter+project": "Filter+Project",
    "full": "λFlow",
    "net-aware": "Net-Aware",
    "net-aware-chain": "Net-Aware (chain)",
    "net-aware-fluid": "Net-Aware (fluid)",
    "oracle": "Oracle",
}
Policy = Literal[
    "no-pushdown", "filter", "filter+project", "full", "net-aware", "net-aware-chain", "net-aware-fluid", "oracle"
]
_ALL_POLICIES: tuple[Policy, ...] = POLICIES  # type: ignore[assignment]


MAX_TASKS_PER_RUN = 10_000_000
"""The most tasks one simulated run may have (jobs x tasks per job): the core keeps every task in
memory (the committed figures use at most 30,000)."""


class SimSpecError(SpecError):
    """A spec that cannot be used; the message names the file, the field and why."""


class _Model(BaseModel):
    # nan/inf are valid TOML floats but no input the core can simulate
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Cluster(_Model):
    """Identical machines whose cores form one FIFO pool."""

    machines: int = Field(ge=1, le=100_000, description="Number of machines.")
    cores_per_machine: int = Field(ge=1, le=1024, description="Cores of each machine.")
    core_ghz: float = Field(gt=0, le=10, description="Clock rate of a core, GHz.")
    efficiency: float = Field(
        default=1.0, gt=0, le=1, description="Useful fraction of a core's cycles (storage overhead)."
    )


class Clusters(_Model):
    compute: Cluster
    storage: Cluster


class Network(_Model):
    """The links between the storage and the compute cluster."""

    mode: Literal["flow", "chunk"] = Field(
        default="flow", description="flow: max-min fair fluid flows; chunk: round-robin chunks."
    )
    inter_cluster_gbps: float = Field(gt=0, le=100_000, description="Inter-cluster link, Gbit/s.")
    storage_nic_gbps: float | None = Field(
        default=None, gt=0, le=100_000, description="Each storage machine's uplink, Gbit/s (absent: unlimited)."
    )
    # upper bounds keep every number the core gets finite after its unit conversions (x 1e9 / 8, x 1024)
    header_bytes_per_flow: float = Field(default=0, ge=0, le=1e12, description="Bytes added per transfer.")
    header_bytes_per_packet: float = Field(default=0, ge=0, le=1e6, description="Bytes added per packet.")
    mss_bytes: float = Field(default=1448, gt=0, le=1e6, description="Payload bytes per packet.")
    chunk_kib: float = Field(default=1024, gt=0, le=1e9, description="Chunk size in chunk mode, KiB.")
    max_concurrent_jobs: int = Field(
        default=17, ge=1, description="S_max: jobs transferring at once (others wait in order)."
    )
    max_concurrent_flows: int | None = Field(
        default=None,
        ge=1,
        description="Transfers in flight at once, all jobs (absent: one per compute core).",
    )
    slot_order: Literal["fair", "round_robin"] = Field(
        default="fair",
        description="Who gets a free transfer slot: the admitted job with the fewest in flight, or each in turn.",
    )


class Operator(_Model):
    """One operator of the query's chain."""

    name: str = Field(min_length=1, max_length=32)
    cycles_per_byte: float = Field(ge=0, le=1e6, description="CPU cycles per input byte.")
    reduction_factor: float = Field(gt=0, le=1e12, description="Input bytes / output bytes.")
    pushable: bool = True


class Workload(_Model):
    """A stream of identical queries (jobs) arriving at a fixed interval."""

    jobs: int = Field(default=1, ge=1, le=100_000)
    interarrival_s: float = Field(default=50, ge=0, le=1e9, description="Time between job arrivals, s.")
    input_gib: float = Field(gt=0, le=1e9, description="Input size of one job, GiB.")
    task_input_mib: float = Field(gt=0, le=1e12, description="Input of one task (partition), MiB.")
    cpu_jitter: float = Field(default=0.0, ge=0, lt=1, description="Task CPU cost × uniform[1 - j, 1 + j], seeded.")
    operators: list[Operator] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> Workload:
        names = [o.name for o in self.operators]
        if len(set(names)) != len(names):
            raise ValueError(f"operator names must be unique, got {names}")
        tasks = self.jobs * self.tasks_per_job()
        if tasks > MAX_TASKS_PER_RUN:
            raise ValueError(
                f"{self.jobs} jobs x {self.tasks_per_job():,} tasks (input_gib / task_input_mib) = {tasks:,} tasks, "
                f"more than a run may simulate ({MAX_TASKS_PER_RUN:,})"
            )
        return self

    def tasks_per_job(self) -> int:
        """Tasks of one job, as the core counts them (``ceil(input / task input)``, at least 1)."""
        ratio = self.input_gib * GIB / (self.task_input_mib * MIB)
        if not math.isfinite(ratio):  # a subnormal task input: more tasks than any bound
            return 2**63
        return max(1, math.ceil(ratio))


class Experiment(_Model):
    name: str = Field(pattern=r"^sim-[a-z0-9-]+$", description="Experiment name (sim-...).")
    description: str = ""
    figure: str = Field(default="", description="What this reproduces (e.g. 'seed 003 Fig 5').")
    policies: list[Policy] = Field(default_factory=lambda: list(_ALL_POLICIES), min_length=1)
    seeds: int = Field(default=1, ge=1, le=10_000, description="Repetitions with seeds 0..n-1.")
    x: str | None = Field(default=None, description="Matrix key for the figure's x axis.")


class SimSpec(_Model):
    """A whole simulation experiment: the base scenario and the matrix of varied values."""

    experiment: Experiment
    cluster: Clusters
    network: Network
    workload: Workload
    matrix: dict[str, list[Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _policies_fit_the_query(self) -> SimSpec:
        names = [o.name for o in self.workload.operators]
        for p in self.experiment.policies:
            if p in ("filter", "filter+project"):
                for needed in p.split("+"):
                    if needed not in names:
                        raise ValueError(f"policy {p!r} needs an operator named {needed!r}")
        if self.experiment.x is not None and self.experiment.x not in self.matrix:
            raise ValueError(f"experiment.x {self.experiment.x!r} is not a matrix key")
        return self

    def x_key(self) -> str | None:
        return self.experiment.x or next(iter(self.matrix), None)


def _format_error(where: str, err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = field_path(e["loc"]) or "(top level)"
        lines.append(f"{where}: {loc}: {e['msg']}")
    return "\n".join(lines)


def parse(data: dict[str, Any], where: str = "<spec>") -> SimSpec:
    """Validate a spec document; every matrix point must validate too."""
    check_nesting(data, where, SimSpecError)
    try:
        spec = SimSpec.model_validate(data)
    except ValidationError as err:
        raise SimSpecError(_format_error(where, err)) from None
    expand(spec, where)
    return spec


def load(path: str | Path) -> SimSpec:
    """Read and validate a TOML spec; errors name the file, the field and why."""
    return parse(read_toml(path, SimSpecError), str(path))


class Scenario(_Model):
    """One matrix point: its varied values, a readable label and the full spec."""

    scenario_id: str
    label: str
    values: dict[str, Any]
    spec: SimSpec


def expand(spec: SimSpec, where: str = "<spec>") -> list[Scenario]:
    """The matrix's cartesian product, in file order (the base scenario if there is no matrix).
    At most :data:`~shufflelab.spec.MAX_SCENARIOS` points, counted before expanding."""
    base = spec.model_dump(mode="json")
    base["matrix"] = {}
    base["experiment"]["x"] = None  # a matrix point has no matrix left
    out = []
    for values, doc in point_documents(spec.matrix, base, where, SimSpecError):
        try:
            point = SimSpec.model_validate(doc)
        except ValidationError as err:
            shown = ", ".join(f"{k}={v}" for k, v in values.items())
            raise SimSpecError(_format_error(f"{where} [{shown}]", err)) from None
        label = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in values.items()) or "base"
        sid = f"{spec.experiment.name}/" + ("_".join(f"{k.split('.')[-1]}={v}" for k, v in values.items()) or "base")
        out.append(Scenario(scenario_id=sid, label=label, values=values, spec=point))
    return out


def pushed_ops_for(policy: str, workload: Workload) -> int | None:
    """The static prefix a named policy pushes (None for the dynamic ones).

    ``filter`` pushes every operator up to and including the one named ``filter`` (so a leading
    decompression goes with it); ``filter+project`` up to ``project``; ``full`` every pushable one.
    """
    names = [o.name for o in workload.operators]
    pushable = 0
    for o in workload.operators:
        if not o.pushable:
            break
        pushable += 1
    if policy == "no-pushdown":
        return 0
    if policy == "full":
        return pushable
    if policy == "filter":
        return min(names.index("filter") + 1, pushable)
    if policy == "filter+project":
        return min(names.index("project") + 1, pushable)
    return None


def core_config(
    spec: SimSpec, policy: str, seed: int, *, mode: str | None = None, record_trace: bool = False
) -> dict[str, Any]:
    """The Rust core's JSON configuration for one run (see crates/simcore/src/model.rs)."""
    c, s, n, w = spec.cluster.compute, spec.cluster.storage, spec.network, spec.workload
    fixed = pushed_ops_for(policy, w)
    kind = {
        "net-aware": "net_aware",
        "net-aware-chain": "net_aware_chain",
        "net-aware-fluid": "net_aware_fluid",
        "oracle": "oracle",
    }.get(policy, "fixed")
    ops = [o.model_dump() for o in w.operators]
    jobs = [
        {
            "arrival_s": i * w.interarrival_s,
            "input_bytes": w.input_gib * GIB,
            "task_input_bytes": w.task_input_mib * MIB,
            "operators": ops,
            "pushed_ops": fixed,
        }
        for i in range(w.jobs)
    ]

    def cluster(cl: Cluster) -> dict[str, Any]:
        return {
            "machines": cl.machines,
            "cores_per_machine": cl.cores_per_machine,
            "core_hz": cl.core_ghz * 1e9,
            "efficiency": cl.efficiency,
        }

    return {
        "compute": cluster(c),
        "storage": cluster(s),
        "network": {
            "mode": mode or n.mode,
            "inter_cluster_bytes_per_s": n.inter_cluster_gbps * 1e9 / 8,
            "storage_nic_bytes_per_s": None if n.storage_nic_gbps is None else n.storage_nic_gbps * 1e9 / 8,
            "header_bytes_per_flow": n.header_bytes_per_flow,
            "header_bytes_per_packet": n.header_bytes_per_packet,
            "mss_bytes": n.mss_bytes,
            "chunk_bytes": n.chunk_kib * 1024,
            "max_concurrent_jobs": n.max_concurrent_jobs,
            "max_concurrent_flows": n.max_concurrent_flows,
            "slot_order": n.slot_order,
        },
        "jobs": jobs,
        "policy": kind,
        "seed": seed,
        "cpu_jitter": w.cpu_jitter,
        "record_trace": record_trace,
    }


def spec_json(spec: SimSpec) -> str:
    return json.dumps(spec.model_dump(mode="json"), sort_keys=True)
