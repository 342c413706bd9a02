"""The report of a fabric experiment, labelled SIMULATED: completion, FCT per size bucket,
per-tier link utilisation with a heat map per run (tiers × time; these sections are
:mod:`shufflelab.sim.fabric_sections`, shared with the application report), and the model's limits.

Built with :mod:`shufflelab.document`, so the Markdown and the HTML carry the same content.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from shufflelab import document
from shufflelab.document import Document, Section, Table
from shufflelab.sim import fabric_sections
from shufflelab.sim.fabric import summary_rows
from shufflelab.sim.fabric_sections import fct_table, how_to_read, run_section
from shufflelab.sim.tcp_spec import TCP_LIMIT, tcp_section, tcp_table

LIMITS = [
    "Flow level: every elastic flow runs at its max-min fair rate at once (no slow start, no "
    "packets, queues or losses, no congestion-control differences); ECMP hashes each flow once.",
    "A fetch is one block per request; FCT = two one-way path delays + the fluid transfer time.",
    "UDP in priority mode takes its rate off every link it crosses before the TCP flows share the rest.",
    "No CPU, disk or serialisation time: a reducer ends when its last block arrived.",
    "Heat-map utilisation is relative to each tier's nominal capacity (failed links still count).",
]


def seed_tables(doc: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """With several seeds per matrix point: the completion's spread per point, and for every two
    points that differ in one matrix value, their completion ratio seed by seed (the same seed draws
    the same blocks and hashes, so the ratio isolates that value). None with one seed per point."""
    runs = [r for r in doc["runs"] if r["result"]["shuffle_completion_s"] is not None]
    by_point: dict[str, dict[int, float]] = {}
    values: dict[str, dict[str, Any]] = {}
    for run in runs:
        by_point.setdefault(run["label"], {})[run["seed"]] = float(run["result"]["shuffle_completion_s"])
        values[run["label"]] = run.get("values") or {}
    if not by_point or max(len(v) for v in by_point.values()) < 2:
        return None
    spread = []
    for label, seeds in by_point.items():
        x = np.array(list(seeds.values()))
        sd = float(x.std(ddof=1)) if x.size > 1 else float("nan")
        spread.append(
            {
                "scenario": label,
                "seeds": x.size,
                "mean completion s": float(x.mean()),
                "sd s": sd,
                "min s": float(x.min()),
                "max s": float(x.max()),
                "cv %": 100 * sd / float(x.mean()) if x.size > 1 else float("nan"),
            }
        )
    pairs = []
    labels = list(by_point)
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            va, vb = values[a], values[b]
            differ = [k for k in sorted(set(va) | set(vb)) if va.get(k) != vb.get(k)]
            common = sorted(set(by_point[a]) & set(by_point[b]))
            if len(differ) != 1 or len(common) < 2:
                continue
            ratio = np.array([by_point[b][s] / by_point[a][s] for s in common])
            same = {k: v for k, v in va.items() if k != differ[0]}
            pairs.append(
                {
                    "with": ", ".join(f"{k}={v}" for k, v in same.items()) or "–",
                    "varied": differ[0],
                    "from → to": f"{va.get(differ[0])} → {vb.get(differ[0])}",
                    "seeds": len(common),
                    "completion ratio, mean": float(ratio.mean()),
                    "min": float(ratio.min()),
                    "max": float(ratio.max()),
                    "same side of 1 in every seed": bool((ratio > 1).all() or (ratio < 1).all()),
                }
            )
    return pd.DataFrame(spread), pd.DataFrame(pairs)


CC_NAMES = {"reno": "Reno", "cubic": "Cubic", "dctcp": "DCTCP"}
# why a max-min run's congestion-control difference is no answer (both reports' verdict lines)
MAXMIN_NO_CC_ANSWER = (
    "the max-min mode does not answer it (the [tcp] table only scales capacities and adds standing queues: "
    'no incast, timeouts or queue build-up; mode = "packet" does).'
)


def cc_verdicts(doc: dict[str, Any]) -> list[str]:
    """Every two matrix points that differ only in their congestion control: the shuffle completion's
    ratio (the second over the first) and whether it is decided. Packet-faithful points over two or
    more seeds: a paired 95 % t-interval of the log ratio seed by seed (same seed, same draws), decided
    when the interval leaves out 1; one seed: not weighed; max-min points: the mode does not answer it."""
    runs = [r for r in doc["runs"] if "tcp" in r and r["result"]["shuffle_completion_s"] is not None]
    points: dict[tuple[Any, ...], dict[str, dict[int, dict[str, Any]]]] = {}
    for run in runs:
        rest = tuple((k, v) for k, v in (run.get("values") or {}).items() if k != "tcp.cc")
        points.setdefault(rest, {}).setdefault(run["tcp"]["cc"], {})[run["seed"]] = run
    lines = []
    for rest, by_cc in points.items():
        ccs = list(by_cc)
        for b in ccs[1:]:
            a = ccs[0]
            name_a, name_b = CC_NAMES.get(a, a), CC_NAMES.get(b, b)
            where = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in rest)
            seeds = sorted(set(by_cc[a]) & set(by_cc[b]))
            if not seeds:
                continue
            ratio = np.array(
                [
                    by_cc[b][s]["result"]["shuffle_completion_s"] / by_cc[a][s]["result"]["shuffle_completion_s"]
                    for s in seeds
                ]
            )
            head = (
                f"{name_b} against {name_a}"
                + (f", {where}" if where else "")
                + ": shuffle completion ratio "
                + (
                    f"{ratio[0]:.3f} (seed {seeds[0]}); "
                    if len(seeds) == 1
                    else f"{np.exp(np.log(ratio).mean()):.3f} (geometric mean; {ratio.min():.3f}-{ratio.max():.3f}) "
                    f"over {len(seeds)} seeds; "
                )
            )
            packet = all("packet" in by_cc[c][s]["result"] for c in (a, b) for s in seeds)
            if not packet:
                lines.append(head + MAXMIN_NO_CC_ANSWER)
            elif len(seeds) == 1:
                lines.append(head + "one seed: not weighed against the seeds' own spread ([experiment] seeds).")
            else:
                logs = np.log(ratio)
                half = float(sps.t.ppf(0.975, len(logs) - 1) * logs.std(ddof=1) / np.sqrt(len(logs)))
                lo, hi = np.exp(logs.mean() - half), np.exp(logs.mean() + half)
                interval = f"95 % interval {lo:.3f}-{hi:.3f} (a paired t-interval of the log ratio, seed by seed)"
                if hi < 1 or lo > 1:
                    faster = name_b if hi < 1 else name_a
                    lines.append(head + f"{faster} faster, decided: {interval} leaves out 1.")
                else:
                    lines.append(head + f"not decided: {interval} holds 1.")
    return lines


SEEDS_NOTE = (
    "Seeds change the block sizes drawn, each reducer's fetch order and the ECMP hashes. The ratio of two "
    "points is taken seed by seed (same seed, same draws), so its spread is what that one matrix value "
    "does; a difference whose direction changes between seeds is within the simulator's own noise."
)


PACKET_MODE = (
    "the max-min schedule's fetches re-timed by a packet-level simulation "
    "of every saturated link (slow start, losses, retransmission timeouts, the ports' marking), the links' "
    "largest delay standing for each path; tiers and heat maps are the max-min schedule's."
)


def mode_line(doc: dict[str, Any]) -> str:
    """Which mode produced the runs."""
    return fabric_sections.mode_line(doc, "max-min (flow level, the fast mode)", PACKET_MODE)


def model_questions(doc: dict[str, Any], starts: str = "the fetches start on the max-min schedule") -> str:
    """The headline's statement of what the runs' model can and cannot answer (by the mode that
    produced them: a result with ``packet`` came from the packet-faithful mode); ``starts``: when
    the packet-faithful mode's fetches start."""
    runs = doc["runs"]
    packet = sum(1 for run in runs if "packet" in run["result"])
    tcp = any("tcp" in run for run in runs)
    maxmin = (
        "Flow-level max-min model: it answers how capacity, oversubscription, placement and the traffic's shape "
        "(who sends how much to whom) bound the completion time, every flow at its fair share at once. It cannot "
        "answer questions about incast, retransmission timeouts (RTOs), slow start, losses or queueing delay"
        + (
            " (the [tcp] table only scales capacities and adds standing queues per link class)"
            if tcp
            else ", nor compare congestion controls (Cubic and DCTCP get equal rates)"
        )
        + '; mode = "packet" re-times the fetches for those.'
    )
    if packet == 0:
        return maxmin
    queued = sum(1 for run in runs if "packet" in run["result"] and (run.get("tcp") or {}).get("queued_acks"))
    path = sum(1 for run in runs if "packet" in run["result"] and (run.get("tcp") or {}).get("path_acks"))
    free = (
        "ACKs waiting behind the other direction's data (their ACKs cross no queue: in ns-3's two-way "
        "all-to-alls that costs DCTCP 2.5-4.3 % of the shuffle against Cubic, which these runs cannot show; "
        "tcp.queued_acks = true simulates it)"
    )
    if path == packet:
        acks = (
            ", and their ACKs wait at the links of their own way back (tcp.path_acks: behind what those links' "
            "simulations sent, in the same pass or the one before; never dropped; a sending host's own link holds "
            "none up; retransmission timeouts hold their request slots that whole delay in the next pass, damped)"
        )
    elif path:
        behind = f"{queued} behind the other direction's data (tcp.queued_acks), in " if queued else ""
        acks = (
            f"; in {path} of {packet} packet-faithful runs their ACKs wait at the links of their own way back "
            f"(tcp.path_acks), in {behind}{packet - path - queued} they cross no queue"
        )
    elif queued == packet:
        acks = (
            ", and their ACKs wait behind the other direction's data (tcp.queued_acks: each link simulated with "
            "its cable's other direction; in the applications' mode a sending host's own link keeps its ACKs free)"
        )
    elif queued == 0:
        acks = ", nor " + free
    else:
        acks = (
            f"; in {queued} of {packet} packet-faithful runs their ACKs wait behind the other direction's data "
            "(tcp.queued_acks), the others do not model " + free
        )
    faithful = (
        "Packet-faithful runs: slow start, losses, RTOs, incast and marking are simulated on every saturated link, "
        "so they answer whether a congestion control helps where flows meet; they do not model queues in series "
        "interacting, TCP cross traffic or failures" + acks + "; " + starts + "."
    )
    return faithful if packet == len(runs) else f"{faithful} The max-min runs: {maxmin}"


def build(doc: dict[str, Any], out: Path) -> Document:
    figures = out / "figures"
    summary = pd.DataFrame(summary_rows(doc))
    tcp = tcp_table(doc, lambda run: str(run["label"]))
    # with [tcp] the first limit (no congestion control at all) is the correction's
    limits = [TCP_LIMIT, *LIMITS[1:]] if tcp is not None else LIMITS
    sections = [
        how_to_read(
            "Every number in this report comes from shufflelab's flow-level simulator "
            "(crates/simcore, max-min fair fluid flows on the topology); none is measured on a network.",
            mode_line(doc),
            limits,
        ),
        Section("Runs", tables=[Table(summary, caption="One row per matrix point and seed (virtual seconds).")]),
    ]
    spread = seed_tables(doc)
    if spread is not None:
        sections.append(
            Section(
                "Across seeds",
                paragraphs=[SEEDS_NOTE],
                tables=[
                    Table(spread[0], caption="Shuffle completion per matrix point over its seeds (simulated)."),
                    *(
                        [Table(spread[1], caption="Points differing in one matrix value, ratio seed by seed.", keys=3)]
                        if not spread[1].empty
                        else []
                    ),
                ],
            )
        )
    if tcp is not None:
        sections.append(tcp_section(tcp))
    for run in doc["runs"]:
        r = run["result"]
        workload = run.get("workload")
        workload = f"; {workload};" if workload else f", {run['cores_per_host']} reduce task(s) per host at a time;"
        paragraph = (
            f"{r['hosts']} hosts, {r['links']} directed links{workload} "
            f"{r['remote_fetches']:,} remote and {r['local_fetches']:,} local fetches; "
            f"{r['solves']:,} rate recomputations ({run['recompute']}) over {r['events']:,} events. "
            "Slowdown: FCT over the same fetch alone on its path."
        )
        sections.append(run_section(run, run["label"], paragraph, figures, fct=fct_table(r), over="the shuffle"))
    headline = [model_questions(doc), *cc_verdicts(doc)] + [
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
