"""The spec's network: the bottleneck link (rate, queue, RED, delay), TCP settings, hosts and topology."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from shufflelab import shaping
from shufflelab.spec.base import DCTCP_BASE, CongestionControl, Datapath, Role, SpecModel, SwitchMode


class Red(SpecModel):
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


class Link(SpecModel):
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


class Tcp(SpecModel):
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


class TcpOverride(SpecModel):
    """Per-host TCP overrides; unset fields inherit the experiment's ``[tcp]``."""

    congestion_control: CongestionControl | None = None
    ecn: Literal[0, 1, 2] | None = None
    slow_start_after_idle: bool | None = None
    initcwnd: int | None = Field(default=None, ge=1, le=4096)
    initrwnd: int | None = Field(default=None, ge=1, le=4096)
    vcc: bool | None = None


class Host(SpecModel):
    roles: list[Role] = Field(default_factory=list)
    tcp: TcpOverride = TcpOverride()
    rack: Literal[1, 2] | None = Field(
        default=None, description="The host's side of a dumbbell topology (1 or 2); only for kind = 'dumbbell'."
    )


class Topology(SpecModel):
    kind: Literal["shared", "star", "dumbbell"] = Field(
        default="shared",
        description=(
            "shared: hosts sit on one access bridge whose single uplink to the router carries every "
            "host-to-host packet (one bottleneck queue, the router's downlink port); "
            "star: every host has its own router port, each shaped; "
            "dumbbell: two racks (hosts' rack = 1 or 2), each an access bridge, joined through the "
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
