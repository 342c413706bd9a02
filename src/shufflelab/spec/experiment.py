"""The whole experiment spec: cross traffic, telemetry, faults, metadata and :class:`ExperimentSpec`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from shufflelab import shaping
from shufflelab.spec.base import NAME_PATTERN, Role, SpecModel
from shufflelab.spec.loader import describe_error
from shufflelab.spec.network import Host, Tcp, Topology
from shufflelab.spec.workload import WORKLOAD_PARAMS, Spark, Workload


class CrossTraffic(SpecModel):
    udp_percent: float = Field(default=0, ge=0, le=200, description="UDP load as % of the bottleneck rate.")
    tcp_pairs: int = Field(default=0, ge=0, le=64, description="Long-lived iperf3 TCP flows.")
    source: str | None = Field(default=None, description="Host sending; default: the traffic-source host.")
    sink: str | None = Field(default=None, description="Host receiving; default: the traffic-sink host.")
    warmup_s: float = Field(default=1.0, ge=0, le=60, description="Seconds of traffic before the job starts.")
    generator: Literal["iperf3", "switch"] = Field(
        default="iperf3",
        description=(
            "Who makes the UDP: 'iperf3' sends real packets from the source host to the sink (through both "
            "hosts' CPUs); 'switch' has the userspace switch offer virtual packets to the sink's port queue "
            "(same bytes, service time and drop/RED/ECN decisions, no host CPU); needs the switch datapath."
        ),
    )
    pattern: Literal["constant", "poisson", "onoff"] = Field(
        default="constant",
        description=(
            "generator = 'switch': arrivals at a constant rate, as a Poisson process, or on/off (on_ms sending "
            "at the rate x (on_ms + off_ms) / on_ms, then off_ms silent); the mean is udp_percent in every one."
        ),
    )
    on_ms: float = Field(default=100.0, gt=0, le=60_000, description="pattern = 'onoff': sending period.")
    off_ms: float = Field(default=100.0, ge=0, le=60_000, description="pattern = 'onoff': silent period.")
    seed: int = Field(default=1, ge=1, description="pattern = 'poisson': the arrival process's seed.")

    @property
    def active(self) -> bool:
        """Whether a run of this spec carries cross traffic (UDP, TCP flows or both)."""
        return self.udp_percent > 0 or self.tcp_pairs > 0


class Telemetry(SpecModel):
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


class Fault(SpecModel):
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


class ExperimentMeta(SpecModel):
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


class ExperimentSpec(SpecModel):
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
            if not NAME_PATTERN.match(name):
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
            where = (
                "workload (user application)"
                if self.workload.name == "app"
                else f"workload.params ({self.workload.name})"
            )
            raise ValueError(f"{where}: " + "; ".join(describe_error(e) for e in exc.errors())) from None
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
                reasons = (describe_error(e).removeprefix("Value error, ") for e in exc.errors())
                raise ValueError(f"hosts.{host}.tcp: " + "; ".join(reasons)) from None
        self._racks_fit()
        self._datapath_fits()
        self._generator_fits()
        return self

    def _generator_fits(self) -> None:
        ct = self.cross_traffic
        if ct.generator == "iperf3":
            if ct.pattern != "constant":
                raise ValueError(
                    f"cross_traffic.pattern = {ct.pattern!r} needs cross_traffic.generator = 'switch' "
                    "(iperf3 sends at a constant rate)"
                )
            return
        if self.datapath() != "switch":
            raise ValueError(
                "cross_traffic.generator = 'switch' needs the userspace switch in the path, and this spec runs "
                "on the kernel datapath: set topology.bottleneck.datapath = 'switch' (or use generator = 'iperf3')"
            )
        if ct.tcp_pairs > 0:
            raise ValueError(
                f"cross_traffic.tcp_pairs = {ct.tcp_pairs}: the switch generates UDP only; TCP flows need "
                "cross_traffic.generator = 'iperf3'"
            )
        if ct.udp_percent > 0 and self.topology.bottleneck.rate_mbps * ct.udp_percent / 100 * 1e6 < 8:
            raise ValueError(f"cross_traffic.udp_percent = {ct.udp_percent:g} is below 8 bit/s of frames")

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
