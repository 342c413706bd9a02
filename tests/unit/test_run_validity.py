"""A run is ok only when its scenario's promises held (cross traffic, faults, self-test), and the
Spark cluster is ready only when its master says so; pure decision logic, no fabric."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import FIXTURES
from shufflelab import spec as S
from shufflelab.emulate import traffic, validity
from shufflelab.emulate.faults import FaultEvent
from shufflelab.emulate.spark import not_ready
from shufflelab.spec import CrossTraffic, Fault

JOB = validity.Window(1000.0, 1060.0)  # a 60 s job
UDP_BPS = traffic.udp_payload_rate_bps(20, 100)  # 19.4 Mbit/s of payload at 100 % of 20 Mbit/s


def _udp_row(**kw: Any) -> dict[str, Any]:
    row = {
        "kind": "udp", "error": None, "alive_at_end": True, "started_at": JOB.start - 1.0,
        "configured_bps": UDP_BPS, "job_bytes": int(UDP_BPS / 8 * JOB.seconds), "job_seconds": JOB.seconds,
    }  # fmt: skip
    row.update(kw)
    return row


def test_healthy_udp_cross_traffic_keeps_its_promise() -> None:
    assert validity.traffic_problems(CrossTraffic(udp_percent=100), 20, [_udp_row()], JOB) == []


def test_a_killed_iperf3_client_breaks_the_promise() -> None:
    # what a SIGKILLed client leaves: no JSON (so no intervals) and a client that was gone at the end
    dead = _udp_row(error="no JSON result", alive_at_end=False, job_bytes=None, job_seconds=None)
    problems = validity.traffic_problems(CrossTraffic(udp_percent=100), 20, [dead], JOB)
    assert any("exited before the run ended" in p for p in problems), problems
    assert any("no JSON result" in p for p in problems), problems
    # a UDP client killed early: a client that stopped after a few seconds, 7.7 MB of a promised ~145 MB
    short = _udp_row(alive_at_end=False, job_bytes=7_700_000, job_seconds=3.2)
    problems = validity.traffic_problems(CrossTraffic(udp_percent=100), 20, [short], JOB)
    assert any("ratio 0.05" in p for p in problems), problems
    status, cause = validity.verdict("ok", None, problems)
    assert status == "failed" and cause is not None and "UDP cross traffic" in cause


@given(ratio=st.floats(min_value=0.0, max_value=3.0))
def test_the_udp_rate_is_judged_over_the_whole_job(ratio: float) -> None:
    row = _udp_row(job_bytes=int(UDP_BPS / 8 * JOB.seconds * ratio))
    problems = validity.traffic_problems(CrossTraffic(udp_percent=100), 20, [row], JOB)
    exact = row["job_bytes"] * 8 / JOB.seconds / UDP_BPS  # after rounding to whole bytes
    assert (problems == []) == (abs(exact - 1) <= validity.UDP_RATE_TOLERANCE), (ratio, problems)


def test_traffic_missing_late_or_erroring_is_named() -> None:
    ct = CrossTraffic(udp_percent=50, tcp_pairs=2)
    tcp = {"kind": "tcp", "error": None, "alive_at_end": True, "started_at": JOB.start - 1, "job_bytes": 10**6,
           "job_seconds": JOB.seconds}  # fmt: skip
    # the promise is the spec's rate: a client sending 100 % where 50 % was configured breaks it too
    assert "ratio 2.000" in validity.traffic_problems(ct, 20, [_udp_row(), tcp], JOB)[0]
    ok_udp = _udp_row()
    ct100 = CrossTraffic(udp_percent=100, tcp_pairs=2)
    assert validity.traffic_problems(ct100, 20, [ok_udp, tcp], JOB) == []
    assert validity.traffic_problems(ct100, 20, [ok_udp], JOB) == ["TCP cross traffic: no iperf3 result"]
    silent = {**tcp, "job_bytes": 0}
    assert validity.traffic_problems(ct100, 20, [ok_udp, silent], JOB) == [
        "TCP cross traffic: sent nothing during the job"
    ]
    late = _udp_row(started_at=JOB.start + 5)
    assert any("started 5.0 s after the job" in p for p in validity.traffic_problems(ct100, 20, [late, tcp], JOB))
    failed = {**tcp, "error": "control socket has closed unexpectedly"}
    assert any("closed unexpectedly" in p for p in validity.traffic_problems(ct100, 20, [ok_udp, failed], JOB))


def test_without_cross_traffic_or_a_job_span_only_what_can_be_judged_is() -> None:
    assert validity.traffic_problems(CrossTraffic(), 20, [], JOB) == []
    assert not CrossTraffic().active and CrossTraffic(tcp_pairs=1).active and CrossTraffic(udp_percent=1).active
    # no job span (the job failed): the client's survival is still judged, the rate is not
    assert validity.traffic_problems(CrossTraffic(udp_percent=100), 20, [_udp_row(job_bytes=0)], None) == []
    assert validity.traffic_problems(CrossTraffic(udp_percent=100), 20, [_udp_row(alive_at_end=False)], None)


def test_bytes_in_a_window_are_cut_pro_rata() -> None:
    ivs = [(0.0, 1.0, 100), (1.0, 2.0, 200), (2.0, 2.5, 50)]
    assert traffic.sent_between(ivs, 0.0, 2.5) == (350, 2.5)
    assert traffic.sent_between(ivs, 0.5, 1.5) == (150, 1.0)
    assert traffic.sent_between(ivs, 3.0, 4.0) == (0, 0.0)


@given(cuts=st.lists(st.floats(min_value=0, max_value=10, allow_nan=False), min_size=1, max_size=8))
def test_windows_that_partition_the_test_add_up_to_everything_sent(cuts: list[float]) -> None:
    ivs = [(float(i), float(i + 1), 1000 * (i + 1)) for i in range(10)]
    edges = [0.0, *sorted(cuts), 10.0]
    parts = [traffic.sent_between(ivs, a, b)[0] for a, b in zip(edges, edges[1:], strict=False)]
    assert abs(sum(parts) - 55_000) <= len(parts)  # each part rounds to whole bytes


def test_a_real_udp_result_sent_its_configured_rate(tmp_path: Path) -> None:
    p = tmp_path / "udp.json"
    with gzip.open(FIXTURES / "iperf3-udp-client.json.gz", "rt") as fh:
        p.write_text(fh.read())
    ivs = traffic.sent_intervals(p, started_at=5000.0)
    assert len(ivs) == 136 and ivs[0][0] == 5000.0
    sent, covered = traffic.sent_between(ivs, 5010.0, 5070.0)
    assert covered == pytest.approx(60.0)
    assert sent * 8 / 60 / 29_126_213 == pytest.approx(1.0, abs=0.01)  # the fixture's target bitrate
    assert traffic.sent_intervals(tmp_path / "missing.json", 0.0) == []


def test_faults_that_did_not_happen_are_named() -> None:
    faults = [
        Fault(kind="executor-kill", host="w1", at_s=1.0),
        Fault(kind="link-down", host="w2", at_s=2.0, duration_s=3),
        Fault(kind="udp-burst", at_s=30.0, duration_s=2),
    ]
    done = [FaultEvent(0, "executor-kill", "w1", 1.0, started_at=10.0, ended_at=10.0, detail="SIGKILL")]
    events = [
        *done,
        FaultEvent(1, "link-down", "w2", 2.0, started_at=11.0, ended_at=14.0, error="RuntimeError: boom"),
        FaultEvent(2, "udp-burst", None, 30.0, detail="not injected: the job ended first"),
    ]
    problems = validity.fault_problems(faults, events)
    assert problems == [
        "fault 1 (link-down on w2 at 2 s): RuntimeError: boom",
        "fault 2 (udp-burst at 30 s): not injected (not injected: the job ended first)",
    ]
    assert validity.fault_problems(faults[:1], done) == []
    assert validity.fault_problems(faults[:1], []) == ["fault 0 (executor-kill on w1 at 1 s): not injected"]


def test_selftest_is_required_only_when_the_spec_refuses_without_it() -> None:
    bad = [{"port": "r:sw", "ok": False, "problem": "delivered 0.60 of its configured 20 Mbit/s"}]
    assert validity.selftest_problems("warn", bad) == []
    assert validity.selftest_problems("refuse", bad) == [
        "link self-test: r:sw: delivered 0.60 of its configured 20 Mbit/s"
    ]
    assert validity.selftest_problems("refuse", []) == ["link self-test: no result (telemetry.selftest = 'refuse')"]
    assert validity.selftest_problems("refuse", [{"port": "r:sw", "ok": True, "problem": None}]) == []


def test_verdict_keeps_earlier_failures_and_explains_new_ones() -> None:
    assert validity.verdict("ok", None, []) == ("ok", None)
    assert validity.verdict("timeout", "job exceeded", ["x"]) == ("timeout", "job exceeded")
    status, cause = validity.verdict("ok", None, ["a", "b"])
    assert status == "failed" and cause == "scenario not delivered: a; b"


# -- cluster readiness, from the master's own status ----------------------------------------------------
URL = "spark://10.77.1.1:7077"
WORKERS = {"10.77.2.1": 2, "10.77.3.1": 2}


def _status(*workers: tuple[str, str, int], state: str = "ALIVE", url: str = URL) -> dict[str, Any]:
    return {"url": url, "status": state, "workers": [{"host": h, "state": s, "cores": c} for h, s, c in workers]}


def test_a_cluster_is_ready_when_its_master_lists_every_worker_alive_with_its_cores() -> None:
    ready = _status(("10.77.2.1", "ALIVE", 2), ("10.77.3.1", "ALIVE", 2))
    assert not_ready(ready, URL, WORKERS) is None
    assert not_ready(ready, URL, {}) is None  # the master alone (before its workers start)
    assert not_ready(None, URL, WORKERS) == "the master does not answer yet"
    assert "not registered" in str(not_ready(_status(("10.77.2.1", "ALIVE", 2)), URL, WORKERS))
    dead = _status(("10.77.2.1", "ALIVE", 2), ("10.77.3.1", "DEAD", 2))
    assert "10.77.3.1" in str(not_ready(dead, URL, WORKERS))
    short = _status(("10.77.2.1", "ALIVE", 2), ("10.77.3.1", "ALIVE", 1))
    assert "10.77.3.1 (1 of 2)" in str(not_ready(short, URL, WORKERS))
    assert "STANDBY" in str(not_ready(_status(state="STANDBY"), URL, {}))
    assert "not 'spark" in str(not_ready(_status(url="spark://10.77.9.9:7077"), URL, {}))


# -- resume -------------------------------------------------------------------------------------------
def test_a_failed_run_is_planned_again_on_resume(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    from shufflelab.emulate.runner import EmulateRunner
    from shufflelab.results import RunRecord

    sp = S.parse(spec_dict)  # 2 repetitions of one scenario
    r = EmulateRunner(sp, "t.toml", tmp_path)
    (sc,) = r.scenarios
    for rep, status in ((1, "failed"), (2, "ok")):
        r.store.write_run(RunRecord({"run_id": f"x{rep}", "scenario_id": sc.scenario_id, "rep": rep,
                                     "status": status}, {}))  # fmt: skip
    assert [(s.scenario_id, rep) for s, rep in r.plan()] == [(sc.scenario_id, 1)]
