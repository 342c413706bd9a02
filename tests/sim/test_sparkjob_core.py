"""The Rust core's Spark-application model (``run_spark``) against its Python twin
(:mod:`shufflelab.sim.sparkjob`): the same job time, stage spans and bytes on random jobs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

core = pytest.importorskip("shufflelab_simcore", reason="simulator core not built: run scripts/setup.sh")
if not hasattr(core, "run_spark"):
    pytest.skip("the installed simulator core predates run_spark: rebuild it", allow_module_level=True)

from shufflelab.sim import sparkjob  # noqa: E402

C = 12.5e6


def rust(config: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(core.run_spark(json.dumps(config)))
    return out


tasks = st.builds(
    lambda cpu, lat, fetch, local, rtt, ex: {
        "cpu_s": cpu,
        "latency_s": lat,
        "fetch_bytes": fetch,
        "local_fraction": local,
        "control_round_trips": rtt,
        "executor": ex,
    },
    st.floats(0, 2),
    st.floats(0, 0.3),
    st.lists(st.floats(0, 3e6), max_size=3),
    st.floats(0, 1),
    st.sampled_from([0.0, 1.0, 2.0]),
    st.integers(-1, 3),
)
platforms = st.builds(
    lambda slots, cores, bg, u, tcp, cross, red, rtt, loss: {
        "slots": slots,
        "slots_per_executor": 1,
        "host_cores": cores,
        "background_cores": bg,
        "link_bytes_per_s": C,
        "cross_bytes_per_s": u * C,
        "cross_tcp_flows": cross,
        "queue_bytes": 250_000.0,
        "tcp": tcp,
        "mss_wire_bytes": 1514.0,
        "red": red,
        "base_rtt_s": rtt,
        "control_loss_s": loss,
    },
    st.integers(1, 4),
    st.sampled_from([1.0, 2.0, 4.0]),
    st.floats(0, 0.5),
    st.sampled_from([0.0, 0.5, 0.9, 1.0]),
    st.sampled_from(["loss", "bbr", "dctcp"]),
    st.integers(0, 2),
    st.sampled_from(
        [
            None,
            {"min_bytes": 30_000.0, "max_bytes": 30_000.0},
            {"min_bytes": 20_000.0, "max_bytes": 80_000.0, "max_p": 0.1, "ewma_weight": 0.002},
        ]
    ),
    st.sampled_from([0.0, 0.002]),
    st.sampled_from([0.0, 0.08]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    platforms,
    st.lists(st.tuples(st.floats(0, 0.5), st.lists(tasks, max_size=6)), min_size=1, max_size=4),
    st.floats(0, 0.2),
)
def test_rust_and_python_agree(platform: dict[str, Any], stages: list[Any], tail: float) -> None:
    config = {
        "platform": platform,
        "stages": [{"stage_id": i, "gap_s": g, "tasks": ts} for i, (g, ts) in enumerate(stages)],
        "tail_s": tail,
    }
    py = sparkjob.simulate(config)
    rs = rust(config)
    assert rs["job_time_s"] == pytest.approx(py["job_time_s"], rel=1e-9, abs=1e-9)
    assert rs["network_bytes"] == pytest.approx(py["network_bytes"], rel=1e-9, abs=1e-3)
    assert [s["stage_id"] for s in rs["stages"]] == [s["stage_id"] for s in py["stages"]]
    for a, b in zip(rs["stages"], py["stages"], strict=True):
        assert a["end_s"] == pytest.approx(b["end_s"], rel=1e-9, abs=1e-9)
    key = lambda r: (r["stage_id"], r["index"])  # noqa: E731
    for a, b in zip(sorted(rs["tasks"], key=key), sorted(py["tasks"], key=key), strict=True):
        assert a["slot"] == b["slot"]
        assert a["end_s"] == pytest.approx(b["end_s"], rel=1e-9, abs=1e-9)
        assert a["blocked_s"] == pytest.approx(b["blocked_s"], rel=1e-6, abs=1e-9)


def test_rust_refuses_a_bad_configuration() -> None:
    config = {
        "platform": {"slots": 0, "host_cores": 2, "link_bytes_per_s": C, "queue_bytes": 1e5, "tcp": "loss"},
        "stages": [],
    }
    with pytest.raises(ValueError, match="slots"):
        core.run_spark(json.dumps(config))


def test_switch_logic_sets_the_queue_of_a_marking_bottleneck() -> None:
    """The packet-level probe (the switch's queue and DCTCP windows on virtual packets): a droptail
    FIFO stands near full under loss-based senders, a DCTCP-marking queue near its threshold."""
    base = {"slots": 4, "host_cores": 2.0, "link_bytes_per_s": C, "queue_bytes": 250_000.0, "base_rtt_s": 0.001}
    fifo = sparkjob.operating_point(sparkjob.probe({**base, "tcp": "loss"}, 4))
    marking = sparkjob.operating_point(
        sparkjob.probe({**base, "tcp": "dctcp", "red": {"min_bytes": 30_000.0, "max_bytes": 30_000.0}}, 4)
    )
    assert fifo["mean_backlog_bytes"] > 120_000
    assert 10_000 < marking["mean_backlog_bytes"] < 60_000
    assert marking["mark_share"] > 0 and marking["drop_share"] == 0
    with pytest.raises(ValueError, match="queue_bytes"):
        sparkjob.operating_point(sparkjob.probe({**base, "queue_bytes": 10.0, "tcp": "loss"}, 1))
