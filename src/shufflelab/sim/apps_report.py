"""The report of an application experiment, labelled SIMULATED: per run and application the job
time next to its time without a network, stage times, FCT per size bucket, per-tier utilisation
with a heat map (:mod:`shufflelab.sim.fabric_sections`, shared with the fabric report), how the
recording was scaled, and the model's limits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from shufflelab import document
from shufflelab.document import Document, Section, Table
from shufflelab.sim import fabric_sections
from shufflelab.sim.apps_sim import run_rows, short_label, summary_rows
from shufflelab.sim.fabric_report import CC_NAMES, MAXMIN_NO_CC_ANSWER, model_questions
from shufflelab.sim.fabric_sections import fct_table, how_to_read, run_section
from shufflelab.sim.tcp_spec import TCP_LIMIT, tcp_section, tcp_table

NO_TCP_LIMIT = (
    "Flow level (the fabric model's max-min fluid flows): no packets, queues, losses or slow start, "
    "and no congestion-control differences — Cubic and DCTCP would get the same rates, so this "
    "model gives them equal times; a run labelled with one or the other is not a comparison of them."
)
LIMITS = [
    "A task runs alone on one core: it fetches its blocks (fetch window as in Spark, one block per "
    "request), then computes for its recorded compute time (no overlap of fetch and compute, no "
    "processor sharing, no disk).",
    "Per-(map, reduce) bytes are not recorded: a reducer's recorded bytes are split over the map "
    "tasks it reads from in proportion to what each wrote.",
    "A block that fits in TCP's initial window (fetch.initial_window_bytes, default 10 × 1448 B) "
    "takes one round trip plus its serialisation on the path's slowest link; its bytes count in the "
    "links' utilisation but take no rate from other flows; larger blocks are max-min flows.",
    "Driver time between stages and after the last one is kept as recorded.",
]


PACKET_MODE = (
    "the max-min run's fetches re-timed by a packet-level simulation of "
    "every saturated link (slow start, losses, retransmission timeouts, the ports' marking), the links' largest "
    "delay standing for each path; each task's fetch phase is its fetches' packet-level one and the "
    "applications' stages are replayed with those phases. A fetch starts as its reducer's request loop lets it "
    "at packet level on the reducer's own link (that link is always simulated), and a sender's own link queues "
    "without loss; a task's first requests keep the max-min run's start times (a task delayed at packet level "
    "does not delay the traffic of later tasks), the links between the hosts are not in the loop, and tiers and "
    "heat maps are the max-min run's."
)


STARTS = (
    "a task's first requests leave on the max-min schedule, its later ones as its reducer's own link delivers "
    "at packet level; the links between the hosts are not in that loop (where they are the bottleneck, their "
    "load is overstated)"
)


def mode_line(doc: dict[str, Any]) -> str:
    """Which mode produced the runs."""
    return fabric_sections.mode_line(doc, "max-min (flow level)", PACKET_MODE)


# the passes nearest closed whose job times the report gives (the kept one first)
NEAREST_CLOSED = 3


def _gap_ms(s: float) -> str:
    """A hold gap (s) in signed ms, one that rounds to nothing as +0.00 (not -0.00)."""
    ms = 1e3 * s
    return f"{0.0 if abs(ms) < 0.005 else ms:+.2f}"


def _loops_sentence(p: dict[str, Any]) -> str:
    """How many passes closed the request loops over the whole path, and which one's result this is
    (absent from runs made before the loops were closed)."""
    if "passes" not in p:
        return ""
    moved = f"its fetch starts moved {1e3 * p['pass_move_s']:.1f} ms on average from the pass before"
    line = f" Request loops closed over the whole path in {p['passes']} passes; pass {p['pass_used']} kept "
    if "pass_hold_gap_s" in p:
        # (runs made before the kept pass was chosen by its hold gap lack it)
        line += (
            "(the one whose request slots were held nearest, in the mean, as long as its links found their "
            f"blocks delayed: held less found {_gap_ms(p['pass_hold_gap_s'])} ms a fetch; {moved})."
        )
    else:
        line += f"({moved})."

    kind, passes = _closure_passes(p)
    jobs = [t["mean_job_time_s"] for t in passes if t["mean_job_time_s"] is not None]
    if kind == "nearest" and jobs:
        names = ", ".join(str(t["pass"]) for t in passes)
        gaps = ", ".join(_gap_ms(t["hold_gap_s"]) for t in passes)
        line += (
            f" The {len(passes)} passes nearest closed ({names}: held less found {gaps} ms a fetch) give a "
            f"mean job time of {min(jobs):.3f}-{max(jobs):.3f} s: a difference smaller than that spread is the "
            "loops' closure, not the network."
        )
    elif kind == "any" and jobs:
        # the loops did not settle: what the choice among the passes that could be kept does
        kept = next((t["mean_job_time_s"] for t in passes if t["pass"] == p["pass_used"]), None)
        names = ", ".join(str(t["pass"]) for t in passes)
        line += (
            f" The {len(passes)} passes that could have been kept ({names}) give a mean job time of "
            f"{min(jobs):.3f}-{max(jobs):.3f} s (the kept one {'–' if kept is None else f'{kept:.3f}'} s): "
            "a difference smaller than that spread is the loops' closure, not the network."
        )
    return line


def _closure_passes(p: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The passes whose job times show how far the request loops closed: ``("nearest", ...)`` the
    :data:`NEAREST_CLOSED` passes nearest closed by their hold gaps (the kept one first), ``("any", ...)``
    every pass that could have been kept in runs made before the hold gap was recorded, ``("", [])``
    with fewer than two passes recorded (a pass whose applications did not all end has no mean: null)."""
    times = p.get("pass_job_times") or []
    if len(times) < 2:
        return "", []
    if all("hold_gap_s" in t for t in times):
        return "nearest", sorted(times, key=lambda t: abs(t["hold_gap_s"]))[:NEAREST_CLOSED]
    return "any", times


def _job_span(run: dict[str, Any]) -> tuple[float, float, float, str] | None:
    """A run's mean job time, the span of the passes nearest closed around it (the mean alone when
    the loops settled or the run is max-min) and which passes those are (:func:`_closure_passes`);
    None when an application did not end."""
    times = [a["job_time_s"] for a in run["result"]["apps"]]
    if not times or any(t is None for t in times):
        return None
    mean = sum(times) / len(times)
    kind, passes = _closure_passes(run["result"].get("packet") or {})
    jobs = [mean, *(t["mean_job_time_s"] for t in passes if t["mean_job_time_s"] is not None)]
    return mean, min(jobs), max(jobs), kind


def cc_comparisons(doc: dict[str, Any]) -> list[str]:
    """Every pair of runs that differ only in their congestion control (same other matrix values,
    same seed): the difference in mean job time and whether it is decided; over several seeds, a line
    counting the seeds' verdicts. The rule: a packet-faithful difference counts when the spans of the
    two runs' passes nearest closed are apart (inside them it is the loops' closure, not the network);
    the max-min mode does not answer the question."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for run in doc["runs"]:
        if "tcp" not in run:
            continue
        rest = tuple((k, v) for k, v in run["values"].items() if k != "tcp.cc")
        groups.setdefault((rest, run["seed"]), []).append(run)
    lines = []
    # per (other values, the two controls): each seed's difference and which side it decided (None:
    # not decided; "": the same job time)
    seeds: dict[tuple[Any, ...], list[tuple[float, str | None]]] = {}
    for (rest, seed), runs in groups.items():
        base = runs[0]
        for other in runs[1:]:
            a, b = base["tcp"]["cc"], other["tcp"]["cc"]
            if a == b:
                continue
            name_a, name_b = CC_NAMES.get(a, a), CC_NAMES.get(b, b)
            where = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in rest)
            head = f"{name_b} against {name_a}" + (f", {where}" if where else "") + f" (seed {seed}): "
            span_a, span_b = _job_span(base), _job_span(other)
            if span_a is None or span_b is None:
                lines.append(head + "not compared (an application did not end).")
                continue
            diff = span_b[0] - span_a[0]
            shown = 0.0 if abs(diff) < 5e-4 else diff  # never -0.000
            head += f"mean job time {shown:+.3f} s ({100 * shown / span_a[0]:+.1f} %); "
            if "packet" not in base["result"] or "packet" not in other["result"]:
                lines.append(head + MAXMIN_NO_CC_ANSWER)
                continue
            faster = name_b if diff < 0 else name_a
            # runs made before the hold gap was recorded give every pass that could have been kept
            which = "that could have been kept" if "any" in (span_a[3], span_b[3]) else "nearest closed"
            spread_a, spread_b = span_a[2] - span_a[1], span_b[2] - span_b[1]
            decided: str | None = faster
            if spread_a == 0 and spread_b == 0:
                decided = "" if shown == 0 else faster
                verdict = "the same job time" if shown == 0 else f"{faster} faster by {abs(diff):.3f} s"
                lines.append(head + verdict + " (both runs' loops settled: no spread of passes to weigh it against).")
            elif span_b[2] < span_a[1] or span_a[2] < span_b[1]:
                lines.append(
                    head + f"{faster} faster, decided: the passes {which} give "
                    f"{span_a[1]:.3f}-{span_a[2]:.3f} s ({name_a}) and {span_b[1]:.3f}-{span_b[2]:.3f} s ({name_b}), "
                    f"apart by {max(span_a[1] - span_b[2], span_b[1] - span_a[2]):.3f} s."
                )
            else:
                decided = None
                lines.append(
                    head + f"not decided by this model: the passes {which} give {span_a[1]:.3f}-{span_a[2]:.3f} s "
                    f"({name_a}) and {span_b[1]:.3f}-{span_b[2]:.3f} s ({name_b}), which overlap (a difference "
                    "counts when they are apart)."
                )
            seeds.setdefault((where, name_a, name_b), []).append((diff, decided))
    for (where, name_a, name_b), outcomes in seeds.items():
        if len(outcomes) < 2:
            continue
        said = [d for _, d in outcomes]
        counts = [
            (said.count(name_b), f"{name_b} faster"),
            (said.count(name_a), f"{name_a} faster"),
            (said.count(None), "not decided"),
            (said.count(""), "the same"),
        ]
        mean = sum(d for d, _ in outcomes) / len(outcomes)
        lines.append(
            f"{name_b} against {name_a}" + (f", {where}" if where else "") + f", over {len(outcomes)} seeds: "
            f"mean difference {0.0 if abs(mean) < 5e-4 else mean:+.3f} s; "
            + ", ".join(f"{text} in {n}" for n, text in counts if n)
            + " (each seed's verdict above)."
        )
    return lines


def _packet_sentence(r: dict[str, Any]) -> str:
    p = r.get("packet")
    if p is None:
        return ""
    return (
        f" Packet level: {p['links_simulated']:,} of {p['links_with_flows']:,} links with fetches simulated, "
        f"{p['flows']:,} fetches, {p['timeouts']:,} retransmission timeouts, {p['drops']:,} drops, "
        f"{p['marks']:,} marks, {p['flows_not_done']:,} fetches not done, {p['events']:,} packet events."
        + _loops_sentence(p)
        + "".join(
            f" {t['tier']}: {t['links_simulated']:,} links, {t['timeouts']:,} timeouts, {t['drops']:,} drops, "
            f"{t['marks']:,} marks."
            for t in p.get("tiers", [])
            if t["links_simulated"]
        )
    )


def _stage_table(run: dict[str, Any], app: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "stage": s["id"],
                "tasks": s["tasks"],
                "ready s": s["ready_s"] - app["arrival_s"],
                "end s": s["end_s"] - app["arrival_s"],
                "duration s": s["end_s"] - s["ready_s"],
                "remote fetches": s["remote_fetches"],
                "remote MiB": s["remote_bytes"] / 2**20,
            }
            for s in app["stages"]
        ]
    )


def _recorded(doc: dict[str, Any]) -> Section:
    first = doc["runs"][0]
    bullets = []
    for a in first["apps"]:
        stages = "; ".join(
            f"stage {s['id']}: {s['tasks']} tasks" + (f", reads {s['reads_from']}" if s["reads_from"] else "")
            for s in a["stages"]
        )
        bullets.append(
            f"{a['source']} run {a['run_id']} (app {a['app_index']}): recorded job time "
            f"{a['recorded_job_time_s']:.2f} s on {a['recorded_slots']} executor cores, {a['recorded_tasks']} tasks, "
            f"{a['recorded_shuffle_bytes'] / 2**20:.1f} MiB of shuffle read; {stages}. Without a network (its "
            f"compute and driver time on the same cores) it takes {a['recorded_no_network_s']:.2f} s."
        )
        bullets.append(f"Scaling: {a['scaling']}.")
        if "compute_times" in a:
            bullets.append(f"Compute times ({a['compute']}): {a['compute_times']}.")
        bullets.extend(f"Note: {n}." for n in a["notes"])
    runs = doc["runs"]
    scalings = {(a["scaling"], a["scaled_tasks"]) for run in runs for a in run["apps"]}
    if len(scalings) > 1:
        bullets.append("The scaling differs between runs (see each run's section).")
    return Section("The recorded application and how it is scaled", bullets=bullets)


def build(doc: dict[str, Any], out: Path) -> Document:
    figures = out / "figures"
    summary = pd.DataFrame(run_rows(doc))
    per_app = pd.DataFrame(summary_rows(doc))[["application", "arrival s", "job time s"]]
    per_app.insert(0, "run", [short_label(run) for run in doc["runs"] for _ in run["result"]["apps"]])
    tcp = tcp_table(doc, short_label)
    limits = [TCP_LIMIT if tcp is not None else NO_TCP_LIMIT, *LIMITS]
    sections = [
        how_to_read(
            "Every number here comes from shufflelab's flow-level simulator (crates/simcore, apps.rs): "
            "recorded Spark applications, scaled, on a simulated fabric. None is measured. "
            "'No-network time' is the same scaled application with an infinitely fast network.",
            mode_line(doc),
            limits,
        ),
        _recorded(doc),
        Section(
            "Runs",
            paragraphs=[
                "'via spines GiB': bytes carried up to the spines (leaf→spine; the same bytes come down). "
                "'wall s': the simulator's own time for the run."
            ],
            tables=[
                Table(summary, caption="One row per matrix point and seed (virtual seconds)."),
                Table(per_app, caption="Every application of every run."),
            ],
        ),
    ]
    if tcp is not None:
        sections.append(tcp_section(tcp))
    for run in doc["runs"]:
        r = run["result"]
        stages = [
            Table(_stage_table(run, a), caption=f"{a['name']}: stages (seconds from its arrival, simulated).")
            for a in r["apps"][:4]
        ]
        scaled = run["apps"][0]
        paragraph = (
            f"{r['hosts']:,} hosts × {run['cores_per_host']} core(s), {len(r['apps'])} application(s), "
            f"{r['tasks']:,} tasks; {r['remote_fetches']:,} remote and {r['local_fetches']:,} local "
            f"fetches ({r['remote_bytes'] / 2**30:.2f} GiB on the network); {r['solves']:,} rate "
            f"recomputations over {r['events']:,} events; {run['wall_s']:.1f} s of wall time. "
            f"Scaling: {scaled['scaling']}." + _packet_sentence(r)
        )
        fct = fct_table(r, size="KiB", time="ms", stats=("mean", "p99"))
        sections.append(run_section(run, short_label(run), paragraph, figures, fct=fct, over="the run", tables=stages))
    compute = {a.get("compute", "recorded") for run in doc["runs"] for a in run["apps"]}
    scaled = (
        "Compute times of the recording: "
        + ", ".join(sorted(compute))
        + (
            " (as recorded: longer than one-core times if the recorded executors shared fewer cores)"
            if "recorded" in compute
            else " (see 'The recorded application')"
        )
        + "."
    )
    headline = [model_questions(doc, STARTS), scaled, *cc_comparisons(doc)] + [
        f"{row['run']} (seed {row['seed']}): "
        + (
            f"mean job time {row['mean job s']:.3f} s over {row['apps done']} applications, "
            f"{row['network adds %']:+.1f} % over the {row['no-network s']:.3f} s without a network (simulated)"
            if row["mean job s"] is not None
            else "no application finished"
        )
        for row in run_rows(doc)
    ]
    return Document(
        title=f"SIMULATED: {doc['experiment']}",
        description=(doc.get("description") or "") + f" Spec: {doc['spec_path']}.",
        headline=headline,
        sections=sections,
    )


def report(results: Path, out: Path, doc: dict[str, Any] | None = None) -> Path:
    """Write report.md / report.html (and figures) for an applications results file."""
    from shufflelab.sim.apps_sim import load

    data = doc if doc is not None else load(results)
    _html, md = document.write(build(data, out), out)
    return md
