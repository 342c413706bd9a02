"""The ``[tcp]`` table shared by the simulator's fabric and application specs, and its report parts.

``[tcp]`` asks the Rust core for a per-congestion-control correction (``crates/simcore/src/tcpmodel.rs``):
each link class is run once through the packet-level bottleneck probe; its efficiency scales the
link's capacity in the max-min solve and its standing queue delays packets crossing it while it is
saturated (docs/design-sim.md). Absent: pure max-min rates, no congestion control.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from shufflelab.document import Section, Table
from shufflelab.sim.spec import SimSpecError

TCP_LIMIT = (
    "Flow level with a per-congestion-control correction ([tcp]): each link class was run once "
    "through the packet-level bottleneck probe (the spec's congestion control, discipline and "
    "buffer, its number of long-lived flows, the fabric's longest base round trip); the solver "
    "shares capacity × the probe's efficiency, and a packet crossing a saturated link waits the "
    "probe's standing queue. Not modelled: slow start, losses and timeouts of individual flows "
    "(incast), queues of loaded but unsaturated links, the actual number of flows per link, RTT "
    "unfairness. Runs without [tcp] have no congestion control at all."
)


class DelayedAck(BaseModel):
    """``[tcp.delayed_ack]``: the packet-faithful mode's receivers delay their ACKs as Linux's
    (``crates/simcore/src/linksim.rs``, ``DelayedAck``). Absent: every segment is ACKed at once."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    timeout_s: float = Field(default=0.04, gt=0, le=1, description="The delayed-ACK timer (Linux: 40 ms).")
    quick_acks: int = Field(
        default=5, ge=0, le=1000, description="Segments ACKed one by one at a flow's start (Linux: 5; ns-3: 0)."
    )
    idle_quick_acks: int = Field(
        default=16,
        ge=0,
        le=1000,
        description="The same after a silence longer than the RTO (Linux: 16; ns-3: 0).",
    )


class Tcp(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    cc: Literal["reno", "cubic", "dctcp"] = Field(description="Congestion control of every TCP flow.")
    discipline: Literal["droptail", "red", "step"] | None = Field(
        default=None, description="Every port's queue (absent: droptail for reno/cubic, step for dctcp)."
    )
    queue_packets: float = Field(default=100, gt=0, le=1e6)
    red_min_packets: float = Field(default=20, gt=0, le=1e6)
    red_max_packets: float = Field(default=60, gt=0, le=1e6)
    mark_packets: float = Field(default=20, gt=0, le=1e6, description="Step marking threshold (DCTCP's K).")
    ecn: bool = Field(default=True, description="Reno/Cubic send ECT (marked, not dropped, by red/step).")
    flows: int = Field(default=8, ge=1, le=1000, description="Long-lived flows per link in the probe.")
    delayed_ack: DelayedAck | None = Field(
        default=None,
        description="Packet-faithful mode: receivers delay their ACKs as Linux's (absent: every segment ACKed "
        "at once).",
    )
    queued_acks: bool = Field(
        default=False,
        description="Packet-faithful mode: ACKs wait behind the data of the cable's other direction (each link "
        "simulated with it; a cable with UDP, and in the applications' mode a sending host's own link, keep their "
        "ACKs free). False: ACKs cross no queue.",
    )
    path_acks: bool | None = Field(
        default=None,
        description="The applications' packet mode: ACKs wait at the links of their own way back (from the receiver "
        "to the sender), behind the packets those links' simulations sent (in the same pass or the one before), and "
        "retransmission timeouts hold their fetches' request slots that whole delay in the next pass (damped: as many "
        "as the mean of what a pass held and found, fewer moved after a pass that swings); not with queued_acks. "
        "Absent: on in the applications' packet mode unless queued_acks is, off on a fabric (which refuses it); "
        "false: ACKs cross no queue.",
    )

    def core(self, *, path_acks: bool = False) -> dict[str, Any]:
        """The Rust core's ``tcp`` (``TcpModel``), the discipline resolved and ``path_acks`` too: when the
        spec leaves it out, ``path_acks`` (the caller's default) unless ``queued_acks`` is on."""
        doc = self.model_dump()
        doc["discipline"] = self.discipline or ("step" if self.cc == "dctcp" else "droptail")
        if self.path_acks is None:
            doc["path_acks"] = path_acks and not self.queued_acks
        return doc


def check_tcp(tcp: Tcp | None, where: str) -> None:
    """What one field cannot say alone: RED's thresholds in order, DCTCP on a marking queue."""
    if tcp is None:
        return
    if tcp.queued_acks and tcp.path_acks:
        raise SimSpecError(f"{where}: tcp.path_acks: not with tcp.queued_acks (choose one way for the ACKs)")
    if tcp.red_min_packets >= tcp.red_max_packets:
        raise SimSpecError(f"{where}: tcp.red_min_packets: must be below tcp.red_max_packets")
    if tcp.cc == "dctcp" and tcp.discipline == "droptail":
        raise SimSpecError(f"{where}: tcp.discipline: DCTCP needs a marking queue ('red' or 'step'), not 'droptail'")


def tcp_table(doc: dict[str, Any], label: Callable[[dict[str, Any]], str]) -> pd.DataFrame | None:
    """The probe's correction per link class of every run with [tcp] (None: no run has one)."""
    rows = [
        {
            "run": label(run),
            "cc": run["tcp"]["cc"],
            "discipline": run["tcp"]["discipline"],
            "link Gbit/s": k["bytes_per_s"] * 8 / 1e9,
            "base RTT µs": k["base_rtt_s"] * 1e6,
            "efficiency": k["efficiency"],
            "standing queue µs": k["queue_delay_s"] * 1e6,
            "marked": k["mark_share"],
            "dropped": k["drop_share"],
        }
        for run in doc["runs"]
        if run.get("tcp")
        for k in run["result"].get("tcp_links") or []
    ]
    return pd.DataFrame(rows) if rows else None


def tcp_section(table: pd.DataFrame) -> Section:
    """The report section with :func:`tcp_table`."""
    return Section(
        "Congestion control: the packet-level probe per link class",
        paragraphs=[
            "What the bottleneck probe (switchcore's queue and windows) found for each link class "
            "of each run with [tcp]: the share of the link its senders fill (the solver's capacity "
            "factor) and the mean standing queue (added while the link is saturated). Simulated."
        ],
        tables=[Table(table, caption="Per-link-class correction (simulated).")],
    )
