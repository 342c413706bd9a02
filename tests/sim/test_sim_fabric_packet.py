"""The top-level mode of fabric specs: the packet-faithful mode reaches the core, is refused without
[tcp] (naming the field), and every report says which mode produced its runs."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from simspecs import LEAF_SPINE_2X4

from shufflelab.sim import fabric, fabric_spec
from shufflelab.sim.fabric_report import cc_verdicts, model_questions, report
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
    # the headline says what each mode cannot answer, the packet mode's two-way limit too
    headline = md.split("## Headline")[1].split("##")[0]
    assert "Packet-faithful runs:" in headline and "The max-min runs: Flow-level max-min model" in headline
    assert "ACKs waiting behind the other direction's data" in headline


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


ALL_TO_ALL = (
    """
mode = "packet"

[experiment]
name = "sim-a2a-cluster"

"""
    + LEAF_SPINE_2X4
    + """
[shuffle]
maps = 8
reducers = 8
size = { kind = "constant", mib = 1 }

[tcp]
cc = "cubic"
ecn = false
queue_packets = 1000

[packet]
cluster = false

[matrix]
"packet.cluster" = [false, true]
"""
)


def test_clustering_reaches_the_core_and_simulates_one_link_per_cluster(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(ALL_TO_ALL)
    each, clustered = fabric.run_experiment(tmp_path / "s.toml", tmp_path / "res").doc["runs"]
    off, on = each["result"]["packet"], clustered["result"]["packet"]
    # the 16 host links (a sender's or a receiver's: 7 fetches at once each) are alike, and so are
    # the 2 leaves' uplinks (the spine's downlinks, each fed by one uplink, cannot queue and are not
    # simulated): two simulations for eighteen
    assert (off["clusters"], off["links_represented"], off["cluster_tolerance"]) == (0, 0, None)
    assert (on["clusters"], on["links_simulated"], on["cluster_tolerance"]) == (2, 2, 0.05)
    assert on["links_simulated"] + on["links_represented"] == off["links_simulated"] == 18
    mean_off, mean_on = (r["result"]["fct"][0]["mean_s"] for r in (each, clustered))
    # no loss at 1,000-packet ports: the seeds' jitter is all that differs (0.0624 s against 0.0627 s)
    assert abs(mean_on - mean_off) / mean_off < 0.01
    # the report says which runs took representatives' delays, and how many links
    md = report(tmp_path / "res" / "sim-a2a-cluster.fabric.json", tmp_path / "rep").read_text()
    assert "Alike links simulated once per cluster (tolerance 0.05) in one run: 2 links simulated, 16 took" in md


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ("cluster = true\ncluster_tolerance = 0.9", "packet.cluster_tolerance"),
        ("cluster = true\ncluster_tolerance = -0.1", "packet.cluster_tolerance"),
        ('cluster = "sometimes"', "packet.cluster"),
        ("clusters = true", "packet.clusters"),
    ],
)
def test_bad_clustering_options_name_the_field(table: str, field: str) -> None:
    doc = tomllib.loads(ALL_TO_ALL.replace("cluster = false", table))
    doc["matrix"] = {}
    with pytest.raises(SimSpecError, match=rf"t.toml: {field}: "):
        fabric_spec.parse(doc, "t.toml")


def test_the_core_config_carries_the_tolerance_in_the_packet_mode_only() -> None:
    doc = tomllib.loads(ALL_TO_ALL.replace("cluster = false", "cluster = true\ncluster_tolerance = 0.1"))
    doc["matrix"] = {}
    spec = fabric_spec.parse(doc, "t.toml")
    assert fabric_spec.core_config(spec, 0, Path("."))["packet"] == {"cluster_tolerance": 0.1}
    maxmin = fabric_spec.parse({**doc, "mode": "maxmin"}, "t.toml")
    assert "packet" not in fabric_spec.core_config(maxmin, 0, Path("."))


def test_delayed_acks_reach_the_core_and_the_report_says_how_receivers_ack(tmp_path: Path) -> None:
    # the incast above, its packet run with receivers ACKing every segment and delaying their ACKs
    # (no quick ACKs at a flow's start, as ns-3's receivers)
    runs = {}
    for name, table in (("each", ""), ("delayed", "\n[tcp.delayed_ack]\nquick_acks = 0\n")):
        spec = SPEC.replace('mode = ["maxmin", "packet"]', "").replace('mode = "maxmin"', 'mode = "packet"')
        (tmp_path / f"{name}.toml").write_text(spec.replace("queue_packets = 20\n", "queue_packets = 20\n" + table))
        (run,) = fabric.run_experiment(tmp_path / f"{name}.toml", tmp_path / name).doc["runs"]
        md = report(tmp_path / name / "sim-incast-mode.fabric.json", tmp_path / f"rep-{name}").read_text()
        runs[name] = (run, " ".join(md.split()))
    (each, each_md), (delayed, delayed_md) = runs["each"], runs["delayed"]
    assert "delayed_ack" not in each["tcp"] or each["tcp"]["delayed_ack"] is None
    assert delayed["tcp"]["delayed_ack"] == {"timeout_s": 0.04, "quick_acks": 0, "idle_quick_acks": 16}
    assert each["result"]["fct"][0]["mean_s"] != delayed["result"]["fct"][0]["mean_s"]
    assert "Receivers ACK every segment at once (no delayed ACKs)." in each_md
    assert (
        "Receivers delay their ACKs as Linux's in every packet-faithful run (one ACK per two segments, at once on "
        "a gap or a change of DCTCP's mark; 0 quick ACKs at a flow's start, 16 after a silence longer than the RTO, "
        "else a 40 ms timer)." in delayed_md
    )


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ("timeout_s = 0", "tcp.delayed_ack.timeout_s"),
        ("quick_acks = -1", "tcp.delayed_ack.quick_acks"),
        ("quick = 3", "tcp.delayed_ack.quick"),
    ],
)
def test_bad_delayed_ack_options_name_the_field(table: str, field: str) -> None:
    table = "queue_packets = 20\n\n[tcp.delayed_ack]\n" + table + "\n"
    doc = tomllib.loads(SPEC.replace("queue_packets = 20\n", table))
    doc["matrix"] = {}
    with pytest.raises(SimSpecError, match=rf"t.toml: {field}: "):
        fabric_spec.parse(doc, "t.toml")


def test_queued_acks_reach_the_core_and_the_report_says_where_acks_wait(tmp_path: Path) -> None:
    # the all-to-all above (every host's link carries its sends one way and its receives the
    # other), its ACKs crossing no queue and then queued behind the other direction's data
    runs = {}
    for name, extra in (("free", ""), ("queued", "queued_acks = true\n")):
        spec = ALL_TO_ALL.replace("queue_packets = 1000\n", "queue_packets = 1000\n" + extra)
        spec = spec.replace('name = "sim-a2a-cluster"', f'name = "sim-a2a-{name}"')
        spec = spec.replace('"packet.cluster" = [false, true]\n', "")
        (tmp_path / f"{name}.toml").write_text(spec)
        (run,) = fabric.run_experiment(tmp_path / f"{name}.toml", tmp_path / name).doc["runs"]
        md = report(tmp_path / name / f"sim-a2a-{name}.fabric.json", tmp_path / f"rep-{name}").read_text()
        runs[name] = (run, " ".join(md.split()))
    (free, free_md), (queued, queued_md) = runs["free"], runs["queued"]
    assert not free["tcp"].get("queued_acks") and queued["tcp"]["queued_acks"] is True
    # the ACKs' wait and bytes slow the shuffle
    assert queued["result"]["fct"][0]["mean_s"] > free["result"]["fct"][0]["mean_s"]
    assert "ACKs cross no queue." in free_md and "tcp.queued_acks = true simulates it" in free_md
    assert "ACKs wait behind the other direction's data in every packet-faithful run" in queued_md
    assert "their ACKs wait behind the other direction's data (tcp.queued_acks" in queued_md


def test_a_fabric_refuses_path_acks_by_name() -> None:
    # on a replayed schedule the passes with the queues of the pass before do not settle
    doc = tomllib.loads(ALL_TO_ALL.replace("queue_packets = 1000\n", "queue_packets = 1000\npath_acks = true\n"))
    doc["matrix"] = {}
    with pytest.raises(SimSpecError, match=r"t.toml: tcp.path_acks: the applications' packet mode only"):
        fabric_spec.parse(doc, "t.toml")
    # absent, a fabric's ACKs cross no queue (the applications' packet mode's default is not a fabric's)
    del doc["tcp"]["path_acks"]
    assert fabric_spec.core_config(fabric_spec.parse(doc, "t.toml"), 0, Path("."))["tcp"]["path_acks"] is False


def test_bad_queued_acks_names_the_field() -> None:
    bad = 'queue_packets = 1000\nqueued_acks = "sometimes"\n'
    doc = tomllib.loads(ALL_TO_ALL.replace("queue_packets = 1000\n", bad))
    doc["matrix"] = {}
    with pytest.raises(SimSpecError, match=r"t.toml: tcp.queued_acks: "):
        fabric_spec.parse(doc, "t.toml")


def test_the_headline_says_which_packet_runs_queue_their_acks() -> None:
    def doc(queued: list[bool]) -> dict[str, object]:
        runs = [{"result": {"packet": {}}, "tcp": {"cc": "dctcp", "queued_acks": q}} for q in queued]
        return {"runs": runs}

    assert "and their ACKs wait behind the other direction's data" in model_questions(doc([True, True]))
    assert "nor ACKs waiting behind" in model_questions(doc([False, False]))
    mixed = model_questions(doc([False, True]))
    assert "in 1 of 2 packet-faithful runs their ACKs wait behind" in mixed
    assert "the others do not model ACKs waiting behind" in mixed


def _fabric_run(cc: str, seed: int, completion: float, packet: bool = True, **values: object) -> dict[str, object]:
    result: dict[str, object] = {"shuffle_completion_s": completion, **({"packet": {}} if packet else {})}
    return {"values": {**values, "tcp.cc": cc}, "seed": seed, "tcp": {"cc": cc}, "result": result}


def test_congestion_controls_are_weighed_seed_by_seed_with_a_paired_t_interval() -> None:
    cubic = [_fabric_run("cubic", s, t, uplink_gbps=10) for s, t in enumerate([10.0, 11.0, 12.0])]
    # DCTCP 2-4 % faster in every seed: the interval of the log ratio leaves out 1
    fast = [_fabric_run("dctcp", s, t, uplink_gbps=10) for s, t in enumerate([9.7, 10.6, 11.7])]
    (line,) = cc_verdicts({"runs": cubic + fast})
    assert line.startswith("DCTCP against Cubic, uplink_gbps=10: shuffle completion ratio 0.970 (geometric mean;")
    assert "over 3 seeds; DCTCP faster, decided: 95 % interval 0.9" in line and line.endswith("leaves out 1.")
    # the direction changes between seeds: not decided
    mixed = [_fabric_run("dctcp", s, t, uplink_gbps=10) for s, t in enumerate([9.7, 11.3, 12.0])]
    (line,) = cc_verdicts({"runs": cubic + mixed})
    assert "not decided: 95 % interval" in line and line.endswith("holds 1.")
    # one seed is not weighed; max-min runs do not answer it; other values differing: no pair
    (line,) = cc_verdicts({"runs": cubic[:1] + fast[:1]})
    assert "ratio 0.970 (seed 0); one seed: not weighed" in line
    maxmin = [_fabric_run(r["tcp"]["cc"], r["seed"], r["result"]["shuffle_completion_s"], False) for r in cubic + fast]  # type: ignore[index]
    (line,) = cc_verdicts({"runs": maxmin})
    assert "the max-min mode does not answer it" in line
    assert cc_verdicts({"runs": cubic + [_fabric_run("dctcp", 0, 9.0, uplink_gbps=100)]}) == []
