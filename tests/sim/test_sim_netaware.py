"""The Net-Aware planner: formulas by hand, the prefix rule as a property, Python vs Rust."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shufflelab.netaware import (
    NetworkEstimate,
    OperatorEstimate,
    PrefixEstimate,
    benefits,
    compute_time_s,
    decisions,
    plan,
    plan_chain,
    plan_prefixes,
    transfer_time_s,
)


def op(**kw: float) -> OperatorEstimate:
    base = dict(
        name="op",
        partitions=600.0,
        input_gb=161.0,
        output_gb=2.7,
        compute_queued_partitions=0.0,
        compute_drain_partitions_per_s=29.6,
        storage_queued_partitions=0.0,
        storage_drain_partitions_per_s=6.77,
    )
    base.update(kw)
    return OperatorEstimate(**base)  # type: ignore[arg-type]


def test_compute_time_is_queue_plus_partitions_over_drain_rate() -> None:
    assert compute_time_s(40, 10, 60) == pytest.approx(10.0)
    assert compute_time_s(5, math.inf, 60) == 0.0


def test_transfer_time_shares_below_s_max_and_waits_at_s_max() -> None:
    net = NetworkEstimate(bandwidth_gbps=4, concurrent_transfers=2, max_concurrent_transfers=4, backlog_gb=10)
    assert transfer_time_s(1.0, net) == pytest.approx(8 * 1.0 / (4 / 2))
    full = NetworkEstimate(bandwidth_gbps=4, concurrent_transfers=4, max_concurrent_transfers=4, backlog_gb=10)
    assert transfer_time_s(1.0, full) == pytest.approx(8 * (10 + 1.0) / (4 / 4))


def test_seed_003_single_job_choices() -> None:
    # 150 GiB at 4 Gbit/s, filter at 20 cycles/B: 4 one-core storage machines lose, 16 cores win.
    net = NetworkEstimate(bandwidth_gbps=4, concurrent_transfers=1, max_concurrent_transfers=17)
    one_core = op(storage_drain_partitions_per_s=4 * 2.27e9 / (20 * 268e6))
    four_core = op(storage_drain_partitions_per_s=16 * 2.27e9 / (20 * 268e6))
    assert not benefits(one_core, net)
    assert benefits(four_core, net)
    project = op(input_gb=2.7, output_gb=2.7, storage_drain_partitions_per_s=1e3, compute_drain_partitions_per_s=4e3)
    assert plan([four_core, project, four_core], net) == 1


operators = st.builds(
    OperatorEstimate,
    name=st.just("op"),
    partitions=st.floats(1, 1e4),
    input_gb=st.floats(0, 1e3),
    output_gb=st.floats(0, 1e3),
    compute_queued_partitions=st.floats(0, 1e5),
    compute_drain_partitions_per_s=st.floats(1e-3, 1e4) | st.just(math.inf),
    storage_queued_partitions=st.floats(0, 1e5),
    storage_drain_partitions_per_s=st.floats(1e-3, 1e4) | st.just(math.inf),
    pushable=st.booleans(),
)
networks = st.builds(
    NetworkEstimate,
    bandwidth_gbps=st.floats(0.01, 400),
    concurrent_transfers=st.integers(1, 40).map(float),
    max_concurrent_transfers=st.integers(1, 40).map(float),
    backlog_gb=st.floats(0, 1e3),
)


@given(st.lists(operators, max_size=6), networks)
def test_never_pushes_an_operator_after_one_it_kept(ops: list[OperatorEstimate], net: NetworkEstimate) -> None:
    k = plan(ops, net)
    verdicts = decisions(ops, net)
    assert all(verdicts[:k])
    if k < len(ops):
        assert not verdicts[k]


@settings(max_examples=300, deadline=None)
@given(st.lists(operators, max_size=6), networks)
def test_python_and_rust_planners_agree(ops: list[OperatorEstimate], net: NetworkEstimate) -> None:
    pytest.importorskip("shufflelab_simcore", reason="simulator core not built: scripts/setup.sh")
    from shufflelab.sim.core import rust_plan

    assert rust_plan(ops, net) == plan(ops, net)


@settings(max_examples=300, deadline=None)
@given(st.lists(operators, max_size=6), networks)
def test_python_and_rust_chain_planners_agree(ops: list[OperatorEstimate], net: NetworkEstimate) -> None:
    pytest.importorskip("shufflelab_simcore", reason="simulator core not built: scripts/setup.sh")
    from shufflelab.sim.core import rust_plan

    assert rust_plan(ops, net, chain=True) == plan_chain(ops, net)


def test_chain_pushes_an_expanding_operator_when_the_next_one_pays_for_it() -> None:
    net = NetworkEstimate(bandwidth_gbps=4, concurrent_transfers=1, max_concurrent_transfers=17)
    decompress = op(input_gb=30, output_gb=150, storage_drain_partitions_per_s=100, compute_drain_partitions_per_s=100)
    filt = op(input_gb=150, output_gb=2.5, storage_drain_partitions_per_s=100, compute_drain_partitions_per_s=100)
    assert plan([decompress, filt], net) == 0  # the paper's rule stops at decompression
    assert plan_chain([decompress, filt], net) == 2


@settings(max_examples=300, deadline=None)
@given(st.lists(operators, min_size=1, max_size=5), networks)
def test_prefix_pricing_is_the_chain_planner_for_additive_costs(
    ops: list[OperatorEstimate], net: NetworkEstimate
) -> None:
    """The real NDP system prices whole prefixes; with per-operator costs that add up it decides
    exactly like the simulator's chain planner."""
    ops = [
        OperatorEstimate(**{**o.__dict__, "pushable": True})
        for o in ops
        if not math.isinf(o.storage_drain_partitions_per_s) and not math.isinf(o.compute_drain_partitions_per_s)
    ]
    if not ops:
        return
    prefixes = []
    for i in range(len(ops) + 1):
        prefixes.append(
            PrefixEstimate(
                name=str(i),
                storage_s=sum(o.partitions / o.storage_drain_partitions_per_s for o in ops[:i]),
                crossing_gb=ops[i].input_gb if i < len(ops) else ops[-1].output_gb,
                compute_s=sum(o.partitions / o.compute_drain_partitions_per_s for o in ops[i:]),
                partitions=ops[0].partitions,
            )
        )
    wait_s = ops[0].storage_queued_partitions / ops[0].storage_drain_partitions_per_s
    wait_c = ops[0].compute_queued_partitions / ops[0].compute_drain_partitions_per_s
    best, times = plan_prefixes(prefixes, net, wait_s, wait_c)
    chain = plan_chain(ops, net)
    assert times[best] == pytest.approx(times[chain], rel=1e-9, abs=1e-12)
