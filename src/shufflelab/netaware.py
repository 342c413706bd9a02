"""Seed 003's Net-Aware pushdown planner (SparkNDP): which leading operators of a query to run
on the storage cluster, given the queues, drain rates and network state.

Pure and clock-free, shared by the simulator (which checks that its Rust twin,
``crates/simcore/src/netaware.rs``, decides the same) and a future real NDP system. Units are in
the names: ``*_gb`` gigabytes (10^9 bytes), ``*_gbps`` gigabits per second, ``*_s`` seconds,
partitions are counts and drain rates are partitions per second.

The model, for an operator working on P partitions:

* compute time at a cluster ``Tc(Q, X) = (Q + P) / X``, Q the partitions queued there, X its
  drain rate;
* transfer time ``Tn(D) = 8·D / (B / S)`` if ``S < S_max``, else ``8·(D_S + D) / (B / S_max)``,
  D in GB, B in Gbit/s, S the concurrent transfers (this one included), D_S the backlog that must
  drain before a transfer slot frees;
* push the operator if ``Tc(Q_compute, X_compute) + Tn(D_in) > Tc(Q_storage, X_storage) +
  Tn(D_out)``;
* push the longest prefix of operators that all benefit (once an operator stays on the compute
  cluster, every later one does too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class OperatorEstimate:
    """One operator as the planner sees it: its size and each cluster's queue and drain rate."""

    name: str
    partitions: float
    input_gb: float
    output_gb: float
    compute_queued_partitions: float
    compute_drain_partitions_per_s: float
    storage_queued_partitions: float
    storage_drain_partitions_per_s: float
    pushable: bool = True


@dataclass(frozen=True)
class NetworkEstimate:
    """The network between the clusters: bandwidth, transfers sharing it, the limit S_max and the
    backlog D_S (GB) ahead of a transfer that has to wait for a slot."""

    bandwidth_gbps: float
    concurrent_transfers: float
    max_concurrent_transfers: float
    backlog_gb: float = 0.0


def compute_time_s(queued_partitions: float, drain_rate_partitions_per_s: float, partitions: float) -> float:
    """``Tc(Q, X) = (Q + P) / X`` seconds; 0 when the operator costs no CPU (X infinite)."""
    if math.isinf(drain_rate_partitions_per_s):
        return 0.0
    return (queued_partitions + partitions) / drain_rate_partitions_per_s


def transfer_time_s(data_gb: float, net: NetworkEstimate) -> float:
    """``Tn(D)``: ``8·D / (B / S)`` if ``S < S_max``, else ``8·(D_S + D) / (B / S_max)`` seconds."""
    s = net.concurrent_transfers
    if s < net.max_concurrent_transfers:
        return 8.0 * data_gb / (net.bandwidth_gbps / s)
    return 8.0 * (net.backlog_gb + data_gb) / (net.bandwidth_gbps / net.max_concurrent_transfers)


def benefits(op: OperatorEstimate, net: NetworkEstimate) -> bool:
    """True when ``Tc(Q_c, X_c) + Tn(D_in) > Tc(Q_s, X_s) + Tn(D_out)``: pushing is faster."""
    at_compute = compute_time_s(
        op.compute_queued_partitions, op.compute_drain_partitions_per_s, op.partitions
    ) + transfer_time_s(op.input_gb, net)
    at_storage = compute_time_s(
        op.storage_queued_partitions, op.storage_drain_partitions_per_s, op.partitions
    ) + transfer_time_s(op.output_gb, net)
    return at_compute > at_storage


def plan(operators: Sequence[OperatorEstimate], net: NetworkEstimate) -> int:
    """How many leading operators to push down: the longest prefix of pushable operators that
    each benefit from pushdown."""
    k = 0
    for op in operators:
        if not (op.pushable and benefits(op, net)):
            break
        k += 1
    return k


def _queue_wait_s(operators: Sequence[OperatorEstimate], storage: bool) -> float:
    # Q / X is the queued work over the cluster's capacity: the same for every operator that
    # costs CPU, so the first such operator gives it.
    for op in operators:
        q, x = (
            (op.storage_queued_partitions, op.storage_drain_partitions_per_s)
            if storage
            else (op.compute_queued_partitions, op.compute_drain_partitions_per_s)
        )
        if not math.isinf(x):
            return q / x
    return 0.0


def pipeline_time_s(stage_s: Sequence[float], partitions: float) -> float:
    """Seconds of a pipeline of stages of ``stage_s`` seconds each (a cluster's or the link's
    backlog plus this job's work there) over ``partitions`` partitions: the slowest stage, plus
    one partition's share of every other (filling and draining the pipeline). One partition
    gives the plain sum."""
    total = sum(stage_s)
    if partitions <= 1:
        return total
    slowest = max(stage_s, default=0.0)
    return slowest + (total - slowest) / partitions


def _pushable_prefix(operators: Sequence[OperatorEstimate]) -> int:
    """How many leading operators may run on storage at all."""
    n = 0
    for op in operators:
        if not op.pushable:
            break
        n += 1
    return n


def plan_chain(operators: Sequence[OperatorEstimate], net: NetworkEstimate) -> int:
    """An extension of the model, not in the paper: price each prefix i whole, as the pipeline the
    job's partitions flow through, storage → network → compute: ``T_s = [i>0]·(Q_s/X_s + Σ_{o<i}
    P/X_s,o)``, ``T_n = Tn(D crossing)``, ``T_c = [i<n]·(Q_c/X_c + Σ_{o≥i} P/X_c,o)``,
    ``T(i) = pipeline_time_s([T_s, T_n, T_c], P)``, and push the cheapest (fewest operators on
    ties). Unlike :func:`plan` it can push an operator that expands the data (decompression) when
    a later one shrinks it enough."""
    if not operators:
        return 0
    n = _pushable_prefix(operators)
    wait_s, wait_c = _queue_wait_s(operators, True), _queue_wait_s(operators, False)
    best_t, best_i = math.inf, 0
    for i in range(n + 1):
        t_s = 0.0
        if i > 0:
            t_s = wait_s + sum(
                compute_time_s(0.0, o.storage_drain_partitions_per_s, o.partitions) for o in operators[:i]
            )
        crossing_gb = operators[i].input_gb if i < len(operators) else operators[i - 1].output_gb
        t_n = transfer_time_s(crossing_gb, net)
        t_c = 0.0
        if i < len(operators):
            t_c = wait_c + sum(
                compute_time_s(0.0, o.compute_drain_partitions_per_s, o.partitions) for o in operators[i:]
            )
        t = pipeline_time_s([t_s, t_n, t_c], operators[0].partitions)
        if t < best_t:
            best_t, best_i = t, i
    return best_i


def decisions(operators: Sequence[OperatorEstimate], net: NetworkEstimate) -> list[bool]:
    """The per-operator verdicts (before the prefix rule), for reports and explanations."""
    return [op.pushable and benefits(op, net) for op in operators]


@dataclass(frozen=True)
class PrefixEstimate:
    """One pushdown choice priced as a whole (the real NDP system's form of :func:`plan_chain`):
    ``storage_s`` and ``compute_s`` are the busy time the choice puts on each cluster (its work
    divided by the cluster's capacity), ``crossing_gb`` what crosses the network, ``partitions``
    how many pieces flow through the three stages (1: they run one after the other)."""

    name: str
    storage_s: float
    crossing_gb: float
    compute_s: float
    partitions: float = 1.0


def price_prefix(
    p: PrefixEstimate, net: NetworkEstimate, storage_wait_s: float, compute_wait_s: float, pushes: bool
) -> float:
    """The pipeline (:func:`pipeline_time_s`) of ``[pushes]·(Q_s/X_s + storage_s)``,
    ``Tn(crossing)`` and ``[compute_s > 0]·(Q_c/X_c + compute_s)`` seconds over ``p.partitions``;
    with one partition, their sum."""
    t_s = storage_wait_s + p.storage_s if pushes else 0.0
    t_c = compute_wait_s + p.compute_s if p.compute_s > 0 else 0.0
    return pipeline_time_s([t_s, transfer_time_s(p.crossing_gb, net), t_c], p.partitions)


def plan_prefixes(
    prefixes: Sequence[PrefixEstimate], net: NetworkEstimate, storage_wait_s: float, compute_wait_s: float
) -> tuple[int, list[float]]:
    """The cheapest of ``prefixes`` (index 0 pushes nothing; ties go to the shorter prefix) and
    every prefix's estimated time. With additive per-operator costs this is :func:`plan_chain`."""
    times = [price_prefix(p, net, storage_wait_s, compute_wait_s, i > 0) for i, p in enumerate(prefixes)]
    best = min(range(len(times)), key=lambda i: (times[i], i))
    return best, times


@dataclass(frozen=True)
class PendingTransfer:
    """A transfer already in the system, as the fluid planner sees it: ``ready_gb`` can move now,
    ``produced_gb`` more appears uniformly over ``[from_s, until_s]`` seconds from now (the storage
    cluster's FIFO working through pushed operators; ``from_s == until_s``: all at once)."""

    ready_gb: float
    produced_gb: float = 0.0
    from_s: float = 0.0
    until_s: float = 0.0


@dataclass(frozen=True)
class TransferView:
    """The transfers a new job would join, in admission order; the first ``queued`` are admitted
    or waiting for admission now, the rest queue when their storage work emits data."""

    transfers: tuple[PendingTransfer, ...]
    queued: int


_EPS_GB = 1e-12


def _producing(unproduced_gb: float, tr: PendingTransfer, t: float) -> bool:
    return unproduced_gb > 0.0 and tr.from_s <= t < tr.until_s


def fluid_finish_s(transfers: Sequence[PendingTransfer], bandwidth_gbps: float, max_concurrent: int) -> list[float]:
    """Seconds from now until each transfer's last byte has crossed a link of ``bandwidth_gbps``
    shared max-min among the first ``max_concurrent`` transfers that have something to send (in
    the given order; the rest wait for admission); a transfer with nothing queued takes at most its
    production rate. Later arrivals are not seen. ``inf`` for a transfer that can never finish."""
    n = len(transfers)
    cap = bandwidth_gbps / 8.0
    ready = [max(0.0, tr.ready_gb) for tr in transfers]
    unproduced = [max(0.0, tr.produced_gb) for tr in transfers]
    finish = [math.nan] * n
    rate = [tr.produced_gb / (tr.until_s - tr.from_s) if tr.until_s > tr.from_s else math.inf for tr in transfers]
    t = 0.0
    for _ in range(100_000):
        for k in range(n):
            if unproduced[k] > 0.0 and t >= transfers[k].until_s:
                ready[k] += unproduced[k]
                unproduced[k] = 0.0
        for k in range(n):
            if math.isnan(finish[k]) and ready[k] <= _EPS_GB and unproduced[k] <= 0.0:
                finish[k] = t
        if not any(math.isnan(f) for f in finish):
            break
        active = [k for k in range(n) if ready[k] > _EPS_GB or _producing(unproduced[k], transfers[k], t)]
        active = active[:max_concurrent]
        alloc = [0.0] * n
        order = sorted(
            ((math.inf if ready[k] > _EPS_GB else rate[k]), k) for k in active
        )  # stable on ties: by index, as the Rust sort of (demand, k) pairs
        left = cap
        for i, (demand, k) in enumerate(order):
            share = left / (len(order) - i)
            alloc[k] = min(demand, share)
            left -= alloc[k]
        dt = math.inf
        for k in range(n):
            if not math.isnan(finish[k]):
                continue
            inflow = rate[k] if _producing(unproduced[k], transfers[k], t) else 0.0
            drain = alloc[k] - inflow
            if ready[k] > _EPS_GB and drain > 0.0:
                dt = min(dt, ready[k] / drain)
            if unproduced[k] > 0.0:
                if t < transfers[k].from_s:
                    dt = min(dt, transfers[k].from_s - t)
                elif t < transfers[k].until_s:
                    dt = min(dt, transfers[k].until_s - t)
        if math.isinf(dt):
            finish = [math.inf if math.isnan(f) else f for f in finish]
            break
        dt = max(dt, 1e-12)
        for k in range(n):
            if not math.isnan(finish[k]):
                continue
            if _producing(unproduced[k], transfers[k], t):
                made = min(rate[k] * dt, unproduced[k])
                unproduced[k] -= made
                ready[k] += made
            ready[k] = max(0.0, ready[k] - alloc[k] * dt)
            if ready[k] <= _EPS_GB * (1.0 + transfers[k].ready_gb + transfers[k].produced_gb):
                ready[k] = 0.0
        t += dt
    return [t if math.isnan(f) else f for f in finish]


def plan_fluid(operators: Sequence[OperatorEstimate], net: NetworkEstimate, view: TransferView) -> int:
    """An extension of :func:`plan_chain` with a per-transfer view of the network, not in the
    paper. For every prefix i, this job's crossing joins ``view`` in :func:`fluid_finish_s`:
    ready at once (queued behind the ``view.queued`` transfers admitted or waiting), or emitted by
    the storage FIFO over ``[Q_s/X_s, Q_s/X_s + Σ_{o<i} P/X_s,o]`` (queued behind everything).
    Its time is its transfer's end plus one partition of compute (or the compute queue and work,
    if longer); the prefix's price is that time plus the other transfers' ends, so a choice pays
    for the delay it imposes on the jobs already moving data. The cheapest wins (fewest operators
    on ties)."""
    if not operators:
        return 0
    n = _pushable_prefix(operators)
    wait_s, wait_c = _queue_wait_s(operators, True), _queue_wait_s(operators, False)
    partitions = max(1.0, operators[0].partitions)
    s_max = max(1, int(max(1.0, net.max_concurrent_transfers)))
    others = list(view.transfers)
    best_price, best_i = math.inf, 0
    for i in range(n + 1):
        work_s = sum(compute_time_s(0.0, o.storage_drain_partitions_per_s, o.partitions) for o in operators[:i])
        crossing_gb = operators[i].input_gb if i < len(operators) else operators[i - 1].output_gb
        if i == 0:
            own, at = PendingTransfer(ready_gb=crossing_gb), min(view.queued, len(others))
        else:
            own, at = PendingTransfer(0.0, crossing_gb, wait_s, wait_s + work_s), len(others)
        ends = fluid_finish_s([*others[:at], own, *others[at:]], net.bandwidth_gbps, s_max)
        net_end = ends[at]
        work_c = sum(compute_time_s(0.0, o.compute_drain_partitions_per_s, o.partitions) for o in operators[i:])
        own_s = max(net_end + work_c / partitions, wait_c + work_c) if i < len(operators) else net_end
        price = own_s + (sum(ends) - net_end)
        if price < best_price:
            best_price, best_i = price, i
    return best_i
