//! The flow-level network: fluid transfers share links by max-min fairness.
//!
//! Flows with the same path get the same max-min rate, so they are kept in one group: the group
//! holds the bytes each of its flows has received since the group last emptied (`served`) and a
//! min-heap of the `served` value at which each flow completes. Advancing time, recomputing rates
//! and finding the next completion then cost O(groups × links), independent of the flow count.
//! Rates are recomputed (progressive filling) whenever the set of flows changed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::model::TraceRecord;

/// An `f64` with a total order, for heaps (never NaN here).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Ord64(pub f64);
impl Eq for Ord64 {}
#[allow(clippy::derive_ord_xor_partial_ord)]
impl Ord for Ord64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[derive(Debug, Clone)]
pub struct Link {
    pub name: String,
    pub capacity_bytes_per_s: f64,
    pub carried_bytes: f64,
    pub flow_bytes: f64,
}

#[derive(Debug, Clone)]
struct Group {
    path: Vec<usize>,
    flows: usize,
    rate_bytes_per_s: f64,
    served_bytes: f64,
    /// (served value at completion, flow id)
    finish: BinaryHeap<Reverse<(Ord64, u64)>>,
}

#[derive(Debug, Clone)]
pub struct FlowNetwork {
    pub links: Vec<Link>,
    groups: Vec<Group>,
    group_of_path: HashMap<Vec<usize>, usize>,
    last_s: f64,
    dirty: bool,
    pub record_trace: bool,
    pub trace: Vec<TraceRecord>,
}

/// A completion is due when the remaining bytes would take less than this at the flow's rate.
const DUE_S: f64 = 1e-9;

impl FlowNetwork {
    pub fn new(links: Vec<Link>, record_trace: bool) -> Self {
        FlowNetwork {
            links,
            groups: Vec::new(),
            group_of_path: HashMap::new(),
            last_s: 0.0,
            dirty: false,
            record_trace,
            trace: Vec::new(),
        }
    }

    /// Move the fluid forward to `now_s` at the current rates.
    pub fn advance(&mut self, now_s: f64) {
        let dt = now_s - self.last_s;
        if dt > 0.0 {
            for g in &mut self.groups {
                if g.flows == 0 {
                    continue;
                }
                let per_flow = g.rate_bytes_per_s * dt;
                g.served_bytes += per_flow;
                for &l in &g.path {
                    self.links[l].carried_bytes += per_flow * g.flows as f64;
                }
            }
        }
        self.last_s = now_s;
    }

    /// Start a flow of `bytes` along `path` (call `advance(now)` first).
    pub fn add(&mut self, flow: u64, path: Vec<usize>, bytes: f64) {
        for &l in &path {
            self.links[l].flow_bytes += bytes;
        }
        let gi = match self.group_of_path.get(&path) {
            Some(&gi) => gi,
            None => {
                self.groups.push(Group {
                    path: path.clone(),
                    flows: 0,
                    rate_bytes_per_s: 0.0,
                    served_bytes: 0.0,
                    finish: BinaryHeap::new(),
                });
                self.group_of_path.insert(path, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        let g = &mut self.groups[gi];
        if g.flows == 0 {
            g.served_bytes = 0.0; // keeps the accumulator small, hence precise
        }
        g.finish
            .push(Reverse((Ord64(g.served_bytes + bytes), flow)));
        g.flows += 1;
        self.dirty = true;
    }

    /// Remove and return the flows that have completed by now (call `advance(now)` first).
    pub fn take_completed(&mut self, out: &mut Vec<u64>) {
        for g in &mut self.groups {
            while let Some(&Reverse((Ord64(end), flow))) = g.finish.peek() {
                let left = end - g.served_bytes;
                if left <= g.rate_bytes_per_s * DUE_S || left <= 1e-9 * end {
                    g.finish.pop();
                    g.flows -= 1;
                    out.push(flow);
                    self.dirty = true;
                } else {
                    break;
                }
            }
        }
    }

    /// Each flow in progress with its bytes still to send (call `advance(now)` first).
    pub fn remaining_bytes(&self) -> Vec<(u64, f64)> {
        self.groups
            .iter()
            .flat_map(|g| {
                g.finish.iter().map(move |Reverse((Ord64(end), flow))| {
                    (*flow, (end - g.served_bytes).max(0.0))
                })
            })
            .collect()
    }

    pub fn active_flows(&self) -> usize {
        self.groups.iter().map(|g| g.flows).sum()
    }

    /// Recompute max-min rates if flows changed since the last recomputation.
    pub fn settle(&mut self, now_s: f64) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        let n_links = self.links.len();
        let mut left: Vec<f64> = self.links.iter().map(|l| l.capacity_bytes_per_s).collect();
        let mut frozen: Vec<bool> = self.groups.iter().map(|g| g.flows == 0).collect();
        let mut count = vec![0usize; n_links];
        loop {
            count.iter_mut().for_each(|c| *c = 0);
            for (gi, g) in self.groups.iter().enumerate() {
                if !frozen[gi] {
                    for &l in &g.path {
                        count[l] += g.flows;
                    }
                }
            }
            // The most constrained link fixes the rate of every unfrozen flow crossing it.
            let mut best: Option<(usize, f64)> = None;
            for l in 0..n_links {
                if count[l] > 0 {
                    let share = left[l].max(0.0) / count[l] as f64;
                    if best.is_none_or(|(_, s)| share < s) {
                        best = Some((l, share));
                    }
                }
            }
            let Some((bottleneck, share)) = best else {
                break;
            };
            for (gi, g) in self.groups.iter_mut().enumerate() {
                if !frozen[gi] && g.path.contains(&bottleneck) {
                    frozen[gi] = true;
                    g.rate_bytes_per_s = share;
                    for &l in &g.path {
                        left[l] -= share * g.flows as f64;
                    }
                }
            }
        }
        if self.record_trace {
            let groups = self
                .groups
                .iter()
                .filter(|g| g.flows > 0)
                .map(|g| (g.path.clone(), g.flows, g.rate_bytes_per_s))
                .collect();
            self.trace.push(TraceRecord { t_s: now_s, groups });
        }
    }

    /// Virtual time of the next completion at the current rates (after `settle`).
    pub fn next_completion_s(&self) -> f64 {
        let mut t = f64::INFINITY;
        for g in &self.groups {
            if g.flows == 0 || g.rate_bytes_per_s <= 0.0 {
                continue;
            }
            if let Some(&Reverse((Ord64(end), _))) = g.finish.peek() {
                let dt = ((end - g.served_bytes) / g.rate_bytes_per_s).max(0.0);
                t = t.min(self.last_s + dt);
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(c: f64) -> Link {
        Link {
            name: "l".into(),
            capacity_bytes_per_s: c,
            carried_bytes: 0.0,
            flow_bytes: 0.0,
        }
    }

    #[test]
    fn max_min_on_two_links() {
        // Link 0 (cap 10) carries flows A and B; link 1 (cap 3) carries only B.
        let mut net = FlowNetwork::new(vec![link(10.0), link(3.0)], true);
        net.add(1, vec![0], 100.0);
        net.add(2, vec![0, 1], 100.0);
        net.settle(0.0);
        let rec = &net.trace[0];
        let rate = |p: &[usize]| rec.groups.iter().find(|g| g.0 == p).unwrap().2;
        assert!((rate(&[0, 1]) - 3.0).abs() < 1e-12);
        assert!((rate(&[0]) - 7.0).abs() < 1e-12);
    }

    #[test]
    fn equal_flows_finish_together_and_bytes_add_up() {
        let mut net = FlowNetwork::new(vec![link(4.0)], false);
        net.add(1, vec![0], 8.0);
        net.add(2, vec![0], 4.0);
        net.settle(0.0);
        let t1 = net.next_completion_s();
        assert!((t1 - 2.0).abs() < 1e-12);
        net.advance(t1);
        let mut done = Vec::new();
        net.take_completed(&mut done);
        assert_eq!(done, vec![2]);
        net.settle(t1);
        let t2 = net.next_completion_s();
        assert!((t2 - 3.0).abs() < 1e-12);
        net.advance(t2);
        net.take_completed(&mut done);
        assert_eq!(done, vec![2, 1]);
        assert!((net.links[0].carried_bytes - 12.0).abs() < 1e-9);
    }
}
