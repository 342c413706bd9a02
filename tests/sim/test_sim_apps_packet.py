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
from shufflelab.sim.apps_report import _loops_sentence, cc_comparisons, report
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


def _cc_run(cc: str, jobs: list[float], passes: list[float] | None, **values: object) -> dict[str, object]:
    """A run as the results hold it: its applications' job times and, in the packet mode, the mean
    job time of each pass from the second (hold gaps growing, so the first ones are nearest closed;
    none: the loops settled); ``passes=None``: a max-min run."""
    result: dict[str, object] = {"apps": [{"job_time_s": t} for t in jobs]}
    if passes is not None:
        result["packet"] = {
            "pass_job_times": [
                {"pass": i + 2, "hold_gap_s": 0.001 * i, "mean_job_time_s": t} for i, t in enumerate(passes)
            ]
        }
    return {"values": {**values, "tcp.cc": cc}, "seed": 0, "tcp": {"cc": cc}, "result": result}


def test_congestion_controls_are_compared_by_the_spread_of_the_passes_nearest_closed() -> None:
    cubic = _cc_run("cubic", [9.0, 9.2], [9.1, 9.2, 9.4, 12.0], oversubscription=4)
    # DCTCP's passes reach into Cubic's span: the loops' closure, not the network
    close = _cc_run("dctcp", [9.1, 9.1], [9.1, 8.9, 9.0], oversubscription=4)
    (line,) = cc_comparisons({"runs": [cubic, close]})
    assert line.startswith("DCTCP against Cubic, oversubscription=4 (seed 0): mean job time +0.000 s (+0.0 %)")
    assert "not decided by this model: the passes nearest closed give 9.100-9.400 s (Cubic)" in line
    assert "and 8.900-9.100 s (DCTCP), which overlap" in line
    # apart: decided, whichever side is faster (a pass beyond the nearest three does not count)
    apart = _cc_run("dctcp", [8.5, 8.5], [8.5, 8.6, 8.4, 9.9], oversubscription=4)
    (line,) = cc_comparisons({"runs": [cubic, apart]})
    assert (
        "mean job time -0.600 s (-6.6 %); DCTCP faster, decided" in line
        and "8.400-8.600 s (DCTCP), apart by 0.500 s." in line
    )
    (line,) = cc_comparisons({"runs": [apart, cubic]})
    assert line.startswith("Cubic against DCTCP") and "+0.600 s" in line and "DCTCP faster, decided" in line
    # runs made before the hold gap was recorded: every pass that could have been kept, and said so
    older = {
        **apart,
        "result": {**apart["result"], "packet": {"pass_job_times": [{"pass": 2, "mean_job_time_s": 8.7}]}},
    }
    older["result"]["packet"]["pass_job_times"].append({"pass": 3, "mean_job_time_s": 9.9})
    (line,) = cc_comparisons({"runs": [cubic, older]})
    assert "not decided by this model: the passes that could have been kept give" in line
    assert "8.500-9.900 s (DCTCP)" in line


def test_settled_max_min_and_unmatched_runs_say_what_they_can() -> None:
    # loops settled on both sides: the model's own difference, said as such
    same = [_cc_run(cc, [8.084], []) for cc in ("cubic", "dctcp")]
    assert cc_comparisons({"runs": same}) == [
        "DCTCP against Cubic (seed 0): mean job time +0.000 s (+0.0 %); the same job time (both runs' loops "
        "settled: no spread of passes to weigh it against)."
    ]
    (line,) = cc_comparisons({"runs": [same[0], _cc_run("dctcp", [8.0], [])]})
    assert "DCTCP faster by 0.084 s (both runs' loops settled" in line
    # max-min runs cannot answer it
    maxmin = [{**r, "result": {"apps": r["result"]["apps"]}} for r in same]
    (line,) = cc_comparisons({"runs": maxmin})
    assert "the max-min mode does not answer it" in line
    # runs that differ in more than the congestion control, or in the seed, are not compared
    other = _cc_run("dctcp", [8.0], [], oversubscription=4)
    assert cc_comparisons({"runs": [same[0], other]}) == []
    assert cc_comparisons({"runs": [same[0], {**same[1], "seed": 1}]}) == []
    # an application that did not end: no difference to give
    (line,) = cc_comparisons({"runs": [same[0], _cc_run("dctcp", [None], [])]})  # type: ignore[list-item]
    assert line.endswith("not compared (an application did not end).")


def test_over_several_seeds_a_line_counts_each_seed_s_verdict() -> None:
    cubic = _cc_run("cubic", [9.2], [9.2, 9.3, 9.4])
    runs = [
        {**cubic, "seed": 0},
        {**_cc_run("dctcp", [8.5], [8.5, 8.6]), "seed": 0},  # apart: DCTCP
        {**cubic, "seed": 1},
        {**_cc_run("dctcp", [8.4], [8.4, 8.5]), "seed": 1},  # apart: DCTCP
        {**cubic, "seed": 2},
        {**_cc_run("dctcp", [9.3], [9.3, 9.25]), "seed": 2},  # overlapping
    ]
    lines = cc_comparisons({"runs": runs})
    assert len(lines) == 4 and [line.count("(seed ") for line in lines] == [1, 1, 1, 0]
    assert lines[-1] == (
        "DCTCP against Cubic, over 3 seeds: mean difference -0.467 s; DCTCP faster in 2, not decided in 1 "
        "(each seed's verdict above)."
    )
