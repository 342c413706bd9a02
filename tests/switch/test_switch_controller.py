"""Unit tests of the switch controller's configuration (no root, no binary)."""

from __future__ import annotations

from pathlib import Path

from shufflelab.switch import Red, SwitchConfig, SwitchHost, SwitchPort, last_rows, read_telemetry
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


def _row(t: float, dev: str, sent: int, marks: int) -> str:
    return f"{t:.6f},{dev},0,0,0,{sent},{sent // 1000},0,{sent},0,{marks}\n"


def test_last_rows_reads_the_tail_and_skips_a_row_being_written(tmp_path: Path) -> None:
    p = tmp_path / "q.csv"
    lines = [TELEMETRY_HEADER + "\n"]
    for k in range(3000):  # longer than the first tail read
        lines += [_row(k / 10, "h1", 1000 * k, k), _row(k / 10, "h2", 2000 * k, 0)]
    p.write_text("".join(lines) + "300.1,h1,5,1,0,9")  # the switch is mid-way through a row
    rows = last_rows(p, ["h1", "h2"], tail_bytes=256)
    assert rows["h1"]["sent_bytes"] == 2_999_000 and rows["h1"]["marks"] == 2999
    assert rows["h2"]["sent_bytes"] == 5_998_000
    only_h1 = tmp_path / "one.csv"
    only_h1.write_text(
        TELEMETRY_HEADER + "\n" + _row(0, "h1", 5000, 1) + "".join(_row(k, "h2", k, 0) for k in range(500))
    )
    assert last_rows(only_h1, ["h1", "h2"], tail_bytes=100)["h1"]["sent_bytes"] == 5000
    empty = tmp_path / "empty.csv"
    empty.write_text(TELEMETRY_HEADER + "\n")
    assert last_rows(empty, ["h1"]) == {}
    assert last_rows(tmp_path / "missing.csv", ["h1"]) == {}


def test_switch_cpu_and_rps_mask() -> None:
    from shufflelab.emulate.fabric import rps_mask_without
    from shufflelab.switch.config import switch_cpu

    assert switch_cpu(2) == 1 and switch_cpu(8) == 7 and switch_cpu(1) is None
    assert rps_mask_without(1, 2) == "1" and rps_mask_without(7, 8) == "7f" and rps_mask_without(0, 4) == "e"
