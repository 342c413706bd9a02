"""The ns-3 validation's interval and verdict per row (benchmarks/sim_vs_ns3_packet.py) on data whose
answer is known: a model 50 % slow is out, 2 % slow within, a noisy one undecided, and the
direction of an error or of a Cubic − DCTCP difference is never inverted."""

from __future__ import annotations

import argparse

import pytest
from benchmarks import sim_vs_ns3 as base
from benchmarks import sim_vs_ns3_packet as bench

NS3 = [1.00, 1.01, 0.99, 1.00, 1.005]


def scaled(factor: float, spread: float) -> list[float]:
    return [factor * (1.0 + spread * d) for d in (-1.0, -0.5, 0.0, 0.5, 1.0, 0.25, -0.25, 0.0, 0.1, -0.1)]


def test_a_model_half_again_as_slow_is_out_and_its_error_is_positive() -> None:
    ci = bench.ratio_interval(scaled(1.5, 0.01), NS3)
    assert ci is not None
    assert 0.45 < ci[0] < 0.5 < ci[1] < 0.55
    assert bench.verdict(ci) == "out"
    # the other way round the error is negative: the interval is not symmetric in the two sides
    back = bench.ratio_interval(NS3 * 2, scaled(1.5, 0.01))
    assert back is not None and back[1] < -0.3


def test_a_model_two_percent_slow_with_little_spread_is_within() -> None:
    ci = bench.ratio_interval(scaled(1.02, 0.005), NS3)
    assert ci is not None and ci[0] < 0.02 < ci[1]
    assert bench.verdict(ci) == "within"


def test_an_interval_across_the_bound_is_undecided() -> None:
    ci = bench.ratio_interval(scaled(1.1, 0.2), NS3)
    assert ci is not None and ci[0] < 0.1 < ci[1]
    assert bench.verdict(ci) == "undecided"
    assert bench.verdict([-0.12, -0.05]) == "undecided"
    assert bench.verdict([-0.3, -0.11]) == "out"


def test_one_ns3_run_is_taken_as_exact_and_too_few_values_give_no_interval() -> None:
    sim = scaled(1.2, 0.01)
    ci = bench.ratio_interval(sim, [1.0])
    mean = sum(sim) / len(sim)
    assert ci is not None and ci[0] < mean - 1.0 < ci[1] and ci[1] - ci[0] < 0.02
    assert bench.ratio_interval(sim[:2], NS3) is None
    assert bench.ratio_interval(sim, NS3[:2]) is None
    assert bench.verdict(None) == "–"


@pytest.mark.parametrize(("cubic", "dctcp", "positive"), [(1.2, 1.0, True), (1.0, 1.2, False)])
def test_the_difference_of_cubic_and_dctcp_keeps_its_sign(cubic: float, dctcp: float, positive: bool) -> None:
    ci = bench.difference_interval(scaled(cubic, 0.01), scaled(dctcp, 0.01))
    assert ci is not None
    assert (ci[0] > 0) if positive else (ci[1] < 0)


def test_a_sign_is_judged_only_where_both_intervals_decide_it() -> None:
    # (the loops check and the table share this verdict)
    pos, neg, across = [0.001, 0.003], [-0.003, -0.001], [-0.001, 0.002]
    assert bench.sign_verdict(0.002, 0.002, pos, pos, 3) == "right"
    assert bench.sign_verdict(0.002, -0.002, pos, neg, 3) == "**wrong**"
    assert bench.sign_verdict(-0.002, -0.002, neg, neg, 3) == "right"
    assert bench.sign_verdict(0.0005, -0.002, across, neg, 3) == "ns-3 undecided"
    assert bench.sign_verdict(0.002, 0.0005, pos, across, 3) == "sim undecided"
    # one deterministic ns-3 run is exact; two runs give no interval and decide nothing
    assert bench.sign_verdict(0.002, -0.002, None, neg, 1) == "**wrong**"
    assert bench.sign_verdict(0.002, 0.002, None, pos, 2) == "ns-3: too few runs"
    assert bench.sign_verdict(0.002, 0.002, pos, None, 3) == "sim: too few seeds"


def host_args(*flags: str) -> list[str]:
    """The ns-3 programs' host arguments for the benchmark's command-line ``flags``."""
    ap = argparse.ArgumentParser()
    base.add_host_options(ap)
    return base.host_settings(ap.parse_args(list(flags)))[0]


def test_linux_s_count_reset_goes_to_reno_and_dctcp_runs_and_never_to_cubic_s() -> None:
    hosts = host_args("--prr-sack-fix", "--linux-cwnd-count")
    assert hosts == ["--prrSackFix=true", "--cwndCntReset=true"]
    assert base.hosts_for(hosts, "reno") == hosts and base.hosts_for(hosts, "dctcp") == hosts
    # TcpCubic keeps its own count: its runs keep their arguments (and ns-3's cache)
    assert base.hosts_for(hosts, "cubic") == ["--prrSackFix=true"]
    assert base.hosts_for(host_args("--prr-sack-fix"), "reno") == ["--prrSackFix=true"]


def test_linux_s_recovery_from_cwr_goes_only_to_ecn_flows_and_dctcp_s_loss_answer_only_to_dctcp() -> None:
    hosts = host_args("--linux-cwr-recovery", "--linux-dctcp-loss")
    assert hosts == ["--cwrRecovery=true", "--dctcpLossHalves=true"]
    assert base.hosts_for(hosts, "dctcp", ecn=True) == hosts
    # a drop-tail flow without ECN never enters CWR; only DCTCP has DCTCP's loss answer
    assert base.hosts_for(hosts, "cubic", ecn=False) == []
    assert base.hosts_for(hosts, "reno", ecn=True) == ["--cwrRecovery=true"]


def test_linux_s_rack_goes_to_every_control_s_runs() -> None:
    # any flow may lose a segment, ECN-capable or not
    hosts = host_args("--linux-acks", "--linux-rack")
    assert hosts == ["--linuxAcks=true", "--rackLoss=true"]
    for cc in ("cubic", "reno", "dctcp"):
        assert base.hosts_for(hosts, cc, ecn=False) == hosts


def test_linux_s_loss_probe_goes_to_every_control_s_runs() -> None:
    # any flow may lose its window's tail or its last ACK
    hosts = host_args("--linux-acks", "--linux-rack", "--linux-tlp")
    assert hosts == ["--linuxAcks=true", "--rackLoss=true", "--lossProbe=true"]
    for cc in ("cubic", "reno", "dctcp"):
        assert base.hosts_for(hosts, cc, ecn=False) == hosts


def test_byte_counting_ports_go_to_the_two_tier_program_only() -> None:
    # two_tier.cc's ports (the incast, all-to-all and loops rows); bottleneck.cc has no such
    # option, so the hosts' arguments, which reach it too, never carry it
    ap = argparse.ArgumentParser()
    base.add_host_options(ap)
    on, off = ap.parse_args(["--linux-acks", "--queue-bytes"]), ap.parse_args(["--linux-acks"])
    assert base.two_tier_switch(on) == ["--queueBytes=true"] and base.two_tier_switch(off) == []
    assert base.host_settings(on)[0] == base.host_settings(off)[0] == ["--linuxAcks=true"]


@pytest.mark.parametrize(
    ("flag", "arg"), [("--linux-rack-prr", "--rackPrr=true"), ("--linux-rack-reo", "--rackReo=true")]
)
def test_rack_s_refinements_go_to_every_control_s_runs_and_need_rack(flag: str, arg: str) -> None:
    # PRR's window for what RACK finds in a recovery; RACK's reordering timer
    hosts = host_args("--linux-acks", "--linux-rack", flag)
    assert hosts == ["--linuxAcks=true", "--rackLoss=true", arg]
    for cc in ("cubic", "reno", "dctcp"):
        assert base.hosts_for(hosts, cc, ecn=False) == hosts
    with pytest.raises(SystemExit, match=f"{flag} refines --linux-rack"):
        host_args("--linux-acks", flag)


def test_the_hosts_send_jitter_goes_to_the_two_tier_program_only_and_is_bounded() -> None:
    # bottleneck.cc has no such option: the hosts' arguments, which reach it too, never carry it
    ap = argparse.ArgumentParser()
    base.add_host_options(ap)
    on = ap.parse_args(["--linux-acks", "--queue-bytes", "--send-jitter", "0.5"])
    assert base.two_tier_switch(on) == ["--queueBytes=true", "--sendJitter=0.5"]
    assert base.host_settings(on)[0] == ["--linuxAcks=true"]
    assert base.two_tier_switch(ap.parse_args(["--send-jitter", "0"])) == []
    with pytest.raises(SystemExit, match="--send-jitter must be in"):
        base.two_tier_switch(ap.parse_args(["--send-jitter", "1.5"]))


def test_the_hosts_fifo_port_goes_to_the_two_tier_program_only_and_last() -> None:
    # last: the loops check's cached and stored ns-3 runs were keyed with it after the other two
    ap = argparse.ArgumentParser()
    base.add_host_options(ap)
    on = ap.parse_args(["--linux-acks", "--queue-bytes", "--send-jitter", "1", "--linux-host-queue"])
    assert base.two_tier_switch(on) == ["--queueBytes=true", "--sendJitter=1", "--hostFifo=true"]
    assert base.host_settings(on)[0] == ["--linuxAcks=true"]
    assert "--hostFifo=true" not in base.two_tier_switch(ap.parse_args(["--queue-bytes"]))


def test_queued_acks_go_to_the_model_s_tcp_table_only() -> None:
    # a model option: ns-3's arguments (and so its stored rows' keys) stay as they were
    ap = argparse.ArgumentParser()
    base.add_host_options(ap)
    on = ap.parse_args(["--linux-acks", "--queue-bytes", "--sim-queued-acks"])
    off = ap.parse_args(["--linux-acks", "--queue-bytes"])
    assert base.sim_tcp_extra(on) == {"queued_acks": True} and base.sim_tcp_extra(off) == {}
    path = ap.parse_args(["--linux-acks", "--sim-path-acks"])
    assert base.sim_tcp_extra(path) == {"path_acks": True}
    with pytest.raises(SystemExit, match="exclude each other"):
        base.sim_tcp_extra(ap.parse_args(["--sim-queued-acks", "--sim-path-acks"]))
    assert base.host_settings(on) == base.host_settings(off)
    assert base.two_tier_switch(on) == base.two_tier_switch(off)
