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
    #: GB each *other* job still has to move across the network (the chain planner's view of the
    #: link's sharing; empty when unknown). Not used by the paper's rule.
    others_gb: tuple[float, ...] = ()


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


def shared_transfer_s(data_gb: float, net: NetworkEstimate) -> tuple[float, float]:
    """Seconds to move ``data_gb`` over a link shared fairly with the other jobs' remaining bytes
    ``net.others_gb``, and the seconds of delay the transfer adds to those jobs together.

    Under processor sharing (what max-min fairness gives jobs with equal shares), a job of D bytes
    finishes after ``(D + Σ_j min(R_j, D)) / B`` and delays job j by ``min(R_j, D) / B``. Admission
    (S_max) only reorders who moves first; it is not modelled here. Without ``others_gb`` this is
    the paper's ``Tn(D)`` and no delay."""
    if not net.others_gb:
        return transfer_time_s(data_gb, net), 0.0
    rate_gb_per_s = net.bandwidth_gbps / 8.0
    delayed_gb = sum(min(r, data_gb) for r in net.others_gb)
    return (data_gb + delayed_gb) / rate_gb_per_s, delayed_gb / rate_gb_per_s


def price_chain(operators: Sequence[OperatorEstimate], net: NetworkEstimate, pipelined: bool = True) -> list[float]:
    """Every pushable prefix's estimated cost in seconds (index = operators pushed); see :func:`plan_chain`."""
    n = 0
    for op in operators:
        if not op.pushable:
            break
        n += 1
    wait_s, wait_c = _queue_wait_s(operators, True), _queue_wait_s(operators, False)
    partitions = max(1.0, operators[0].partitions) if operators else 1.0
    costs = []
    for i in range(n + 1):
        stages = []
        if i > 0:
            stages.append(
                wait_s
                + sum(compute_time_s(0.0, o.storage_drain_partitions_per_s, o.partitions) for o in operators[:i])
            )
        crossing_gb = operators[i].input_gb if i < len(operators) else operators[i - 1].output_gb
        if pipelined:
            own_net, delay = shared_transfer_s(crossing_gb, net)
        else:
            own_net, delay = transfer_time_s(crossing_gb, net), 0.0
        stages.append(own_net)
        if i < len(operators):
            stages.append(
                wait_c
                + sum(compute_time_s(0.0, o.compute_drain_partitions_per_s, o.partitions) for o in operators[i:])
            )
        if pipelined:
            # partitions flow storage -> network -> compute: the slowest stage sets the pace, the
            # others add about one partition's worth (fill and drain)
            slowest = max(stages)
            costs.append(slowest + (sum(stages) - slowest) / partitions + delay)
        else:
            costs.append(sum(stages))
    return costs


def plan_chain(operators: Sequence[OperatorEstimate], net: NetworkEstimate, pipelined: bool = True) -> int:
    """An extension of the model, not in the paper: price each pushable prefix i whole and push
    the cheapest (fewest operators on ties). Unlike :func:`plan` it can push an operator that
    expands the data (decompression) when a later one shrinks it enough.

    A prefix's stages are the storage work ``[i>0]·(Q_s/X_s + Σ_{o<i} P/X_s,o)``, the transfer of
    the bytes crossing (:func:`shared_transfer_s`) and the compute work ``[i<n]·(Q_c/X_c +
    Σ_{o≥i} P/X_c,o)``. ``pipelined`` (the default): partitions flow through the stages, so the
    cost is the slowest stage plus one partition's share of the others, plus the delay the
    transfer adds to the jobs already sharing the link (storage and compute queues are FIFO: a
    newcomer delays nobody there). ``pipelined=False``: the stages' plain sum with the paper's
    ``Tn`` (the real NDP system's :func:`plan_prefixes`)."""
    if not operators:
        return 0
    costs = price_chain(operators, net, pipelined)
    return min(range(len(costs)), key=lambda i: (costs[i], i))


def decisions(operators: Sequence[OperatorEstimate], net: NetworkEstimate) -> list[bool]:
    """The per-operator verdicts (before the prefix rule), for reports and explanations."""
    return [op.pushable and benefits(op, net) for op in operators]


@dataclass(frozen=True)
class PrefixEstimate:
    """One pushdown choice priced as a whole (the real NDP system's form of :func:`plan_chain`):
    ``storage_s`` and ``compute_s`` are the busy time the choice puts on each cluster (its work
    divided by the cluster's capacity), ``crossing_gb`` what crosses the network."""

    name: str
    storage_s: float
    crossing_gb: float
    compute_s: float


def price_prefix(
    p: PrefixEstimate, net: NetworkEstimate, storage_wait_s: float, compute_wait_s: float, pushes: bool
) -> float:
    """``[pushes]·(Q_s/X_s + storage_s) + Tn(crossing) + [compute_s > 0]·(Q_c/X_c + compute_s)`` seconds."""
    t = transfer_time_s(p.crossing_gb, net)
    if p.compute_s > 0:
        t += compute_wait_s + p.compute_s
    if pushes:
        t += storage_wait_s + p.storage_s
    return t


def plan_prefixes(
    prefixes: Sequence[PrefixEstimate], net: NetworkEstimate, storage_wait_s: float, compute_wait_s: float
) -> tuple[int, list[float]]:
    """The cheapest of ``prefixes`` (index 0 pushes nothing; ties go to the shorter prefix) and
    every prefix's estimated time. With additive per-operator costs this is
    ``plan_chain(..., pipelined=False)``."""
    times = [price_prefix(p, net, storage_wait_s, compute_wait_s, i > 0) for i, p in enumerate(prefixes)]
    best = min(range(len(times)), key=lambda i: (times[i], i))
    return best, times
