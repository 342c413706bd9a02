"""Experiment specifications: a typed, validated description of what to run, and its matrix.

An experiment file (TOML) describes one *base* scenario and an optional ``[matrix]`` of values to
vary; :func:`expand` turns it into concrete :class:`Scenario` objects. Everything here is pure:
no clock, no subprocess, no system state. Units are part of every field name (``rate_mbps``,
``queue_bytes``, ``delay_ms``, ``timeout_s``).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shufflelab import shaping, sparkconf

CongestionControl = Literal["cubic", "reno", "bbr", "dctcp"]
Role = Literal["spark-master", "spark-worker", "traffic-source", "traffic-sink", "mapreduce", "storage"]
Datapath = Literal["auto", "kernel", "switch"]
SwitchMode = Literal["off", "dctcp", "vcc"]

DCTCP_BASE = "cubic"
"""What a ``dctcp`` host's kernel runs: this kernel has no dctcp module, so DCTCP is enforced by the
userspace switch (window rewriting) over the host's own cubic with ``tcp_ecn = 1``."""

_NAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")
_MEMORY = re.compile(r"^[0-9]+[kmgt]$")


class SpecError(ValueError):
    """A spec that cannot be used; the message names the file, the field and why."""


class _Model(BaseModel):
    # nan/inf are valid TOML floats but no value any field can take (no command, no model applies them)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Red(_Model):
    """RED/ECN on a port with byte thresholds, as seed 001's ``red limit L min A max B``: the limit is
    the link's ``queue_bytes``; above ``max_bytes`` every packet is marked (ECT) or dropped."""

    min_bytes: int = Field(
        gt=0, le=shaping.U64_MAX, description="Marking starts above this (average) backlog, in bytes."
    )
    max_bytes: int = Field(
        gt=0, le=shaping.U64_MAX, description="Marking probability reaches max_p here; above it every packet."
    )
    max_p: float = Field(default=0.1, gt=0, le=1, description="Marking probability at max_bytes.")
    ewma_weight: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Weight of the average backlog per packet; none = the instantaneous backlog (DCTCP's step).",
    )
    ecn: bool = Field(default=True, description="Mark ECT packets with CE instead of dropping them.")

    @model_validator(mode="after")
    def _thresholds(self) -> Red:
        if self.min_bytes > self.max_bytes:
            raise ValueError(f"min_bytes ({self.min_bytes}) must not exceed max_bytes ({self.max_bytes})")
        return self


class Link(_Model):
    """A shaped link direction: rate, queue, propagation delay and queue discipline.

    The kernel datapath (HTB + FIFO) shapes rate and queue size only; delay, RED/ECN and (per host)
    DCTCP/VCC come from the userspace switch, which ``datapath = "auto"`` picks when asked for them.
    """

    rate_mbps: float = Field(gt=0, le=100_000, description="Shaped rate in Mbit/s (10^6 bit/s).")
    queue_bytes: int | None = Field(
        default=None,
        gt=0,
        description="Queue limit in bytes (bfifo). Default: 1 BDP at 1 ms, at least 64 KiB.",
    )
    queue_packets: int | None = Field(default=None, gt=0, description="Queue limit in packets (pfifo).")
    delay_ms: float = Field(
        default=0.0, ge=0, le=10_000, description="One-way propagation delay in ms (userspace switch)."
    )
    discipline: Literal["droptail", "red"] = Field(default="droptail", description="'red' needs the red table.")
    red: Red | None = Field(default=None, description="RED/ECN thresholds; used when discipline = 'red'.")
    datapath: Datapath = Field(
        default="auto",
        description=(
            "kernel: HTB + FIFO qdiscs, the router forwards; switch: the userspace switch forwards and "
            "queues; auto: the switch when delay, RED, dctcp or vcc is asked for, else the kernel."
        ),
    )

    @field_validator("rate_mbps")
    @classmethod
    def _rate_can_be_shaped(cls, v: float) -> float:
        problem = shaping.rate_problem(v)
        if problem is not None:
            raise ValueError(problem)
        return v

    @field_validator("queue_bytes")
    @classmethod
    def _bytes_limit_fits(cls, v: int | None) -> int | None:
        problem = shaping.queue_problem(v, None)
        if problem is not None:
            raise ValueError(problem)
        return v

    @field_validator("queue_packets")
    @classmethod
    def _packets_limit_fits(cls, v: int | None) -> int | None:
        problem = shaping.queue_problem(None, v)
        if problem is not None:
            raise ValueError(problem)
        return v

    @model_validator(mode="after")
    def _one_queue_limit(self) -> Link:
        if self.queue_bytes is not None and self.queue_packets is not None:
            raise ValueError("give queue_bytes or queue_packets, not both")
        if self.discipline == "red":
            if self.red is None:
                raise ValueError(
                    "discipline = 'red' needs a red table: red = {min_bytes = ..., max_bytes = ...} "
                    "(seed 001: queue_bytes = 2_500_000, min_bytes = 500_000, max_bytes = 1_000_000)"
                )
            limit = self.effective_queue_bytes()
            if limit is not None and self.red.max_bytes > limit:
                raise ValueError(
                    f"red.max_bytes ({self.red.max_bytes}) exceeds the queue limit queue_bytes ({limit}); "
                    "RED's thresholds must lie inside the queue"
                )
        return self

    def effective_queue_bytes(self) -> int | None:
        """Queue limit in bytes when the queue is byte-limited (the default)."""
        if self.queue_packets is not None:
            return None
        if self.queue_bytes is not None:
            return self.queue_bytes
        return max(65_536, int(self.rate_mbps * 1e6 / 8 * 1e-3))


class Tcp(_Model):
    """Per-host TCP settings (applied as namespace sysctls and route attributes)."""

    congestion_control: CongestionControl = "cubic"
    ecn: Literal[0, 1, 2] = Field(default=2, description="net.ipv4.tcp_ecn (0 off, 1 request, 2 accept).")
    slow_start_after_idle: bool = True
    initcwnd: int | None = Field(default=None, ge=1, le=4096, description="Initial cwnd in MSS.")
    initrwnd: int | None = Field(default=None, ge=1, le=4096, description="Initial receive window in MSS.")
    vcc: bool = Field(
        default=False,
        description=(
            "A legacy host (tcp_ecn = 0) whose TCP flows the userspace switch virtualizes into DCTCP (seed 002's VCC)."
        ),
    )

    @model_validator(mode="after")
    def _dctcp_and_vcc(self) -> Tcp:
        if self.vcc and self.congestion_control == "dctcp":
            raise ValueError(
                "vcc = true is for legacy hosts; a host with congestion_control = 'dctcp' is already "
                "managed by the switch (choose one)"
            )
        if self.vcc and self.ecn == 1:
            raise ValueError("vcc = true makes the host a legacy stack (tcp_ecn = 0); ecn = 1 contradicts it")
        if self.congestion_control == "dctcp" and self.ecn == 0:
            raise ValueError("congestion_control = 'dctcp' negotiates ECN (tcp_ecn = 1); ecn = 0 contradicts it")
        return self

    def switch_mode(self) -> SwitchMode:
        """What the userspace switch does with this host's flows."""
        if self.congestion_control == "dctcp":
            return "dctcp"
        return "vcc" if self.vcc else "off"

    def kernel_congestion_control(self) -> str:
        """The congestion control the host's kernel runs (``dctcp`` = the switch's DCTCP over cubic)."""
        return DCTCP_BASE if self.congestion_control == "dctcp" else self.congestion_control

    def kernel_ecn(self) -> int:
        """The host's ``net.ipv4.tcp_ecn``: 1 under DCTCP, 0 for a VCC legacy host, else ``ecn``."""
        if self.congestion_control == "dctcp":
            return 1
        return 0 if self.vcc else self.ecn


class TcpOverride(_Model):
    """Per-host TCP overrides; unset fields inherit the experiment's ``[tcp]``."""

    congestion_control: CongestionControl | None = None
    ecn: Literal[0, 1, 2] | None = None
    slow_start_after_idle: bool | None = None
    initcwnd: int | None = Field(default=None, ge=1, le=4096)
    initrwnd: int | None = Field(default=None, ge=1, le=4096)
    vcc: bool | None = None


class Host(_Model):
    roles: list[Role] = Field(default_factory=list)
    tcp: TcpOverride = TcpOverride()
    rack: Literal[1, 2] | None = Field(
        default=None, description="The host's side of a dumbbell topology (1 or 2); only for kind = 'dumbbell'."
    )


class Topology(_Model):
    kind: Literal["shared", "star", "dumbbell"] = Field(
        default="shared",
        description=(
            "shared: hosts sit on one access switch whose single uplink to the router carries every "
            "host-to-host packet (one bottleneck queue, the router's downlink port); "
            "star: every host has its own router port, each shaped; "
            "dumbbell: two racks (hosts' rack = 1 or 2), each an access switch, joined through the "
            "router: traffic between racks leaves through the far rack's shaped router port (one queue "
            "per direction, like a full-duplex inter-switch link); traffic within a rack is routed too and "
            "leaves through its own rack's port."
        ),
    )
    bottleneck: Link
    offloads: bool = Field(
        default=False,
        description="Keep GSO/TSO/GRO on; off (default) makes queues count real packets.",
    )
    switch_spin: bool = Field(
        default=False,
        description=(
            "Userspace switch only: never sleep, spin on its CPU (one core fully busy). Cuts the delay "
            "emulation's p99 error from ~150 to ~50 µs (docs/benchmarks-switch.md); off by default because "
            "the core is taken from the workload even when the network is idle."
        ),
    )


def _conf_key(key: str) -> str:
    if not key.startswith("spark."):
        raise ValueError(f"conf key {key!r} must start with 'spark.'")
    reason = sparkconf.reserved_reason(key)
    if reason is not None:
        raise ValueError(f"reserved: {reason}; the lab sets it for every application")
    return key


SparkConfKey = Annotated[str, AfterValidator(_conf_key)]


class Spark(_Model):
    worker_cores: int = Field(default=1, ge=1, le=64)
    worker_memory: str = "1g"
    executor_memory: str = "768m"
    driver_memory: str = "1g"
    shuffle_compress: bool = Field(default=False, description="Seed 000 disables it so every byte hits the wire.")
    conf: dict[SparkConfKey, str] = Field(
        default_factory=dict,
        description=(
            "Extra Spark conf for the application; wins over the lab's defaults. Keys the lab relies on "
            "(event log, listener, master, cores: shufflelab.sparkconf.RESERVED) are refused."
        ),
    )
    fast_jvm: bool = Field(
        default=False,
        description="C1-only JIT and serial GC: quicker tiny runs (tests), not for measurements.",
    )
    reuse_cluster: bool = Field(default=True, description="Keep master and workers up across runs that allow it.")
    listener: bool = Field(
        default=True,
        description="Attach shufflelab's task listener (per-task fetch progress from every heartbeat).",
    )
    cds: bool = Field(
        default=True,
        description="Start driver and executor JVMs from a class-data-sharing archive (faster start-up only).",
    )
    heartbeat_s: float = Field(
        default=1.0,
        ge=0.001,  # Spark gets whole milliseconds (listener.spark_conf): less would be a 0 ms heartbeat
        le=60,
        description="Executor heartbeat period: how often the listener sees fetch progress.",
    )

    @field_validator("worker_memory", "executor_memory", "driver_memory")
    @classmethod
    def _memory(cls, v: str) -> str:
        if not _MEMORY.match(v):
            raise ValueError(f"{v!r} is not a Spark memory size like '512m' or '2g'")
        return v


SPARK_LONG_MAX = 2**63 - 1
"""Spark takes a Python int literal as a LongType: a workload's seeds, groups and keys must fit."""
SparkSeed = Annotated[int, Field(ge=-(2**63), le=SPARK_LONG_MAX - 1)]  # the workloads also use seed + 1
SPARK_MAX_ARRAY = 2**31 - 1 - 15
"""The most elements a Spark array holds (``ByteArrayMethods.MAX_ROUNDED_ARRAY_LENGTH``)."""

WorkloadName = Literal["sort-aggregate", "groupby-test", "small-records", "mapreduce", "tpch", "app"]
APP_FIELDS = ("script", "jar", "main_class", "args", "py_files", "conf")
"""The fields of ``[workload]`` that describe a user application (``name = "app"``)."""


class AppParams(_Model):
    """The user's own application: a PySpark script, or a jar and its main class, with arguments.

    It runs on the emulated cluster inside the session the lab creates (shufflelab.workloads.userapp);
    ``conf`` is applied like ``spark.conf`` (the keys the lab relies on are refused).
    """

    script: str | None = Field(default=None, description="A PySpark script (.py), relative to the spec file.")
    jar: str | None = Field(default=None, description="An application jar, relative to the spec file.")
    main_class: str | None = Field(default=None, description="The jar's main class (fully qualified).")
    args: list[str] = Field(default_factory=list, max_length=1000, description="The application's arguments.")
    py_files: list[str] = Field(default_factory=list, max_length=100, description="Python modules it imports.")
    conf: dict[SparkConfKey, str] = Field(default_factory=dict, description="Spark conf of this application.")

    @model_validator(mode="after")
    def _one_entry_point(self) -> AppParams:
        if (self.script is None) == (self.jar is None):
            raise ValueError("a user application ('app') needs exactly one of script = 'job.py' or jar = 'app.jar'")
        if self.script is not None and not self.script.endswith(".py"):
            raise ValueError(f"script {self.script!r}: give a PySpark script ending in .py (or use jar)")
        if self.jar is not None and not self.main_class:
            raise ValueError("jar needs main_class, the fully qualified class whose main() runs the application")
        if self.script is not None and self.main_class:
            raise ValueError("main_class goes with jar, not with script")
        return self


class Workload(_Model):
    name: WorkloadName = "sort-aggregate"
    params: dict[str, int | float | str | bool] = Field(default_factory=dict)
    apps: int = Field(
        default=1,
        ge=1,
        le=8,
        description="Identical applications run at the same time, the cluster's cores split evenly between them.",
    )
    script: str | None = Field(default=None, description="name = 'app': the PySpark script to run.")
    jar: str | None = Field(default=None, description="name = 'app': the application jar (with main_class).")
    main_class: str | None = Field(default=None, description="name = 'app': the jar's main class.")
    args: list[str] = Field(default_factory=list, description="name = 'app': the application's arguments.")
    py_files: list[str] = Field(default_factory=list, description="name = 'app': Python files it imports.")
    conf: dict[SparkConfKey, str] = Field(default_factory=dict, description="name = 'app': its Spark conf.")

    @model_validator(mode="after")
    def _app_fields(self) -> Workload:
        given = [f for f in APP_FIELDS if getattr(self, f)]
        if self.name != "app" and given:
            raise ValueError(f"{', '.join(given)}: only for a user application (workload.name = 'app')")
        if self.name == "app" and self.params:
            raise ValueError("a user application takes script/jar, args and conf, not params")
        return self

    def param_data(self) -> dict[str, Any]:
        """What ``WORKLOAD_PARAMS[name]`` validates: ``params``, or the application's fields for 'app'."""
        if self.name == "app":
            return {f: getattr(self, f) for f in APP_FIELDS}
        return dict(self.params)


class SortAggregateParams(_Model):
    """Seed 000's application: synthetic rows, orderBy, then groupBy + count."""

    rows: int = Field(ge=1, le=10_000_000_000)
    partitions: int = Field(ge=1, le=100_000)
    payload_bytes: int = Field(default=64, ge=0, le=100_000, description="Bytes of payload per row.")
    groups: int = Field(default=1000, ge=1, le=SPARK_LONG_MAX, description="Distinct values of the groupBy key.")
    seed: SparkSeed = 42


class GroupByTestParams(_Model):
    """Spark's GroupByTest example: random (int, bytes) pairs, cached, counted, groupByKey, counted."""

    mappers: int = Field(default=2, ge=1, le=100_000, description="numMappers (map partitions).")
    kv_pairs: int = Field(
        default=1000, ge=1, le=SPARK_MAX_ARRAY, description="numKVPairs per mapper (one Spark array each)."
    )
    value_bytes: int = Field(default=1000, ge=1, le=1_000_000, description="valSize: bytes per value.")
    reducers: int = Field(default=2, ge=1, le=100_000, description="numReducers.")
    seed: SparkSeed = 42

    @property
    def partitions(self) -> int:
        return self.reducers


class SmallRecordsParams(_Model):
    """Seed 001's network-heavy app: many small records and many small shuffle blocks."""

    records: int = Field(ge=1, le=10_000_000_000)
    partitions: int = Field(default=64, ge=1, le=100_000, description="Map and reduce partitions.")
    keys: int = Field(default=100_000, ge=1, le=SPARK_LONG_MAX, description="Distinct keys.")
    rounds: int = Field(default=2, ge=1, le=10, description="Shuffles in a row (groupBy, then repartition...).")
    seed: SparkSeed = 42


class MapReduceParams(_Model):
    """Seed 002's emulated MapReduce shuffle: a trace replayed by transfer agents on the hosts with
    role ``mapreduce`` (no Spark). The trace is a JSON file, or generated from these parameters."""

    trace: str | None = Field(default=None, description="A trace JSON file (shufflelab.mapreduce.trace).")
    generator: Literal["hadoop-sort", "synthetic"] = "hadoop-sort"
    mappers: int = Field(default=8, ge=1, le=10_000)
    reducers: int = Field(default=8, ge=1, le=10_000)
    input_mb_per_map: float = Field(default=8.0, gt=0, le=1e6, description="hadoop-sort: map input = output per map.")
    partition_mb: float = Field(default=1.0, gt=0, le=1e6, description="synthetic: mean bytes per (map, reducer).")
    dist: Literal["constant", "uniform", "lognormal"] = "lognormal"
    spread: float = Field(default=0.5, ge=0, le=5)
    map_s: float = Field(default=1.0, ge=0, le=86_400, description="synthetic: mean map duration.")
    reduce_s: float = Field(default=0.0, ge=0, le=86_400, description="synthetic: reduce compute after the shuffle.")
    parallel_copies: int = Field(default=5, ge=1, le=1000)
    placement: Literal["round-robin", "split"] = Field(
        default="split", description="split: maps on the first half of the hosts, reduces on the second."
    )
    seed: int = 1


NdpPolicy = Literal["none", "filter", "filter+project", "full", "net-aware"]
TpchQuery = Literal["q1", "q6", "q14", "q19"]


class TpchParams(_Model):
    """Seed 003's prototype: TPC-H queries over lineitem/part in HDFS on the hosts with role
    ``storage``, read by Spark through shufflelab's NDP connector, which pushes the ``policy``'s
    prefix of filter / project / partial aggregate to the storage hosts' NDP proxies."""

    query: TpchQuery | Literal["mix"] = Field(
        default="q6", description="The query; 'mix' cycles q1, q6, q14, q19 through a stream."
    )
    policy: NdpPolicy = Field(default="net-aware", description="What the connector may push down.")
    queries: int = Field(default=1, ge=1, le=100, description="1: a single query; more: a stream of queries.")
    interval_s: float = Field(default=10.0, ge=0, le=3600, description="Arrival spacing of the stream's queries.")
    scale_factor: float = Field(default=0.1, gt=0, le=10, description="TPC-H scale factor (tpchgen-cli).")
    file_mb: int = Field(default=16, ge=1, le=256, description="Size of each Parquet file (one HDFS block each).")
    block_mb: int = Field(default=32, ge=1, le=1024, description="HDFS block size; file_mb must fit in it.")
    storage_cores: float = Field(default=1, gt=0, le=64, description="Emulated cores of each storage host.")
    core_scale: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="Real CPU per emulated core (this machine has two): storage hosts get storage_cores × this.",
    )

    @model_validator(mode="after")
    def _blocks(self) -> TpchParams:
        if self.file_mb > self.block_mb:
            raise ValueError(f"file_mb ({self.file_mb}) must fit in one block (block_mb = {self.block_mb})")
        return self


WORKLOAD_PARAMS: dict[str, type[_Model]] = {
    "tpch": TpchParams,
    "sort-aggregate": SortAggregateParams,
    "groupby-test": GroupByTestParams,
    "small-records": SmallRecordsParams,
    "mapreduce": MapReduceParams,
    "app": AppParams,
}


class CrossTraffic(_Model):
    udp_percent: float = Field(default=0, ge=0, le=200, description="UDP load as % of the bottleneck rate.")
    tcp_pairs: int = Field(default=0, ge=0, le=64, description="Long-lived iperf3 TCP flows.")
    source: str | None = Field(default=None, description="Host sending; default: the traffic-source host.")
    sink: str | None = Field(default=None, description="Host receiving; default: the traffic-sink host.")
    warmup_s: float = Field(default=1.0, ge=0, le=60, description="Seconds of traffic before the job starts.")

    @property
    def active(self) -> bool:
        """Whether a run of this spec carries cross traffic (UDP, TCP flows or both)."""
        return self.udp_percent > 0 or self.tcp_pairs > 0


class Telemetry(_Model):
    queue_period_ms: float = Field(
        default=100, ge=1, le=10_000, description="Queue sampling period; below 10 ms only with the userspace switch."
    )
    selftest: Literal["off", "warn", "refuse"] = Field(
        default="warn",
        description=(
            "Before the first run of each link configuration, measure every bottleneck port's goodput and "
            "RTT against its configuration (iperf3 + ping on the idle fabric, a few seconds). warn: runs go "
            "on, the report lists deviating links; refuse: the runs fail with the reason; off: skip."
        ),
    )


class Fault(_Model):
    """A fault injected during a run (seed 004's fault escape), timed from the moment the first
    application's SparkSession is up (its first job is submitted then).

    - ``link-down``: ``host``'s link is down for ``duration_s`` (its interface, then routes restored);
    - ``executor-kill``: the Spark executor on worker ``host`` is killed (SIGKILL); its worker starts
      a new one and Spark recovers (fetch retries, stage re-attempts);
    - ``udp-burst``: UDP at ``rate_mbps`` (default: the bottleneck rate) from the traffic source
      (or ``host``) to the traffic sink for ``duration_s``.
    """

    kind: Literal["link-down", "executor-kill", "udp-burst"]
    at_s: float = Field(ge=0, le=86_400, description="Seconds after the SparkSession is up (the first job starts).")
    duration_s: float = Field(default=0.0, ge=0, le=3_600, description="link-down / udp-burst: how long.")
    host: str | None = Field(default=None, description="The host concerned (see kind).")
    rate_mbps: float | None = Field(default=None, gt=0, le=100_000, description="udp-burst: offered rate.")

    @model_validator(mode="after")
    def _needs(self) -> Fault:
        if self.kind in ("link-down", "executor-kill") and not self.host:
            raise ValueError(f"a {self.kind} fault needs a host")
        if self.kind in ("link-down", "udp-burst") and self.duration_s <= 0:
            raise ValueError(f"a {self.kind} fault needs duration_s > 0")
        return self


class ExperimentMeta(_Model):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    repetitions: int = Field(default=1, ge=1, le=1000)
    run_timeout_s: float = Field(default=600, gt=0, le=86_400)
    seed: int = 1
    order: Literal["grouped", "shuffled"] = Field(
        default="grouped",
        description=(
            "Run order inside a fabric group: 'grouped' keeps the matrix order; 'shuffled' gives every "
            "repetition its own seeded random order, so warm caches, JIT or drift do not favour the "
            "scenarios that come later. Not part of a scenario's identity: changing it keeps finished runs."
        ),
    )


class ExperimentSpec(_Model):
    """One scenario's full description (the base of an experiment, or one matrix point)."""

    experiment: ExperimentMeta
    topology: Topology
    hosts: dict[str, Host]
    tcp: Tcp = Tcp()
    spark: Spark = Spark()
    workload: Workload
    cross_traffic: CrossTraffic = CrossTraffic()
    telemetry: Telemetry = Telemetry()
    faults: list[Fault] = Field(default_factory=list, description="Faults injected during every run.")
    matrix: dict[str, list[Any]] = Field(default_factory=dict)
    cases: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description=(
            "Named sets of overrides (dotted paths), crossed with the matrix: [cases.control] ...; "
            "a case's 'only' table limits it to matrix points whose fields have those values."
        ),
    )

    @field_validator("hosts")
    @classmethod
    def _host_names(cls, v: dict[str, Host]) -> dict[str, Host]:
        for name in v:
            if not _NAME.match(name):
                raise ValueError(f"host name {name!r}: use 1-8 lowercase letters/digits, starting with a letter")
            if name in ("r", "sw", "sw1", "sw2"):
                raise ValueError(f"host name {name!r} is taken by the fabric's router/switches (r, sw, sw1, sw2)")
        if len(v) > 60:
            raise ValueError("at most 60 hosts")
        return v

    @model_validator(mode="after")
    def _roles(self) -> ExperimentSpec:
        if self.workload.name == "mapreduce":
            if len(self.hosts_with("mapreduce")) < 2:
                raise ValueError("workload 'mapreduce' needs at least two hosts with role 'mapreduce'")
            if self.workload.apps != 1:
                raise ValueError("workload 'mapreduce' runs one job at a time (apps = 1)")
        else:
            masters = self.hosts_with("spark-master")
            if len(masters) != 1:
                raise ValueError(f"exactly one host needs role 'spark-master' (found {len(masters)})")
            if not self.hosts_with("spark-worker"):
                raise ValueError("at least one host needs role 'spark-worker'")
        storage = self.hosts_with("storage")
        if self.workload.name == "tpch" and not storage:
            raise ValueError("workload 'tpch' needs at least one host with role 'storage' (HDFS + NDP proxy)")
        for h in storage:
            if set(self.hosts[h].roles) & {"spark-master", "spark-worker", "mapreduce"}:
                raise ValueError(f"hosts.{h}: a 'storage' host runs only HDFS and the NDP proxy (no Spark)")
        if storage and self.workload.name != "tpch":
            raise ValueError(f"role 'storage' is used by workload 'tpch' only (workload is {self.workload.name!r})")
        ct = self.cross_traffic
        if ct.active:
            src, dst = self.traffic_endpoints()
            if src is None or dst is None:
                raise ValueError(
                    "cross traffic needs a source and a sink: give hosts the roles "
                    "'traffic-source'/'traffic-sink' or set cross_traffic.source/sink"
                )
            if src == dst:
                raise ValueError("cross_traffic source and sink must be different hosts")
        rate = self.topology.bottleneck.rate_mbps
        if ct.udp_percent > 0 and shaping.udp_payload_rate_bps(rate, ct.udp_percent) < 1:
            raise ValueError(
                f"cross_traffic.udp_percent = {ct.udp_percent:g} of {rate:g} Mbit/s is below 1 bit/s of UDP "
                "payload, which iperf3 would take as unlimited (-b 0)"
            )
        for field in ("source", "sink"):
            name = getattr(ct, field)
            if name is not None and name not in self.hosts:
                raise ValueError(f"cross_traffic.{field}: no host named {name!r}")
        try:
            WORKLOAD_PARAMS[self.workload.name].model_validate(self.workload.param_data())
        except ValidationError as exc:
            raise ValueError(
                (
                    "workload (user application): "
                    if self.workload.name == "app"
                    else f"workload.params ({self.workload.name}): "
                )
                + "; ".join(_describe(e) for e in exc.errors())
            ) from None
        if self.faults and self.workload.name == "mapreduce":
            raise ValueError("faults: injected into Spark runs only (not the mapreduce replay)")
        for i, f in enumerate(self.faults):
            if f.host is not None and f.host not in self.hosts:
                raise ValueError(f"faults[{i}].host: no host named {f.host!r}")
            if f.kind == "executor-kill" and f.host not in self.hosts_with("spark-worker"):
                raise ValueError(f"faults[{i}].host: {f.host!r} runs no Spark executor (role 'spark-worker')")
            if f.kind == "udp-burst":
                burst = f.rate_mbps or self.topology.bottleneck.rate_mbps
                if shaping.udp_payload_rate_bps(burst, 100.0) < 1:
                    raise ValueError(
                        f"faults[{i}].rate_mbps: {burst:g} Mbit/s is below 1 bit/s of UDP payload, which "
                        "iperf3 would take as unlimited (-b 0)"
                    )
                src = f.host or self.traffic_endpoints()[0]
                dst = self.traffic_endpoints()[1]
                if src is None or dst is None or src == dst:
                    raise ValueError(
                        f"faults[{i}]: a udp-burst needs a traffic-source (or host) and a different traffic-sink"
                    )
        cores = self.spark.worker_cores * len(self.hosts_with("spark-worker"))
        if self.workload.name != "mapreduce" and cores < self.workload.apps:
            raise ValueError(f"workload.apps = {self.workload.apps} needs at least as many worker cores ({cores})")
        for host in self.hosts:
            try:
                self.tcp_for(host)
            except ValidationError as exc:
                reasons = (_describe(e).removeprefix("Value error, ") for e in exc.errors())
                raise ValueError(f"hosts.{host}.tcp: " + "; ".join(reasons)) from None
        self._racks_fit()
        self._datapath_fits()
        return self

    def _racks_fit(self) -> None:
        racks = {h: host.rack for h, host in self.hosts.items()}
        if self.topology.kind != "dumbbell":
            given = [h for h, r in racks.items() if r is not None]
            if given:
                raise ValueError(f"hosts.{given[0]}.rack: racks are for topology.kind = 'dumbbell'")
            return
        missing = [h for h, r in racks.items() if r is None]
        if missing:
            raise ValueError(f"hosts.{missing[0]}.rack: the dumbbell topology needs every host's rack (1 or 2)")
        for side in (1, 2):
            if side not in racks.values():
                raise ValueError(f"topology.kind = 'dumbbell': no host has rack = {side}")

    def _datapath_fits(self) -> None:
        link = self.topology.bottleneck
        if self.topology.switch_spin and self.datapath() == "kernel":
            raise ValueError(
                "topology.switch_spin = true is for the userspace switch datapath (this spec runs on the kernel's)"
            )
        wants = self.switch_features()
        if link.datapath == "kernel" and wants:
            raise ValueError(
                "topology.bottleneck.datapath = 'kernel', but "
                + "; ".join(wants)
                + " only the userspace switch provides (use datapath = 'auto' or 'switch')"
            )
        if self.datapath() == "switch" and self.topology.offloads:
            raise ValueError(
                "topology.offloads = true cannot be used with the userspace switch (it forwards real "
                "frames, not 64 KB GSO segments); set offloads = false"
            )
        if self.telemetry.queue_period_ms < 10 and self.datapath() == "kernel":
            raise ValueError(
                f"telemetry.queue_period_ms = {self.telemetry.queue_period_ms:g}: below 10 ms needs the "
                "userspace switch's telemetry (topology.bottleneck.datapath = 'switch')"
            )

    def switch_features(self) -> list[str]:
        """What this spec asks for that only the userspace switch provides, naming the fields."""
        link = self.topology.bottleneck
        out = []
        if link.delay_ms > 0:
            out.append(f"topology.bottleneck.delay_ms = {link.delay_ms:g}")
        if link.discipline == "red":
            out.append("topology.bottleneck.discipline = 'red'")
        by_mode = self.hosts_by_switch_mode()
        if "dctcp" in by_mode:
            out.append(f"tcp.congestion_control = 'dctcp' (hosts {', '.join(by_mode['dctcp'])})")
        if "vcc" in by_mode:
            out.append(f"tcp.vcc = true (hosts {', '.join(by_mode['vcc'])})")
        return out

    def hosts_by_switch_mode(self) -> dict[str, list[str]]:
        """Hosts whose flows the switch manages, by mode (``dctcp``, ``vcc``), in spec order."""
        out: dict[str, list[str]] = {}
        for host in self.hosts:
            mode = self.tcp_for(host).switch_mode()
            if mode != "off":
                out.setdefault(mode, []).append(host)
        return out

    def datapath(self) -> Literal["kernel", "switch"]:
        """The resolved datapath: ``auto`` is the switch when something needs it, else the kernel."""
        dp = self.topology.bottleneck.datapath
        if dp == "auto":
            return "switch" if self.switch_features() else "kernel"
        return "switch" if dp == "switch" else "kernel"

    def hosts_with(self, role: Role) -> list[str]:
        """Names of the hosts that have ``role``, in spec order."""
        return [n for n, h in self.hosts.items() if role in h.roles]

    def traffic_endpoints(self) -> tuple[str | None, str | None]:
        src = self.cross_traffic.source or next(iter(self.hosts_with("traffic-source")), None)
        dst = self.cross_traffic.sink or next(iter(self.hosts_with("traffic-sink")), None)
        return src, dst

    def tcp_for(self, host: str) -> Tcp:
        """The effective TCP settings of ``host`` (experiment defaults + host overrides), validated."""
        override = self.hosts[host].tcp.model_dump(exclude_none=True)
        if not override:
            return self.tcp
        return Tcp.model_validate({**self.tcp.model_dump(), **override})

    def workload_params(self) -> Any:
        """The workload's validated parameter model (see ``WORKLOAD_PARAMS``)."""
        return WORKLOAD_PARAMS[self.workload.name].model_validate(self.workload.param_data())


class Scenario(BaseModel):
    """One point of an experiment's matrix: its values, a readable label and a content hash."""

    model_config = ConfigDict(frozen=True)

    spec: ExperimentSpec
    values: dict[str, Any]
    label: str
    scenario_id: str


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    """A field's location as written in TOML: ``spark.conf."spark.eventLog.enabled"``, ``faults[0].host``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":  # pydantic's marker for an error in a dict key: the key is the field
            continue
        else:
            text = str(part) if _BARE_KEY.match(str(part)) else json.dumps(str(part), ensure_ascii=False)
            out += f".{text}" if out else text
    return out


def _describe(err: Any) -> str:
    loc = field_path(err.get("loc", ()))
    msg = str(err.get("msg", "invalid"))
    return f"{loc}: {msg}" if loc else msg


def _format(exc: ValidationError, where: str) -> str:
    lines = [f"{where}: invalid experiment spec"]
    for err in exc.errors():
        lines.append(f"  - {_describe(err)}")
    return "\n".join(lines)


# experiment fields a matrix point or case may change (e.g. a shorter timeout for a case that starves)
_VARIABLE_META = frozenset({"experiment.run_timeout_s"})


MAX_SCENARIOS = 10_000
"""The most scenarios one experiment may expand to (matrix points x cases). Checked before
expanding, so a matrix of millions of points is refused at once with its count instead of taking
minutes and gigabytes; 10,000 is far beyond what can run on one host (a run takes a minute)."""

MAX_NESTING = 32
"""How deeply tables and arrays may nest in a spec (a real one nests about 6 levels deep)."""


def check_nesting(data: Any, where: str, error: type[SpecError] | None = None) -> None:
    """Refuse data nested more than :data:`MAX_NESTING` levels deep, naming where (iteratively:
    validating, copying or hashing such data would exhaust Python's stack)."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        node, loc = stack.pop()
        if len(loc) > MAX_NESTING:
            raise (error or SpecError)(
                f"{where}: {field_path(loc[:MAX_NESTING])}...: nested more than {MAX_NESTING} levels deep"
            )
        if isinstance(node, dict):
            stack.extend((v, (*loc, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*loc, i)) for i, v in enumerate(node))


def _toml_statement(exc: BaseException) -> str:
    """Where tomllib was when it ran out of stack: ``line N, key.path: `` of the top-level statement
    (read from its parser's frames; empty if they cannot be found)."""
    src = pos = None
    header: Any = ()
    key: Any = None
    tb = exc.__traceback__
    while tb is not None:
        code, local = tb.tb_frame.f_code, tb.tb_frame.f_locals
        if code.co_filename.endswith(os.path.join("tomllib", "_parser.py")):
            if code.co_name == "loads":
                src, pos, header = local.get("src"), local.get("pos"), local.get("header", ())
            elif code.co_name == "parse_key_value_pair" and key is None:
                key = local.get("key")
        tb = tb.tb_next
    if not isinstance(src, str) or not isinstance(pos, int):
        return ""
    line = src.count("\n", 0, pos) + 1
    out = f"line {line}"
    if isinstance(header, tuple) and isinstance(key, tuple):
        out += f", {field_path((*header, *key))}"
    return out + ": "


def read_toml(path: str | Path, error: type[SpecError] | None = None) -> dict[str, Any]:
    """Read a TOML file; every problem raises ``error`` (:class:`SpecError`) naming the file and
    where in it: unreadable, not UTF-8, not TOML, nested too deeply."""
    error = error or SpecError
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise error(f"{p}: cannot read: {(exc.strerror or str(exc)).lower()}") from None
    try:
        text = raw.decode("utf-8")  # TOML is UTF-8, whatever the locale says
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise error(
            f"{p}: line {line}, column {column}: byte 0x{raw[exc.start]:02x} is not UTF-8 (a TOML file is UTF-8 text)"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{p}: not valid TOML: {exc}") from None
    except RecursionError as exc:
        raise error(
            f"{p}: {_toml_statement(exc)}arrays or inline tables nested too deeply to read "
            f"(a spec may nest {MAX_NESTING} levels)"
        ) from None
    check_nesting(data, str(p), error)
    return data


def parse(data: dict[str, Any], where: str = "<spec>") -> ExperimentSpec:
    """Validate a spec dictionary; raise :class:`SpecError` naming ``where`` and the bad fields."""
    check_nesting(data, where)
    try:
        spec = ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_format(exc, where)) from None
    for path, values in spec.matrix.items():
        if not values:
            raise SpecError(f"{where}: {field_path(('matrix', path))}: give a non-empty list of values")
        if path.split(".")[0] in ("matrix", "experiment") and path not in _VARIABLE_META:
            raise SpecError(f"{where}: {field_path(('matrix', path))}: this field cannot be varied")
    for case, overrides in spec.cases.items():
        for path in overrides:
            if path == ONLY:
                if not isinstance(overrides[path], dict) or not overrides[path]:
                    raise SpecError(
                        f"{where}: {field_path(('cases', case, ONLY))}: give a table of field paths and values"
                    )
                continue
            if path.split(".")[0] in ("matrix", "experiment", "cases") and path not in _VARIABLE_META:
                raise SpecError(f"{where}: {field_path(('cases', case, path))}: this field cannot be varied")
    expand(spec, where)  # every matrix point must validate, so errors surface at load time
    return spec


def resolve_app_files(data: dict[str, Any], base: Path, where: str) -> None:
    """Make a user application's files (script, jar, py_files) absolute, relative to ``base``; each must exist."""
    w = data.get("workload")
    if not isinstance(w, dict):
        return

    def one(value: Any, field: str) -> Any:
        if not isinstance(value, str) or not value:
            return value  # validation names the bad type
        p = (base / value).expanduser().resolve()
        if not p.is_file():
            raise SpecError(f"{where}: workload.{field}: no file {p}")
        return str(p)

    for key in ("script", "jar"):
        if key in w:
            w[key] = one(w[key], key)
    if isinstance(w.get("py_files"), list):
        w["py_files"] = [one(v, f"py_files[{i}]") for i, v in enumerate(w["py_files"])]


def load(path: str | Path) -> ExperimentSpec:
    """Read and validate a TOML experiment file (a user application's files relative to it)."""
    data = read_toml(path)
    resolve_app_files(data, Path(path).parent, str(path))
    return parse(data, str(path))


class PathError(ValueError):
    """A dotted path that descends into something other than a table."""


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set the field at the dotted ``path`` (creating tables on the way); raise :class:`PathError`
    when the path descends into a value or a list."""
    node = data
    parts = path.split(".")
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            what = "a list" if isinstance(child, list) else f"a value ({_brief(child)})"
            raise PathError(f"{'.'.join(parts[: i + 1])} is {what}, not a table: the path cannot descend into it")
        node = child
    node[parts[-1]] = value


def _brief(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


ONLY = "only"  # a case's key limiting it to some matrix points; not a spec field


def _get_path(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


_MISSING = object()


def _case_applies(data: dict[str, Any], only: dict[str, Any] | None) -> bool:
    """Does a case with this ``only`` table apply to the matrix point ``data``? A value may be a list
    of allowed values."""
    for path, want in (only or {}).items():
        have = _get_path(data, path)
        allowed = want if isinstance(want, list) else [want]
        if have is _MISSING or have not in allowed:
            return False
    return True


def _show(value: Any) -> str:
    if isinstance(value, dict) and "name" in value:
        return str(value["name"])
    return str(value)


def _short(path: str) -> str:
    aliases = {
        "congestion_control": "cc",
        "udp_percent": "udp",
        "partitions": "parts",
        "rate_mbps": "rate",
    }
    last = path.rsplit(".", 1)[-1]
    return aliases.get(last, last)


# Fields added after experiments were recorded: left out of the hash while at their default, so a
# scenario keeps its id (and its finished runs) when the spec language grows.
_HASH_NEUTRAL_DEFAULTS: dict[tuple[str, ...], Any] = {
    ("topology", "bottleneck", "red"): None,
    ("topology", "bottleneck", "datapath"): "auto",
    ("tcp", "vcc"): False,
    ("telemetry", "selftest"): "warn",
    ("topology", "switch_spin"): False,
    ("faults",): [],
    ("workload", "script"): None,  # the user-application fields
    ("workload", "jar"): None,
    ("workload", "main_class"): None,
    ("workload", "args"): [],
    ("workload", "py_files"): [],
    ("workload", "conf"): {},
}
_HOST_HASH_NEUTRAL_DEFAULTS: dict[str, Any] = {"vcc": None}


def spec_hash(spec: ExperimentSpec) -> str:
    """Stable 12-hex-digit content hash of a scenario spec (matrix and repetitions excluded)."""
    data = spec.model_dump(mode="json", exclude={"matrix", "cases"})
    data["experiment"].pop("repetitions", None)
    data["experiment"].pop("order", None)
    for path, default in _HASH_NEUTRAL_DEFAULTS.items():
        parent = _get_path(data, ".".join(path[:-1])) if len(path) > 1 else data
        if isinstance(parent, dict) and parent.get(path[-1], _MISSING) == default:
            del parent[path[-1]]
    for host in data.get("hosts", {}).values():
        if host.get("rack", _MISSING) is None:  # added with the dumbbell topology
            del host["rack"]
        for key, default in _HOST_HASH_NEUTRAL_DEFAULTS.items():
            if host.get("tcp", {}).get(key, _MISSING) == default:
                del host["tcp"][key]
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def expand(spec: ExperimentSpec, where: str = "<spec>") -> list[Scenario]:
    """The matrix's cartesian product (x the named cases) as validated scenarios.

    Order follows the matrix table's key order, last key varying fastest; cases vary fastest of
    all, so a case and its siblings run next to each other. One scenario if there is neither.
    """
    keys = list(spec.matrix)
    cases: list[tuple[str | None, dict[str, Any]]] = list(spec.cases.items()) or [(None, {})]
    total = math.prod(len(spec.matrix[k]) for k in keys) * len(cases)
    if total > MAX_SCENARIOS:  # counted before anything is expanded
        sizes = [f"{len(spec.matrix[k])} {k}" for k in keys] + ([f"{len(spec.cases)} cases"] if spec.cases else [])
        raise SpecError(
            f"{where}: matrix: {total:,} scenarios ({' x '.join(sizes)}) exceed the bound of "
            f"{MAX_SCENARIOS:,} per experiment; vary fewer values or split the experiment"
        )
    base = spec.model_dump(mode="json", exclude={"matrix", "cases"})
    scenarios: list[Scenario] = []
    for combo in itertools.product(*(spec.matrix[k] for k in keys)):
        for case, overrides in cases:
            data = copy.deepcopy(base)
            values: dict[str, Any] = dict(zip(keys, combo, strict=True))
            for path, value in values.items():
                try:
                    set_path(data, path, copy.deepcopy(value))  # never alias the matrix's own values
                except PathError as exc:
                    raise SpecError(f"{where}: {field_path(('matrix', path))}: {exc}") from None
            if not _case_applies(data, overrides.get(ONLY)):
                continue
            for path, value in overrides.items():
                if path != ONLY:
                    try:
                        set_path(data, path, copy.deepcopy(value))  # never alias the matrix's own values
                    except PathError as exc:
                        raise SpecError(f"{where}: {field_path(('cases', case, path))}: {exc}") from None
            parts = [f"{_short(k)}={_show(v)}" for k, v in values.items()]
            if case is not None:
                values["case"] = case
                parts.append(f"case={case}")
            label = ",".join(parts) or "base"
            try:
                concrete = ExperimentSpec.model_validate(data)
            except ValidationError as exc:
                raise SpecError(_format(exc, f"{where} (matrix point {label})")) from None
            scenarios.append(Scenario(spec=concrete, values=values, label=label, scenario_id=spec_hash(concrete)))
    if not scenarios:
        raise SpecError(f"{where}: no scenario left: every case's 'only' table excludes every matrix point")
    ids = [s.scenario_id for s in scenarios]
    if len(set(ids)) != len(ids):
        raise SpecError(f"{where}: matrix produces duplicate scenarios")
    return scenarios
