"""The shipped experiments the hosts backend does not run (docs/hosts.md's table: TPC-H/NDP on a
dumbbell, the MapReduce replay on a dumbbell) are refused by ``shufflelab run --hosts`` before
anything connects, naming each spec field and why -- here with an inventory of documentation-range
machines (never contacted: connecting fails the test)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from shufflelab import spec as specmod
from shufflelab.cli import app

ROOT = Path(__file__).resolve().parents[2]
REFUSED = ["ndp-tpch.toml", "ndp-costs.toml", "vcc-mapreduce.toml", "vcc-mapreduce-red.toml"]


def _inventory(tmp_path: Path, spec: specmod.ExperimentSpec) -> Path:
    """A machine of its own for every spec host, and a router host."""
    (tmp_path / "key").write_text("not read")
    (tmp_path / "known_hosts").write_text("")
    names = [*spec.hosts, "router"]
    lines = ['router = "m-router"', "[ssh]", 'known_hosts = "known_hosts"']
    for i, name in enumerate(names, start=1):
        lines += [f"[hosts.m-{name}]", f'address = "192.0.2.{i}"', 'key_file = "key"', 'data_interface = "eth1"']
    lines += ["[map]", *(f'{h} = "m-{h}"' for h in spec.hosts)]
    inv = tmp_path / "inv.toml"
    inv.write_text("\n".join(lines) + "\n")
    return inv


@pytest.mark.parametrize("name", REFUSED)
def test_refused_before_anything_connects_naming_the_fields(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_connection(*args: Any, **kw: Any) -> Any:
        raise AssertionError("connected to a machine")

    monkeypatch.setattr("shufflelab.hosts.backend.connect", no_connection)
    monkeypatch.setattr("asyncssh.connect", no_connection)
    path = ROOT / "experiments" / name
    inv = _inventory(tmp_path, specmod.load(path))
    r = CliRunner().invoke(app, ["run", str(path), "--hosts", str(inv), "--results", str(tmp_path / "results")])
    out = " ".join(r.output.split())  # the console wraps long lines
    assert r.exit_code == 2, r.output
    assert "the hosts backend cannot run this experiment" in out
    # the topology: two queues, one per rack, on the router host's one interface (not done)
    assert "topology.kind = 'dumbbell'" in out and "twice the rate" in out, out
    workload = "tpch" if name.startswith("ndp") else "mapreduce"
    assert f"workload.name = '{workload}'" in out, out
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.duckdb"))
