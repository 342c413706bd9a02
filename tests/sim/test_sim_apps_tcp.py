"""The fabric's per-congestion-control correction ([tcp]) through the application spec and report."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from tests.sim.test_sim_apps import SPEC, data_folder

from shufflelab.sim import app_spec, apps_sim
from shufflelab.sim.apps_report import report
from shufflelab.sim.spec import SimSpecError

# 1 Gbit/s host links, 50 µs per hop, the shuffle's bytes × 100,000 (tens of MB per block)
FAST = (
    SPEC.replace("host_gbps = 0.000008", "host_gbps = 1\nhost_delay_us = 50")
    .replace("task_factor = 2", "task_factor = 2\nbytes_factor = 100000")
    .replace('"topology.oversubscription" = [1, 4]', '"topology.oversubscription" = [1]')
)


def _run(tmp_path: Path, spec: str) -> dict[str, Any]:
    data_folder(tmp_path / "data")
    (tmp_path / "s.toml").write_text(spec)
    return apps_sim.run_experiment(tmp_path / "s.toml", tmp_path / "res").doc


def test_absent_tcp_is_the_plain_model(tmp_path: Path) -> None:
    data_folder(tmp_path / "data")
    spec = app_spec.parse(tomllib.loads(FAST))
    assert spec.tcp is None
    assert "tcp" not in app_spec.core_config(spec, 0, tmp_path)
    doc = _run(tmp_path, FAST)
    assert "tcp" not in doc["runs"][0] and "tcp_links" not in doc["runs"][0]["result"]


def test_discipline_follows_the_congestion_control() -> None:
    assert app_spec.Tcp(cc="dctcp").core()["discipline"] == "step"
    assert app_spec.Tcp(cc="cubic").core()["discipline"] == "droptail"
    assert app_spec.Tcp(cc="cubic", discipline="red").core()["discipline"] == "red"


def test_reno_through_a_tiny_buffer_slows_the_shuffle(tmp_path: Path) -> None:
    plain = _run(tmp_path / "a", FAST)["runs"][0]["result"]
    doc = _run(tmp_path / "b", FAST + '\n[tcp]\ncc = "reno"\nqueue_packets = 2\n')
    run = doc["runs"][0]
    links = run["result"]["tcp_links"]
    assert run["tcp"]["discipline"] == "droptail" and links
    assert min(k["efficiency"] for k in links) < 0.99
    assert run["result"]["apps"][0]["job_time_s"] > plain["apps"][0]["job_time_s"]
    md = report(tmp_path / "b" / "res" / "sim-app-test.apps.json", tmp_path / "rep").read_text()
    assert "packet-level probe per link class" in md and "equal times" not in md


def test_matrix_over_the_congestion_control(tmp_path: Path) -> None:
    spec = FAST.replace("[matrix]", '[tcp]\ncc = "cubic"\n[matrix]\n"tcp.cc" = ["cubic", "dctcp"]')
    runs = _run(tmp_path, spec)["runs"]
    assert [r["tcp"]["discipline"] for r in runs] == ["droptail", "step"]
    cubic, dctcp = (r["result"]["tcp_links"][0]["queue_delay_s"] for r in runs)
    assert dctcp < cubic


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('cc = "dctcp"\ndiscipline = "droptail"', "tcp.discipline: DCTCP needs a marking queue"),
        ('cc = "vegas"', "tcp.cc"),
        ('cc = "cubic"\nred_min_packets = 80', "tcp.red_min_packets"),
        ('cc = "cubic"\nflows = 0', "tcp.flows"),
    ],
)
def test_tcp_errors_name_the_field(tmp_path: Path, table: str, message: str) -> None:
    data_folder(tmp_path / "data")
    (tmp_path / "s.toml").write_text(FAST + f"\n[tcp]\n{table}\n")
    with pytest.raises(SimSpecError, match=message):
        apps_sim.run_experiment(tmp_path / "s.toml", tmp_path / "res")
