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
from shufflelab import netplan, report
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


def test_streams_fill_a_port_that_drops_below_its_bdp() -> None:
    # seed 000 on the switch: 100 Mbit/s, 10 ms round trip (BDP 125 kB), non-ECT drops from 30 kB
    shallow = S.Link(rate_mbps=100, queue_bytes=250_000, delay_ms=5, discipline="red",
                     red={"min_bytes": 30_000, "max_bytes": 30_000, "max_p": 1.0, "ecn": True})  # fmt: skip
    assert selftest.streams(shallow) == 5
    assert selftest.streams(S.Link(rate_mbps=100, queue_bytes=250_000, delay_ms=5)) == 1  # a BDP and more
    assert selftest.streams(S.Link(rate_mbps=1000)) == 1  # no delay: the queue holds the round trip
    assert selftest.streams(S.Link(rate_mbps=10_000, queue_packets=10, delay_ms=50)) == selftest.MAX_STREAMS


def test_the_probe_runs_the_streams_its_port_needs(tmp_path: Path) -> None:
    net = _Fabric.network
    shallow = S.Link(rate_mbps=100, queue_bytes=250_000, delay_ms=5, discipline="red",
                     red={"min_bytes": 30_000, "max_bytes": 30_000, "max_p": 1.0, "ecn": True})  # fmt: skip
    seen: list[list[str]] = []

    def run(argv: Any, *, place: str | None = None, check: bool = True, timeout: float = 60) -> str:
        seen.append(list(argv))
        if argv[0] == "ping":
            return "rtt min/avg/max/mdev = 10.1/10.1/10.1/0.0 ms\n"
        if argv[0] == "ss":
            return f"LISTEN 0 5 0.0.0.0:{selftest.IPERF_PORT}"
        return json.dumps({"end": {"sum_received": {"bits_per_second": 94e6}}})

    class _Proc:
        def stop(self, grace_s: float = 1) -> None:
            pass

    places = {h: h for h in net.host_addresses}
    links = {p.ifname: shallow for p in net.bottlenecks}
    checks = selftest.check(places, net, tmp_path, links, run=run, launch=lambda *a, **k: _Proc())
    clients = [a for a in seen if a[0] == "iperf3"]
    assert clients and all(a[a.index("-P") + 1] == "5" for a in clients)
    assert all(c.ok for c in checks)
