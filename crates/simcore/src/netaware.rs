//! Seed 003's Net-Aware pushdown model (SparkNDP), the same formulas as
//! `shufflelab.netaware` in Python; the test suite checks that both agree.
//!
//! * `Tc(Q, X) = (Q + P) / X` seconds: Q queued partitions, X drain rate (partitions/s), P the
//!   operator's partitions.
//! * `Tn(D) = 8·D / (B / S)` if `S < S_max`, else `8·(D_S + D) / (B / S_max)` seconds: D in GB,
//!   B in Gbit/s, S concurrent transfers, D_S the backlog (GB) to drain before a slot frees.
//! * Push operator i when `Tc(Q_c, X_c) + Tn(D_in) > Tc(Q_s, X_s) + Tn(D_out)`; push the longest
//!   prefix of operators that all benefit.

use crate::model::{NetworkEstimate, OperatorEstimate};

/// Seconds to drain `queued` partitions plus `partitions` at `drain_per_s` partitions/s.
pub fn compute_time_s(queued: f64, drain_per_s: f64, partitions: f64) -> f64 {
    if drain_per_s.is_infinite() {
        return 0.0;
    }
    (queued + partitions) / drain_per_s
}

/// Seconds to move `data_gb` through the network described by `net`.
pub fn transfer_time_s(data_gb: f64, net: &NetworkEstimate) -> f64 {
    let s = net.concurrent_transfers;
    if s < net.max_concurrent_transfers {
        8.0 * data_gb / (net.bandwidth_gbps / s)
    } else {
        8.0 * (net.backlog_gb + data_gb) / (net.bandwidth_gbps / net.max_concurrent_transfers)
    }
}

/// Whether pushing this operator to storage is predicted to be faster.
pub fn benefits(op: &OperatorEstimate, net: &NetworkEstimate) -> bool {
    let at_compute = compute_time_s(
        op.compute_queued_partitions,
        op.compute_drain_partitions_per_s,
        op.partitions,
    ) + transfer_time_s(op.input_gb, net);
    let at_storage = compute_time_s(
        op.storage_queued_partitions,
        op.storage_drain_partitions_per_s,
        op.partitions,
    ) + transfer_time_s(op.output_gb, net);
    at_compute > at_storage
}

/// The number of leading operators to push down.
pub fn plan(ops: &[OperatorEstimate], net: &NetworkEstimate) -> u32 {
    ops.iter()
        .take_while(|op| op.pushable && benefits(op, net))
        .count() as u32
}

/// Seconds a cluster needs for its queue: Q / X of the first operator that costs CPU (Q / X is
/// the queued work over the cluster's capacity, the same for every operator).
fn queue_wait_s(ops: &[OperatorEstimate], storage: bool) -> f64 {
    ops.iter()
        .map(|o| {
            if storage {
                (
                    o.storage_queued_partitions,
                    o.storage_drain_partitions_per_s,
                )
            } else {
                (
                    o.compute_queued_partitions,
                    o.compute_drain_partitions_per_s,
                )
            }
        })
        .find(|(_, x)| x.is_finite())
        .map_or(0.0, |(q, x)| q / x)
}

/// Seconds of a pipeline of stages of `stage_s` seconds each (a cluster's or the link's backlog
/// plus this job's work there) over `partitions` partitions: the slowest stage, plus one
/// partition's share of every other (filling and draining the pipeline). One partition gives the
/// plain sum.
pub fn pipeline_time_s(stage_s: &[f64], partitions: f64) -> f64 {
    let sum: f64 = stage_s.iter().sum();
    if partitions <= 1.0 {
        return sum;
    }
    let slowest = stage_s.iter().copied().fold(0.0, f64::max);
    slowest + (sum - slowest) / partitions
}

/// An extension of the model, not in the paper: price every prefix i whole, as the pipeline the
/// job's partitions flow through, storage → network → compute:
/// `T_s = [i > 0]·(Q_s/X_s + Σ_{o<i} P/X_s,o)`, `T_n = Tn(D crossing)`,
/// `T_c = [i < n]·(Q_c/X_c + Σ_{o≥i} P/X_c,o)`, `T(i) = max(T_s, T_n, T_c) + (T_s + T_n + T_c −
/// max)/P`, and push the cheapest (fewest operators on ties). Unlike [`plan`], it can push an
/// operator that expands the data (decompression) when a later one shrinks it enough.
pub fn plan_chain(ops: &[OperatorEstimate], net: &NetworkEstimate) -> u32 {
    if ops.is_empty() {
        return 0;
    }
    let n = ops.iter().take_while(|o| o.pushable).count();
    let (wait_s, wait_c) = (queue_wait_s(ops, true), queue_wait_s(ops, false));
    let mut best = (f64::INFINITY, 0u32);
    for i in 0..=n {
        let t_s = if i > 0 {
            wait_s
                + ops[..i]
                    .iter()
                    .map(|o| compute_time_s(0.0, o.storage_drain_partitions_per_s, o.partitions))
                    .sum::<f64>()
        } else {
            0.0
        };
        let crossing_gb = if i < ops.len() {
            ops[i].input_gb
        } else {
            ops[i - 1].output_gb
        };
        let t_n = transfer_time_s(crossing_gb, net);
        let t_c = if i < ops.len() {
            wait_c
                + ops[i..]
                    .iter()
                    .map(|o| compute_time_s(0.0, o.compute_drain_partitions_per_s, o.partitions))
                    .sum::<f64>()
        } else {
            0.0
        };
        let t = pipeline_time_s(&[t_s, t_n, t_c], ops[0].partitions);
        if t < best.0 {
            best = (t, i as u32);
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: f64) -> NetworkEstimate {
        NetworkEstimate {
            bandwidth_gbps: 4.0,
            concurrent_transfers: s,
            max_concurrent_transfers: 4.0,
            backlog_gb: 10.0,
        }
    }

    fn op(storage_drain: f64, input_gb: f64, output_gb: f64) -> OperatorEstimate {
        OperatorEstimate {
            name: "op".into(),
            partitions: 100.0,
            input_gb,
            output_gb,
            compute_queued_partitions: 0.0,
            compute_drain_partitions_per_s: 10.0,
            storage_queued_partitions: 0.0,
            storage_drain_partitions_per_s: storage_drain,
            pushable: true,
        }
    }

    #[test]
    fn transfer_time_shares_then_waits() {
        // 8 Gbit over 4 Gbit/s shared by 2: 4 s.
        assert!((transfer_time_s(1.0, &net(2.0)) - 4.0).abs() < 1e-12);
        // At S_max: (10 + 1) GB * 8 / (4 / 4) = 88 s.
        assert!((transfer_time_s(1.0, &net(4.0)) - 88.0).abs() < 1e-12);
    }

    #[test]
    fn pipeline_is_the_slowest_stage_plus_one_partition_of_the_others() {
        assert!((pipeline_time_s(&[10.0, 40.0, 20.0], 10.0) - 43.0).abs() < 1e-12);
        assert!((pipeline_time_s(&[10.0, 40.0, 20.0], 1.0) - 70.0).abs() < 1e-12);
    }

    #[test]
    fn prefix_stops_at_first_loser() {
        let good = op(10.0, 100.0, 1.0);
        let bad = op(0.1, 1.0, 1.0);
        assert_eq!(plan(&[good.clone(), bad, good.clone()], &net(1.0)), 1);
        assert_eq!(plan(&[good.clone(), good], &net(1.0)), 2);
    }
}
