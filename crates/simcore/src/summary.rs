//! What the fabric and application models report about a run: the result types they share, FCT
//! per size bucket, per-tier utilisation and a tier × time heat map (used by [`crate::fabric`]
//! and [`crate::apps`]; this module imports neither).

use serde::Serialize;

use crate::topology::Topology;

#[derive(Debug, Clone, Serialize)]
pub struct FctBucket {
    pub lo_bytes: f64,
    /// null: no upper bound
    pub hi_bytes: Option<f64>,
    pub count: u64,
    pub mean_s: f64,
    pub p50_s: f64,
    pub p99_s: f64,
    pub max_s: f64,
    /// FCT over the FCT alone on the path (size / slowest link + 2·delay)
    pub mean_slowdown: f64,
    pub p99_slowdown: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TierResult {
    pub name: String,
    pub links: u32,
    pub capacity_bytes_per_s: f64,
    pub carried_bytes: f64,
    /// carried / (capacity × (end − start of the shuffle))
    pub mean_utilisation: f64,
    /// the busiest link of the tier, its carried / (capacity × duration)
    pub max_link_utilisation: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Heatmap {
    pub bin_s: f64,
    /// `utilisation[tier][bin]`, bins from time 0
    pub utilisation: Vec<Vec<f64>>,
}

/// Bytes per tier in time bins whose width doubles when the run outgrows them.
pub(crate) struct Hist {
    pub(crate) width: f64,
    pub(crate) bins: Vec<Vec<f64>>,
}
impl Hist {
    pub(crate) fn new(tiers: usize, bins: u32) -> Hist {
        Hist {
            width: 1e-6,
            bins: vec![vec![0.0; 2 * bins as usize]; tiers],
        }
    }
    pub(crate) fn add(&mut self, tier: usize, t0: f64, t1: f64, load: f64) {
        if t1 <= t0 || load <= 0.0 {
            return;
        }
        let n = self.bins[tier].len();
        while t1 > self.width * n as f64 {
            for b in &mut self.bins {
                for i in 0..n / 2 {
                    b[i] = b[2 * i] + b[2 * i + 1];
                }
                b[n / 2..].iter_mut().for_each(|x| *x = 0.0);
            }
            self.width *= 2.0;
        }
        let first = (t0 / self.width) as usize;
        let last = ((t1 / self.width) as usize).min(n - 1);
        for i in first..=last {
            let lo = t0.max(i as f64 * self.width);
            let hi = t1.min((i + 1) as f64 * self.width);
            if hi > lo {
                self.bins[tier][i] += load * (hi - lo);
            }
        }
    }
}

pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// Buckets of `(fct, slowdown)` pairs, bucket b holding sizes in [edges[b−1], edges[b]).
pub(crate) fn fct_buckets(fct: &mut [Vec<(f64, f64)>], edges: &[f64]) -> Vec<FctBucket> {
    fct.iter_mut()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(b, v)| {
            let mut t: Vec<f64> = v.iter().map(|x| x.0).collect();
            // a fetch that had no path when it started has no ideal time: no slowdown
            let mut s: Vec<f64> = v.iter().map(|x| x.1).filter(|x| x.is_finite()).collect();
            t.sort_by(f64::total_cmp);
            s.sort_by(f64::total_cmp);
            FctBucket {
                lo_bytes: if b == 0 { 0.0 } else { edges[b - 1] },
                hi_bytes: edges.get(b).copied(),
                count: t.len() as u64,
                mean_s: t.iter().sum::<f64>() / t.len() as f64,
                p50_s: quantile(&t, 0.5),
                p99_s: quantile(&t, 0.99),
                max_s: *t.last().unwrap_or(&f64::NAN),
                mean_slowdown: if s.is_empty() {
                    f64::NAN
                } else {
                    s.iter().sum::<f64>() / s.len() as f64
                },
                p99_slowdown: quantile(&s, 0.99),
            }
        })
        .collect()
}

/// Per tier: bytes carried (`carried[link]`) and utilisation over `span` seconds.
pub(crate) fn tier_results(topo: &Topology, carried: &[f64], span: f64) -> Vec<TierResult> {
    (0..topo.tiers.len())
        .map(|t| {
            let links: Vec<usize> = (0..topo.links.len())
                .filter(|&l| topo.links[l].tier as usize == t)
                .collect();
            let cap: f64 = links.iter().map(|&l| topo.links[l].capacity).sum();
            let sum: f64 = links.iter().map(|&l| carried[l]).sum();
            let max_link = links
                .iter()
                .map(|&l| carried[l] / (topo.links[l].capacity * span))
                .fold(0.0, f64::max);
            TierResult {
                name: topo.tiers[t].clone(),
                links: links.len() as u32,
                capacity_bytes_per_s: cap,
                carried_bytes: sum,
                mean_utilisation: sum / (cap * span),
                max_link_utilisation: max_link,
            }
        })
        .collect()
}

/// The heat map of utilisation per tier and time bin up to `now`.
pub(crate) fn heatmap(hist: &Hist, tiers: &[TierResult], now: f64) -> Heatmap {
    let w = hist.width;
    let used = ((now / w).ceil() as usize).clamp(1, hist.bins.first().map_or(1, |b| b.len()));
    let utilisation = tiers
        .iter()
        .enumerate()
        .map(|(t, tr)| {
            (0..used)
                .map(|i| {
                    let covered = (now.min((i + 1) as f64 * w) - i as f64 * w).max(1e-300);
                    hist.bins[t][i] / (tr.capacity_bytes_per_s * covered)
                })
                .collect()
        })
        .collect();
    Heatmap {
        bin_s: w,
        utilisation,
    }
}

/// What the links and tiers carry over time: every link's load integrated between its changes
/// (its carried bytes) and each tier's total load binned for the heat map. Both engines (the
/// all-to-all fabric and the applications) keep one and tell it every change of a link's load.
pub(crate) struct LinkMeter {
    acc_load: Vec<f64>,
    acc_t: Vec<f64>,
    pub(crate) carried: Vec<f64>,
    tier_load: Vec<f64>,
    tier_t: f64,
    pub(crate) hist: Hist,
}

impl LinkMeter {
    pub(crate) fn new(links: usize, tiers: usize, bins: u32) -> Self {
        LinkMeter {
            acc_load: vec![0.0; links],
            acc_t: vec![0.0; links],
            carried: vec![0.0; links],
            tier_load: vec![0.0; tiers],
            tier_t: 0.0,
            hist: Hist::new(tiers, bins),
        }
    }

    /// Close the tiers' load interval at `now`; call before changing any link's load at `now`.
    pub(crate) fn close_tiers(&mut self, now: f64) {
        for (t, load) in self.tier_load.iter().enumerate() {
            self.hist.add(t, self.tier_t, now, *load);
        }
        self.tier_t = now;
    }

    /// Link `link` of tier `tier` carries `load` bytes/s from `now` on.
    pub(crate) fn set_load(&mut self, link: usize, tier: usize, now: f64, load: f64) {
        self.carried[link] += self.acc_load[link] * (now - self.acc_t[link]);
        self.acc_t[link] = now;
        self.tier_load[tier] += load - self.acc_load[link];
        self.acc_load[link] = load;
    }

    /// `bytes` crossing link `link` of tier `tier` in `seconds` from `now`, outside the rates
    /// (a block within TCP's initial window).
    pub(crate) fn burst(&mut self, link: usize, tier: usize, now: f64, bytes: f64, seconds: f64) {
        self.carried[link] += bytes;
        self.hist.add(tier, now, now + seconds, bytes / seconds);
    }

    /// Account everything up to `now`, the end of the run.
    pub(crate) fn finish(&mut self, now: f64) {
        self.close_tiers(now);
        for l in 0..self.carried.len() {
            self.carried[l] += self.acc_load[l] * (now - self.acc_t[l]);
            self.acc_t[l] = now;
        }
    }
}
