from __future__ import annotations

from typing import Any

from shufflelab import capabilities as C
from shufflelab import spec as S

HOST = C.Capabilities(
    kernel="6.x", root=True, netns=True, veth=True, qdiscs=["htb", "pfifo", "bfifo"],
    congestion_controls=["reno", "bbr", "cubic"], tools={"iperf3": "3.12", "java": "17"},
)  # fmt: skip


def test_a_plain_spec_passes(spec_dict: dict[str, Any]) -> None:
    assert C.check(S.parse(spec_dict), HOST) == []


def test_delay_red_and_dctcp_are_refused_with_reasons(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"]["bottleneck"].update(delay_ms=10, discipline="red")
    spec_dict["tcp"] = {"congestion_control": "dctcp"}
    problems = C.check(S.parse(spec_dict), HOST, "x.toml")
    text = "\n".join(problems)
    assert len(problems) == 3
    assert "delay_ms = 10" in text and "netem" in text
    assert "discipline = 'red'" in text
    assert "'dctcp'" in text and "reno, bbr, cubic" in text
    assert all(p.startswith("x.toml: ") for p in problems)


def test_missing_tools_and_root(spec_dict: dict[str, Any]) -> None:
    spec_dict["cross_traffic"] = {"udp_percent": 50}
    bare = C.Capabilities(root=False, tools={})
    text = "\n".join(C.check(S.parse(spec_dict), bare))
    assert "needs root" in text and "iperf3" in text and "Java" in text
