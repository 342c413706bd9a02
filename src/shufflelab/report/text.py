"""The experiment report's words: the headline, the scale and limits, the self-test fact."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from shufflelab import netplan
from shufflelab.attribution import level_text
from shufflelab.document import signed
from shufflelab.report.data import Data, _p_text, verdict
from shufflelab.shaping import TCP_PAYLOAD_SHARE
from shufflelab.stats import MIN_N, Comparison

if TYPE_CHECKING:
    from shufflelab.spec import ExperimentSpec, Workload


def _comparison_line(scenario: str, baseline: str, c: Comparison) -> str:
    n = f"n = {c.n_baseline}/{c.n_treatment}"
    if math.isnan(c.ratio):
        return f"{scenario} vs {baseline}: no successful run with a job time on a side ({n})"
    head = f"{scenario} vs {baseline}: job time x{c.ratio:.2f} ({signed(c.percent_change)} %)"
    if c.too_few:
        return f"{head}, {n}: too few runs for an interval/verdict (need {MIN_N} per side)"
    level = level_text(c.confidence)  # 95 %, or a sequential look's level
    return f"{head}, {level} CI {c.ci_text()}, Welch p = {_p_text(c)}, {n}: {verdict(c)}"


def vcc_headline(closure: pd.DataFrame | None) -> list[str]:
    """Seed 002's finding: the share of the legacy hosts' gap that VCC closes, per number of pairs."""
    lines = []
    for _, r in (closure if closure is not None else pd.DataFrame()).iterrows():
        if not math.isfinite(r["closure"]):
            continue
        ci = (f"bootstrap 95 % CI {r['closure_ci_low']:.3f}-{r['closure_ci_high']:.3f}"
              if math.isfinite(r["closure_ci_low"]) else "no interval")  # fmt: skip
        kind = {"lower": "a lower", "upper": "an upper"}.get(str(r["closure_bound"]))
        bound = f"; legacy runs timed out, so {kind} bound" if kind else ""
        lines.append(
            f"{int(r['pairs'])} competing pairs: VCC closes {r['closure']:.3f} of the legacy-ECN gap ({ci}{bound})."
        )
    return lines


def headline(
    table: pd.DataFrame,
    slow: pd.DataFrame | None,
    diagnoses: list[Any],
    not_ok: int = 0,
    first: list[str] | None = None,
) -> list[str]:
    """The report's finding in a few lines: ``first`` (an experiment's own finding), then each scenario
    with cross traffic against its baseline (job-time ratio, interval, p, verdict; and the starvation
    diagnosis), else the job-time range of the successful runs and how many runs did not finish."""
    return (first or []) + _headline(table, slow, diagnoses, not_ok)


HEADLINE_PAIRS = 3
"""More comparisons than this are summed up in the headline (each one is in its section)."""


@dataclass
class _Pair:
    where: str
    ratio: float
    ci: str
    p: str
    verdict: str
    n: str
    too_few: bool


def _pairs(slow: pd.DataFrame | None, diagnoses: list[Any]) -> list[_Pair]:
    if diagnoses:
        return [_Pair(f"{x.scenario} vs {x.baseline}", x.job.ratio, x.job.ci_text(), _p_text(x.job), verdict(x.job),
                      f"{x.job.n_baseline}/{x.job.n_treatment}", x.job.too_few) for x in diagnoses]  # fmt: skip
    if slow is None or slow.empty:
        return []
    keys = [c for c in slow.columns if c not in ("udp_percent", "n", "job_ratio", "job_ci_95", "p_welch",
                                                 "verdict", "cpu_ratio", "cpu_ci_95")]  # fmt: skip
    out = []
    for _, r in slow.iterrows():
        where = ", ".join(f"{k}={r[k]}" for k in keys)
        where = f"{where + ', ' if where else ''}UDP at {r['udp_percent']:g} % vs none"
        out.append(_Pair(where, float(r["job_ratio"]), str(r["job_ci_95"]), str(r["p_welch"]), str(r["verdict"]),
                         str(r["n"]), str(r["verdict"]).startswith("too few")))  # fmt: skip
    return out


def _counts(words: list[str]) -> str:
    return ", ".join(f"{n} {w}" for w, n in Counter(words).items())


def _summary(pairs: list[_Pair], diagnoses: list[Any]) -> list[str]:
    """Many comparisons in two sentences: the verdicts counted, the smallest and largest slowdown."""
    measured = sorted((p for p in pairs if math.isfinite(p.ratio)), key=lambda p: p.ratio)
    line = f"Cross traffic vs none in {len(pairs)} comparisons: {_counts([p.verdict for p in pairs])}"
    if measured:
        lo, hi = measured[0], measured[-1]
        detail = f"n = {hi.n}" if hi.too_few else f"95 % CI {hi.ci}, Welch p = {hi.p}, n = {hi.n}"
        line += f"; job time from x{lo.ratio:.2f} ({lo.where}) to x{hi.ratio:.2f} ({hi.where}, {detail})"
    lines = [line + "."]
    if diagnoses:
        lines.append(f"Starvation diagnosis: {_counts([x.verdict for x in diagnoses])} (each pair under "
                     "'Starvation diagnosis').")  # fmt: skip
    return lines


def _headline(table: pd.DataFrame, slow: pd.DataFrame | None, diagnoses: list[Any], not_ok: int) -> list[str]:
    pairs = _pairs(slow, diagnoses)
    if len(pairs) > HEADLINE_PAIRS:
        return _summary(pairs, diagnoses)
    if diagnoses:
        return [f"{_comparison_line(x.scenario, x.baseline, x.job)}; starvation diagnosis: {x.verdict}."
                for x in diagnoses]  # fmt: skip
    if pairs:
        lines = []
        for p in pairs:
            head = f"{p.where}: job time x{p.ratio:.2f}, n = {p.n}"
            if p.too_few:
                lines.append(f"{head}: too few runs for an interval/verdict (need {MIN_N} per side).")
            else:
                lines.append(f"{head}, 95 % CI {p.ci}, Welch p = {p.p}: {p.verdict}.")
        return lines
    measured = table[table["n"] > 0] if not table.empty else table
    if measured.empty:
        return ["No successful run: nothing was measured (see 'Runs that did not finish')."]
    lo = measured.loc[measured["job_mean_s"].idxmin()]
    hi = measured.loc[measured["job_mean_s"].idxmax()]
    unfinished = f"; {not_ok} run(s) did not finish (see 'Runs that did not finish')" if not_ok else ""
    return [
        f"{int(measured['n'].sum())} successful runs over {len(measured)} scenario(s); mean job time from "
        f"{lo['job_mean_s']:.1f} s ({lo['scenario']}, n = {lo['n']}) to {hi['job_mean_s']:.1f} s "
        f"({hi['scenario']}, n = {hi['n']}){unfinished}."
    ]


SEED_SCALE = {
    "sort-aggregate": "Seed 000 used 1 master + 4 workers (1 core each), a 1 Gbit/s link with 10 ms added delay, "
    "400-1000 partitions and 500-600 M rows, and DCTCP as the third congestion control.",
    "small-records": "Seed 001 used 7 VMs (master + 4 executors of 1 core / 2 GB, a traffic VM, a central router "
    "with RED under a 10 Gbit/s HTB class), 2 ms delay, DCTCP + ECN, 100 M records and 10 runs per scenario.",
}
SEED_SCALE["mapreduce"] = (
    "Seed 002 used MRemu (Hadoop MapReduce traffic from job traces, no compute) on 2 switches joined by a "
    "1 Gbit/s link with 8 servers per switch at 1 Gbit/s, iperf TCP pairs on ECN-capable hosts, 10 runs per point."
)
SEED_SCALE["groupby-test"] = SEED_SCALE["small-records"].replace("100 M records", "Spark's GroupByTest")


def _checked_elsewhere(rows: list[dict[str, Any]], own: ExperimentSpec | None) -> bool:
    """Was a run's self-test measured against another link than its scenario's? Runs recorded before
    2026-11-28 on a fabric shared by scenarios of other rates were checked against the link of the
    fabric's first scenario (the fabric shaped the run's own link; the check compared with another)."""
    if own is None:
        return False
    link = netplan.bottleneck(own)
    return any(
        r.get("rate_mbps") != link.rate_mbps or abs(float(r.get("expected_rtt_ms") or 0.0) - 2 * link.delay_ms) > 1e-9
        for r in rows
    )


def selftest_fact(d: Data) -> str | None:
    """One line on the link self-tests recorded with the runs (None if no run had one). A port
    configuration that failed in any run is reported as deviating, whatever other runs measured;
    runs whose check was measured against another scenario's link are counted apart."""
    checks: dict[tuple[str, str], dict[str, Any]] = {}
    n_runs = elsewhere = 0
    reread: list[float] = []  # those runs' goodput over their own rate (the link they were measured on)
    ratios: list[float] = []  # every other check's goodput over its configured rate
    labels = d.runs["label"] if "label" in d.runs else pd.Series([None] * len(d.runs), index=d.runs.index)
    envs = d.runs.get("environment_json", pd.Series(dtype=object))
    for env, label in zip(envs, labels.reindex(envs.index), strict=True):
        if not isinstance(env, str):
            continue
        rows = json.loads(env).get("selftest") or []
        n_runs += bool(rows)
        own = d.scenarios.get(label) if isinstance(label, str) else None
        if rows and own is not None and _checked_elsewhere(rows, own):
            elsewhere += 1
            rate = netplan.bottleneck(own).rate_mbps * TCP_PAYLOAD_SHARE
            reread += [r["goodput_mbps"] / rate for r in rows if r.get("goodput_mbps") is not None]
            continue
        ratios += [r["rate_ratio"] for r in rows if r.get("rate_ratio") is not None]
        for r in rows:
            key = (str(r.get("port")), json.dumps(r.get("rate_mbps")))
            if key not in checks or not r.get("ok") or checks[key].get("ok"):  # a failure is never overwritten
                checks[key] = r
    if not checks and not elsewhere:
        return None
    bad = [r for r in checks.values() if not r.get("ok")]
    span = f" (goodput / configured rate {min(ratios):.2f}-{max(ratios):.2f})" if ratios else ""
    if elsewhere:
        head = (
            f"Link self-test: {elsewhere} of {n_runs} runs were checked against another scenario's link (the "
            "first scenario's on their shared fabric, a defect fixed on 2026-11-28): their recorded verdicts are void"
        )
        if reread:  # the fabric had shaped the run's own link when it was measured
            head += f"; their goodput, measured on their own link, is {min(reread):.2f}-{max(reread):.2f} of its rate"
        if not checks:
            return head + "."
        if not bad:
            return f"{head}; the other {n_runs - elsewhere} runs' checks all passed{span}."
        return f"{head}; in the other {n_runs - elsewhere} runs {_deviated(bad, span)}"
    if not bad:
        return f"Link self-test before the runs: every checked port within tolerance{span}; {n_runs} runs covered."
    return f"Link self-test: {_deviated(bad, span)}"


def _deviated(bad: list[dict[str, Any]], span: str) -> str:
    return (
        f"{len(bad)} port configuration(s) deviated{span} -- "
        + "; ".join(f"{r['port']} at {r['rate_mbps']:g} Mbit/s: {r['problem']}" for r in bad)
        + " (telemetry.selftest = 'warn': the runs went on; read their network results with care)."
    )


def cross_generator_fact(d: Data) -> str | None:
    """Which generator made the UDP cross traffic of the experiment's scenarios (None without any):
    iperf3 sends real packets through the hosts' CPUs, the switch's own source does not."""
    used: dict[str, list[str]] = {}
    for label, spec in d.scenarios.items():
        if spec is not None and spec.cross_traffic.udp_percent > 0:
            used.setdefault(spec.cross_traffic.generator, []).append(label)
    if not used:
        return None
    words = {
        "iperf3": "iperf3 (real packets sent and received by the traffic hosts, on the same cores as the executors)",
        "switch": "the userspace switch's own source (virtual packets in the sink's port queue; no host builds, "
        "sends or receives them)",
    }
    if len(used) == 1:
        (gen,) = used
        extra = ""
        if gen == "switch":
            patterns = {s.cross_traffic.pattern for s in d.scenarios.values() if s is not None}
            extra = f", arrivals {'/'.join(sorted(patterns))}"
        return f"UDP cross traffic generated by {words[gen]}{extra}."
    return (
        "UDP cross traffic generated by "
        + "; ".join(f"{words[g].split(' (')[0]} in {', '.join(labels)}" for g, labels in sorted(used.items()))
        + "."
    )


# how boxload.BoxLoad.verdict's reasons begin, and the kind each names in the report
_BOX_KINDS = (
    ("other work", "other work"),
    ("softirq", "softirq"),
    ("switch", "switch lag"),
    ("link self-test", "link self-test"),
)
# ("run queue ...", which stores written before it was recorded rather than judged may hold, is none)


def _box_kinds(reasons: object) -> list[str]:
    """The judged kinds among a run's ``box_reasons`` (a self-test's problem may hold "; " itself:
    known kinds only)."""
    kinds: list[str] = []
    for part in str(reasons).split("; ") if isinstance(reasons, str) else []:
        kind = next((k for p, k in _BOX_KINDS if part.startswith(p)), None)
        if kind is not None and kind not in kinds:
            kinds.append(kind)
    return kinds


def box_runs(d: Data, labels: Sequence[str] | None = None) -> tuple[int, int, list[str]]:
    """Of the ok runs (of ``labels``, or all), how many ran on a box that was itself the bottleneck
    (``runs.box_bottleneck``, :mod:`shufflelab.emulate.boxload`), how many were assessed, and the
    distinct reasons' kinds. A run labelled only for its run queue (stores from before it was
    recorded rather than judged) is not counted: the lab oversubscribes the cores by design."""
    runs = d.runs
    if "box_bottleneck" not in runs.columns:
        return 0, 0, []
    ok = runs[(runs["status"] == "ok") & runs["box_bottleneck"].notna()]
    if labels is not None:
        ok = ok[ok["label"].isin(list(labels))]
    flagged = ok[ok["box_bottleneck"].astype(bool)]
    per_run = [_box_kinds(why) for why in flagged.get("box_reasons", pd.Series([None] * len(flagged)))]
    kinds = list(dict.fromkeys(k for ks in per_run for k in ks))
    return sum(1 for ks in per_run if ks), len(ok), kinds


def _box_measures(d: Data) -> str:
    """What the report says of the recorded, unjudged measures: the run queue's range and other
    work's (or that it was not measured)."""
    runs = d.runs[d.runs["status"] == "ok"]
    said = []
    runq = runs["box_runq_per_core"].dropna() if "box_runq_per_core" in runs.columns else pd.Series(dtype=float)
    if not runq.empty:
        said.append(
            f"mean run queue {runq.min():.1f}-{runq.max():.1f} runnable threads per core, recorded but not judged "
            "(the lab oversubscribes the cores by design, alike in every scenario)"
        )
    foreign = runs["box_foreign_share"].dropna() if "box_foreign_share" in runs.columns else pd.Series(dtype=float)
    if not foreign.empty:
        said.append(f"other work {100 * foreign.min():.0f}-{100 * foreign.max():.0f} % of the box's CPU time")
    else:
        said.append("other work on the box not measured in these runs")
    text = "; ".join(said)
    return text[0].upper() + text[1:] + "."


def box_fact(d: Data) -> str | None:
    """The report's line on the fidelity of the box over all runs (None if no run was assessed)."""
    bad, n, kinds = box_runs(d)
    if n == 0:
        return None
    measures = _box_measures(d)
    if bad == 0:
        return (
            f"Fidelity of the box: in none of the {n} assessed ok runs was the emulation host itself the "
            f"bottleneck. {measures}"
        )
    return (
        f"Fidelity of the box: in {bad} of {n} ok runs the emulation host was itself the bottleneck "
        f"({', '.join(kinds)} over threshold; column box_bottleneck / box_reasons of runs): what those runs "
        f"measured includes the box, not only the emulated network. {measures}"
    )


def box_verdict_note(d: Data, scenario: str, baseline: str) -> str:
    """What to append to a verdict built on runs of ``scenario`` and ``baseline``: how many of them
    ran on a box that was itself the bottleneck ("" when none, or none assessed)."""
    bad, n, kinds = box_runs(d, [scenario, baseline])
    if bad == 0:
        return ""
    return (
        f" -- built on {bad} of {n} runs where the emulation host was itself the bottleneck "
        f"({', '.join(kinds)}): read this verdict with care"
    )


def user_app_line(w: Workload) -> str:
    """What a user application workload was, for the report: not a built-in, its entry point and inputs."""
    entry = Path(w.script).name if w.script else f"{w.main_class} in {Path(w.jar or '').name}"
    args = " ".join(w.args) or "no arguments"
    conf = ", ".join(f"{k}={v}" for k, v in w.conf.items())
    return (
        f"Workload: the user's own application {entry} ({args}{'; conf ' + conf if conf else ''}), "
        "not one of the lab's built-in workloads: its data sizes are whatever it was given here."
    )


def _union_of_notes(per_run: list[list[str]]) -> list[str]:
    """The switch's notes over runs, each once; notes saying the same thing "on hosts" of a scenario
    become one with the hosts of every scenario (in order of appearance)."""
    items: list[str] = []
    hosts: dict[str, list[str]] = {}
    for notes in per_run:
        for item in notes:
            head, sep, tail = item.partition(" on hosts ")
            if not sep:
                if item not in items:
                    items.append(item)
                continue
            if head not in hosts:
                hosts[head] = []
                items.append(head)
            hosts[head] += [h for h in tail.split(", ") if h not in hosts[head]]
    return [f"{i} on hosts {', '.join(hosts[i])}" if i in hosts else i for i in items]


def machines_text(machines: dict[str, dict[str, Any]]) -> str:
    """Where a run over SSH ran, as its environment records it (``machines``: spec host -> its
    inventory machine, and the router host as ``(router)``): each machine, its CPUs, its spec hosts."""
    by: dict[str, tuple[Any, list[str]]] = {}
    for spec_host, m in machines.items():
        cpus, hosts = by.setdefault(str(m.get("machine", "?")), (m.get("cpus"), []))
        hosts.append("the router host" if spec_host == "(router)" else spec_host)
    parts = [
        f"{name}, {f'{cpus} CPUs' if cpus else 'CPUs not recorded'}: {', '.join(hosts)}"
        for name, (cpus, hosts) in by.items()
    ]
    return f"On {len(by)} machines over SSH ({'; '.join(parts)}):"


def scale_note(d: Data) -> list[str]:
    s = d.spec
    params: dict[str, Any] = dict(s.workload.params)
    varied = {
        json.dumps(json.loads(v)["workload"], sort_keys=True)
        for v in d.runs.get("values_json", [])
        if "workload" in json.loads(v)
    }
    if varied:  # the matrix replaces the whole workload: show what actually ran
        params = {"varied": "; ".join(sorted(varied))}
    mr = s.workload.name == "mapreduce"
    who = (
        f"{len(s.hosts_with('mapreduce'))} MapReduce hosts (trace replay over real TCP, no Hadoop)"
        if mr
        else f"{len(s.hosts_with('spark-worker'))} workers x {s.spark.worker_cores} core(s)"
    )
    machines = d.environment.get("machines") or {}
    where = machines_text(machines) if machines else f"Scaled to one host ({d.environment.get('cpus', '?')} CPUs):"
    lines = [
        f"{where} {who}, "
        f"topology '{s.topology.kind}' with a "
        f"{netplan.bottleneck(s).rate_mbps:g} Mbit/s bottleneck, workload {s.workload.name}"
        + (" " + ", ".join(f"{k}={v}" for k, v in params.items()) if params else "")
        + ".",
    ]
    seed = SEED_SCALE.get(s.workload.name)
    if seed:
        lines.append(seed)
    if s.workload.name == "app":
        lines.append(user_app_line(s.workload))
    caps = d.environment.get("capabilities", {})
    missing_q = [q for q in ("netem", "red") if q not in caps.get("qdiscs", [])]
    missing_cc = [c for c in ("dctcp",) if c not in caps.get("congestion_controls", [])]
    emu = d.environment.get("emulation") or {}
    if emu.get("datapath") == "switch":
        # the union over the runs: scenarios differ (e.g. which hosts run dctcp or vcc)
        notes = [
            (json.loads(env).get("emulation") or {}).get("emulated_by_switch", [])
            for env in d.runs.get("environment_json", pd.Series(dtype=object)).dropna()
        ]
        items = _union_of_notes(notes or [list(emu.get("emulated_by_switch", []))])
        lines.append("Network (over all scenarios): " + "; ".join(items))
    elif (missing_q or missing_cc) and not machines:  # this box's capabilities, not the machines'
        lines.append(
            "The kernel has no "
            + ", ".join([f"{q} qdisc" for q in missing_q] + [f"{c} congestion control" for c in missing_cc])
            + "; this experiment ran on the kernel datapath (HTB + FIFO), so it has no added delay, no RED/ECN "
            "marking and no DCTCP. Specs that ask for them run on the userspace switch "
            "(e.g. experiments/starvation-red.toml)."
        )
    if caps.get("irq_time_accounting") is False and not mr:
        lines.append(
            "Executor CPU time from the event log includes interrupt work (packet forwarding) charged to the "
            "executors by this kernel (no IRQ time accounting); see docs/design.md, 'CPU time and interrupts'."
        )
    lines.append(
        f"Environment{' (the controller)' if machines else ''}: kernel {d.environment.get('kernel', '?')}, "
        f"pyspark {d.environment.get('pyspark', '?')}, shufflelab {d.environment.get('shufflelab_commit') or '?'}. "
        + (
            "All figures are measured on those machines over SSH, none simulated."
            if machines
            else "All figures are measured on the emulated fabric, none simulated."
        )
    )
    return lines
