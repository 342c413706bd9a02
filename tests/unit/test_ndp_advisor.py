"""Net-Aware for the real NDP system: the decision follows the network, the storage CPUs and the
proxies' live queues the way seed 003's model says."""

from __future__ import annotations

import pytest

from shufflelab.ndp import advisor as A

PROFILE = {
    "partitions": 8,
    "parquet_bytes": 100e6,
    "queries": {
        "q": {
            "none": {"crossing_bytes": 100e6, "storage_cpu_s": 0.0},
            "filter": {"crossing_bytes": 400e6, "storage_cpu_s": 8.0},  # unselective filter, uncompressed Arrow
            "filter+project": {"crossing_bytes": 20e6, "storage_cpu_s": 6.0},
            "full": {"crossing_bytes": 1e4, "storage_cpu_s": 6.5},
        }
    },
}


def model(gbps: float, storage_cpus: float, **kw: object) -> A.Model:
    return A.Model(
        bandwidth_gbps=gbps, storage_hosts=2, storage_cpus_per_host=storage_cpus, proxy_workers=1,
        compute_cpus=2.0, profile=PROFILE, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_slow_link_pushes_everything_fast_link_and_weak_storage_pushes_nothing() -> None:
    assert A.decide("q", model(0.1, 1.0), []).policy == "full"
    d = A.decide("q", model(100.0, 0.05), [])
    assert d.policy == "none", d.times_s
    # the unselective filter alone is never worth it here: 4x the bytes of the files
    assert d.times_s["filter"] > d.times_s["none"]


def test_terms_are_the_model_formula() -> None:
    m = model(1.0, 0.5)
    d = A.decide("q", m, [], concurrent_queries=2)
    c = m.costs
    # none: 8·D/(B/S) + D·parquet cost / compute CPUs
    assert d.times_s["none"] == pytest.approx(8 * 0.1 / (1.0 / 2) + 100e6 * c["parquet_s_per_byte"] / 2, abs=1e-3)
    # full: storage CPU × overhead over 2 hosts × 0.5 CPU, then a few kB
    want = 6.5 * c["storage_overhead"] / 1.0 + 8 * 1e-5 / 0.5 + 1e4 * c["arrow_s_per_byte"] / 2
    assert d.times_s["full"] == pytest.approx(want, abs=1e-3)
    assert d.terms["concurrent_queries"] == 2 and d.terms["storage_wait_s"] == 0.0


def test_a_long_storage_queue_turns_the_decision_back() -> None:
    m = model(0.4, 1.0)
    assert A.decide("q", m, []).policy == "full"
    busy = [{"queued": 30, "running": 1, "workers": 1, "service_s": 2.0}] * 2
    d = A.decide("q", m, busy)
    assert d.terms["storage_wait_s"] == pytest.approx(62.0)
    assert d.policy == "none", d.times_s


def test_unanswered_proxies_and_fallback_service_time() -> None:
    assert A.storage_wait_s([{"error": "timed out"}], 1.0) == 0.0
    assert A.storage_wait_s([{"queued": 2, "running": 1, "workers": 3, "service_s": None}], 1.5) == pytest.approx(1.5)
    with pytest.raises(KeyError, match="no profile"):
        A.decide("q9", model(1.0, 1.0), [])
