//! Seed 003's Net-Aware pushdown model (SparkNDP), the same formulas as
//! `shufflelab.netaware` in Python; the test suite checks that both agree.
//!
//! * `Tc(Q, X) = (Q + P) / X` seconds: Q queued partitions, X drain rate (partitions/s), P the
//!   operator's partitions.
//! * `Tn(D) = 8·D / (B / S)` if `S < S_max`, else `8·(D_S + D) / (B / S_max)` seconds: D in GB,
//!   B in Gbit/s, S concurrent transfers, D_S the backlog (GB) to drain before a slot frees.
//! * Push operator i when `Tc(Q_c, X_c) + Tn(D_in) > Tc(Q_s, X_s) + Tn(D_out)`; push the longest
//!   prefix of operators that all benefit.

use serde::{Deserialize, Serialize};

/// The Net-Aware model's inputs for one operator, as seen at a job's arrival.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct OperatorEstimate {
    pub name: String,
    pub partitions: f64,
    pub input_gb: f64,
    pub output_gb: f64,
    pub compute_queued_partitions: f64,
    /// Infinite (JSON null) when the operator costs no CPU.
    #[serde(deserialize_with = "infinite_if_null")]
    pub compute_drain_partitions_per_s: f64,
    pub storage_queued_partitions: f64,
    #[serde(deserialize_with = "infinite_if_null")]
    pub storage_drain_partitions_per_s: f64,
    pub pushable: bool,
}

/// JSON has no infinity: serde_json writes it as null, and null reads back as infinity.
fn infinite_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

/// The network part of the Net-Aware model's inputs.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct NetworkEstimate {
    pub bandwidth_gbps: f64,
    pub concurrent_transfers: f64,
    pub max_concurrent_transfers: f64,
    pub backlog_gb: f64,
}

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

/// A transfer already in the system, as the fluid planner sees it: `ready_gb` can move now,
/// `produced_gb` more appears uniformly over `[from_s, until_s]` seconds from now (the storage
/// cluster's FIFO working through its pushed operators; `from_s == until_s` means all at once).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PendingTransfer {
    pub ready_gb: f64,
    pub produced_gb: f64,
    pub from_s: f64,
    pub until_s: f64,
}

/// The transfers a new job would join, in admission order; the first `queued` of them are
/// admitted or waiting for admission now, the rest will queue when their storage work emits data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferView {
    pub transfers: Vec<PendingTransfer>,
    pub queued: usize,
}

const EPS_GB: f64 = 1e-12;

fn producing(unproduced_gb: f64, tr: &PendingTransfer, t: f64) -> bool {
    unproduced_gb > 0.0 && t >= tr.from_s && t < tr.until_s
}

/// Seconds from now until each transfer's last byte has crossed a link of `bandwidth_gbps`
/// shared max-min among the first `max_concurrent` transfers that have something to send (in
/// the given order; the rest wait for admission); a transfer with nothing queued takes at most
/// its production rate. Later arrivals are not seen.
pub fn fluid_finish_s(
    transfers: &[PendingTransfer],
    bandwidth_gbps: f64,
    max_concurrent: usize,
) -> Vec<f64> {
    let n = transfers.len();
    let cap = bandwidth_gbps / 8.0; // GB/s
    let mut ready: Vec<f64> = transfers.iter().map(|t| t.ready_gb.max(0.0)).collect();
    let mut unproduced: Vec<f64> = transfers.iter().map(|t| t.produced_gb.max(0.0)).collect();
    let mut finish = vec![f64::NAN; n];
    let rate: Vec<f64> = transfers
        .iter()
        .map(|t| {
            let w = t.until_s - t.from_s;
            if w > 0.0 {
                t.produced_gb / w
            } else {
                f64::INFINITY
            }
        })
        .collect();
    let mut t = 0.0;
    let mut alloc = vec![0.0; n];
    for _ in 0..100_000 {
        // Impulses (and windows already over) land in the queue.
        for k in 0..n {
            if unproduced[k] > 0.0 && t >= transfers[k].until_s {
                ready[k] += unproduced[k];
                unproduced[k] = 0.0;
            }
        }
        for k in 0..n {
            if finish[k].is_nan() && ready[k] <= EPS_GB && unproduced[k] <= 0.0 {
                finish[k] = t;
            }
        }
        if finish.iter().all(|f| !f.is_nan()) {
            break;
        }
        // Admitted: the first `max_concurrent` with something to send or being produced.
        let active: Vec<usize> = (0..n)
            .filter(|&k| ready[k] > EPS_GB || producing(unproduced[k], &transfers[k], t))
            .take(max_concurrent)
            .collect();
        // Max-min with caps: a transfer with an empty queue takes at most its production rate.
        alloc.iter_mut().for_each(|a| *a = 0.0);
        let mut order: Vec<(f64, usize)> = active
            .iter()
            .map(|&k| {
                let demand = if ready[k] > EPS_GB {
                    f64::INFINITY
                } else {
                    rate[k]
                };
                (demand, k)
            })
            .collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut left = cap;
        for (i, &(demand, k)) in order.iter().enumerate() {
            let share = left / (order.len() - i) as f64;
            alloc[k] = demand.min(share);
            left -= alloc[k];
        }
        // The next change: a queue empties, a production window opens or closes.
        let mut dt = f64::INFINITY;
        for k in 0..n {
            if !finish[k].is_nan() {
                continue;
            }
            let inflow = if producing(unproduced[k], &transfers[k], t) {
                rate[k]
            } else {
                0.0
            };
            let drain = alloc[k] - inflow;
            if ready[k] > EPS_GB && drain > 0.0 {
                dt = dt.min(ready[k] / drain);
            }
            if unproduced[k] > 0.0 {
                if t < transfers[k].from_s {
                    dt = dt.min(transfers[k].from_s - t);
                } else if t < transfers[k].until_s {
                    dt = dt.min(transfers[k].until_s - t);
                }
            }
        }
        if !dt.is_finite() {
            // Nothing can move any more (no bandwidth): the rest never finish.
            for f in finish.iter_mut().filter(|f| f.is_nan()) {
                *f = f64::INFINITY;
            }
            break;
        }
        let dt = dt.max(1e-12);
        for k in 0..n {
            if !finish[k].is_nan() {
                continue;
            }
            if producing(unproduced[k], &transfers[k], t) {
                let made = (rate[k] * dt).min(unproduced[k]);
                unproduced[k] -= made;
                ready[k] += made;
            }
            ready[k] = (ready[k] - alloc[k] * dt).max(0.0);
            if ready[k] <= EPS_GB * (1.0 + transfers[k].ready_gb + transfers[k].produced_gb) {
                ready[k] = 0.0;
            }
        }
        t += dt;
    }
    for f in finish.iter_mut().filter(|f| f.is_nan()) {
        *f = t;
    }
    finish
}

/// An extension of [`plan_chain`] with a per-transfer view of the network: for every prefix i,
/// this job's crossing (ready at once, or produced by the storage FIFO after `Q_s/X_s` over its
/// pushed work) joins `others` in [`fluid_finish_s`]; its time is its transfer's end plus one
/// partition of compute (or the compute queue and work, if longer), and the price of the prefix
/// is that time plus the others' transfer ends (what it costs the jobs already moving data).
pub fn plan_fluid(ops: &[OperatorEstimate], net: &NetworkEstimate, view: &TransferView) -> u32 {
    let (others, queued) = (&view.transfers, view.queued);
    if ops.is_empty() {
        return 0;
    }
    let n = ops.iter().take_while(|o| o.pushable).count();
    let (wait_s, wait_c) = (queue_wait_s(ops, true), queue_wait_s(ops, false));
    let partitions = ops[0].partitions.max(1.0);
    let s_max = net.max_concurrent_transfers.max(1.0) as usize;
    let mut best = (f64::INFINITY, 0u32);
    for i in 0..=n {
        let work_s: f64 = ops[..i]
            .iter()
            .map(|o| compute_time_s(0.0, o.storage_drain_partitions_per_s, o.partitions))
            .sum();
        let crossing_gb = if i < ops.len() {
            ops[i].input_gb
        } else {
            ops[i - 1].output_gb
        };
        // Data ready at once queues for admission behind the jobs already queued; data the
        // storage FIFO produces later queues behind everything produced before it.
        let (own, at) = if i == 0 {
            let own = PendingTransfer {
                ready_gb: crossing_gb,
                produced_gb: 0.0,
                from_s: 0.0,
                until_s: 0.0,
            };
            (own, queued.min(others.len()))
        } else {
            let own = PendingTransfer {
                ready_gb: 0.0,
                produced_gb: crossing_gb,
                from_s: wait_s,
                until_s: wait_s + work_s,
            };
            (own, others.len())
        };
        let mut transfers = others.to_vec();
        transfers.insert(at, own);
        let ends = fluid_finish_s(&transfers, net.bandwidth_gbps, s_max);
        let net_end = ends[at];
        let work_c: f64 = ops[i..]
            .iter()
            .map(|o| compute_time_s(0.0, o.compute_drain_partitions_per_s, o.partitions))
            .sum();
        let own_s = if i < ops.len() {
            (net_end + work_c / partitions).max(wait_c + work_c)
        } else {
            net_end
        };
        let others_s = ends.iter().sum::<f64>() - net_end;
        let price = own_s + others_s;
        if price < best.0 {
            best = (price, i as u32);
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

    fn ready(gb: f64) -> PendingTransfer {
        PendingTransfer {
            ready_gb: gb,
            produced_gb: 0.0,
            from_s: 0.0,
            until_s: 0.0,
        }
    }

    #[test]
    fn fluid_shares_the_link_then_admits_the_next() {
        // 1 GB/s: 2 and 6 GB share until the small one leaves at 4 s.
        let ends = fluid_finish_s(&[ready(2.0), ready(6.0)], 8.0, 17);
        assert!((ends[0] - 4.0).abs() < 1e-9 && (ends[1] - 8.0).abs() < 1e-9);
        // One admission: one after the other.
        let ends = fluid_finish_s(&[ready(2.0), ready(3.0)], 8.0, 1);
        assert!((ends[0] - 2.0).abs() < 1e-9 && (ends[1] - 5.0).abs() < 1e-9);
    }

    #[test]
    fn fluid_caps_a_transfer_at_its_production_rate() {
        let slow = PendingTransfer {
            ready_gb: 0.0,
            produced_gb: 1.0,
            from_s: 0.0,
            until_s: 10.0,
        };
        let ends = fluid_finish_s(&[slow, ready(9.0)], 8.0, 17);
        assert!((ends[0] - 10.0).abs() < 1e-9 && (ends[1] - 10.0).abs() < 1e-9);
    }

    #[test]
    fn fluid_planner_pays_for_the_transfers_it_slows() {
        let mut o = op(4.0, 161.0, 2.7);
        o.partitions = 600.0;
        o.compute_drain_partitions_per_s = 1e3;
        let n = NetworkEstimate {
            bandwidth_gbps: 10.0,
            concurrent_transfers: 11.0,
            max_concurrent_transfers: 17.0,
            backlog_gb: 0.0,
        };
        let alone = TransferView {
            transfers: vec![],
            queued: 0,
        };
        let crowded = TransferView {
            transfers: vec![ready(20.0); 10],
            queued: 10,
        };
        assert_eq!(plan_fluid(&[o.clone()], &n, &alone), 0);
        assert_eq!(plan_fluid(&[o], &n, &crowded), 1);
    }
}
