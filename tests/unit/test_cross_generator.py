"""The in-switch cross-traffic source from the spec to the run's validity: which generator a spec
may ask for, the switch's configuration, the source's row from the switch's status samples, the
validity rule it is held to, and the report's line naming the generator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shufflelab import netplan
from shufflelab import spec as S
from shufflelab import topology as T
from shufflelab.emulate import record, validity
from shufflelab.spec import SpecError
from shufflelab.spec.scenarios import spec_hash
from shufflelab.switch import STATUS_HEADER, CrossSource

RATE = 50.0  # the base spec's bottleneck


def _switch_spec(spec_dict: dict[str, Any], **ct: Any) -> S.ExperimentSpec:
    spec_dict["topology"]["bottleneck"]["datapath"] = "switch"
    spec_dict["cross_traffic"] = {"udp_percent": 90, "generator": "switch", **ct}
    return S.parse(spec_dict)


def test_the_switch_generator_is_refused_where_no_switch_is_in_the_path(spec_dict: dict[str, Any]) -> None:
    spec_dict["cross_traffic"] = {"udp_percent": 50, "generator": "switch"}
    with pytest.raises(SpecError, match=r"cross_traffic.generator = 'switch' needs the userspace switch"):
        S.parse(spec_dict)
    spec_dict["topology"]["bottleneck"]["datapath"] = "switch"
    spec_dict["cross_traffic"]["tcp_pairs"] = 2
    with pytest.raises(SpecError, match=r"cross_traffic.tcp_pairs = 2: the switch generates UDP only"):
        S.parse(spec_dict)
    spec_dict["cross_traffic"] = {"udp_percent": 50, "pattern": "poisson"}
    with pytest.raises(SpecError, match=r"cross_traffic.pattern = 'poisson' needs cross_traffic.generator"):
        S.parse(spec_dict)


def test_the_new_fields_at_their_defaults_keep_scenario_ids(spec_dict: dict[str, Any]) -> None:
    spec_dict["cross_traffic"] = {"udp_percent": 50}
    plain = S.parse(spec_dict)
    spec_dict["cross_traffic"].update(generator="iperf3", pattern="constant", on_ms=100, off_ms=100, seed=1)
    assert spec_hash(S.parse(spec_dict)) == spec_hash(plain)
    spec_dict["topology"]["bottleneck"]["datapath"] = "switch"
    before = spec_hash(S.parse(spec_dict))
    spec_dict["cross_traffic"]["generator"] = "switch"
    assert spec_hash(S.parse(spec_dict)) != before


def test_the_switch_gets_a_paused_source_on_the_sinks_port(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"]["kind"] = "star"
    sp = _switch_spec(spec_dict, pattern="onoff", on_ms=20, off_ms=60, seed=3)
    macs = {h: f"02:00:00:00:00:{i:02x}" for i, h in enumerate(sp.hosts, start=1)}
    cfg = netplan.switch_config(T.build(sp), sp, macs)
    assert cfg.cross == [CrossSource("tsink", rate_mbps=45.0, pattern="onoff", on_ms=20, off_ms=60, seed=3)]
    doc = cfg.to_json(Path("/q.csv"), Path("/s.csv"))
    assert doc["cross_paused"] is True and doc["telemetry"]["status_path"] == "/s.csv"
    assert doc["cross"][0] == {
        "port": "tsink", "rate_bps": 45_000_000, "frame_bytes": 1514, "pattern": "onoff", "on_ms": 20,
        "off_ms": 60, "ect": False, "seed": 3,
    }  # fmt: skip
    spec_dict["cross_traffic"]["generator"] = "iperf3"
    spec_dict["cross_traffic"]["pattern"] = "constant"
    iperf = S.parse(spec_dict)
    assert netplan.switch_config(T.build(iperf), iperf, macs).cross == []


def _status(path: Path, rows: list[tuple[float, int, int]], running_until: float = 1e18) -> Path:
    """A status CSV: (t, offered packets, delivered packets) of 1514-byte frames."""
    lines = [STATUS_HEADER]
    for t, off, dlv in rows:
        lines.append(f"{t},10,3.0,40.0,{off},{off * 1514},{dlv},{dlv * 1514},{off - dlv},0,{int(t < running_until)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _per_s(share: float) -> int:
    return int(RATE * 1e6 * share / 8 / 1514)  # frames per second at ``share`` of the link


def test_the_sources_row_and_its_rate_during_the_job(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    sp = _switch_spec(spec_dict)
    n = _per_s(0.9)
    csv = _status(tmp_path / "switch_status.csv", [(100.0 + k, n * k, n * k - k) for k in range(21)])
    row = record.switch_traffic_row(netplan.of(sp, T.build(sp)), csv, validity.Window(104.5, 114.5))
    assert row["generator"] == "switch" and row["alive_at_end"] and row["started_at"] == 101.0
    assert row["job_bytes"] == pytest.approx(10 * n * 1514, abs=1) and row["job_seconds"] == 10
    assert row["received_bytes"] == (20 * n - 20) * 1514 and row["lost_packets"] == 20
    assert validity.traffic_problems(sp.cross_traffic, RATE, [row], validity.Window(104.5, 114.5)) == []


def test_a_stopped_in_switch_source_breaks_the_promise(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    sp = _switch_spec(spec_dict)
    n = _per_s(0.9)
    # stopped (SIGUSR1) 5 s into a 10 s job: its counters stand still from then on
    rows = [(100.0 + k, n * min(k, 9), 0) for k in range(21)]
    csv = _status(tmp_path / "switch_status.csv", rows, running_until=109.5)
    window = validity.Window(104.0, 114.0)
    row = record.switch_traffic_row(netplan.of(sp, T.build(sp)), csv, window)
    problems = validity.traffic_problems(sp.cross_traffic, RATE, [row], window)
    assert any("stopped sending before the run ended" in p for p in problems), problems
    assert any("UDP cross traffic (in the switch): offered 22.50 Mbit/s" in p and "ratio 0.500" in p for p in problems)
    missing = record.switch_traffic_row(netplan.of(sp, T.build(sp)), tmp_path / "none.csv", window)
    assert validity.traffic_problems(sp.cross_traffic, RATE, [missing], window)[0] == (
        "UDP cross traffic (in the switch): the switch's source failed: no status samples from the switch (none.csv)"
    )


def test_the_tolerance_widens_only_for_what_the_pattern_makes_random(spec_dict: dict[str, Any]) -> None:
    const = _switch_spec(spec_dict).cross_traffic
    assert validity.switch_tolerance(const, 45e6, 10) == validity.UDP_RATE_TOLERANCE
    poisson = const.model_copy(update={"pattern": "poisson"})
    n = 45e6 * 10 / 8 / 1514
    assert validity.switch_tolerance(poisson, 45e6, 10) == pytest.approx(validity.UDP_RATE_TOLERANCE + 4 / n**0.5)
    onoff = const.model_copy(update={"pattern": "onoff", "on_ms": 200, "off_ms": 300})
    assert validity.switch_tolerance(onoff, 45e6, 10) == pytest.approx(validity.UDP_RATE_TOLERANCE + 0.05)


def test_iperf3_rows_are_named_and_the_switch_row_added(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    sp = _switch_spec(spec_dict)
    (tmp_path / "selftest.json").write_text(json.dumps([]))
    rows: list[dict[str, Any]] = []
    problems = record.promises(netplan.of(sp, T.build(sp)), tmp_path, rows, validity.Window(1.0, 11.0), [])
    assert [r["generator"] for r in rows] == ["switch"] and problems
