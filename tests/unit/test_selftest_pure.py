"""Link self-test wiring without a fabric: which hosts measure a port, once per link configuration,
warn vs refuse, and the report's line."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from conftest import BASE_SPEC
from shufflelab import netplan, report, shaping
from shufflelab import spec as S
from shufflelab import topology as T
from shufflelab.emulate import selftest


def _net(spec_dict: dict[str, Any], kind: str) -> T.Network:
    spec_dict["topology"]["kind"] = kind
    if kind == "dumbbell":
        for i, h in enumerate(spec_dict["hosts"]):
            spec_dict["hosts"][h]["rack"] = 1 if i % 2 == 0 else 2
    return T.build(S.parse(spec_dict))


@pytest.mark.parametrize("kind", ["shared", "star", "dumbbell"])
def test_each_port_is_measured_by_traffic_that_crosses_it(spec_dict: dict[str, Any], kind: str) -> None:
    net = _net(spec_dict, kind)
    for port in net.bottlenecks:
        ends = selftest._endpoints(net, port)
        assert ends is not None
        src, dst = ends
        assert src != dst and net.router_port_of(dst) == port
        if kind != "shared":  # the source sits behind another port: its packets leave through this one
            assert net.router_port_of(src) != port


def _check(ok: bool) -> selftest.LinkCheck:
    return selftest.LinkCheck("r:sw", "a", "b", 20.0, 12.0 if not ok else 19.0, 0.63 if not ok else 0.99, 0.3, 0.0,
                              ok, None if ok else "delivered 0.63 of its configured 20 Mbit/s")  # fmt: skip


class _Fabric:
    ns: dict[str, str] = {}
    network = T.build(
        S.parse({**copy.deepcopy(BASE_SPEC), "topology": {"kind": "shared", "bottleneck": {"rate_mbps": 20}}})
    )


def _plan(spec: S.ExperimentSpec) -> netplan.NetPlan:
    return netplan.of(spec, _Fabric.network)


def test_once_per_link_configuration_and_refuse(
    spec_dict: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    monkeypatch.setattr(selftest, "check", lambda ns, net, d, links, **kw: calls.append(links) or [_check(ok=False)])
    spec = S.parse(spec_dict)
    cache: dict[str, list[selftest.LinkCheck]] = {}
    rows = selftest.for_run(_plan(spec), _Fabric(), tmp_path, cache)  # default: warn
    assert spec.telemetry.selftest == "warn" and rows[0]["ok"] is False
    assert json.loads((tmp_path / "selftest.json").read_text()) == rows
    selftest.for_run(_plan(spec), _Fabric(), tmp_path, cache)
    assert len(calls) == 1  # same link configuration: measured once
    spec_dict["telemetry"] = {"selftest": "refuse"}
    with pytest.raises(selftest.SelftestError, match="r:sw: delivered 0.63"):
        selftest.for_run(_plan(S.parse(spec_dict)), _Fabric(), tmp_path, cache)
    spec_dict["topology"]["bottleneck"]["rate_mbps"] = 10  # another configuration: measured again
    spec_dict["telemetry"] = {"selftest": "warn"}
    selftest.for_run(_plan(S.parse(spec_dict)), _Fabric(), tmp_path, cache)
    assert len(calls) == 2 and calls[-1]["sw"].rate_mbps == 10  # measured against the plan's link
    spec_dict["telemetry"] = {"selftest": "off"}
    assert selftest.for_run(_plan(S.parse(spec_dict)), _Fabric(), tmp_path, {}) == [] and len(calls) == 2


def test_report_line_names_the_deviating_port() -> None:
    env = json.dumps({"selftest": [_check(ok=False).row()]})
    good = json.dumps({"selftest": [_check(ok=True).row()]})
    d = report.Data("x", "", {}, pd.DataFrame({"environment_json": [env, env, None]}), [], {})
    line = report.selftest_fact(d)
    assert line is not None and "r:sw at 20 Mbit/s: delivered 0.63" in line and "1 port configuration" in line
    ok = report.selftest_fact(report.Data("x", "", {}, pd.DataFrame({"environment_json": [good]}), [], {}))
    assert ok is not None and "within tolerance" in ok
    assert report.selftest_fact(report.Data("x", "", {}, pd.DataFrame({"environment_json": ["{}"]}), [], {})) is None


def test_report_line_never_says_within_tolerance_when_a_later_run_passed_the_same_port() -> None:
    # one row per (port, rate) used to keep the last: a failure followed by a pass read "within tolerance"
    failed = json.dumps({"selftest": [_check(ok=False).row()]})
    passed = json.dumps({"selftest": [_check(ok=True).row()]})
    d = report.Data("x", "", {}, pd.DataFrame({"environment_json": [failed, passed, passed]}), [], {})
    line = report.selftest_fact(d)
    assert line is not None and "within tolerance" not in line
    assert "1 port configuration(s) deviated" in line and "r:sw at 20 Mbit/s: delivered 0.63" in line
    assert "(goodput / configured rate 0.63-0.99)" in line  # the span of every run's check, not of one per port


def test_report_line_sets_apart_checks_made_against_another_scenarios_rate(spec_dict: dict[str, Any]) -> None:
    # recorded before the fix: a 1000 Mbit/s run checked against the 100 Mbit/s of its fabric's first scenario
    own = {}
    for rate in (100, 1000):
        spec_dict["topology"]["bottleneck"]["rate_mbps"] = rate
        own[f"{rate}M"] = S.parse(spec_dict)

    def env(rate: float, goodput: float) -> str:
        ratio = goodput / (rate * selftest.PAYLOAD_SHARE)
        ok = 0.85 <= ratio <= 1.08
        problem = None if ok else f"delivered {ratio:.2f} of its configured {rate:g} Mbit/s"
        row = selftest.LinkCheck("r:sw", "a", "b", rate, goodput, ratio, 0.2, 0.0, ok, problem).row()
        return json.dumps({"selftest": [row]})

    runs = pd.DataFrame(
        {
            "label": ["100M", "1000M", "1000M", "100M"],
            "environment_json": [env(100, 95.0), env(100, 950.0), env(1000, 950.0), env(1000, 95.0)],
        }
    )
    line = report.selftest_fact(report.Data("x", "", {}, runs, [], {}, scenarios=own))
    assert line is not None and "within tolerance" not in line
    assert "2 of 4 runs" in line and "another scenario's" in line and "deviated" not in line
    assert "measured on their own link, is 0.99-0.99 of its rate" in line  # 950 of 1000, 95 of 100


# seed 000 on the switch: 100 Mbit/s, 10 ms round trip (BDP 125 kB), non-ECT drops from 30 kB -- one
# cubic flow read 0.41 of the rate there and five parallel ones 0.55, though the port shaped correctly
SHALLOW = S.Link(rate_mbps=100, queue_bytes=250_000, delay_ms=5, discipline="red",
                 red={"min_bytes": 30_000, "max_bytes": 30_000, "max_p": 1.0, "ecn": True})  # fmt: skip


def _iperf3_udp(argv: list[str], shaped_bps: float | None) -> str:
    """iperf3 3.12's client JSON for a UDP test through a port that delivers ``shaped_bps`` of payload
    (None: unshaped): ``sum`` and ``sum_sent`` hold the sender's rate, ``sum_received`` the server's."""
    offered = float(argv[argv.index("-b") + 1])
    got = offered if shaped_bps is None else min(offered, shaped_bps)
    sender = {"bits_per_second": offered, "sender": True}
    return json.dumps({"end": {"sum": sender, "sum_sent": sender,
                               "sum_received": {"bits_per_second": got, "sender": False}}})  # fmt: skip


def _probe(
    tmp_path: Path, link: S.Link, shaped_bps: float | None, ping: str = "10.1/10.1/10.1/0.0"
) -> tuple[list[list[str]], list[selftest.LinkCheck]]:
    """The self-test of ``link`` through a port delivering ``shaped_bps``, where ping prints
    ``ping`` (min/avg/max/mdev in ms)."""
    net = _Fabric.network
    seen: list[list[str]] = []

    def run(argv: Any, *, place: str | None = None, check: bool = True, timeout: float = 60) -> str:
        seen.append(list(argv))
        if argv[0] == "ping":
            return f"rtt min/avg/max/mdev = {ping} ms\n"
        if argv[0] == "ss":
            return f"LISTEN 0 5 0.0.0.0:{selftest.IPERF_PORT}"
        return _iperf3_udp(list(argv), shaped_bps)

    class _Proc:
        def stop(self, grace_s: float = 1) -> None:
            pass

    places = {h: h for h in net.host_addresses}
    links = {p.ifname: link for p in net.bottlenecks}
    checks = selftest.check(places, net, tmp_path, links, run=run, launch=lambda *a, **k: _Proc())
    return [a for a in seen if a[0] == "iperf3"], checks


def test_the_probe_offers_udp_above_the_rate_and_reads_the_receiver(tmp_path: Path) -> None:
    # a port that shapes at its rate: 100 Mbit/s of 1442-byte frames carry 97.1 Mbit/s of payload
    clients, checks = _probe(tmp_path, SHALLOW, shaped_bps=100e6 * 1400 / 1442)
    assert clients
    for argv in clients:
        assert "-u" in argv and argv[argv.index("-l") + 1] == "1400"
        offered = int(argv[argv.index("-b") + 1])
        assert offered == shaping.udp_payload_rate_bps(100, 120) and "-P" not in argv
    assert checks and all(c.ok for c in checks), [c.problem for c in checks]
    assert all(c.rate_ratio == pytest.approx(1.0) for c in checks)  # not the sender's 1.20 (end.sum)


def test_the_probe_catches_an_over_fast_and_a_slow_port(tmp_path: Path) -> None:
    _, fast = _probe(tmp_path, SHALLOW, shaped_bps=None)  # the qdisc gone: the offered 1.2 gets through
    assert fast and not any(c.ok for c in fast)
    assert all("delivered 1.20 of its configured 100 Mbit/s" in (c.problem or "") for c in fast)
    _, slow = _probe(tmp_path, SHALLOW, shaped_bps=60e6 * 1400 / 1442)
    assert slow and all(not c.ok and c.rate_ratio == pytest.approx(0.6) for c in slow)
    assert all("delivered 0.60" in (c.problem or "") and "sender offered 1.20" in (c.problem or "") for c in slow)


def test_the_rtt_is_the_smallest_ping_so_a_late_reply_is_no_delay_of_the_link(tmp_path: Path) -> None:
    # a userspace switch that lost the CPU for a moment answers some pings late: the link's delay is
    # what the fastest reply took (the configured 2 x 5 ms), not the average the late ones raise
    _, checks = _probe(tmp_path, SHALLOW, shaped_bps=100e6 * 1400 / 1442, ping="10.1/16.0/31.2/8.0")
    assert checks and all(c.ok and c.rtt_ms == pytest.approx(10.1) for c in checks), [c.problem for c in checks]
    # a delay above the configured one shows in every reply, the fastest too
    _, slow = _probe(tmp_path, SHALLOW, shaped_bps=100e6 * 1400 / 1442, ping="20.3/20.5/21.0/0.2")
    assert slow and all(not c.ok and "RTT 20.30 ms, expected 10.00 ms" in (c.problem or "") for c in slow)
