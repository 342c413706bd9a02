"""Application specs: recorded Spark applications, scaled, on a data-center fabric.

A fabric spec (:mod:`shufflelab.sim.fabric_spec`: ``[experiment]``, ``[topology]``, ``[hosts]``,
``[output]``, ``[matrix]``) with one or more ``[[app]]`` tables instead of a ``[shuffle]``::

    [[app]]
    source = "../docs/results/user-app/data"  # a results store or a data/ folder (relative to the spec)
    run_id = "e896bbeb7c6e-r1-a1"              # absent: the application with the median job time
    executors = 1000                            # hosts it gets (absent: all)
    placement = "spread"                        # or "pack"
    task_factor = 20                            # absent: executor cores / recorded cores
    copies = 1                                  # this many applications of the recording
    compute = "auto"                            # recorded | shared | thread_cpu (app_dag: oversubscribed recordings)
    recorded_cpus = 8                           # physical cores per recorded host (absent: the lab's record)

    [arrival]            # absent: every application at its arrival_s (default 0)
    kind = "poisson"
    mean_gap_s = 5

    [fetch]              # the reducers' fetch window
    max_reqs_in_flight = 5
    max_mib_in_flight = 48
    initial_window_bytes = 14480                # blocks this small take one round trip (0: all are flows)

    mode = "packet"      # top level, absent: "maxmin"; "packet" needs [tcp] (a matrix may vary it)

    [tcp]                # absent: pure max-min rates, no congestion control (today's model)
    cc = "dctcp"         # reno, cubic or dctcp: every TCP flow of the fabric
    discipline = "step"  # droptail, red or step (absent: droptail for reno/cubic, step for dctcp)
    queue_packets = 100  # every switch port's buffer; red_min/max_packets 20/60; mark_packets 20 (K)
    flows = 8            # long-lived flows per link in the packet-level probe
    path_acks = false    # packet mode: ACKs cross no queue (absent: they wait at the links of their way back)

With ``[tcp]`` each link class is run once through the packet-level bottleneck probe
(``crates/simcore/src/tcpmodel.rs``); its efficiency scales the link's capacity in the max-min solve
and its standing queue delays packets crossing it while it is saturated (docs/design-sim.md).

``mode = "packet"`` is the fabric's packet-faithful mode for applications: the max-min run's fetches
are re-timed by a packet-level simulation of every saturated link, each task's fetch phase becomes
its packet-level one, and the applications' stages are replayed with them (docs/design-sim.md,
"Packet-faithful mode").

How a recording is scaled is :func:`shufflelab.sim.app_dag.scale`; the report states it.
:func:`core_config` turns one matrix point into the Rust core's JSON (``crates/simcore/src/apps.rs``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shufflelab.sim import app_dag
from shufflelab.sim.fabric_spec import (
    MIB,
    Experiment,
    GraphFile,
    Hosts,
    Output,
    Topology,
    _errors,
    core_topology,
    read_graph,
)
from shufflelab.sim.spec import SimSpecError
from shufflelab.sim.tcp_spec import Tcp, check_tcp
from shufflelab.spec import check_nesting, read_toml
from shufflelab.spec.matrix import point_documents

MAX_APPS = 1_000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class App(_Model):
    source: str = Field(min_length=1, description="A results store (.duckdb) or a data/ folder of Parquet tables.")
    run_id: str | None = Field(default=None, description="The recorded run (absent: the median job time).")
    app_index: int = Field(default=0, ge=0, le=10_000)
    name: str = ""
    executors: int | None = Field(default=None, ge=1, le=20_000, description="Hosts it gets (absent: all).")
    placement: Literal["spread", "pack"] = "spread"
    task_factor: float | None = Field(default=None, gt=0, le=100_000, description="Tasks per recorded task.")
    bytes_factor: float = Field(default=1.0, gt=0, le=100_000, description="Shuffle bytes per recorded byte.")
    arrival_s: float = Field(default=0, ge=0, le=1e7)
    copies: int = Field(default=1, ge=1, le=MAX_APPS)
    compute: Literal["auto", "recorded", "shared", "thread_cpu"] = Field(
        default="auto",
        description="Task compute times: as recorded (wall), corrected for processor sharing on the recorded "
        "machine, or the task threads' CPU time; auto: shared when the machine's cores are known.",
    )
    recorded_cpus: float | None = Field(
        default=None, gt=0, le=100_000, description="Physical cores per recorded host (absent: the lab's run record)."
    )


class Arrival(_Model):
    kind: Literal["fixed", "poisson"] = "fixed"
    mean_gap_s: float | None = Field(default=None, gt=0, le=1e7, description="Poisson: mean time between arrivals.")


class Fetch(_Model):
    max_reqs_in_flight: int | None = Field(default=None, ge=1, le=2**31 - 1)
    max_mib_in_flight: float = Field(default=48, gt=0, le=1e9)
    initial_window_bytes: int = Field(
        default=14_480, ge=0, le=2**30, description="Blocks up to this size take one round trip, off the solver."
    )


class AppsSpec(_Model):
    experiment: Experiment
    topology: Topology
    hosts: Hosts = Hosts()
    app: list[App] = Field(min_length=1, max_length=MAX_APPS)
    arrival: Arrival = Arrival()
    fetch: Fetch = Fetch()
    tcp: Tcp | None = None
    mode: Literal["maxmin", "packet"] = Field(
        default="maxmin",
        description="maxmin: flow level, the fast mode; packet: the max-min run's fetches re-timed by a "
        "packet-level simulation of every saturated link and the stages replayed with them (needs [tcp]).",
    )
    output: Output = Output(fct_buckets_mib=[0.01, 0.1, 1, 10])
    matrix: dict[str, list[Any]] = Field(default_factory=dict)


class AppsPoint(_Model):
    label: str
    values: dict[str, Any]
    spec: AppsSpec


def is_apps(data: dict[str, Any]) -> bool:
    """Whether a spec document names recorded applications (``[[app]]``)."""
    return "app" in data


def parse(data: dict[str, Any], where: str = "<spec>") -> AppsSpec:
    check_nesting(data, where, SimSpecError)
    try:
        spec = AppsSpec.model_validate(data)
    except ValidationError as err:
        raise SimSpecError(_errors(where, err)) from None
    if spec.arrival.kind == "poisson" and spec.arrival.mean_gap_s is None:
        raise SimSpecError(f"{where}: arrival.mean_gap_s: a Poisson arrival needs its mean gap")
    check_tcp(spec.tcp, where)
    check_mode(spec, where)
    if sum(a.copies for a in spec.app) > MAX_APPS:
        raise SimSpecError(f"{where}: app: more than {MAX_APPS} applications in all (copies included)")
    expand(spec, where)
    return spec


def check_mode(spec: AppsSpec, where: str) -> None:
    if spec.mode == "packet" and spec.tcp is None:
        raise SimSpecError(
            f"{where}: mode: 'packet' needs a [tcp] table (the congestion control and queues to simulate)"
        )


def load(path: str | Path) -> AppsSpec:
    return parse(read_toml(path, SimSpecError), str(path))


def expand(spec: AppsSpec, where: str = "<spec>") -> list[AppsPoint]:
    """The matrix's points in file order, each validated (errors name the point's values)."""
    base = spec.model_dump(mode="json", exclude_none=True)
    base["matrix"] = {}
    out = []
    for values, doc in point_documents(spec.matrix, base, where, SimSpecError, create=False):
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        try:
            point = AppsSpec.model_validate(doc)
        except ValidationError as err:
            raise SimSpecError(_errors(f"{where} [{shown}]", err)) from None
        out.append(AppsPoint(label=shown or "base", values=values, spec=point))
    for pt in out:
        check_tcp(pt.spec.tcp, f"{where} [{pt.label}]")
        check_mode(pt.spec, f"{where} [{pt.label}]")
    return out


@lru_cache(maxsize=32)
def _recorded(
    source: Path, run_id: str | None, app_index: int, compute: app_dag.Compute = "auto", cpus: float | None = None
) -> app_dag.AppDag:
    return app_dag.load_app(source, run_id, app_index, compute=compute, cpus=cpus)


def recorded(app: App, i: int, base_dir: Path) -> app_dag.AppDag:
    """The recorded application of ``app[i]`` (read once per run of the process)."""
    try:
        return _recorded((base_dir / app.source).resolve(), app.run_id, app.app_index, app.compute, app.recorded_cpus)
    except app_dag.AppDagError as err:
        raise SimSpecError(f"app[{i}].source: {err}") from None


def scaled(app: App, i: int, spec: AppsSpec, hosts: int, base_dir: Path) -> app_dag.AppDag:
    dag = recorded(app, i, base_dir)
    executors = app.executors or hosts
    if executors > hosts:
        raise SimSpecError(f"app[{i}].executors: {executors} hosts, the topology has {hosts}")
    try:
        return app_dag.scale(
            dag, executors, spec.hosts.cores, task_factor=app.task_factor, bytes_factor=app.bytes_factor
        )
    except app_dag.AppDagError as err:
        raise SimSpecError(f"app[{i}]: {err}") from None


def host_count(spec: AppsSpec, base_dir: Path) -> int:
    t = spec.topology
    if isinstance(t, GraphFile):
        return sum(1 for n in read_graph(base_dir / t.file)["nodes"] if n["host"])
    return t.hosts()


def core_config(spec: AppsSpec, seed: int, base_dir: Path, *, where: str = "<spec>") -> dict[str, Any]:
    """The Rust core's configuration for one matrix point and seed."""
    hosts = host_count(spec, base_dir)
    apps = []
    for i, a in enumerate(spec.app):
        dag = scaled(a, i, spec, hosts, base_dir)
        tasks = sum(len(s.tasks) for s in dag.stages)
        if tasks * a.copies > 5_000_000:
            raise SimSpecError(f"{where}: app[{i}]: {tasks:,} tasks × {a.copies} copies, more than 5,000,000")
        doc = app_dag.core_app(dag)
        for c in range(a.copies):
            apps.append(
                {
                    **doc,
                    "name": (a.name or doc["name"]) + (f" #{c + 1}" if a.copies > 1 else ""),
                    "executors": a.executors,
                    "placement": a.placement,
                    "arrival_s": a.arrival_s,
                }
            )
    arrival: dict[str, Any] = {"kind": "fixed"}
    if spec.arrival.kind == "poisson":
        arrival = {"kind": "poisson", "mean_gap_s": spec.arrival.mean_gap_s}
    config: dict[str, Any] = {
        "topology": core_topology(spec.topology, base_dir),
        "cores_per_host": spec.hosts.cores,
        "seed": seed,
        "recompute": spec.experiment.recompute,
        "max_reqs_in_flight": spec.fetch.max_reqs_in_flight or 2**31 - 1,
        "max_bytes_in_flight": spec.fetch.max_mib_in_flight * MIB,
        "initial_window_bytes": spec.fetch.initial_window_bytes,
        "arrival": arrival,
        "apps": apps,
        "fct_bucket_edges_bytes": [b * MIB for b in spec.output.fct_buckets_mib],
        "heatmap_bins": spec.output.heatmap_bins,
    }
    if spec.tcp is not None:
        # path ACKs are the applications' packet mode's default (docs/design-sim.md, "ACKs at their way back")
        config["tcp"] = spec.tcp.core(path_acks=spec.mode == "packet")
    if spec.mode == "packet":
        config["mode"] = "packet"
    return config
