"""What the fabric report and the application report say alike about one simulated run on a
fabric: its flow completion times per block-size bucket, its per-tier utilisation, and the heat
map of that utilisation over virtual time (tiers × time), as one report section per run.

Both reports are SIMULATED; the section's captions say so. Built with :mod:`shufflelab.document`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from shufflelab.document import Figure, Section, Table  # noqa: E402

SIZE_UNITS = {"MiB": 2**20, "KiB": 1024}


def mode_line(doc: dict[str, Any], maxmin: str, packet: str) -> str:
    """Which mode produced the runs (a result with ``packet`` came from the packet-faithful mode):
    ``maxmin`` names the fast mode, ``packet`` says what the packet-faithful mode did."""
    n = sum(1 for run in doc["runs"] if "packet" in run["result"])
    if n == 0:
        return f"Mode: {maxmin} for every run."
    what = "every run" if n == len(doc["runs"]) else f"{n} of {len(doc['runs'])} runs (the others max-min)"
    return f"Mode: packet-faithful for {what}: {packet}" + receivers_note(doc) + acks_note(doc) + clustering_note(doc)


def receivers_note(doc: dict[str, Any]) -> str:
    """How the packet-faithful runs' receivers ACK (the spec's ``tcp.delayed_ack``)."""
    packet = [r for r in doc["runs"] if "packet" in r["result"]]
    delayed = [r for r in packet if (r.get("tcp") or {}).get("delayed_ack")]
    if not delayed:
        return " Receivers ACK every segment at once (no delayed ACKs)."
    which = "every packet-faithful run" if len(delayed) == len(packet) else f"{len(delayed)} of {len(packet)} runs"
    settings = sorted(
        {(d["timeout_s"], d["quick_acks"], d["idle_quick_acks"]) for d in (r["tcp"]["delayed_ack"] for r in delayed)}
    )
    how = "; ".join(
        f"{q} quick ACKs at a flow's start, {iq} after a silence longer than the RTO, else a {1e3 * t:g} ms timer"
        for t, q, iq in settings
    )
    return (
        f" Receivers delay their ACKs as Linux's in {which} (one ACK per two segments, at once on a gap or "
        f"a change of DCTCP's mark; {how})."
    )


def acks_note(doc: dict[str, Any]) -> str:
    """Where the packet-faithful runs' ACKs go (the spec's ``tcp.queued_acks`` and ``tcp.path_acks``)."""
    packet = [r for r in doc["runs"] if "packet" in r["result"]]
    queued = [r for r in packet if (r.get("tcp") or {}).get("queued_acks")]
    path = [r for r in packet if (r.get("tcp") or {}).get("path_acks")]
    if path:
        which = "every packet-faithful run" if len(path) == len(packet) else f"{len(path)} of {len(packet)} runs"
        return (
            f" ACKs wait at the links of their own way back in {which} (from the receiver to the sender, behind "
            "what those links' simulations sent, in the same pass or the one before; a sending host's own link holds "
            "none up; retransmission timeouts hold their request slots that whole delay in the next pass, damped)."
            + (f" In {len(queued)} runs they wait behind the other direction's data." if queued else "")
        )
    if not queued:
        return " ACKs cross no queue."
    which = "every packet-faithful run" if len(queued) == len(packet) else f"{len(queued)} of {len(packet)} runs"
    return (
        f" ACKs wait behind the other direction's data in {which} (each link simulated with its cable's other "
        "direction; a cable with UDP, and in the applications' mode a sending host's own link, keep their ACKs free)."
    )


def clustering_note(doc: dict[str, Any]) -> str:
    """What the packet mode's clustering of alike links did, where it was on (empty where not): the
    links simulated and those that took their cluster representative's delays, over the clustered runs."""
    clustered = [r["result"]["packet"] for r in doc["runs"] if r["result"].get("packet", {}).get("clusters")]
    if not clustered:
        return ""
    tolerances = sorted({p["cluster_tolerance"] for p in clustered})
    simulated = sum(p["links_simulated"] for p in clustered)
    represented = sum(p["links_represented"] for p in clustered)
    largest = max(p["largest_cluster"] for p in clustered)
    runs = "one run" if len(clustered) == 1 else f"{len(clustered)} runs"
    return (
        f" Alike links simulated once per cluster (tolerance {', '.join(f'{t:g}' for t in tolerances)}) in {runs}: "
        f"{simulated:,} links simulated, {represented:,} took their representative's delays instead "
        f"(the largest cluster {largest:,} links), so a represented link's own bursts are approximated."
    )


def how_to_read(intro: str, mode: str, limits: Sequence[str]) -> Section:
    """The report's headline: SIMULATED, where the numbers come from, the mode, the model's limits."""
    return Section("SIMULATED — how to read this", paragraphs=[intro, mode], bullets=list(limits), note=True)


def slug(text: str) -> str:
    """A file name part for a run's label."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "base"


def heatmap(run: dict[str, Any], path: Path) -> Path:
    """Per-tier utilisation over virtual time (rows: tiers, columns: time bins)."""
    r = run["result"]
    util = np.array(r["heatmap"]["utilisation"], dtype=float)
    names = [t["name"] for t in r["tiers"]]
    bin_s = r["heatmap"]["bin_s"]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(names) + 1.6))
    im = ax.imshow(
        util,
        aspect="auto",
        cmap="viridis",
        vmin=0,
        vmax=max(1.0, float(np.nanmax(util)) if util.size else 1.0),
        extent=(0, bin_s * util.shape[1], len(names) - 0.5, -0.5),
        interpolation="nearest",
    )
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("virtual time (s)")
    ax.set_title(f"SIMULATED per-tier link utilisation — {run['label']} (seed {run['seed']})", fontsize=10)
    fig.colorbar(im, ax=ax, label="utilisation of the tier's capacity")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fct_table(
    r: dict[str, Any],
    size: Literal["MiB", "KiB"] = "MiB",
    time: Literal["s", "ms"] = "s",
    stats: Sequence[str] = ("mean", "p50", "p99", "max"),
) -> pd.DataFrame:
    """One row per block-size bucket of a run's result: its bounds in ``size`` units, its fetches,
    the FCT ``stats`` (of ``mean``, ``p50``, ``p99``, ``max``) in ``time`` units, and the slowdowns."""
    per = SIZE_UNITS[size]

    def fct(seconds: float | None) -> float | None:
        return seconds if time == "s" or seconds is None else seconds * 1e3

    return pd.DataFrame(
        [
            {
                f"size from {size}": b["lo_bytes"] / per,
                f"size to {size}": None if b["hi_bytes"] is None else b["hi_bytes"] / per,
                "fetches": b["count"],
                **{f"{s} FCT {time}": fct(b[f"{s}_s"]) for s in stats},
                "mean slowdown": b["mean_slowdown"],
                "p99 slowdown": b["p99_slowdown"],
            }
            for b in r["fct"]
        ]
    )


def tier_table(r: dict[str, Any]) -> pd.DataFrame:
    """One row per tier of a run's result: links, capacity, bytes carried, mean and busiest utilisation."""
    return pd.DataFrame(
        [
            {
                "tier": t["name"],
                "links": t["links"],
                "capacity Gbit/s": t["capacity_bytes_per_s"] * 8 / 1e9,
                "carried GiB": t["carried_bytes"] / 2**30,
                "mean utilisation": t["mean_utilisation"],
                "busiest link utilisation": t["max_link_utilisation"],
            }
            for t in r["tiers"]
        ]
    )


def run_section(
    run: dict[str, Any],
    label: str,
    paragraph: str,
    figures: Path,
    *,
    fct: pd.DataFrame,
    over: str,
    tables: Sequence[Table] = (),
) -> Section:
    """A run's section, titled ``label (seed N)``: ``paragraph``, the report's own ``tables``, the
    FCT table, the tier table (utilisation ``over`` the shuffle or the run) and the heat map, drawn
    into ``figures``."""
    title = f"{label} (seed {run['seed']})"
    png = heatmap({**run, "label": label}, figures / f"heat-{slug(label)}-s{run['seed']}.png")
    return Section(
        title,
        paragraphs=[paragraph],
        tables=[
            *tables,
            Table(fct, caption="Flow completion time per block-size bucket (simulated)."),
            Table(tier_table(run["result"]), caption=f"Per-tier utilisation over {over} (simulated)."),
        ],
        figures=[Figure(png, f"Simulated per-tier utilisation over time, {title}.")],
        level=3,
    )
