"""The top-level mode of fabric specs: the packet-faithful mode reaches the core, is refused without
[tcp] (naming the field), and every report says which mode produced its runs."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from simspecs import LEAF_SPINE_2X4

from shufflelab.sim import fabric, fabric_spec
from shufflelab.sim.fabric_report import report
from shufflelab.sim.spec import SimSpecError

SPEC = (
    """
mode = "maxmin"

[experiment]
name = "sim-incast-mode"

"""
    + LEAF_SPINE_2X4
    + """
[shuffle]
maps = 8
reducers = 1
size = { kind = "constant", mib = 0.25 }

[tcp]
cc = "reno"
ecn = false
queue_packets = 20

[matrix]
mode = ["maxmin", "packet"]
"""
)


def test_both_modes_run_and_the_report_names_them(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(SPEC)
    maxmin, packet = fabric.run_experiment(tmp_path / "s.toml", tmp_path / "res").doc["runs"]
    assert "packet" not in maxmin["result"]
    summary = packet["result"]["packet"]
    # seven senders into one 1 Gbit/s port of 20 packets: the receiver's link is simulated and drops
    assert summary["mode"] == "packet" and summary["links_simulated"] >= 1 and summary["drops"] > 0
    assert packet["result"]["fct"][0]["mean_s"] > maxmin["result"]["fct"][0]["mean_s"]
    md = report(tmp_path / "res" / "sim-incast-mode.fabric.json", tmp_path / "rep").read_text()
    assert "Mode: packet-faithful for 1 of 2 runs (the others max-min)" in md


def test_a_max_min_report_says_so(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(SPEC.replace('mode = ["maxmin", "packet"]', ""))
    fabric.run_experiment(tmp_path / "s.toml", tmp_path / "res")
    md = report(tmp_path / "res" / "sim-incast-mode.fabric.json", tmp_path / "rep").read_text()
    assert "Mode: max-min (flow level, the fast mode) for every run." in md


def test_packet_mode_without_tcp_names_the_field() -> None:
    doc = tomllib.loads(SPEC)
    del doc["tcp"]
    doc["matrix"] = {}
    doc["mode"] = "packet"
    with pytest.raises(SimSpecError, match=r"t.toml: mode: 'packet' needs a \[tcp\] table"):
        fabric_spec.parse(doc, "t.toml")
    doc["mode"] = "fluid"
    with pytest.raises(SimSpecError, match=r"t.toml: mode: "):
        fabric_spec.parse(doc, "t.toml")
