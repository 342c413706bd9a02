from __future__ import annotations

import dataclasses
from typing import Any

from shufflelab import capabilities as C
from shufflelab import spec as S

HOST = C.Capabilities(
    kernel="6.x", root=True, netns=True, veth=True, qdiscs=["htb", "pfifo", "bfifo"],
    congestion_controls=["reno", "bbr", "cubic"], tools={"iperf3": "3.12", "java": "17"},
)  # fmt: skip


def test_a_plain_spec_passes(spec_dict: dict[str, Any]) -> None:
    assert C.check(S.parse(spec_dict), HOST) == []


SEED_001_LINK = {
    "rate_mbps": 50,
    "queue_bytes": 2_500_000,
    "delay_ms": 2,
    "discipline": "red",
    "red": {"min_bytes": 500_000, "max_bytes": 1_000_000},
}


def test_delay_red_and_dctcp_are_refused_without_the_switch(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"]["bottleneck"] = dict(SEED_001_LINK, delay_ms=10)
    spec_dict["tcp"] = {"congestion_control": "dctcp"}
    spec_dict["hosts"]["tsink"]["tcp"] = {"congestion_control": "cubic", "vcc": True}
    problems = C.check(S.parse(spec_dict), HOST, "x.toml")
    text = "\n".join(problems)
    assert len(problems) == 4, problems
    assert "topology.bottleneck.delay_ms = 10" in text and "netem" in text
    assert "topology.bottleneck.discipline = 'red'" in text
    assert "tcp.congestion_control = 'dctcp' (hosts master, w1, w2, tgen)" in text and "reno, bbr, cubic" in text
    assert "tcp.vcc = true (hosts tsink)" in text
    assert all(p.startswith("x.toml: ") and "shufflelab-switch is not built" in p for p in problems)


def test_the_switch_makes_delay_red_dctcp_and_vcc_runnable(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"]["bottleneck"] = SEED_001_LINK
    spec_dict["tcp"] = {"congestion_control": "dctcp"}
    spec_dict["hosts"]["tsink"]["tcp"] = {"congestion_control": "reno", "vcc": True}
    spec_dict["telemetry"] = {"queue_period_ms": 1}
    sw = dataclasses.replace(HOST, userspace_switch=True, switch_binary="/x/shufflelab-switch", qdiscs=[])
    assert C.check(S.parse(spec_dict), sw) == []
    # dctcp hosts run cubic under the switch: a kernel without cubic is still refused, naming it
    no_cubic = dataclasses.replace(sw, congestion_controls=["reno"])
    assert C.check(S.parse(spec_dict), no_cubic) == [
        "tcp.congestion_control = 'cubic' (hosts master, w1, w2, tgen): the kernel offers reno"
    ]


def test_an_explicit_switch_datapath_needs_the_binary(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"]["bottleneck"]["datapath"] = "switch"
    problems = C.check(S.parse(spec_dict), HOST)
    assert problems == [
        "topology.bottleneck.datapath = 'switch': shufflelab-switch is not built here (make setup builds "
        "target/release/shufflelab-switch; or point SHUFFLELAB_SWITCH at the binary)"
    ]
    assert C.check(S.parse(spec_dict), dataclasses.replace(HOST, userspace_switch=True)) == []


def test_emulation_record_says_what_the_switch_provides(spec_dict: dict[str, Any]) -> None:
    assert C.emulation(S.parse(spec_dict)) == {"datapath": "kernel", "shaping": "HTB 50 Mbit/s + bfifo of 100000 bytes"}
    spec_dict["topology"]["bottleneck"] = SEED_001_LINK
    spec_dict["tcp"] = {"congestion_control": "dctcp"}
    em = C.emulation(S.parse(spec_dict))
    assert em["datapath"] == "switch"
    assert em["congestion_control"] == {"dctcp": "DCTCP in the userspace switch over cubic"}
    text = "\n".join(em["emulated_by_switch"])
    assert "2 ms one-way delay" in text
    assert "RED/ECN: limit 2500000 bytes, min 500000 bytes, max 1000000 bytes" in text
    assert "dctcp = DCTCP in the userspace switch over cubic (tcp_ecn = 1) on hosts master, w1, w2, tgen, tsink" in text


def test_missing_tools_and_root(spec_dict: dict[str, Any]) -> None:
    spec_dict["cross_traffic"] = {"udp_percent": 50}
    bare = C.Capabilities(root=False, tools={})
    text = "\n".join(C.check(S.parse(spec_dict), bare))
    assert "needs root" in text and "iperf3" in text and "Java" in text


def test_shipped_starvation_red_needs_only_the_switch() -> None:
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "experiments" / "starvation-red.toml"
    spec = S.load(path)
    base = S.load(path.with_name("starvation.toml"))
    assert spec.hosts == base.hosts and spec.topology.kind == base.topology.kind == "star"
    assert spec.topology.bottleneck.rate_mbps == base.topology.bottleneck.rate_mbps
    scenarios = S.expand(spec, str(path))
    assert {sc.spec.datapath() for sc in scenarios} == {"switch"}
    switch_host = dataclasses.replace(HOST, userspace_switch=True)
    for sc in scenarios:
        assert C.check(sc.spec, switch_host) == []
        assert C.check(sc.spec, HOST)  # refused, with reasons, where the switch is not built
