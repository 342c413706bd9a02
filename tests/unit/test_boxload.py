"""The fidelity of the box per run: /proc/stat parsed, the run queue and softirq share from samples,
the switch's lag from its status CSV, and each threshold judged (fakes only: no real /proc)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from conftest import BASE_SPEC
from shufflelab import spec as S
from shufflelab.emulate import boxload as B
from shufflelab.report.data import Data
from shufflelab.report.text import box_fact, box_verdict_note

PROC_STAT = """cpu  100 5 50 800 10 2 30 0 0 0
cpu0 50 2 25 400 5 1 15 0 0 0
intr 12345
procs_running 3
procs_blocked 0
"""


def _samples(runq: list[int], softirq_per_step: int, busy_per_step: int = 100) -> pd.DataFrame:
    """Samples whose jiffies grow by ``busy_per_step`` a step, ``softirq_per_step`` of them softirq."""
    rows = []
    for k, r in enumerate(runq):
        rows.append(
            {"t": float(k), "procs_running": r, "user": k * (busy_per_step - softirq_per_step), "nice": 0,
             "system": 0, "idle": k * 100, "iowait": 0, "irq": 0, "softirq": k * softirq_per_step, "steal": 0}
        )  # fmt: skip
    return pd.DataFrame(rows)


def test_proc_stat_is_read_for_the_run_queue_and_the_cpu_modes() -> None:
    s = B.parse_proc_stat(PROC_STAT, 1.5)
    assert s.procs_running == 3 and s.jiffies["softirq"] == 30 and s.jiffies["idle"] == 800
    assert s.row() == [1.5, 3, 100, 5, 50, 800, 10, 2, 30, 0]


def test_a_sampler_thread_with_a_fake_proc_stat_writes_its_samples(tmp_path: Path) -> None:
    t = iter(range(1000))
    sampler = B.BoxSampler(period_s=0.01, read=lambda: PROC_STAT, clock=lambda: float(next(t))).start()
    while len(sampler.samples) < 3:
        pass
    sampler.stop(tmp_path / "box_load.csv")
    df = pd.read_csv(tmp_path / "box_load.csv")
    assert list(df.columns) == list(B.CSV_HEADER) and len(df) >= 3 and set(df["procs_running"]) == {3}


def test_run_queue_per_core_and_softirq_share() -> None:
    runq, soft = B.from_samples(_samples([5, 5, 5, 5], softirq_per_step=40), ncpu=2)
    assert runq == 2.0  # (5 - the sampler) / 2 cores
    assert soft == pytest.approx(40 / 200)  # 40 of 100 busy + 100 idle jiffies per step
    assert B.from_samples(pd.DataFrame(), 2) == (None, None)


@pytest.mark.parametrize(
    ("load", "reason"),
    [
        (B.BoxLoad(runq_per_core=B.RUNQ_PER_CORE + 0.01), "run queue"),
        (B.BoxLoad(softirq_share=B.SOFTIRQ_SHARE + 0.01), "softirq"),
        (B.BoxLoad(switch_lag_mean_ms=B.SWITCH_LAG_MEAN_MS + 0.01), "behind its schedule"),
        (B.BoxLoad(selftest_failed=["sw: goodput 0.7 of the rate"]), "link self-test: sw"),
    ],
)
def test_each_sign_over_its_threshold_labels_the_run(load: B.BoxLoad, reason: str) -> None:
    bad, why = load.verdict()
    assert bad and len(why) == 1 and reason in why[0], why


def test_a_box_at_its_thresholds_is_not_the_bottleneck() -> None:
    at = B.BoxLoad(
        runq_per_core=B.RUNQ_PER_CORE, softirq_share=B.SOFTIRQ_SHARE, switch_lag_mean_ms=B.SWITCH_LAG_MEAN_MS,
        switch_lag_p99_ms=50.0,  # spikes are recorded, not judged
    )  # fmt: skip
    assert at.verdict() == (False, [])
    assert B.BoxLoad().verdict() == (False, [])  # nothing known: no label


def test_the_switch_lag_is_the_event_weighted_mean(tmp_path: Path) -> None:
    status = pd.DataFrame(
        {"lag_events": [0, 100, 300], "lag_mean_us": [0.0, 2000.0, 200.0], "lag_max_us": [0.0, 9000.0, 800.0]}
    )
    mean, p99 = B.switch_lag_ms(status)
    assert mean == pytest.approx((100 * 2.0 + 300 * 0.2) / 400)
    assert p99 == pytest.approx(8.918)


def test_a_run_folder_is_assessed_and_becomes_runs_columns(tmp_path: Path) -> None:
    _samples([4] * 5, softirq_per_step=10).to_csv(tmp_path / "box_load.csv", index=False)
    pd.DataFrame({"lag_events": [10], "lag_mean_us": [30.0], "lag_max_us": [90.0]}).to_csv(
        tmp_path / "switch_status.csv", index=False
    )
    cols = B.columns(B.assess(tmp_path, ncpu=2, selftest=[{"port": "sw", "ok": True}]))
    assert cols["box_runq_per_core"] == 1.5 and cols["box_bottleneck"] is False and cols["box_reasons"] is None
    cols = B.columns(B.assess(tmp_path, ncpu=1, selftest=[]))
    assert cols["box_bottleneck"] is True and "3.00 runnable threads per core" in cols["box_reasons"]
    empty = B.columns(B.assess(tmp_path / "none", ncpu=2, selftest=[]))
    assert empty["box_bottleneck"] is False and empty["box_runq_per_core"] is None


def _data(rows: list[dict[str, object]]) -> Data:
    return Data("t", "", S.parse(BASE_SPEC), pd.DataFrame(rows), [], {})


def test_the_report_says_which_verdicts_rest_on_runs_of_an_overloaded_box() -> None:
    rows = [
        {
            "label": "udp=100",
            "status": "ok",
            "box_bottleneck": True,
            "box_reasons": "softirq 31 % of CPU time (> 25 %)",
        },
        {"label": "udp=100", "status": "ok", "box_bottleneck": False, "box_reasons": None},
        {
            "label": "udp=0",
            "status": "ok",
            "box_bottleneck": True,
            "box_reasons": "link self-test: r:w4: delivered 0.63 (goodput 12.0 Mbit/s; allowed 0.85-1.08)",
        },
        {"label": "udp=50", "status": "ok", "box_bottleneck": False, "box_reasons": None},
        {"label": "udp=50", "status": "failed", "box_bottleneck": True, "box_reasons": "run queue 2.1 ..."},
    ]
    d = _data(rows)
    note = box_verdict_note(d, "udp=100", "udp=0")
    assert "built on 2 of 3 runs where the emulation host was itself the bottleneck (softirq, link self-test)" in note
    assert "built on 1 of 2 runs" in box_verdict_note(d, "udp=50", "udp=0")  # the failed one is in no verdict
    assert "in 2 of 4 ok runs" in (box_fact(d) or "")
    older = _data([{"label": "a", "status": "ok"}])  # a store from before the columns
    assert box_fact(older) is None and box_verdict_note(older, "a", "a") == ""
