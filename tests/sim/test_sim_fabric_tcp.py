"""[tcp] in fabric specs (the raw all-to-all): parsing, errors naming the field, the matrix over
tcp.cc, a small run, the report, and results unchanged without [tcp] (to rounding)."""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from shufflelab.sim import fabric, fabric_spec
from shufflelab.sim.core import simulate_fabric
from shufflelab.sim.fabric_report import report, seed_tables
from shufflelab.sim.spec import SimSpecError

GOLDEN = Path(__file__).parent / "data" / "fabric_without_tcp.json"

SPEC = """
[experiment]
name = "sim-a2a-tcp"

[topology]
kind = "leaf_spine"
leaves = 2
hosts_per_leaf = 4
spines = 1
host_gbps = 10
uplink_gbps = 10

[shuffle]
maps = 8
reducers = 8
size = { kind = "constant", mib = 4 }
max_reqs_in_flight = 2

[tcp]
cc = "cubic"
ecn = false
queue_packets = 100

[matrix]
"tcp.cc" = ["cubic", "dctcp"]
"""


def _same(a: Any, b: Any, where: str = "result") -> None:
    """Equal structure, counts and names; floats equal to rounding (relative 1e-9)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert b == pytest.approx(a, rel=1e-9, abs=1e-15), where
    else:
        assert a == b, where


def test_without_tcp_the_result_is_unchanged() -> None:
    # written by the core before the fabric had a [tcp] table (same spec, same seed); every count and
    # event is the same, floats to rounding: later solver work (rate order, per-link load sums) sums
    # in another order, which moves the last bits
    golden = json.loads(GOLDEN.read_text())
    spec = fabric_spec.parse(golden["spec"])
    assert spec.tcp is None
    # the golden run's solver counts are those of the level cut, the default when it was last written;
    # local repair (the default now) gives the same rates to rounding with fewer flows re-solved
    config = fabric_spec.core_config(spec, golden["seed"], Path("."), recompute="level_cut")
    assert "tcp" not in config
    _same(golden["result"], simulate_fabric(config))


def test_the_tcp_table_reaches_the_core_with_its_discipline() -> None:
    points = fabric_spec.expand(fabric_spec.parse(tomllib.loads(SPEC)))
    assert [p.label for p in points] == ["tcp.cc=cubic", "tcp.cc=dctcp"]
    tcps = [fabric_spec.core_config(p.spec, 0, Path("."))["tcp"] for p in points]
    assert [(t["cc"], t["discipline"], t["ecn"]) for t in tcps] == [
        ("cubic", "droptail", False),
        ("dctcp", "step", False),
    ]


@pytest.mark.parametrize(
    ("tcp", "matrix", "where"),
    [
        ({"cc": "vegas"}, {}, "t.toml: tcp.cc: "),
        ({"cc": "cubic", "queue_packets": 0}, {}, "t.toml: tcp.queue_packets: "),
        ({"cc": "cubic", "flows": 0}, {}, "t.toml: tcp.flows: "),
        ({"cc": "cubic", "colour": 1}, {}, "t.toml: tcp.colour: "),
        ({"cc": "dctcp", "discipline": "droptail"}, {}, "t.toml: tcp.discipline: "),
        ({"cc": "cubic", "red_min_packets": 60, "red_max_packets": 20}, {}, "t.toml: tcp.red_min_packets: "),
        ({"cc": "cubic"}, {"tcp.cc": ["cubic", "bbr"]}, "t.toml [tcp.cc=bbr]: tcp.cc: "),
        (
            {"cc": "cubic", "discipline": "droptail"},
            {"tcp.cc": ["dctcp"]},
            "t.toml [tcp.cc=dctcp]: tcp.discipline: ",
        ),
        (None, {"tcp.cc": ["cubic"]}, "t.toml: matrix.tcp.cc: "),
    ],
)
def test_a_bad_tcp_value_names_the_field(tcp: dict[str, Any] | None, matrix: dict[str, Any], where: str) -> None:
    doc = tomllib.loads(SPEC)
    doc["matrix"] = matrix
    if tcp is None:
        del doc["tcp"]
    else:
        doc["tcp"] = tcp
    with pytest.raises(SimSpecError) as exc:
        fabric_spec.parse(copy.deepcopy(doc), "t.toml")
    assert str(exc.value).startswith(where), exc.value


def test_a_small_run_cubic_vs_dctcp_and_its_report(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(SPEC)
    doc = fabric.run_experiment(tmp_path / "s.toml", tmp_path / "res").doc
    cubic, dctcp = doc["runs"]
    assert cubic["tcp"]["cc"] == "cubic" and dctcp["tcp"]["discipline"] == "step"
    for run in (cubic, dctcp):
        r = run["result"]
        (link,) = r["tcp_links"]  # one link class: every link 10 Gbit/s
        assert link["bytes_per_s"] == 10e9 / 8 and 0 < link["efficiency"] <= 1
        assert r["shuffle_completion_s"] is not None and r["remote_fetches"] == 56
    # Cubic through a 100-packet droptail queue stands deeper than DCTCP at K = 20
    assert cubic["result"]["tcp_links"][0]["queue_delay_s"] > dctcp["result"]["tcp_links"][0]["queue_delay_s"]
    md = report(tmp_path / "res" / "sim-a2a-tcp.fabric.json", tmp_path / "rep").read_text()
    assert "SIMULATED" in md and "packet-level probe per link class" in md
    assert "no congestion-control differences" not in md


def test_a_report_without_tcp_has_no_probe_table(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(SPEC.split("[tcp]")[0])
    runs = fabric.run_experiment(tmp_path / "s.toml", tmp_path / "res").doc["runs"]
    assert "tcp" not in runs[0] and "tcp_links" not in runs[0]["result"]
    md = report(tmp_path / "res" / "sim-a2a-tcp.fabric.json", tmp_path / "rep").read_text()
    assert "packet-level probe" not in md and "no congestion-control differences" in md


def _run(label: str, values: dict[str, Any], seed: int, completion: float | None) -> dict[str, Any]:
    return {"label": label, "values": values, "seed": seed, "result": {"shuffle_completion_s": completion}}


def test_seed_tables_spread_and_ratio_seed_by_seed() -> None:
    cub, dct = {"tcp.cc": "cubic", "up": 10}, {"tcp.cc": "dctcp", "up": 10}
    other = {"tcp.cc": "dctcp", "up": 100}  # differs from cubic in two values: no pair with it
    doc = {
        "runs": [
            *(_run("c", cub, s, t) for s, t in enumerate([10.0, 12.0, 11.0])),
            *(_run("d", dct, s, t) for s, t in enumerate([11.0, 11.4, 12.1])),
            *(_run("o", other, s, t) for s, t in enumerate([5.0, 5.5, None])),
        ]
    }
    tables = seed_tables(doc)
    assert tables is not None
    spread, pairs = tables
    c = spread[spread["scenario"] == "c"].iloc[0]
    assert c["seeds"] == 3 and c["mean completion s"] == pytest.approx(11.0) and c["sd s"] == pytest.approx(1.0)
    assert spread[spread["scenario"] == "o"].iloc[0]["seeds"] == 2  # the stranded run has no completion
    assert list(pairs["varied"]) == ["tcp.cc", "up"]  # c-d and d-o; c-o differ in two values
    cd = pairs.iloc[0]
    assert cd["from → to"] == "cubic → dctcp" and cd["with"] == "up=10"
    assert cd["min"] == pytest.approx(11.4 / 12.0) and cd["max"] == pytest.approx(1.1)
    assert not cd["same side of 1 in every seed"] and pairs.iloc[1]["same side of 1 in every seed"]
    assert seed_tables({"runs": [_run("c", cub, 0, 1.0), _run("d", dct, 0, 2.0)]}) is None


def test_a_run_over_seeds_reports_the_spread(tmp_path: Path) -> None:
    text = SPEC.replace('name = "sim-a2a-tcp"', 'name = "sim-a2a-tcp"\nseeds = 3')
    text = text.replace(
        'size = { kind = "constant", mib = 4 }', 'size = { kind = "lognormal", mean_mib = 4, sigma = 1 }'
    )
    (tmp_path / "s.toml").write_text(text)
    doc = fabric.run_experiment(tmp_path / "s.toml", tmp_path / "res").doc
    assert sorted({r["seed"] for r in doc["runs"]}) == [0, 1, 2]
    done = {(r["label"], r["seed"]): r["result"]["shuffle_completion_s"] for r in doc["runs"]}
    assert len(set(done.values())) > 2  # the seeds draw different blocks
    md = report(tmp_path / "res" / "sim-a2a-tcp.fabric.json", tmp_path / "rep").read_text()
    assert "## Across seeds" in md and "| tcp.cc=cubic | 3 |" in md and "cubic → dctcp" in md
