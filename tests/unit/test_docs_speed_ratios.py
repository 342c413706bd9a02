"""The documents never draw a speed ratio from SimGrid's cited 555 CPU-s (issue 31, item 9).

That figure is SimGrid on its own scenario (every one of 1,000 hosts fetches from 100 random hosts,
1,000 receivers with 5 fetches in flight, no byte cap), which shufflelab's simulator cannot express
yet. Dividing it by shufflelab's time on `experiments/sim-alltoall-1000.toml` (316 reducers, 48 MiB
cap) divides one scenario's CPU time by another's. Ratios measured side by side on one scenario
(`benchmarks/sim_vs_simgrid.py`) are what the documents quote.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# "173×", "~106x", "22–38×"; not "8 × 20 MB" or "25 x 40" (a count times a count)
RATIO = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?\s?[×x](?!\s*\d)(?!\w)")
CITED = re.compile(r"(?<![\d,.])555(?:\s*CPU|\s*/)")


def units(text: str) -> list[str]:
    """Paragraphs, list items and table rows: what one statement sits in."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        current: list[str] = []
        for line in block.splitlines():
            if re.match(r"\s*(?:[-*] |\d+\. |\|)", line) and current:
                out.append("\n".join(current))
                current = []
            current.append(line)
        if current:
            out.append("\n".join(current))
    return out


def ratios_from_cited(text: str) -> list[str]:
    return [u for u in units(text) if CITED.search(u) and RATIO.search(u)]


def documents() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "docs").glob("results/*/README.md")),
    ]


def test_the_finder_sees_a_ratio_drawn_from_the_cited_figure() -> None:
    bad = "- Against the issue's cited 555 CPU-s it is **173×** (555 / 3.21).\n- Side by side: 22–38×."
    assert ratios_from_cited(bad) == ["- Against the issue's cited 555 CPU-s it is **173×** (555 / 3.21)."]
    assert ratios_from_cited("SimGrid's 555 CPU-s is another scenario.\n\n8 × 20 MB, 25 x 40 hosts") == []


def test_no_document_divides_the_cited_simgrid_figure() -> None:
    found = [f"{p.relative_to(ROOT)}: {u.strip()[:160]}" for p in documents() for u in ratios_from_cited(p.read_text())]
    assert not found, "a speed ratio next to SimGrid's cited 555 CPU-s (another scenario):\n" + "\n".join(found)
