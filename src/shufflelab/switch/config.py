"""The userspace switch's configuration as plain data (units in the field names), as it is written
to the JSON file ``shufflelab-switch`` reads. Pure: no process, no namespace, no host."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from shufflelab import shaping

Mode = Literal["off", "dctcp", "vcc"]
SPIN_US = 10**9  # busy_poll_us that makes the switch spin forever (every wait is "short")


@dataclass(frozen=True)
class Red:
    """RED on a port: byte thresholds (as seed 001), marking ECT packets when ``ecn``."""

    min_bytes: int
    max_bytes: int
    max_p: float = 0.1
    ewma_weight: float | None = None  # None: instantaneous queue (DCTCP-style step at min=max)
    ecn: bool = True


@dataclass(frozen=True)
class SwitchPort:
    """One switch port's egress: rate (0 = unlimited), delay, queue limit and discipline. ``name``:
    what hosts, sources and telemetry call it (None: ``ifname``); ports of one interface are its
    queues, each host's packets in its port's (the router host's one data interface holding a
    dumbbell's two directions)."""

    ifname: str
    rate_mbps: float = 0.0
    delay_ms: float = 0.0
    queue_bytes: int | None = None
    queue_packets: int | None = None
    red: Red | None = None
    burst_bytes: int | None = None  # default: 1 ms of the rate, at least two frames
    name: str | None = None

    @property
    def port_name(self) -> str:
        return self.name if self.name is not None else self.ifname

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ifname": self.ifname,
            "rate_bps": shaping.rate_bits(self.rate_mbps),
            "delay_us": self.delay_ms * 1000.0,
            "discipline": "red" if self.red else "droptail",
        }
        if self.name is not None:
            out["name"] = self.name
        if self.queue_bytes is not None:
            out["queue_bytes"] = self.queue_bytes
        if self.queue_packets is not None:
            out["queue_packets"] = self.queue_packets
        if self.burst_bytes is not None:
            out["burst_bytes"] = self.burst_bytes
        if self.red:
            out["red"] = {
                "min_bytes": self.red.min_bytes,
                "max_bytes": self.red.max_bytes,
                "max_p": self.red.max_p,
                "ewma_weight": self.red.ewma_weight,
                "ecn": self.red.ecn,
            }
        return out


@dataclass(frozen=True)
class CrossSource:
    """UDP made inside the switch: virtual frames of ``frame_bytes`` offered to port ``port``'s queue
    at a mean ``rate_mbps`` of frame bytes (constant, Poisson or on/off), never sent by a host."""

    port: str
    rate_mbps: float
    pattern: Literal["constant", "poisson", "onoff"] = "constant"
    on_ms: float = 0.0
    off_ms: float = 0.0
    seed: int = 1
    frame_bytes: int = 1514
    ect: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "port": self.port, "rate_bps": shaping.rate_bits(self.rate_mbps), "frame_bytes": self.frame_bytes,
            "pattern": self.pattern, "on_ms": self.on_ms, "off_ms": self.off_ms, "ect": self.ect, "seed": self.seed,
        }  # fmt: skip


@dataclass(frozen=True)
class SwitchHost:
    """A host behind the switch: its address, MAC, port, and what the switch does with its TCP."""

    ip: str
    mac: str
    port: str
    mode: Mode = "off"


@dataclass
class SwitchConfig:
    ports: list[SwitchPort]
    hosts: list[SwitchHost]
    telemetry_period_ms: float = 100.0
    busy_poll_us: int = 50
    cpu: int | None = None
    max_flows: int = 4096
    flow_idle_timeout_s: float = 60.0
    g: float = 1.0 / 16.0
    cross: list[CrossSource] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self, telemetry_path: Path | None, status_path: Path | None = None) -> dict[str, Any]:
        return {
            "ports": [p.to_json() for p in self.ports],
            "hosts": [{"ip": h.ip, "mac": h.mac, "port": h.port, "mode": h.mode} for h in self.hosts],
            "telemetry": {
                "path": str(telemetry_path) if telemetry_path else None,
                "period_ms": self.telemetry_period_ms,
                **({"status_path": str(status_path)} if status_path else {}),
            },
            "cross": [c.to_json() for c in self.cross],
            "cross_paused": bool(self.cross),  # started by start_cross (SIGUSR2) when the run needs them
            "flows": {"g": self.g, "max_flows": self.max_flows, "idle_timeout_s": self.flow_idle_timeout_s},
            "busy_poll_us": self.busy_poll_us,
            "cpu": self.cpu,
            **self.extra,
        }


def switch_cpu(ncpu: int | None = None) -> int | None:
    """The CPU the switch is pinned to on a fabric: the last one (``None`` on a one-CPU host)."""
    n = ncpu or os.cpu_count() or 1
    return n - 1 if n >= 2 else None
