"""docs/hosts.md's table of shipped experiments says what the code does: for every file in
experiments/, the fewest machines it needs (the map the backend accepts: a Spark master sharing with
one worker where it may) and whether the hosts backend runs it, runs part of it (``--select``) or
refuses it, naming each field the backend refuses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shufflelab import spec as specmod
from shufflelab import tune
from shufflelab.hosts import inventory
from shufflelab.hosts.fabric import refusals

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted((ROOT / "experiments").glob("*.toml"))


def _table() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "hosts.md").read_text()
    section = text.split("## Which shipped experiments run on machines", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`([^`]+)`", cells[0]) if len(cells) == 5 else None
        if m:
            rows[m.group(1)] = cells[1:]
    return rows


TABLE = _table()


def fewest(spec: specmod.ExperimentSpec) -> tuple[int, dict[str, str]]:
    """The fewest machines for ``spec`` (and the map): the Spark master on the first worker's machine
    that the inventory check and the backend accept, with it the traffic hosts when they run nothing
    (the switch makes the UDP), a machine per other host, a router host for 'shared' and 'dumbbell'."""
    hosts = list(spec.hosts)
    alone = {h: f"m{i}" for i, h in enumerate(hosts)}
    router = spec.topology.kind in ("shared", "dumbbell")
    machines = {
        m: {"address": f"192.0.2.{i}", "agent": True, "data_interface": "eth1"} for i, m in enumerate(alone.values())
    }
    traffic = [h for h in hosts if set(spec.hosts[h].roles) <= inventory.TRAFFIC_ROLES]
    masters = [h for h in hosts if spec.hosts[h].roles == ["spark-master"]]
    candidates = []
    for master in masters[:1]:
        for worker in (h for h in hosts if spec.hosts[h].roles == ["spark-worker"]):
            candidates += [{**alone, master: alone[worker], **dict.fromkeys(traffic, alone[worker])}]
            candidates += [{**alone, master: alone[worker]}]
    for mapping in candidates:
        try:
            inventory.check_mapping(inventory.parse({"hosts": machines, "map": mapping}), spec)
        except inventory.InventoryError:
            continue
        groups = inventory.machine_groups(mapping)
        if all(not refusals(sc.spec, router=True, sharing=groups) for sc in specmod.expand(spec)):
            return len(set(mapping.values())) + router, mapping
    return len(hosts) + router, alone


def _row(name: str) -> list[str]:
    if name in TABLE:
        return TABLE[name]
    assert name.startswith("sim-"), f"docs/hosts.md has no row for experiments/{name}"
    return TABLE["sim-*.toml"]


@pytest.mark.parametrize("path", EXPERIMENTS, ids=[p.name for p in EXPERIMENTS])
def test_the_table_says_what_the_backend_does(path: Path) -> None:
    hosts, machines, where, verdict = _row(path.name)
    searched = "[tune]" in path.read_text()
    try:
        if searched:  # tune --hosts: the default configuration and every knob's extremes
            base, cfg = tune.load(path)
            spec = tune.extremes_spec(base, cfg, str(path))
        else:
            spec = specmod.load(path)
    except specmod.SpecError:  # a simulator spec: nothing of it runs on machines
        assert verdict.startswith("not over SSH"), (path.name, verdict)
        return
    scenarios = specmod.expand(spec, str(path))
    problems = {sc.label: refusals(sc.spec, router=True) for sc in scenarios}
    stopped = [label for label, p in problems.items() if p]
    assert hosts == str(len(spec.hosts)), (path.name, hosts)
    fields = {p.split(":")[0] for ps in problems.values() for p in ps}
    if not stopped and searched:
        assert verdict.startswith("runs (`tune --hosts "), (path.name, verdict)
    elif not stopped:
        assert verdict.startswith(f"runs ({len(scenarios)} cells"), (path.name, verdict)
    elif len(stopped) < len(scenarios):
        runnable = [label for label in problems if label not in stopped]
        assert verdict.startswith(f"partly: only `--select {runnable[0]}` ({len(runnable)} of {len(scenarios)} cells)")
    else:
        assert verdict.startswith("refused:"), (path.name, verdict)
        assert machines == "–", (path.name, machines)
    if not stopped or len(stopped) < len(scenarios):
        n, mapping = fewest(spec)
        assert machines == str(n), (path.name, machines, mapping)
        (group,) = inventory.machine_groups(mapping) or [[]]
        if group:  # the row says which hosts share a machine (the quickstart's: master + w1)
            said = " + ".join(group)
            assert said in where or (said == "master + w1" and where.startswith("as the quickstart")), (where, said)
    for field in fields:  # each refused field is named, by the first words of the backend's refusal
        named = re.findall(r"[a-z_]+\.[a-z_.]+|faults", field)
        assert named and all(f in verdict for f in named[:1]), (path.name, field, verdict)


def test_every_row_is_a_shipped_experiment() -> None:
    names = {p.name for p in EXPERIMENTS}
    assert set(TABLE) - {"sim-*.toml"} <= names, set(TABLE) - names


@pytest.mark.parametrize("path", EXPERIMENTS, ids=[p.name for p in EXPERIMENTS])
def test_the_table_names_the_test_that_runs_each_over_ssh(path: Path) -> None:
    """A row that runs (all or part of the spec) names the stand-in test that runs it over SSH -- a
    file of tests/hosts that names the spec -- or says why none does ("not run over SSH: ...")."""
    verdict = _row(path.name)[3]
    if not verdict.startswith(("runs", "partly")):
        return
    named = re.findall(r"tests/hosts/test_\w+\.py", verdict)
    assert named or "not run over SSH: " in verdict, (path.name, verdict)
    for test in named:
        assert path.name in (ROOT / test).read_text(), (path.name, test)
