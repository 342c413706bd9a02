"""Traffic matrices on the fabric: ``[traffic]`` random (k distinct peers per host, seeded) and from a
CSV/Parquet file, their validation, and runs in the max-min and packet modes."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simspecs import LEAF_SPINE_2X4

from shufflelab.sim import fabric, fabric_spec
from shufflelab.sim.core import simulate_fabric
from shufflelab.sim.fabric_report import report
from shufflelab.sim.spec import SimSpecError

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

SPEC = (
    """
[experiment]
name = "sim-traffic-test"

"""
    + LEAF_SPINE_2X4
    + """
[traffic]
kind = "random"
k = 3
size = { kind = "constant", mib = 0.5 }
"""
)


def _random(**kw: object) -> fabric_spec.RandomTraffic:
    return fabric_spec.RandomTraffic.model_validate(
        {"kind": "random", "size": {"kind": "lognormal", "mean_mib": 1, "sigma": 1}, **kw}
    )


@settings(max_examples=60, deadline=None)
@given(
    hosts=st.integers(2, 60),
    data=st.data(),
    per=st.sampled_from(["receiver", "sender"]),
    seed=st.integers(0, 2**32),
)
def test_random_matrix_properties(hosts: int, data: st.DataObject, per: str, seed: int) -> None:
    senders = data.draw(st.one_of(st.none(), st.integers(2, hosts)), "senders")
    receivers = data.draw(st.one_of(st.none(), st.integers(2, hosts)), "receivers")
    pool = (senders if per == "receiver" else receivers) or hosts
    k = data.draw(st.integers(1, pool - 1), "k")
    t = _random(k=k, per=per, senders=senders, receivers=receivers)
    src, dst, size_b = fabric_spec.random_matrix(hosts, t, seed)
    pickers = (receivers if per == "receiver" else senders) or hosts
    assert len(src) == len(dst) == len(size_b) == pickers * k
    assert (src != dst).all(), "no host is its own peer"
    assert ((src >= 0) & (src < hosts) & (dst >= 0) & (dst < hosts)).all()
    own, other = (dst, src) if per == "receiver" else (src, dst)
    # every picking host has exactly k rows, to k distinct peers
    hosts_picking, counts = np.unique(own, return_counts=True)
    assert len(hosts_picking) == pickers and (counts == k).all()
    for h in hosts_picking:
        assert len(set(other[own == h].tolist())) == k
    assert len(set(src.tolist())) <= (senders or hosts)
    assert len(set(dst.tolist())) <= (receivers or hosts)
    assert (size_b >= 1).all()
    # seeded: the same seed draws the same matrix
    again = fabric_spec.random_matrix(hosts, t, seed)
    for a, b in zip((src, dst, size_b), again, strict=True):
        assert np.array_equal(a, b)


def test_the_matrix_seed_and_the_run_seed() -> None:
    t = _random(k=5)
    a = fabric_spec.random_matrix(50, t, 1)
    b = fabric_spec.random_matrix(50, t, 2)
    assert not np.array_equal(a[0], b[0]), "another run seed, another matrix"
    fixed = _random(k=5, seed=7)
    c = fabric_spec.random_matrix(50, fixed, 1)
    d = fabric_spec.random_matrix(50, fixed, 2)
    assert all(np.array_equal(x, y) for x, y in zip(c, d, strict=True)), "traffic.seed fixes it"


def test_senders_are_drawn_uniformly_over_the_other_hosts() -> None:
    # 8 hosts, each receiver picks 1 of the 7 others: over many seeds every other host comes up
    t = _random(k=1)
    seen = np.zeros((8, 8))
    for seed in range(700):
        src, dst, _ = fabric_spec.random_matrix(8, t, seed)
        seen[dst, src] += 1
    assert (np.diag(seen) == 0).all()
    off = seen[~np.eye(8, dtype=bool)]
    assert off.min() > 60 and off.max() < 150  # expectation 100 each


@settings(max_examples=15, deadline=None)
@given(hosts_per_leaf=st.integers(2, 5), k=st.integers(1, 3), seed=st.integers(0, 1000))
def test_bytes_are_conserved_through_the_core(hosts_per_leaf: int, k: int, seed: int) -> None:
    doc = tomllib.loads(SPEC)
    doc["topology"]["hosts_per_leaf"] = hosts_per_leaf
    doc["traffic"] = {"kind": "random", "k": k, "size": {"kind": "lognormal", "mean_mib": 0.1, "sigma": 1}}
    spec = fabric_spec.parse(doc, "t.toml")
    config = fabric_spec.core_config(spec, seed, Path("."))
    m = config["shuffle"]["matrix"]
    r = simulate_fabric(config)
    assert r["remote_fetches"] == len(m["src"]) and r["local_fetches"] == 0
    assert r["remote_bytes"] == pytest.approx(sum(m["bytes"]), rel=1e-12)
    up = next(t for t in r["tiers"] if t["name"] == "host→leaf")
    assert up["carried_bytes"] == pytest.approx(sum(m["bytes"]), rel=1e-9)
    assert r["shuffle_completion_s"] is not None and len(r["reducer_finish_s"]) == 2 * hosts_per_leaf


def test_csv_and_parquet_matrices_read_the_same(tmp_path: Path) -> None:
    rows = pd.DataFrame({"dst": [0, 0, 3], "src": [1, 2, 0], "bytes": [1e6, 2e6, 5e5], "note": ["a", "b", "c"]})
    (tmp_path / "m.csv").write_text("# a comment\n" + rows.to_csv(index=False))
    rows.to_parquet(tmp_path / "m.parquet")
    a = fabric_spec.read_matrix(tmp_path / "m.csv")
    b = fabric_spec.read_matrix(tmp_path / "m.parquet")
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x, y)
    assert a[0].tolist() == [1, 2, 0] and a[1].tolist() == [0, 0, 3] and a[2].tolist() == [1e6, 2e6, 5e5]
    (tmp_path / "m.txt").write_text(rows.to_csv(index=False))
    assert fabric_spec.read_matrix(tmp_path / "m.txt", "csv")[0].tolist() == [1, 2, 0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("src,dst\n1,2\n", r"m\.csv: the header line must name the columns src, dst, bytes \(missing: bytes"),
        ("src,dst,bytes\n1,2,10\nx,2,10\n", r"m\.csv: row 2: field 'src': 'x' is not a host index"),
        ("src,dst,bytes\n1,-2,10\n", r"row 1: field 'dst': '-2' is not a host index"),
        ("src,dst,bytes\n1,2,1.5\n1,2,lots\n", r"row 2: field 'bytes': 'lots' is not a number of bytes"),
        ("src,dst,bytes\n1,2,0\n", r"row 1: field 'bytes': 0 is not in \(0, 1e15\] bytes"),
        ("src,dst,bytes\n1,2,5\n3,3,5\n", r"row 2: src and dst are the same host \(3\)"),
        ("src,dst,bytes\n1,2\n", r"row 1: 2 fields, the header has 3"),
        ("src,dst,bytes\n", r"no rows"),
    ],
)
def test_bad_csv_matrices_name_the_row_and_field(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "m.csv").write_text(text)
    with pytest.raises(SimSpecError, match=r"traffic\.file: .*" + message):
        fabric_spec.read_matrix(tmp_path / "m.csv")


def test_bad_parquet_and_format_errors(tmp_path: Path) -> None:
    pd.DataFrame({"src": [1], "to": [2], "bytes": [3.0]}).to_parquet(tmp_path / "a.parquet")
    with pytest.raises(SimSpecError, match=r"must have the columns src, dst, bytes \(missing: dst"):
        fabric_spec.read_matrix(tmp_path / "a.parquet")
    pd.DataFrame({"src": [1, 2], "dst": [2, 0], "bytes": [3.0, None]}).to_parquet(tmp_path / "b.parquet")
    with pytest.raises(SimSpecError, match=r"row 2: field 'bytes': 'None' is not a number"):
        fabric_spec.read_matrix(tmp_path / "b.parquet")
    pd.DataFrame({"src": [1.5], "dst": [2], "bytes": [3.0]}).to_parquet(tmp_path / "c.parquet")
    with pytest.raises(SimSpecError, match=r"row 1: field 'src': '1.5' is not a host index"):
        fabric_spec.read_matrix(tmp_path / "c.parquet")
    (tmp_path / "d.parquet").write_text("not parquet")
    with pytest.raises(SimSpecError, match=r"d\.parquet: not a readable Parquet file"):
        fabric_spec.read_matrix(tmp_path / "d.parquet")
    (tmp_path / "e.tsv").write_text("src\tdst\tbytes\n")
    with pytest.raises(SimSpecError, match=r"cannot tell the format from the extension '\.tsv'"):
        fabric_spec.read_matrix(tmp_path / "e.tsv")
    with pytest.raises(SimSpecError, match=r"missing\.csv: cannot read"):
        fabric_spec.read_matrix(tmp_path / "missing.csv")


def test_a_file_matrix_host_outside_the_topology_is_named(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text("src,dst,bytes\n1,2,10\n3,8,10\n")
    doc = tomllib.loads(SPEC)
    doc["traffic"] = {"kind": "file", "file": "m.csv"}
    spec = fabric_spec.parse(doc, "t.toml")
    with pytest.raises(
        SimSpecError, match=r"m\.csv: row 2: field 'dst': host 8 is not a host of the topology \(0 to 7\)"
    ):
        fabric_spec.core_config(spec, 0, tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"shuffle": {"maps": 2, "reducers": 2, "size": {"kind": "constant", "mib": 1}}}, r"exactly one workload"),
        ({"traffic": None}, r"exactly one workload"),
        ({"traffic": {"kind": "random", "k": 0, "size": {"kind": "constant", "mib": 1}}}, r"t\.toml: traffic\.k: "),
        ({"traffic": {"kind": "random", "k": 8, "size": {"kind": "constant", "mib": 1}}}, r"traffic\.k: 8 distinct"),
        (
            {"traffic": {"kind": "random", "k": 3, "senders": 3, "size": {"kind": "constant", "mib": 1}}},
            r"traffic: .*k = 3 distinct peers need at least 4 senders",
        ),
        (
            {"traffic": {"kind": "random", "k": 1, "receivers": 9, "size": {"kind": "constant", "mib": 1}}},
            r"traffic\.receivers: 9 hosts, the topology has 8",
        ),
        ({"traffic": {"kind": "random", "k": 1, "size": {"kind": "uniform"}}}, r"t\.toml: traffic\.size: "),
        ({"traffic": {"kind": "poisson", "k": 1}}, r"t\.toml: traffic: "),
        ({"traffic": {"kind": "file", "file": "m.csv", "format": "xlsx"}}, r"t\.toml: traffic\.format: "),
        ({"traffic": {"kind": "random", "k": 1, "colour": 1, "size": {"kind": "constant", "mib": 1}}}, r"colour"),
    ],
)
def test_traffic_spec_errors_name_the_field(change: dict[str, object], message: str) -> None:
    doc = tomllib.loads(SPEC)
    for key, value in change.items():
        if value is None:
            doc.pop(key)
        else:
            doc[key] = value
    with pytest.raises(SimSpecError, match=message):
        fabric_spec.parse(doc, "t.toml")


def test_a_matrix_point_is_checked_against_the_topology() -> None:
    doc = tomllib.loads(SPEC)
    doc["matrix"] = {"traffic.k": [3, 7, 9]}
    with pytest.raises(SimSpecError, match=r"\[traffic\.k=9\]: traffic\.k: 9 distinct peers need at least 10"):
        fabric_spec.parse(doc, "t.toml")


def test_the_small_example_runs_in_both_modes_and_reports(tmp_path: Path) -> None:
    path = EXPERIMENTS / "sim-fanin-small.toml"
    runs = fabric.run_experiment(path, tmp_path).doc["runs"]
    assert [(r["values"]["mode"], r["seed"]) for r in runs] == [
        ("maxmin", 0),
        ("maxmin", 1),
        ("packet", 0),
        ("packet", 1),
    ]
    for run in runs:
        r = run["result"]
        assert r["remote_fetches"] == 16 * 4 and r["local_fetches"] == 0
        assert r["remote_bytes"] == pytest.approx(64 * 0.25 * 2**20)
        assert r["shuffle_completion_s"] > 0
        assert "each receiver fetches from 4 distinct random senders" in run["workload"]
    assert "packet" not in runs[0]["result"] and runs[2]["result"]["packet"]["mode"] == "packet"
    # the same seed draws the same matrix in both modes; the packet mode re-times it
    assert runs[2]["result"]["remote_bytes"] == runs[0]["result"]["remote_bytes"]
    md = report(tmp_path / "sim-fanin-small.fabric.json", tmp_path / "rep").read_text()
    assert "random traffic matrix: 12 random hosts send, every host receive" in md
    assert "Mode: packet-faithful for 2 of 4 runs" in md


def test_the_file_example_runs_in_both_modes(tmp_path: Path) -> None:
    runs = fabric.run_experiment(EXPERIMENTS / "sim-matrix-file.toml", tmp_path).doc["runs"]
    assert len(runs) == 4
    for run in runs:
        r = run["result"]
        assert r["remote_fetches"] == 12 and r["remote_bytes"] == pytest.approx(6e6 + 24e6)
    maxmin = [r for r in runs if r["values"]["mode"] == "maxmin"]
    packet = [r for r in runs if r["values"]["mode"] == "packet"]
    assert len(maxmin) == len(packet) == 2 and all("packet" in r["result"] for r in packet)


def test_the_1000_host_fan_in_is_a_spec_not_an_approximation() -> None:
    # experiments/sim-fanin-1000.toml: each of 1,000 hosts fetches from 100 random others
    spec = fabric_spec.load(EXPERIMENTS / "sim-fanin-1000.toml")
    points = fabric_spec.expand(spec)
    assert [p.label for p in points] == ["topology.oversubscription=1", "topology.oversubscription=4"]
    src, dst, _ = fabric_spec.traffic_matrix(points[0].spec, 1000, 0, EXPERIMENTS)
    assert len(src) == 100_000 and (src != dst).all()
    per_host = pd.DataFrame({"s": src, "d": dst}).groupby("d")["s"].nunique()
    assert len(per_host) == 1000 and (per_host == 100).all()
