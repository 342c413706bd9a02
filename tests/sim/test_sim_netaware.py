"""The Net-Aware planners (the paper's rule, chain, fluid): formulas by hand, properties, Python vs Rust."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shufflelab.netaware import (
    NetworkEstimate,
    OperatorEstimate,
    PendingTransfer,
    PrefixEstimate,
    TransferView,
    benefits,
    compute_time_s,
    decisions,
    fluid_finish_s,
    plan,
    plan_chain,
    plan_fluid,
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


# Net-Aware (fluid): the per-transfer fluid network and the planner on it.


def test_one_transfer_takes_its_bytes_over_the_link() -> None:
    assert fluid_finish_s([PendingTransfer(ready_gb=10)], 8, 17) == pytest.approx([10.0])


def test_equal_transfers_share_the_link_and_the_smaller_leaves_first() -> None:
    # 1 GB/s link: 2 GB and 6 GB ready. Both at 0.5 GB/s until the small one ends at 4 s, then 4 GB alone.
    ends = fluid_finish_s([PendingTransfer(2), PendingTransfer(6)], 8, 17)
    assert ends == pytest.approx([4.0, 8.0])


def test_a_transfer_produced_slowly_takes_only_its_production_rate() -> None:
    # 1 GB produced over [0, 10] s (0.1 GB/s) next to 9 GB ready on a 1 GB/s link: the slow one
    # ends with its production at 10 s, the bulk one gets the other 0.9 GB/s and ends at 10 s too.
    ends = fluid_finish_s([PendingTransfer(0, 1, 0, 10), PendingTransfer(9)], 8, 17)
    assert ends == pytest.approx([10.0, 10.0])


def test_admission_makes_the_later_transfer_wait() -> None:
    ends = fluid_finish_s([PendingTransfer(2), PendingTransfer(3)], 8, 1)
    assert ends == pytest.approx([2.0, 5.0])


def test_production_that_starts_later_waits_for_its_window() -> None:
    ends = fluid_finish_s([PendingTransfer(0, 1, 5, 5)], 8, 17)  # all at once, at 5 s
    assert ends == pytest.approx([6.0])


def test_no_bandwidth_never_finishes() -> None:
    assert fluid_finish_s([PendingTransfer(1)], 0, 17) == [math.inf]


transfers = st.lists(
    st.builds(
        PendingTransfer,
        ready_gb=st.floats(0, 500),
        # nothing, or at least a byte: the model's resolution is netaware._EPS_GB (1e-12 GB), and a
        # subnormal amount (5e-324 GB) is produced in one step, its rate rounding up to itself
        produced_gb=st.one_of(st.just(0.0), st.floats(1e-9, 500)),
        from_s=st.floats(0, 1e3),
        until_s=st.floats(0, 1e3),
    ).map(lambda t: PendingTransfer(t.ready_gb, t.produced_gb, t.from_s, max(t.from_s, t.until_s))),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(transfers, st.floats(0.1, 400), st.integers(1, 20))
def test_no_transfer_beats_the_link_or_its_production(ts: list[PendingTransfer], b: float, s_max: int) -> None:
    ends = fluid_finish_s(ts, b, s_max)
    cap = b / 8
    for t, end in zip(ts, ends, strict=True):
        assert end >= (t.ready_gb + t.produced_gb) / cap * (1 - 1e-9) - 1e-9
        if t.produced_gb > 0:
            assert end >= t.until_s * (1 - 1e-9) - 1e-9
    # The link never carries more than its rate: the last end is at least all bytes over the link.
    if ts:
        total = sum(t.ready_gb + t.produced_gb for t in ts)
        assert max(ends) >= total / cap * (1 - 1e-9) - 1e-9


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.001, 500), min_size=1, max_size=12), st.floats(0.1, 400))
def test_ready_transfers_keep_the_link_busy(sizes: list[float], b: float) -> None:
    # Work conservation: with everything ready and admitted, the link drains all of it at its rate.
    ends = fluid_finish_s([PendingTransfer(x) for x in sizes], b, len(sizes))
    assert max(ends) == pytest.approx(sum(sizes) / (b / 8), rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(transfers, st.builds(PendingTransfer, ready_gb=st.floats(0, 500)), st.floats(0.1, 400), st.integers(1, 20))
def test_joining_never_speeds_up_the_others(
    ts: list[PendingTransfer], new: PendingTransfer, b: float, s_max: int
) -> None:
    before = fluid_finish_s(ts, b, s_max)
    after = fluid_finish_s([*ts, new], b, s_max)
    for x, y in zip(before, after[:-1], strict=True):
        assert y >= x * (1 - 1e-9) - 1e-9


def test_alone_it_prices_like_the_chain() -> None:
    # No other transfer: the fluid view is the link alone, so a job with nothing in its way
    # decides as the chain planner does, for slow and fast storage.
    empty = TransferView((), 0)
    net = NetworkEstimate(bandwidth_gbps=4, concurrent_transfers=1, max_concurrent_transfers=17)
    for drain in (0.5, 6.77, 60.0):
        ops = [op(storage_drain_partitions_per_s=drain), op(input_gb=2.7, output_gb=2.7)]
        assert plan_fluid(ops, net, empty) == plan_chain(ops, net)


def test_a_bulk_transfer_pays_for_the_jobs_it_slows() -> None:
    # Pushing costs this job a little more than not pushing, but not pushing puts 161 GB next to
    # ten transfers of 20 GB each and slows every one of them: the fluid planner pushes.
    net = NetworkEstimate(bandwidth_gbps=10, concurrent_transfers=11, max_concurrent_transfers=17)
    ops = [op(storage_drain_partitions_per_s=4.0, compute_drain_partitions_per_s=1e3)]
    alone = plan_fluid(ops, net, TransferView((), 0))
    crowded = plan_fluid(ops, net, TransferView(tuple(PendingTransfer(20) for _ in range(10)), 10))
    assert (alone, crowded) == (0, 1)


views = st.builds(lambda ts, q: TransferView(tuple(ts), min(q, len(ts))), transfers, st.integers(0, 12))


@settings(max_examples=200, deadline=None)
@given(transfers, st.floats(0.1, 400), st.integers(1, 20))
def test_python_and_rust_fluid_networks_agree(ts: list[PendingTransfer], b: float, s_max: int) -> None:
    pytest.importorskip("shufflelab_simcore", reason="simulator core not built: scripts/setup.sh")
    from shufflelab.sim.core import rust_fluid_finish_s

    assert rust_fluid_finish_s(ts, b, s_max) == pytest.approx(fluid_finish_s(ts, b, s_max), rel=1e-12, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(operators, max_size=5), networks, views)
def test_python_and_rust_fluid_planners_agree(
    ops: list[OperatorEstimate], net: NetworkEstimate, view: TransferView
) -> None:
    pytest.importorskip("shufflelab_simcore", reason="simulator core not built: scripts/setup.sh")
    from shufflelab.sim.core import rust_plan

    assert rust_plan(ops, net, view=view) == plan_fluid(ops, net, view)


@given(st.lists(operators, max_size=5), networks, views)
def test_the_fluid_planner_never_pushes_an_operator_that_cannot_be(
    ops: list[OperatorEstimate], net: NetworkEstimate, view: TransferView
) -> None:
    k = plan_fluid(ops, net, view)
    assert all(o.pushable for o in ops[:k])
