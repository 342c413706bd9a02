"""Shipped experiments whose every cell is a cell of another shipped experiment: what runs one of
them on machines (tests/hosts) runs such cells of the other. docs/hosts.md's table says so for
these pairs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shufflelab import spec as specmod

ROOT = Path(__file__).resolve().parents[2]
# (the experiment, the one whose cells include all of its own)
SUBSETS = [("ndp-costs.toml", "ndp-tpch.toml"), ("starvation-control.toml", "starvation.toml")]


def cells(name: str) -> list[str]:
    """Each cell of experiments/``name`` as what it runs: its spec but the experiment's name,
    description, repetitions and order."""
    out = []
    for sc in specmod.expand(specmod.load(ROOT / "experiments" / name)):
        data: dict[str, Any] = sc.spec.model_dump(mode="json", exclude={"matrix", "cases"})
        for key in ("name", "description", "repetitions", "order"):
            data["experiment"].pop(key, None)
        out.append(json.dumps(data, sort_keys=True))
    return out


@pytest.mark.parametrize(("name", "within"), SUBSETS, ids=[n for n, _ in SUBSETS])
def test_every_cell_is_a_cell_of_the_other(name: str, within: str) -> None:
    theirs = set(cells(within))
    ours = cells(name)
    assert ours and all(c in theirs for c in ours), [c for c in ours if c not in theirs][:1]


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data:
        return {k: v for key, x in data.items() for k, v in _flat(x, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): data}


# (the experiment, the one whose cells it repeats but for these fields)
AS = [
    (
        "cc-under-udp.toml",
        "quickstart.toml",
        {"topology.bottleneck.rate_mbps", "topology.bottleneck.queue_bytes", "tcp.congestion_control",
         "cross_traffic.udp_percent"},
    ),
    ("user-app.toml", "quickstart.toml", {"workload."}),
]  # fmt: skip


def _differ(a: dict[str, Any], b: dict[str, Any]) -> set[str]:
    """The fields in which two flattened cells differ, but the experiment's (its name, timeout ...)."""
    return {k for k in set(a) | set(b) if a.get(k, "-") != b.get(k, "-") and not k.startswith("experiment.")}


@pytest.mark.parametrize(("name", "like", "fields"), AS, ids=[n for n, _, _ in AS])
def test_every_cell_is_one_of_the_other_ones_but_for_some_values(name: str, like: str, fields: set[str]) -> None:
    """Each cell of ``name`` differs from a cell of ``like`` only in ``fields`` (a field, or every
    field under one ending in a dot): the same hosts, roles, topology kind, Spark and telemetry, so
    what runs ``like`` on machines runs the same structure."""
    theirs = [_flat(json.loads(c)) for c in cells(like)]

    def within(keys: set[str]) -> bool:
        return all(k in fields or any(f.endswith(".") and k.startswith(f) for f in fields) for k in keys)

    for cell in cells(name):
        ours = _flat(json.loads(cell))
        assert any(within(_differ(ours, t)) for t in theirs), (name, [sorted(_differ(ours, t)) for t in theirs])
