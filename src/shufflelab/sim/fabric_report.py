"""The report of a fabric experiment, labelled SIMULATED: completion, FCT per size bucket,
per-tier link utilisation with a heat map per run (tiers × time), and the model's limits.

Built with :mod:`shufflelab.document`, so the Markdown and the HTML carry the same content.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from shufflelab import document  # noqa: E402
from shufflelab.document import Document, Figure, Section, Table  # noqa: E402
from shufflelab.sim.fabric import summary_rows  # noqa: E402
from shufflelab.sim.tcp_spec import TCP_LIMIT, tcp_section, tcp_table  # noqa: E402

LIMITS = [
    "Flow level: every elastic flow runs at its max-min fair rate at once (no slow start, no "
    "packets, queues or losses, no congestion-control differences); ECMP hashes each flow once.",
    "A fetch is one block per request; FCT = two one-way path delays + the fluid transfer time.",
    "UDP in priority mode takes its rate off every link it crosses before the TCP flows share the rest.",
    "No CPU, disk or serialisation time: a reducer ends when its last block arrived.",
    "Heat-map utilisation is relative to each tier's nominal capacity (failed links still count).",
]


def _slug(text: str) -> str:
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


def build(doc: dict[str, Any], out: Path) -> Document:
    figures = out / "figures"
    summary = pd.DataFrame(summary_rows(doc))
    tcp = tcp_table(doc, lambda run: str(run["label"]))
    # with [tcp] the first limit (no congestion control at all) is the correction's
    limits = [TCP_LIMIT, *LIMITS[1:]] if tcp is not None else LIMITS
    sections = [
        Section(
            "SIMULATED — how to read this",
            paragraphs=[
                "Every number in this report comes from shufflelab's flow-level simulator "
                "(crates/simcore, max-min fair fluid flows on the topology); none is measured on a network.",
            ],
            bullets=limits,
            note=True,
        ),
        Section("Runs", tables=[Table(summary, caption="One row per matrix point and seed (virtual seconds).")]),
    ]
    if tcp is not None:
        sections.append(tcp_section(tcp))
    for run in doc["runs"]:
        r = run["result"]
        title = f"{run['label']} (seed {run['seed']})"
        fct = pd.DataFrame(
            [
                {
                    "size from MiB": b["lo_bytes"] / 2**20,
                    "size to MiB": None if b["hi_bytes"] is None else b["hi_bytes"] / 2**20,
                    "fetches": b["count"],
                    "mean FCT s": b["mean_s"],
                    "p50 FCT s": b["p50_s"],
                    "p99 FCT s": b["p99_s"],
                    "max FCT s": b["max_s"],
                    "mean slowdown": b["mean_slowdown"],
                    "p99 slowdown": b["p99_slowdown"],
                }
                for b in r["fct"]
            ]
        )
        tiers = pd.DataFrame(
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
        png = heatmap(run, figures / f"heat-{_slug(run['label'])}-s{run['seed']}.png")
        sections.append(
            Section(
                title,
                paragraphs=[
                    f"{r['hosts']} hosts, {r['links']} directed links, {run['cores_per_host']} reduce task(s) per "
                    f"host at a time; {r['remote_fetches']:,} remote and {r['local_fetches']:,} local fetches; "
                    f"{r['solves']:,} rate recomputations ({run['recompute']}) over {r['events']:,} events. "
                    "Slowdown: FCT over the same fetch alone on its path."
                ],
                tables=[
                    Table(fct, caption="Flow completion time per block-size bucket (simulated)."),
                    Table(tiers, caption="Per-tier utilisation over the shuffle (simulated)."),
                ],
                figures=[Figure(png, f"Simulated per-tier utilisation over time, {title}.")],
                level=3,
            )
        )
    headline = [
        f"{row['scenario']} (seed {row['seed']}): shuffle completes in "
        + (f"{row['shuffle completion s']:.3f} s" if row["shuffle completion s"] is not None else "— (stranded)")
        + " (simulated)"
        for row in summary_rows(doc)
    ]
    return Document(
        title=f"SIMULATED: {doc['experiment']}",
        description=(doc.get("description") or "") + f" Spec: {doc['spec_path']}.",
        headline=headline,
        sections=sections,
    )


def report(results: Path, out: Path, doc: dict[str, Any] | None = None) -> Path:
    """Write report.md / report.html (and figures) for a fabric results file; returns the Markdown."""
    from shufflelab.sim.fabric import load

    data = doc if doc is not None else load(results)
    _html, md = document.write(build(data, out), out)
    return md
