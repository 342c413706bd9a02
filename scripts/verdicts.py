#!/usr/bin/env python3
"""The starvation verdict of every committed comparison, before (seed 001's strict rule: CPU shown
unchanged within +/-10 %) and after (the attribution of the added job time, ``attribution.py``),
with the split and the reason for each change, as a Markdown page.

    PYTHONPATH=src .venv/bin/python scripts/verdicts.py [--write docs/verdicts.md]

Reads docs/results/*/data/ (the parquet tables every committed report was rendered from).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections import Counter
from pathlib import Path

from shufflelab import diagnose as dg
from shufflelab import sequential
from shufflelab.results import Store

COMMAND = "PYTHONPATH=src .venv/bin/python scripts/verdicts.py --write docs/verdicts.md"


def _why(d: dg.Diagnosis) -> str:
    """Why the verdict is what it is, and what the strict rule stopped at when they differ."""
    a = d.attribution
    if a is None:
        return "no executor run time: the strict verdict stands"
    head = a.reasons[1] if len(a.reasons) > 1 and d.job.significant else a.reasons[0]
    head = head.split("; decides:")[0]
    if a.decide:
        head += f"; decides: {a.decide}"
    if d.strict_verdict == d.verdict:
        return head
    strict = "CPU not shown unchanged within ±10 %" if d.strict_verdict == "inconclusive" else d.strict_verdict
    if d.strict_verdict == "inconclusive" and not d.job.significant:
        strict = "job time not significant"
    return f"{head} (strict rule: {strict})"


def rows() -> tuple[list[str], Counter[str], Counter[str]]:
    out, before, after = [], Counter[str](), Counter[str]()
    folders = sorted(p.parent for p in Path("docs/results").glob("*/data") if (p / "runs.parquet").exists())
    for folder in folders:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "store.duckdb"
            Store(db).import_parquet(folder / "data")
            try:
                found = sequential.read(db)[0]  # at each comparison's deciding look, as the report
            except ValueError:  # MapReduce replays: no tasks, no diagnosis
                continue
        for d in found:
            a = d.attribution
            before[d.strict_verdict] += 1
            after[d.verdict] += 1
            cpu = f"{a.cpu_at_most_s:.1f}" if a is not None and math.isfinite(a.cpu_at_most_s) else "–"
            cells = [
                folder.name,
                d.scenario,
                f"{d.n_baseline}/{d.n_scenario}",
                d.strict_verdict,
                f"**{d.verdict}**" if d.verdict != d.strict_verdict else d.verdict,
                a.added.text() if a else "–",
                a.waiting.text() if a else "–",
                a.busy.text() if a else "–",
                cpu,
                _why(d).replace("|", "\\|"),
            ]
            out.append("| " + " | ".join(cells) + " |")
    return out, before, after


def page() -> str:
    lines, before, after = rows()

    def counts(c: Counter[str]) -> str:
        return ", ".join(f"{c[k]} {k}" for k in ("starved", "mixed", "not starved", "inconclusive") if c[k])

    return "\n".join(
        [
            "# Starvation verdicts of the committed results, before and after the attribution",
            "",
            f"Produced by `{COMMAND}` from `docs/results/*/data/`. *Before*: seed 001's strict rule",
            "(starved only with the CPU shown unchanged within ±10 %; kept in every report as the column",
            "`strict_verdict`). *After*: the added job time split into waiting for data and busy executors",
            "(CPU work and CPU taken by other processes), each with its 95 % Welch interval; *starved* when",
            'waiting is significantly the larger part (docs/design.md, "Statistics and reports").',
            "Seconds are seconds of job time, scenario minus baseline. *CPU at most*: what more CPU work could",
            "explain at most, from the CPU ratio's upper 95 % bound on the critical path. Results run with",
            "`--until-decided` are read at the look that decided each comparison (its n, its nominal level).",
            "",
            "Re-runs: starvation-red was run again on 2026-11-28 with the cross traffic made inside the switch",
            "and repetitions until decided (before: iperf3, 10 fixed repetitions: 5 strict-inconclusive, then 2",
            "inconclusive, 2 mixed, 1 not starved by the attribution; after: 3 starved by both rules, 1 not",
            "starved, 1 mixed, none open); its README compares the two sets. cc-under-udp-switch (seed 000 on",
            "the switch) was run again on 2026-12-02 the same way, with Poisson arrivals (before: iperf3, 5",
            "fixed repetitions: 9 strict-inconclusive, then 4 starved, 2 mixed, 3 inconclusive by the",
            "attribution; after: 6 starved, the three 50 % rows inconclusive at the cap of 6 runs a side).",
            "",
            f"**{sum(before.values())} comparisons. Before: {counts(before)}. After: {counts(after)}.**",
            "",
            "| result | comparison | n | before | after | added job time | waiting | busy | CPU at most (s) | why |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *lines,
            "",
        ]
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="verdicts.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--write", type=Path, metavar="PAGE", help="write the page there (default: stdout)")
    args = parser.parse_args(argv)
    text = page()
    if args.write:
        args.write.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
