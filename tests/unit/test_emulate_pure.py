"""Pure parts of the emulate backend: command construction, parsers, rates."""

from __future__ import annotations

import gzip
import json

from conftest import FIXTURES
from shufflelab.emulate import fabric, traffic
from shufflelab.emulate.runner import _cc_in_ss, parse_cc_observed
from shufflelab.spec import Link, Tcp


def test_shaping_commands_bfifo_and_pfifo() -> None:
    root, cls, leaf = fabric.shaping_commands("ns1", "sw", Link(rate_mbps=100, queue_bytes=250_000))
    assert root[:4] == ["tc", "-n", "ns1", "qdisc"] and "htb" in root
    assert cls[cls.index("rate") + 1] == "100000000bit" and cls[cls.index("ceil") + 1] == "100000000bit"
    assert leaf[-3:] == ["bfifo", "limit", "250000"]
    *_, leaf2 = fabric.shaping_commands("ns1", "sw", Link(rate_mbps=10, queue_packets=50))
    assert leaf2[-3:] == ["pfifo", "limit", "50"]


def test_tcp_sysctls() -> None:
    s = fabric.tcp_sysctls(Tcp(congestion_control="reno", ecn=1, slow_start_after_idle=False))
    assert s == {
        "net.ipv4.tcp_congestion_control": "reno",
        "net.ipv4.tcp_ecn": "1",
        "net.ipv4.tcp_slow_start_after_idle": "0",
    }


def test_udp_rate_counts_headers_on_the_wire() -> None:
    bps = traffic.udp_payload_rate_bps(100, 50)
    assert bps == int(50e6 * 1400 / 1442)
    assert traffic.udp_payload_rate_bps(100, 0) == 0


def test_iperf3_summary_from_a_real_result(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "udp.json"
    with gzip.open(FIXTURES / "iperf3-udp-client.json.gz", "rt") as fh:
        p.write_text(fh.read())
    row = traffic.summarize("udp", p)
    assert row["bytes"] == 492_703_400
    assert 29e6 < row["bits_per_second"] < 29.3e6
    assert row["error"] is None  # stopping the client with SIGINT is how runs end, not an error
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert traffic.summarize("udp", bad)["error"] == "no JSON result"
    assert json.loads(p.read_text())["start"]["test_start"]["protocol"] == "UDP"


def test_cc_names_from_ss_output() -> None:
    text = (FIXTURES / "ss-tin-worker.txt").read_text()  # recorded in a worker: its link to the master
    assert _cc_in_ss(text, skip_ports=()) == ["cubic"]
    assert _cc_in_ss(text) == []  # daemon (port 7077) connections do not count
    executor = (
        "0 0 [::ffff:10.77.3.1]:41234 [::ffff:10.77.4.1]:39017\n"
        "\t reno wscale:10,10 rto:204 rtt:0.2/0.1 mss:1448 cwnd:10\n"
        "0 0 127.0.0.1:5000 127.0.0.1:5001\n\t bbr wscale:7,7\n"
    )
    assert _cc_in_ss(text + executor) == ["reno"]  # loopback is not an inter-host connection
    assert parse_cc_observed("cubic:3,reno:1") == {"cubic": 3, "reno": 1}
    assert parse_cc_observed(None) == {}


def test_select_filters_scenarios_by_label_parts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    import pytest

    from shufflelab import spec as S
    from shufflelab.emulate.runner import EmulateRunner

    root = Path(__file__).resolve().parents[2]
    sp = S.load(root / "experiments" / "starvation.toml")
    r = EmulateRunner(sp, "starvation.toml", tmp_path, select=["workload=groupby-test", "case=shared"])
    assert [s.label for s in r.scenarios] == [
        "workload=groupby-test,apps=1,case=shared",
        "workload=groupby-test,apps=2,case=shared",
    ]
    assert len(r.plan()) == 2 * sp.experiment.repetitions
    with pytest.raises(S.SpecError, match="no scenario matches"):
        EmulateRunner(sp, "starvation.toml", tmp_path, select=["apps=3"])
