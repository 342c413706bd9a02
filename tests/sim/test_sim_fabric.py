"""Fabric specs (errors naming the field, bounds, files) and small runs on a fat tree, a leaf-spine
and a graph from a file, through the Rust core and the CLI."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from shufflelab.sim import fabric_spec
from shufflelab.sim.spec import SimSpecError

BASE: dict[str, Any] = {
    "experiment": {"name": "sim-ft"},
    "topology": {"kind": "fat_tree", "k": 4, "host_gbps": 10},
    "hosts": {"cores": 2},
    "shuffle": {"maps": 16, "reducers": 16, "size": {"kind": "constant", "mib": 1}, "max_reqs_in_flight": 4},
}


def spec(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        node = doc
        *head, last = dotted.split("__")
        for part in head:
            node = node.setdefault(part, {})
        node[last] = value
    return doc


def error(doc: dict[str, Any]) -> str:
    with pytest.raises(SimSpecError) as exc:
        fabric_spec.parse(doc, "t.toml")
    return str(exc.value)


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"topology__k": 5}, "t.toml: topology: "),
        ({"topology__k": 44}, "t.toml: topology.k: "),
        ({"topology__host_gbps": 0}, "t.toml: topology.host_gbps: "),
        ({"topology__kind": "torus"}, "t.toml: topology: "),
        ({"shuffle__maps": 2000, "shuffle__reducers": 2000}, "t.toml: shuffle: "),
        ({"shuffle__size": {"kind": "lognormal", "mean_mib": 1, "sigma": 9}}, "t.toml: shuffle.size.sigma: "),
        ({"shuffle__max_reqs_in_flight": 0}, "t.toml: shuffle.max_reqs_in_flight: "),
        ({"hosts__cores": 0}, "t.toml: hosts.cores: "),
        ({"shuffle__colour": "red"}, "t.toml: shuffle.colour: "),
        ({"cross": [{"kind": "udp", "src": 0, "dst": 1}]}, "t.toml: cross[0]: "),
        ({"cross": [{"kind": "tcp", "src": 0, "dst": 1, "gbps": 1}]}, "t.toml: cross[0]: "),
        ({"failures": [{"a": "leaf0", "b": "spine0", "down_s": 2, "up_s": 1}]}, "t.toml: failures[0]: "),
        ({"output__fct_buckets_mib": [10, 1]}, "t.toml: output: "),
        ({"matrix": {"experiment.seeds": [1, 2]}}, "t.toml: matrix.experiment.seeds: "),
    ],
)
def test_a_bad_spec_names_the_field(changes: dict[str, Any], where: str) -> None:
    assert error(spec(**changes)).startswith(where)


def test_a_matrix_is_expanded_by_the_rules_of_every_spec() -> None:
    """spec.matrix's rules, as for the lab's and seed 003's specs: a path into a value names the value,
    the bound names each factor, a list item is reached by its index."""
    msg = error(spec(matrix={"topology.k.x": [4]}))
    assert msg == "t.toml: matrix.topology.k.x: topology.k is a value (4), not a table: the path cannot descend into it"
    big = {"topology.host_gbps": list(range(1, 101)), "hosts.cores": list(range(1, 201))}
    assert "matrix: 20,000 points (100 topology.host_gbps x 200 hosts.cores) exceed the bound" in error(
        spec(matrix=big)
    )
    cross = [{"kind": "udp", "src": 0, "dst": 1, "gbps": 1}]
    points = fabric_spec.expand(fabric_spec.parse(spec(cross=cross, matrix={"cross.0.gbps": [1, 2]})))
    assert [p.spec.cross[0].gbps for p in points] == [1, 2]


def test_leaf_spine_takes_one_of_uplink_and_oversubscription() -> None:
    topo = {"kind": "leaf_spine", "leaves": 4, "hosts_per_leaf": 8, "spines": 2, "host_gbps": 10}
    assert "exactly one" in error(spec(topology=topo))
    assert "exactly one" in error(spec(topology={**topo, "uplink_gbps": 10, "oversubscription": 2}))
    s = fabric_spec.parse(spec(topology={**topo, "oversubscription": 4}))
    assert s.topology.uplink() == pytest.approx(10.0)  # 8 x 10 / (2 x 4)
    assert fabric_spec.oversubscription(s) == pytest.approx(4.0)
    assert "more than 20,000" in error(spec(topology={**topo, "leaves": 1000, "hosts_per_leaf": 100, "uplink_gbps": 1}))


def test_a_matrix_point_that_does_not_validate_names_its_values() -> None:
    msg = error(spec(matrix={"topology.k": [4, 7]}))
    assert msg.startswith("t.toml [topology.k=7]: topology: ")
    points = fabric_spec.expand(fabric_spec.parse(spec(matrix={"topology.oversubscription": [1, 4]})))
    assert [p.label for p in points] == ["topology.oversubscription=1", "topology.oversubscription=4"]
    assert fabric_spec.oversubscription(points[1].spec) == 4


def test_files_are_read_relative_to_the_spec_and_bounded(tmp_path: Path) -> None:
    s = fabric_spec.parse(spec(shuffle__size={"kind": "empirical", "file": "sizes.csv"}))
    with pytest.raises(SimSpecError, match=r"shuffle.size.file: .*sizes.csv: cannot read"):
        fabric_spec.core_config(s, 0, tmp_path)
    (tmp_path / "sizes.csv").write_text("bytes\n1000\n2000\nlots\n")
    with pytest.raises(SimSpecError, match="line 4: 'lots' is not a size"):
        fabric_spec.core_config(s, 0, tmp_path)
    (tmp_path / "sizes.csv").write_text("bytes\n1000\n2000\n")
    assert fabric_spec.core_config(s, 0, tmp_path)["shuffle"]["sizes"]["bytes"] == [1000.0, 2000.0]
    g = fabric_spec.parse(spec(topology={"kind": "graph", "file": "g.csv"}))
    (tmp_path / "g.csv").write_text("a,b,gbps,delay_us,tier\nh0,s0,10,1,host\nh1,s0,10\n")
    with pytest.raises(SimSpecError, match="topology.file: .*line 3: want a,b,gbps,delay_us,tier"):
        fabric_spec.core_config(g, 0, tmp_path)


def test_cross_traffic_hosts_must_exist() -> None:
    s = fabric_spec.parse(spec(cross=[{"kind": "udp", "src": 0, "dst": 16, "gbps": 1}]))
    with pytest.raises(SimSpecError, match=r"cross\[0\]: .*below 16"):
        fabric_spec.core_config(s, 0, Path("."))


def test_lab_specs_are_not_fabric_specs() -> None:
    assert fabric_spec.is_fabric(BASE)
    assert not fabric_spec.is_fabric({"topology": {"kind": "shared"}, "hosts": {}})


# --- runs through the Rust core -------------------------------------------------------------


@pytest.fixture
def core() -> Any:
    mod = pytest.importorskip("shufflelab_simcore", reason="simulator core not built: run scripts/setup.sh")
    if not hasattr(mod, "run_fabric"):
        pytest.skip("the installed simulator core predates fabric simulation: rebuild it (scripts/setup.sh)")
    return mod


def run(doc: dict[str, Any], recompute: str | None = None, base: Path = Path(".")) -> dict[str, Any]:
    from shufflelab.sim.core import simulate_fabric

    s = fabric_spec.parse(doc)
    return simulate_fabric(fabric_spec.core_config(s, 0, base, recompute=recompute))


def test_a_fat_tree_all_to_all_moves_every_byte_once_per_tier(core: Any) -> None:
    r = run(spec())
    assert r["hosts"] == 16
    assert r["remote_fetches"] == 16 * 15 and r["local_fetches"] == 16
    mib = 2**20
    assert r["remote_bytes"] == 16 * 15 * mib
    tiers = {t["name"]: t for t in r["tiers"]}
    assert tiers["host→edge"]["carried_bytes"] == pytest.approx(r["remote_bytes"], rel=1e-9)
    assert tiers["edge→host"]["carried_bytes"] == pytest.approx(r["remote_bytes"], rel=1e-9)
    # a reducer host takes 15 MiB through one 10 Gbit/s link: the shuffle cannot be faster
    assert r["shuffle_completion_s"] >= 15 * mib / (10e9 / 8)
    assert all(t["max_link_utilisation"] <= 1 + 1e-9 for t in r["tiers"])
    assert sum(b["count"] for b in r["fct"]) == r["remote_fetches"]


def test_incremental_and_from_scratch_recomputation_agree(core: Any) -> None:
    doc = spec(shuffle__size={"kind": "lognormal", "mean_mib": 1, "sigma": 1}, topology__oversubscription=2)
    a, c, b = run(doc, "incremental"), run(doc, "level_cut"), run(doc, "full")
    assert a["shuffle_completion_s"] == pytest.approx(b["shuffle_completion_s"], rel=1e-9)
    assert c["shuffle_completion_s"] == pytest.approx(b["shuffle_completion_s"], rel=1e-9)
    assert a["flows_solved"] <= c["flows_solved"] <= b["flows_solved"]
    assert run(doc, "incremental") == a  # seeded: the same run twice


def test_oversubscription_and_udp_slow_the_shuffle(core: Any) -> None:
    base = run(spec())["shuffle_completion_s"]
    assert run(spec(topology__oversubscription=4))["shuffle_completion_s"] > base
    udp = [{"kind": "udp", "src": s, "dst": (s + 1) % 16, "gbps": 5} for s in range(16)]
    assert run(spec(cross=udp))["shuffle_completion_s"] > base


def test_a_graph_from_a_file_with_a_link_failure(core: Any, tmp_path: Path) -> None:
    lines = ["a,b,gbps,delay_us,tier"]
    lines += [f"h{i},s{i // 2},10,1,host" for i in range(4)]
    lines += ["s0,c0,10,1,core", "s1,c0,10,1,core", "s0,c1,10,1,core", "s1,c1,10,1,core"]
    (tmp_path / "g.csv").write_text("\n".join(lines) + "\n")
    doc = spec(topology={"kind": "graph", "file": "g.csv"}, shuffle__maps=4, shuffle__reducers=4)
    doc["failures"] = [{"a": "s0", "b": "c0", "down_s": 0.0001}]
    r = run(doc, base=tmp_path)
    assert r["hosts"] == 4
    assert r["shuffle_completion_s"] is not None and r["stranded_flows"] == 0
    assert r["rerouted_flows"] > 0
    assert {t["name"] for t in r["tiers"]} == {"host", "core"}


def test_cli_runs_a_fabric_spec_and_writes_a_simulated_report(core: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from shufflelab.sim.cli import app

    path = tmp_path / "ft.toml"
    path.write_text(
        '[experiment]\nname = "sim-ft"\n[topology]\nkind = "fat_tree"\nk = 4\nhost_gbps = 10\n'
        '[shuffle]\nmaps = 16\nreducers = 16\nsize = { kind = "constant", mib = 1 }\n'
        '[matrix]\n"topology.oversubscription" = [1, 2]\n'
    )
    res = CliRunner().invoke(app, ["run", str(path), "--results", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "r" / "sim-ft.fabric.json").read_text())
    assert [r["label"] for r in doc["runs"]] == ["topology.oversubscription=1", "topology.oversubscription=2"]
    md = (tmp_path / "r" / "sim-ft-report" / "report.md").read_text()
    assert md.startswith("# SIMULATED: sim-ft")
    assert "edge→agg" in md
    assert len(list((tmp_path / "r" / "sim-ft-report" / "figures").glob("heat-*.png"))) == 2
    again = CliRunner().invoke(
        app, ["report", str(tmp_path / "r" / "sim-ft.fabric.json"), "--out", str(tmp_path / "again")]
    )
    assert again.exit_code == 0, again.output
    assert (tmp_path / "again" / "report.html").read_text().count("SIMULATED") >= 2
    path.write_text(path.read_text() + '[[failures]]\na = "edge0.0"\nb = "spine9"\ndown_s = 1\n')
    bad = CliRunner().invoke(app, ["run", str(path), "--results", str(tmp_path / "r")])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "failures[0]: no link between" in bad.output
    path.write_text(path.read_text().replace("k = 4", "k = 3"))
    bad = CliRunner().invoke(app, ["run", str(path), "--results", str(tmp_path / "r")])
    assert bad.exit_code == 2 and "topology" in bad.output and "Traceback" not in bad.output


def test_every_committed_fabric_spec_loads() -> None:
    from shufflelab.spec import read_toml

    root = Path(__file__).resolve().parents[2] / "experiments"
    paths = [p for p in sorted(root.glob("sim-*.toml")) if fabric_spec.is_fabric(read_toml(p))]
    assert {p.name for p in paths} >= {"sim-alltoall-1000.toml", "sim-alltoall-k8.toml"}
    for p in paths:
        s = fabric_spec.load(p)
        for point in fabric_spec.expand(s):
            fabric_spec.core_config(point.spec, 0, p.parent)
