//! Clustering of the packet mode's link simulations (after Parsimon, Zhao et al., NSDI'23, §4.3):
//! links whose workloads are alike are simulated once, by a representative, and the cluster's
//! other links take the representative's per-fetch delays.
//!
//! **Alike** (every condition, [`distance`] ≤ the tolerance):
//! - the same capacity, the same UDP cross rate and the same queue (a port's or a sender's own
//!   lossless link): exact, these set the simulation's parameters;
//! - the number of fetches within the tolerance (relative), and the share of them that a
//!   delivery on the same link releases (an in-flight limit's loop) within it (absolute);
//! - four distributions of the link's fetches, each as 100 quantiles compared by their weighted
//!   mean absolute percentage error (WMAPE, Parsimon's metric, made symmetric: Σ|a−b| over the
//!   larger of Σ|a| and Σ|b|): sizes, data starts (from the link's first), round trips and the
//!   rates they enter the link at. Parsimon compares sizes and inter-arrival times plus the
//!   load; the starts from the first carry both the arrivals and, with the count and sizes, the
//!   load over time, and the round trips and entry rates are what the max-min schedule adds
//!   here (a fetch held back upstream enters at its max-min rate).
//!
//! Links are taken in index order; each joins the first representative it is alike to, or
//! becomes one (Parsimon's greedy clustering gives the same clusters).
//!
//! **Taking the representative's delays** ([`Transfer`]): the representative's fetches are put in
//! size buckets as Parsimon does (sorted by size, a bucket closes once it holds 100 fetches and
//! its largest is at least twice its smallest; the first bucket reaches down to 0, the last up
//! without bound). A member's fetch finds the bucket of its size; within it, member fetches and
//! representative fetches are each ranked by data start (ties by order on the link), and the
//! member fetch of rank k of n takes the representative fetch of rank ⌊(k + ½) · n_rep / n⌋ — the
//! same position in the link's schedule, where Parsimon draws at random from the bucket. It
//! takes that fetch's delay per packet times its own packets (Parsimon's packet-normalized delay;
//! the delay itself when the sizes are equal) and its start delay. Links alike by this test
//! have the same count within the tolerance, so a rank lands on the fetch in the same place.

use crate::linksim::LinkFlow;

/// Quantiles per distribution.
const Q: usize = 100;
/// Parsimon's size buckets: at least this many fetches, the largest ≥ `BUCKET_SPREAD` × smallest.
const BUCKET_MIN: usize = 100;
const BUCKET_SPREAD: f64 = 2.0;

/// A simulated link's workload as the clustering compares it.
#[derive(Debug, Clone)]
pub(crate) struct Feature {
    /// Capacity, UDP cross rate and lossless queue: equal bits or not alike.
    key: [u64; 3],
    n: f64,
    looped: f64,
    /// The most fetches at once in the max-min schedule (its bursts: where the timeouts are).
    peak: f64,
    sizes: Vec<f64>,
    starts: Vec<f64>,
    rtts: Vec<f64>,
    entry: Vec<f64>,
}

fn quantiles(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    (0..Q)
        .map(|i| v[(((i as f64 + 0.5) / Q as f64) * n as f64) as usize])
        .collect()
}

impl Feature {
    /// The feature of a link of capacity `cap` with UDP `cross` and these flows (as simulated),
    /// which the max-min schedule ended at `ends` (NaN: not known).
    pub(crate) fn new(
        cap: f64,
        cross: f64,
        lossless: bool,
        flows: &[LinkFlow],
        ends: &[f64],
    ) -> Self {
        let first = flows
            .iter()
            .map(|f| f.start_s)
            .fold(f64::INFINITY, f64::min);
        let mut edges: Vec<(f64, i32)> = flows
            .iter()
            .zip(ends)
            .filter(|(_, e)| e.is_finite())
            .flat_map(|(f, &e)| [(f.start_s, 1), (e.max(f.start_s), -1)])
            .collect();
        // an end before a start at the same instant: back to back is not at once
        edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let (mut now, mut peak) = (0i32, 0i32);
        for (_, d) in edges {
            now += d;
            peak = peak.max(now);
        }
        Feature {
            key: [cap.to_bits(), cross.to_bits(), u64::from(lossless)],
            n: flows.len() as f64,
            peak: f64::from(peak),
            looped: flows.iter().filter(|f| f.after.is_some()).count() as f64
                / flows.len().max(1) as f64,
            sizes: quantiles(flows.iter().map(|f| f.bytes).collect()),
            starts: quantiles(flows.iter().map(|f| f.start_s - first).collect()),
            rtts: quantiles(flows.iter().map(|f| f.base_rtt_s).collect()),
            entry: quantiles(flows.iter().map(|f| f.access_bytes_per_s).collect()),
        }
    }
}

/// Symmetric WMAPE: Σ|a−b| / max(Σ|a|, Σ|b|) (0 for two all-zero vectors).
fn wmape(a: &[f64], b: &[f64]) -> f64 {
    let diff: f64 = a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum();
    let scale = a
        .iter()
        .map(|x| x.abs())
        .sum::<f64>()
        .max(b.iter().map(|x| x.abs()).sum());
    if diff == 0.0 {
        0.0
    } else {
        diff / scale
    }
}

/// How far apart two links' workloads are (infinite when their parameters differ).
pub(crate) fn distance(a: &Feature, b: &Feature) -> f64 {
    if a.key != b.key {
        return f64::INFINITY;
    }
    [
        (a.n - b.n).abs() / a.n.max(b.n),
        (a.peak - b.peak).abs() / a.peak.max(b.peak).max(1.0),
        (a.looped - b.looped).abs(),
        wmape(&a.sizes, &b.sizes),
        wmape(&a.starts, &b.starts),
        wmape(&a.rtts, &b.rtts),
        wmape(&a.entry, &b.entry),
    ]
    .into_iter()
    .fold(0.0, f64::max)
}

/// Greedy clustering in order: each link's representative (an index into `features`; a
/// representative is its own, the first link of its cluster).
pub(crate) fn cluster(features: &[Feature], tolerance: f64) -> Vec<usize> {
    let mut reps: Vec<usize> = Vec::new();
    features
        .iter()
        .enumerate()
        .map(|(i, f)| {
            match reps
                .iter()
                .copied()
                .find(|&r| distance(&features[r], f) <= tolerance)
            {
                Some(r) => r,
                None => {
                    reps.push(i);
                    i
                }
            }
        })
        .collect()
}

/// Packets of a fetch of `bytes` (segments of `mss`).
fn packets(bytes: f64, mss: f64) -> f64 {
    (bytes / mss).ceil().max(1.0)
}

/// A representative's outcome, ready to be taken by its cluster's other links.
pub(crate) struct Transfer {
    /// Size buckets' upper bounds (exclusive; the last is infinite).
    upper: Vec<f64>,
    /// Per bucket, the representative's fetches by data start: (bytes, delay, start delay).
    by_start: Vec<Vec<(f64, f64, f64)>>,
}

impl Transfer {
    /// From the representative's fetches: (bytes, data start, delay, start delay) each.
    pub(crate) fn new(fetches: &[(f64, f64, f64, f64)]) -> Self {
        let mut order: Vec<usize> = (0..fetches.len()).collect();
        order.sort_by(|&a, &b| fetches[a].0.total_cmp(&fetches[b].0));
        let mut upper = Vec::new();
        let mut members: Vec<Vec<usize>> = Vec::new();
        let (mut acc, mut lo) = (Vec::new(), 0.0f64);
        let mut k = 0;
        while k < order.len() {
            let size = fetches[order[k]].0;
            acc.push(order[k]);
            k += 1;
            if acc.len() >= BUCKET_MIN && lo * BUCKET_SPREAD <= size {
                // equal sizes stay in one bucket
                while k < order.len() && fetches[order[k]].0 == size {
                    acc.push(order[k]);
                    k += 1;
                }
                upper.push(if k < order.len() {
                    fetches[order[k]].0
                } else {
                    f64::INFINITY
                });
                members.push(std::mem::take(&mut acc));
                lo = upper[upper.len() - 1];
            }
        }
        if !acc.is_empty() {
            upper.push(f64::INFINITY);
            members.push(acc);
        }
        if let Some(u) = upper.last_mut() {
            *u = f64::INFINITY;
        }
        let by_start = members
            .into_iter()
            .map(|mut m| {
                m.sort_by(|&a, &b| fetches[a].1.total_cmp(&fetches[b].1).then(a.cmp(&b)));
                m.into_iter()
                    .map(|i| (fetches[i].0, fetches[i].2, fetches[i].3))
                    .collect()
            })
            .collect();
        Transfer { upper, by_start }
    }

    fn bucket(&self, bytes: f64) -> usize {
        self.upper.iter().take_while(|&&u| bytes >= u).count()
    }

    /// A member link's fetches, (bytes, data start) each: the delay and the start delay each takes.
    pub(crate) fn take(&self, fetches: &[(f64, f64)], mss: f64) -> Vec<(f64, f64)> {
        let mut out = vec![(f64::NAN, 0.0); fetches.len()];
        if self.by_start.is_empty() {
            return out;
        }
        let mut mine: Vec<Vec<usize>> = vec![Vec::new(); self.by_start.len()];
        for (i, &(b, _)) in fetches.iter().enumerate() {
            mine[self.bucket(b)].push(i);
        }
        for (bucket, mut ids) in mine.into_iter().enumerate() {
            let rep = &self.by_start[bucket];
            if ids.is_empty() {
                continue;
            }
            ids.sort_by(|&a, &b| fetches[a].1.total_cmp(&fetches[b].1).then(a.cmp(&b)));
            let n = ids.len() as f64;
            for (k, &i) in ids.iter().enumerate() {
                let j = (((k as f64 + 0.5) * rep.len() as f64 / n) as usize).min(rep.len() - 1);
                let (bytes, delay, late) = rep[j];
                let own = fetches[i].0;
                let d = if own == bytes {
                    delay
                } else {
                    delay / packets(bytes, mss) * packets(own, mss)
                };
                out[i] = (d, late);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flows(n: usize, bytes: f64, gap: f64, rtt: f64) -> Vec<LinkFlow> {
        (0..n)
            .map(|i| LinkFlow {
                bytes,
                start_s: 1.0 + i as f64 * gap,
                base_rtt_s: rtt,
                one_way_s: rtt / 2.0,
                access_bytes_per_s: 1.25e9,
                after: None,
                after_gap_s: 0.0,
                hold_s: 0.0,
                loop_id: None,
                loop_slots: 0,
                reverse: false,
                ack_queue_s: 0.0,
                ingress: None,
                back: None,
            })
            .collect()
    }

    #[test]
    fn identical_links_form_one_cluster_and_unlike_ones_do_not_merge() {
        let base = flows(50, 1e6, 1e-3, 20e-6);
        let same = Feature::new(1.25e9, 0.0, false, &base, &[]);
        let features = vec![
            same.clone(),
            same.clone(),
            // another capacity, another UDP rate, a lossless queue: never alike
            Feature::new(1.25e8, 0.0, false, &base, &[]),
            Feature::new(1.25e9, 1e8, false, &base, &[]),
            Feature::new(1.25e9, 0.0, true, &base, &[]),
            // twice the fetches, four times the size, starts twice as far apart, a longer
            // round trip: each far outside 5 %
            Feature::new(1.25e9, 0.0, false, &flows(100, 1e6, 1e-3, 20e-6), &[]),
            Feature::new(1.25e9, 0.0, false, &flows(50, 4e6, 1e-3, 20e-6), &[]),
            Feature::new(1.25e9, 0.0, false, &flows(50, 1e6, 2e-3, 20e-6), &[]),
            Feature::new(1.25e9, 0.0, false, &flows(50, 1e6, 1e-3, 80e-6), &[]),
            // 1 % more bytes per fetch: alike
            Feature::new(1.25e9, 0.0, false, &flows(50, 1.01e6, 1e-3, 20e-6), &[]),
        ];
        assert_eq!(distance(&same, &same), 0.0);
        // the same fetches one at a time or all at once in the max-min schedule: not alike
        let one_at_a_time: Vec<f64> = base.iter().map(|f| f.start_s + 1e-4).collect();
        let all_at_once = vec![10.0; base.len()];
        let a = Feature::new(1.25e9, 0.0, false, &base, &one_at_a_time);
        let b = Feature::new(1.25e9, 0.0, false, &base, &all_at_once);
        assert_eq!((a.peak, b.peak), (1.0, 50.0));
        assert!(distance(&a, &b) > 0.9);
        let reps = cluster(&features, 0.05);
        assert_eq!(reps, vec![0, 0, 2, 3, 4, 5, 6, 7, 8, 0]);
        // a tolerance of 0 still merges identical links, and only those
        assert_eq!(cluster(&features, 0.0), vec![0, 0, 2, 3, 4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn a_member_takes_the_fetch_at_its_own_position_in_the_representatives_schedule() {
        // the representative: 4 fetches of 1 MB, delays growing with their start
        let rep: Vec<(f64, f64, f64, f64)> = (0..4)
            .map(|i| (1e6, i as f64, i as f64 / 10.0, i as f64 / 100.0))
            .collect();
        let t = Transfer::new(&rep);
        // a member with the same fetches listed in another order takes them one to one
        let member = [(1e6, 3.0), (1e6, 0.0), (1e6, 2.0), (1e6, 1.0)];
        let got = t.take(&member, 1448.0);
        assert_eq!(got, vec![(0.3, 0.03), (0.0, 0.0), (0.2, 0.02), (0.1, 0.01)]);
        // two fetches take the quarter positions; a fetch of twice the packets, twice the delay
        let got = t.take(&[(1e6, 5.0), (2e6, 9.0)], 1448.0);
        assert_eq!(got[0], (0.1, 0.01));
        let pk = |b: f64| (b / 1448.0f64).ceil();
        assert_eq!(got[1], (0.3 / pk(1e6) * pk(2e6), 0.03));
    }

    #[test]
    fn sizes_fall_in_parsimons_buckets() {
        // 150 fetches of 10 kB and 150 of 1 MB, delay = their size in MB: two buckets
        let rep: Vec<(f64, f64, f64, f64)> = (0..300)
            .map(|i| {
                let b = if i % 2 == 0 { 1e4 } else { 1e6 };
                (b, i as f64, b / 1e6, 0.0)
            })
            .collect();
        let t = Transfer::new(&rep);
        assert_eq!(t.upper, vec![1e6, f64::INFINITY]);
        let got = t.take(&[(1e4, 0.0), (1e6, 0.0), (5e5, 0.0)], 1448.0);
        assert_eq!((got[0].0, got[1].0), (0.01, 1.0));
        // 500 kB is in the small fetches' bucket: their delay per packet times its packets
        let pk = |b: f64| (b / 1448.0f64).ceil();
        assert_eq!(got[2].0, 0.01 / pk(1e4) * pk(5e5));
    }
}
