"""docs/hosts.md's table of shipped experiments says what the code does: for every file in
experiments/, how many machines it needs and whether the hosts backend runs it, runs part of it
(``--select``) or refuses it, naming each field the backend refuses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shufflelab import spec as specmod
from shufflelab.hosts.fabric import refusals

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted((ROOT / "experiments").glob("*.toml"))


def _table() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "hosts.md").read_text()
    section = text.split("## Which shipped experiments run on machines", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`([^`]+)`", cells[0]) if len(cells) == 4 else None
        if m:
            rows[m.group(1)] = cells[1:]
    return rows


TABLE = _table()


def _row(name: str) -> list[str]:
    if name in TABLE:
        return TABLE[name]
    assert name.startswith("sim-"), f"docs/hosts.md has no row for experiments/{name}"
    return TABLE["sim-*.toml"]


@pytest.mark.parametrize("path", EXPERIMENTS, ids=[p.name for p in EXPERIMENTS])
def test_the_table_says_what_the_backend_does(path: Path) -> None:
    hosts, machines, verdict = _row(path.name)
    try:
        spec = specmod.load(path)
    except specmod.SpecError:  # a simulator or tune spec: nothing of it runs on machines
        assert verdict.startswith("not over SSH"), (path.name, verdict)
        return
    scenarios = specmod.expand(spec, str(path))
    problems = {sc.label: refusals(sc.spec, router=True) for sc in scenarios}
    stopped = [label for label, p in problems.items() if p]
    assert hosts == str(len(spec.hosts)), (path.name, hosts)
    fields = {p.split(":")[0] for ps in problems.values() for p in ps}
    if not stopped:
        assert verdict.startswith(f"runs ({len(scenarios)} cells"), (path.name, verdict)
    elif len(stopped) < len(scenarios):
        runnable = [label for label in problems if label not in stopped]
        assert verdict.startswith(f"partly: only `--select {runnable[0]}` ({len(runnable)} of {len(scenarios)} cells)")
    else:
        assert verdict.startswith("refused:"), (path.name, verdict)
        assert machines == "–", (path.name, machines)
    if not stopped or len(stopped) < len(scenarios):
        shared = any(sc.spec.topology.kind == "shared" for sc in scenarios)
        assert machines == str(len(spec.hosts) + shared), (path.name, machines)
    for field in fields:  # each refused field is named, by the first words of the backend's refusal
        named = re.findall(r"[a-z_]+\.[a-z_.]+|faults", field)
        assert named and all(f in verdict for f in named[:1]), (path.name, field, verdict)


def test_every_row_is_a_shipped_experiment() -> None:
    names = {p.name for p in EXPERIMENTS}
    assert set(TABLE) - {"sim-*.toml"} <= names, set(TABLE) - names
