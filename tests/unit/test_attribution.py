"""The starvation verdict's attribution on synthetic runs tables whose truth is known: a slowdown
made only of more CPU work never reads *starved*; one made of waiting for shuffle data reads
*starved* at every n >= 3, also when the cross traffic costs the executors CPU as well (which seed
001's strict test cannot pass); the committed verdicts are what docs/verdicts.md lists.

The runs: per executor slot, CPU work c, other busy time o and fetch wait f (seconds), idle slots
and gaps a fraction g of that; job time J = (c + o + f)(1 + g), executor run time R = cores (c + o
+ f), fetch wait F = cores f, task CPU U = cores c. Noise: every component of every run times an
independent uniform factor 1 +/- eps, eps from 2 to 15 % (run-to-run job-time spread of 3-9 %; the
committed results show 5-15 % on the job time, of which this is the realistic per-part share).

Effect sizes for the n = 3 claim: added waiting of at least 1x the baseline job time. At n = 3
Welch's interval has 2-4 degrees of freedom (t up to 4.3); in 3,000 random draws at eps = 15 %
and a CPU cost of up to 25 %, an added wait of 0.75x the job already read starved every time
(0.5x failed 28 times), so 1x leaves a margin; Hypothesis then searches the whole range.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from shufflelab import attribution as A
from shufflelab import diagnose as dg

JOB_S = 20.0
CORES = 4
SETTINGS = settings(max_examples=30, deadline=None, derandomize=True)


def _runs(
    n: int,
    seed: int,
    *,
    phi: float,
    util: float,
    eps: float,
    gap: float = 0.2,
    cpu_factor: float = 1.0,
    added_wait_s: float = 0.0,
) -> pd.DataFrame:
    """n runs of the model in the module doc; ``phi``: fetch wait's share of run time, ``util``: CPU
    work's share of the busy time; ``added_wait_s``/``cpu_factor``: the scenario's change."""
    rng = np.random.default_rng(seed)
    base = JOB_S / (1 + gap)
    f0, c0, o0 = base * phi, base * (1 - phi) * util, base * (1 - phi) * (1 - util)

    def noise() -> np.ndarray:
        return 1 + rng.uniform(-eps, eps, n)

    c, o, f, g = c0 * cpu_factor * noise(), o0 * noise(), (f0 + added_wait_s / (1 + gap)) * noise(), gap * noise()
    return pd.DataFrame(
        {
            "run_id": [f"r{seed}-{i}" for i in range(n)],
            "job_time_s": (c + o + f) * (1 + g),
            "executor_run_s": CORES * (c + o + f),
            "fetch_wait_s": CORES * f,
            "task_user_cpu_s": CORES * c,
            "executor_cpu_s": CORES * c * 1.05,
            "total_cores": CORES,
        }
    )


def _diagnose(base: pd.DataFrame, scen: pd.DataFrame) -> dg.Diagnosis:
    empty = pd.DataFrame(columns=["run_id", "executor_cpu_ms", "launch_at_ms", "finish_at_ms"])
    return dg.diagnose("udp", "none", base, scen, empty, empty)


table = dict(
    n=st.integers(3, 12),
    phi=st.floats(0.05, 0.5),
    util=st.floats(0.1, 0.9),
    eps=st.floats(0.02, 0.15),  # no noise at all: no interval, no verdict
    seed=st.integers(0, 2**31),
)


@SETTINGS
@given(slowdown=st.floats(0.1, 3.0), **table)
def test_a_pure_cpu_slowdown_never_reads_starved(
    slowdown: float, n: int, phi: float, util: float, eps: float, seed: int
) -> None:
    """More CPU work only (the job ``slowdown`` x its time slower from it): never starved."""
    cpu0 = JOB_S / 1.2 * (1 - phi) * util
    k = 1 + slowdown * (JOB_S / 1.2) / cpu0
    base = _runs(n, seed, phi=phi, util=util, eps=eps)
    scen = _runs(n, seed + 1, phi=phi, util=util, eps=eps, cpu_factor=k)
    d = _diagnose(base, scen)
    assert d.attribution is not None
    assert d.verdict != "starved", d.reasons
    assert d.attribution.busy.delta > d.attribution.waiting.delta


@SETTINGS
@given(added=st.floats(1.0, 4.0), **table)
def test_a_pure_wait_slowdown_reads_starved(
    added: float, n: int, phi: float, util: float, eps: float, seed: int
) -> None:
    """Waiting for data only, ``added`` x the baseline job time: starved at every n >= 3."""
    base = _runs(n, seed, phi=phi, util=util, eps=eps)
    scen = _runs(n, seed + 1, phi=phi, util=util, eps=eps, added_wait_s=added * JOB_S)
    d = _diagnose(base, scen)
    assert d.verdict == "starved", d.reasons
    att = d.attribution
    assert att is not None and att.waiting.above_zero and att.dominance.above_zero
    assert att.waiting_share > 0.5 > att.busy_share


@SETTINGS
@given(added=st.floats(1.0, 4.0), cpu_cost=st.floats(0.12, 0.25), **table)
def test_waiting_with_the_hosts_cpu_cost_reads_starved_where_the_strict_test_cannot(
    added: float, cpu_cost: float, n: int, phi: float, util: float, eps: float, seed: int
) -> None:
    """The committed results' case: the cross traffic costs the executors 12-25 % more CPU on the same
    cores while the job waits for data. Seed 001's strict test cannot show the CPU unchanged; the
    attribution still reads starved (the CPU's share is bounded and small)."""
    base = _runs(n, seed, phi=phi, util=util, eps=eps)
    scen = _runs(n, seed + 1, phi=phi, util=util, eps=eps, added_wait_s=added * JOB_S, cpu_factor=1 + cpu_cost)
    d = _diagnose(base, scen)
    assert d.verdict == "starved", d.reasons
    assert d.strict_verdict != "starved"
    assert d.attribution is not None and d.attribution.cpu_at_most_s < d.attribution.waiting.ci_low


def test_a_job_that_is_not_slower_is_not_starved() -> None:
    base = _runs(6, 1, phi=0.2, util=0.5, eps=0.05)
    scen = _runs(6, 2, phi=0.2, util=0.5, eps=0.05)
    assert _diagnose(base, scen).verdict == "not starved"


def test_waiting_and_cpu_together_read_mixed_with_both_shares() -> None:
    """Half the added time waiting, half more CPU work: neither part dominates."""
    cpu0 = JOB_S / 1.2 * 0.8  # CPU work per slot before the gaps (phi = 0.2, util = 1)
    base = _runs(8, 1, phi=0.2, util=1.0, eps=0.08)
    scen = _runs(8, 2, phi=0.2, util=1.0, eps=0.08, added_wait_s=10.0, cpu_factor=1 + 10.0 / 1.2 / cpu0)
    d = _diagnose(base, scen)
    assert d.verdict == "mixed", d.reasons
    assert d.attribution is not None and 0.3 < d.attribution.waiting_share < 0.7
    assert "waiting" in d.row()["shares"] and "busy" in d.row()["shares"]


def test_an_open_verdict_says_what_would_decide_it() -> None:
    base = _runs(3, 1, phi=0.2, util=0.5, eps=0.15)
    scen = _runs(3, 2, phi=0.2, util=0.5, eps=0.15, added_wait_s=1.5, cpu_factor=1.2)
    att = A.attribute(base, scen, "task_user_cpu_s")
    assert att is not None and att.verdict == "inconclusive"
    assert "runs a side" in att.decide and "decides:" in " ".join(att.reasons)


def test_without_run_time_the_strict_verdict_stands_and_says_why() -> None:
    base = _runs(5, 1, phi=0.2, util=0.5, eps=0.05).drop(columns=["executor_run_s"])
    scen = _runs(5, 2, phi=0.2, util=0.5, eps=0.05, added_wait_s=20.0).drop(columns=["executor_run_s"])
    d = _diagnose(base, scen)
    assert d.attribution is None and d.verdict == d.strict_verdict
    assert "no attribution" in d.reasons[-1]


@SETTINGS
@given(n=st.integers(3, 6), seed=st.integers(0, 2**31), slowdown=st.floats(0.0, 0.3))
def test_not_starved_needs_the_job_shown_less_than_the_tolerance_slower(n: int, seed: int, slowdown: float) -> None:
    """Noisy runs (+/-30 %) and a slowdown of 0-30 % of wait: failing to find a slowdown is not
    showing there is none -- 'not starved' only with the job ratio's interval below 1 + tolerance."""
    base = _runs(n, seed, phi=0.2, util=0.5, eps=0.3)
    scen = _runs(n, seed + 1, phi=0.2, util=0.5, eps=0.3, added_wait_s=slowdown * JOB_S)
    att = A.attribute(base, scen, "task_user_cpu_s")
    assert att is not None
    job = A.compare(base["job_time_s"].tolist(), scen["job_time_s"].tolist(), confidence=0.95, min_n=3)
    if att.verdict == "not starved" and not job.significant:
        assert job.ratio_ci_high < 1.10, att.reasons
    if att.verdict == "inconclusive" and not job.significant:
        assert "runs a side" in att.decide or att.decide == "the job time", att.decide
