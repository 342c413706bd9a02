"""The top-level mode of application specs: the packet-faithful mode reaches the core, is refused
without [tcp] (naming the field), a matrix may vary it, and every report says which mode produced
its runs."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from tests.sim.test_sim_apps import data_folder
from tests.sim.test_sim_apps_tcp import FAST

from shufflelab.sim import app_spec, apps_sim
from shufflelab.sim.apps_report import _loops_sentence, report
from shufflelab.sim.spec import SimSpecError

# the recorded application at 1 Gbit/s, blocks of tens of MB, Cubic through 100-packet drop-tail ports
SPEC = FAST.replace("[matrix]", '[tcp]\ncc = "cubic"\nqueue_packets = 100\n[matrix]\nmode = ["maxmin", "packet"]')


def test_both_modes_run_and_the_report_names_them(tmp_path: Path) -> None:
    data_folder(tmp_path / "data")
    (tmp_path / "s.toml").write_text(SPEC)
    out = apps_sim.run_experiment(tmp_path / "s.toml", tmp_path / "res")
    maxmin, packet = out.doc["runs"]
    assert "packet" not in maxmin["result"]
    summary = packet["result"]["packet"]
    assert summary["mode"] == "packet" and summary["flows"] == packet["result"]["remote_fetches"] > 0
    # same applications, same fetches; the packet level adds headers and slow start at least
    assert packet["result"]["remote_bytes"] == maxmin["result"]["remote_bytes"]
    t_max, t_pkt = (r["result"]["apps"][0]["job_time_s"] for r in (maxmin, packet))
    assert t_pkt >= t_max * (1 - 1e-9)
    rows = apps_sim.run_rows(out.doc)
    assert [r["mode"] for r in rows] == ["maxmin", "packet"]
    md = report(out.path, tmp_path / "rep").read_text()
    assert "Mode: packet-faithful for 1 of 2 runs (the others max-min)" in md
    assert "Packet level: " in md and "retransmission timeouts" in md
    # the request loops' passes, and which one's result the run is
    assert 1 <= summary["pass_used"] <= summary["passes"] <= 16, summary
    assert (
        f"Request loops closed over the whole path in {summary['passes']} passes; pass {summary['pass_used']} kept"
        in md
    )
    # per tier of links: the reducers' own links are always simulated (their request loops)
    tiers = {t["tier"]: t for t in summary["tiers"]}
    assert tiers["leaf→host"]["links_simulated"] >= 1
    assert "leaf→host: " in md


def test_a_max_min_report_says_so_and_has_no_mode_column(tmp_path: Path) -> None:
    data_folder(tmp_path / "data")
    (tmp_path / "s.toml").write_text(SPEC.replace('mode = ["maxmin", "packet"]', ""))
    out = apps_sim.run_experiment(tmp_path / "s.toml", tmp_path / "res")
    assert "mode" not in apps_sim.run_rows(out.doc)[0]
    md = report(out.path, tmp_path / "rep").read_text()
    assert "Mode: max-min (flow level) for every run." in md


def test_packet_mode_reaches_the_core_and_needs_tcp(tmp_path: Path) -> None:
    data_folder(tmp_path / "data")
    doc = tomllib.loads(SPEC)
    doc["matrix"] = {}
    doc["mode"] = "packet"
    spec = app_spec.parse(doc, "t.toml")
    assert app_spec.core_config(spec, 0, tmp_path)["mode"] == "packet"
    doc["mode"] = "maxmin"
    assert "mode" not in app_spec.core_config(app_spec.parse(doc, "t.toml"), 0, tmp_path)
    del doc["tcp"]
    doc["mode"] = "packet"
    with pytest.raises(SimSpecError, match=r"t.toml: mode: 'packet' needs a \[tcp\] table"):
        app_spec.parse(doc, "t.toml")
    doc["mode"] = "fluid"
    with pytest.raises(SimSpecError, match=r"t.toml: mode: "):
        app_spec.parse(doc, "t.toml")


def test_the_report_gives_the_job_times_of_the_passes_that_could_have_been_kept() -> None:
    p = {"passes": 11, "pass_used": 8, "pass_move_s": 0.0047}
    times = [{"pass": 8, "mean_job_time_s": 0.2173}, {"pass": 9, "mean_job_time_s": 0.2153}]
    line = _loops_sentence(p | {"pass_job_times": [*times, {"pass": 11, "mean_job_time_s": None}]})
    assert "pass 8 kept (its fetch starts moved 4.7 ms" in line
    gap = _loops_sentence(p | {"pass_hold_gap_s": -0.0003})
    assert "pass 8 kept (the one whose request slots were held nearest" in gap
    assert "held less found -0.30 ms a fetch; its fetch starts moved 4.7 ms" in gap
    # a gap that rounds to nothing reads +0.00, never -0.00
    assert "held less found +0.00 ms" in _loops_sentence(p | {"pass_hold_gap_s": -1e-9})
    assert "The 3 passes that could have been kept (8, 9, 11) give a mean job time of 0.215-0.217 s" in line
    assert "(the kept one 0.217 s)" in line
    # with their hold gaps: the three nearest closed, the kept one first
    gaps = [{"pass": 8, "hold_gap_s": 0.0002, "mean_job_time_s": 0.2173}]
    gaps += [{"pass": 9, "hold_gap_s": -0.0031, "mean_job_time_s": 0.2153}]
    gaps += [{"pass": 10, "hold_gap_s": 0.0009, "mean_job_time_s": 0.2101}]
    gaps += [{"pass": 2, "hold_gap_s": 0.087, "mean_job_time_s": 0.5}]
    line = _loops_sentence(p | {"pass_hold_gap_s": 0.0002, "pass_job_times": gaps})
    assert "The 3 passes nearest closed (8, 10, 9: held less found +0.20, +0.90, -3.10 ms a fetch)" in line
    assert "give a mean job time of 0.210-0.217 s" in line
    # one pass, or none recorded (runs before them): nothing to compare
    assert "could have been kept" not in _loops_sentence(p | {"pass_job_times": times[:1]})
    assert "could have been kept" not in _loops_sentence(p)


def test_path_acks_reach_the_core_and_the_report_says_where_acks_wait(tmp_path: Path) -> None:
    # the packet-faithful run above, its ACKs crossing no queue and at the links of their own way back
    data_folder(tmp_path / "data")
    spec = SPEC.replace('mode = ["maxmin", "packet"]', 'mode = ["packet"]\n"tcp.path_acks" = [false, true]')
    (tmp_path / "s.toml").write_text(spec)
    out = apps_sim.run_experiment(tmp_path / "s.toml", tmp_path / "res")
    free, path = out.doc["runs"]
    assert not free["tcp"]["path_acks"] and path["tcp"]["path_acks"] is True
    # the core waited them: the fetches' times moved
    assert path["result"]["fct"][0]["mean_s"] != free["result"]["fct"][0]["mean_s"]
    md = " ".join(report(out.path, tmp_path / "rep").read_text().split())
    assert "ACKs wait at the links of their own way back in 1 of 2 runs" in md
    assert "retransmission timeouts hold their request slots that whole delay in the next pass, damped" in md
    assert "in 1 of 2 packet-faithful runs their ACKs wait at the links of their own way back (tcp.path_acks)" in md


def test_path_acks_are_the_packet_mode_s_default_unless_the_spec_says_otherwise(tmp_path: Path) -> None:
    data_folder(tmp_path / "data")
    doc = tomllib.loads(SPEC)
    doc["matrix"] = {}

    def core_path_acks(mode: str, **tcp: bool) -> bool:
        d = {**doc, "mode": mode, "tcp": {**doc["tcp"], **tcp}}
        return app_spec.core_config(app_spec.parse(d, "t.toml"), 0, tmp_path)["tcp"]["path_acks"]

    # absent: on in the packet mode; the max-min mode has no ACKs to place
    assert core_path_acks("packet") is True and core_path_acks("maxmin") is False
    # the spec's own word wins, and queued ACKs are the other way for them
    assert core_path_acks("packet", path_acks=False) is False
    assert core_path_acks("packet", queued_acks=True) is False


def test_path_acks_exclude_queued_acks_and_a_bad_value_is_named() -> None:
    both = "queue_packets = 100\npath_acks = true\nqueued_acks = true\n"
    doc = tomllib.loads(SPEC.replace("queue_packets = 100\n", both))
    doc["matrix"] = {}
    with pytest.raises(SimSpecError, match=r"t.toml: tcp.path_acks: not with tcp.queued_acks"):
        app_spec.parse(doc, "t.toml")
    doc["tcp"]["path_acks"] = "sometimes"
    with pytest.raises(SimSpecError, match=r"t.toml: tcp.path_acks: "):
        app_spec.parse(doc, "t.toml")
