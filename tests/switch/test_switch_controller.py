"""Unit tests of the switch controller's configuration (no root, no binary)."""

from __future__ import annotations

from pathlib import Path

from shufflelab.switch import Red, SwitchConfig, SwitchHost, SwitchPort, read_telemetry
from shufflelab.switch.controller import TELEMETRY_HEADER


def test_config_json_has_units_and_red() -> None:
    cfg = SwitchConfig(
        ports=[SwitchPort("h1", rate_mbps=100, delay_ms=2, queue_bytes=2_500_000, red=Red(500_000, 1_000_000))],
        hosts=[SwitchHost("10.77.1.1", "02:00:00:00:00:01", "h1", "vcc")],
        telemetry_period_ms=1,
    )
    j = cfg.to_json(Path("/tmp/q.csv"))
    port = j["ports"][0]
    assert port == {
        "ifname": "h1",
        "rate_bps": 100_000_000,
        "delay_us": 2000.0,
        "discipline": "red",
        "queue_bytes": 2_500_000,
        "red": {"min_bytes": 500_000, "max_bytes": 1_000_000, "max_p": 0.1, "ewma_weight": None, "ecn": True},
    }
    assert j["hosts"][0]["mode"] == "vcc"
    assert j["telemetry"] == {"path": "/tmp/q.csv", "period_ms": 1}


def test_telemetry_header_extends_the_kernel_sampler() -> None:
    from shufflelab.emulate.sampler import HEADER

    assert TELEMETRY_HEADER == HEADER + ",marks"


def test_read_telemetry(tmp_path: Path) -> None:
    p = tmp_path / "q.csv"
    p.write_text(TELEMETRY_HEADER + "\n1.5,h1,10,1,0,100,2,0,90,80,3\n")
    rows = read_telemetry(p)
    assert rows == [
        {
            "t": 1.5,
            "dev": "h1",
            "backlog_bytes": 10.0,
            "backlog_packets": 1.0,
            "drops": 0.0,
            "sent_bytes": 100.0,
            "sent_packets": 2.0,
            "overlimits": 0.0,
            "tx_bytes": 90.0,
            "rx_bytes": 80.0,
            "marks": 3.0,
        }
    ]
