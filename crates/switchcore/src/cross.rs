//! Cross traffic generated inside the switch: UDP-like packets that enter a port's egress queue
//! as if a host had sent them, occupy bytes and service time there and meet the same
//! droptail/RED/ECN decisions as real frames, but are never built, sent or received by any host
//! (no bytes exist, only a length in the queue).
//!
//! A source's arrival times are a pure function of its configuration, its start instant and its
//! seed; the switch admits every arrival at its own scheduled instant (see
//! [`Switch`](crate::switch::Switch)), so a caller that polls late changes nothing in the queue's
//! history, it only shows up as lag.
//!
//! Patterns (the mean offered rate is `rate_bytes_per_s` in every one):
//! - `Constant`: arrival k at `start + ⌈k · frame / rate⌉` (exact in the long run, no drift);
//! - `Poisson`: exponential gaps of mean `frame / rate` from the seeded generator;
//! - `OnOff`: a square wave, `on_ns` sending at `rate · (on + off) / on`, then `off_ns` silent,
//!   the first period starting on; within an on period arrivals are evenly spaced.

use crate::rng::Rng;

const NS_PER_S: u128 = 1_000_000_000;

/// When a source's packets arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    Constant,
    Poisson,
    OnOff { on_ns: u64, off_ns: u64 },
}

/// One in-switch traffic source.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossConfig {
    /// The egress port whose queue the packets enter.
    pub port: usize,
    /// Mean offered rate in bytes per second of frame bytes (as the port's rate counts).
    pub rate_bytes_per_s: u64,
    /// Every packet's length in bytes (a full-size UDP frame is 1514).
    pub frame_bytes: u64,
    pub pattern: Pattern,
    /// The packets say ECN-capable (RED marks instead of dropping them); UDP is usually not.
    pub ect: bool,
    /// Seed of the Poisson gaps (other patterns are deterministic).
    pub seed: u64,
}

impl CrossConfig {
    /// Why this source cannot run (`ports`: how many ports the switch has), if it cannot.
    pub fn check(&self, ports: usize) -> Result<(), String> {
        if self.port >= ports {
            return Err(format!(
                "cross traffic source on port {}, but the switch has {ports} ports",
                self.port
            ));
        }
        if self.rate_bytes_per_s == 0 || self.frame_bytes == 0 {
            return Err("cross traffic source needs a rate > 0 and frame_bytes > 0".into());
        }
        if let Pattern::OnOff { on_ns, .. } = self.pattern {
            if on_ns == 0 {
                return Err("cross traffic source: an on/off pattern needs on > 0".into());
            }
        }
        Ok(())
    }
}

/// What a source offered and what became of it (cumulative).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CrossStats {
    /// Arrivals offered to the queue (admitted or not).
    pub offered_packets: u64,
    pub offered_bytes: u64,
    /// Dropped by the queue (limit, or RED on a non-ECT packet).
    pub drops: u64,
    /// Marked by RED (ECT sources only).
    pub marks: u64,
    /// Left the port's delay line ("received" by the virtual sink).
    pub delivered_packets: u64,
    pub delivered_bytes: u64,
    /// Whether the source still sends (false once stopped).
    pub running: bool,
}

/// One source's schedule and counters.
#[derive(Debug, Clone)]
pub struct CrossSource {
    cfg: CrossConfig,
    start_ns: u64,
    k: u64,
    next_ns: Option<u64>,
    rng: Rng,
    stats: CrossStats,
}

impl CrossSource {
    /// A source whose first packet arrives at `now_ns`.
    pub fn new(cfg: CrossConfig, now_ns: u64) -> CrossSource {
        let rng = Rng::new(cfg.seed);
        CrossSource {
            cfg,
            start_ns: now_ns,
            k: 0,
            next_ns: Some(now_ns),
            rng,
            stats: CrossStats {
                running: true,
                ..CrossStats::default()
            },
        }
    }

    pub fn config(&self) -> &CrossConfig {
        &self.cfg
    }

    pub fn stats(&self) -> CrossStats {
        self.stats
    }

    pub(crate) fn stats_mut(&mut self) -> &mut CrossStats {
        &mut self.stats
    }

    /// The next arrival's instant (`None` once stopped).
    pub fn next_arrival(&self) -> Option<u64> {
        self.next_ns
    }

    /// No more arrivals (packets already queued still leave).
    pub fn stop(&mut self) {
        self.next_ns = None;
        self.stats.running = false;
    }

    /// Start (again) at `now_ns`: the schedule begins anew there, the counters go on.
    pub fn start(&mut self, now_ns: u64) {
        self.start_ns = now_ns;
        self.k = 0;
        self.next_ns = Some(now_ns);
        self.stats.running = true;
    }

    /// Take the due arrival (at or before `now_ns`), advancing the schedule; its instant.
    pub fn take_due(&mut self, now_ns: u64) -> Option<u64> {
        let t = self.next_ns.filter(|&t| t <= now_ns)?;
        self.k += 1;
        self.next_ns = Some(self.arrival_after(t));
        self.stats.offered_packets += 1;
        self.stats.offered_bytes += self.cfg.frame_bytes;
        Some(t)
    }

    /// The arrival following the one at `prev_ns` (the k-th, k already counted).
    fn arrival_after(&mut self, prev_ns: u64) -> u64 {
        let frame = u128::from(self.cfg.frame_bytes);
        let rate = u128::from(self.cfg.rate_bytes_per_s);
        match self.cfg.pattern {
            Pattern::Constant => {
                self.start_ns + div_ceil(u128::from(self.k) * frame * NS_PER_S, rate)
            }
            Pattern::Poisson => {
                let mean_ns = (frame * NS_PER_S) as f64 / rate as f64;
                let u = self.rng.next_f64(); // [0, 1)
                let gap = -(1.0 - u).ln() * mean_ns;
                prev_ns + (gap.round() as u64).max(1)
            }
            Pattern::OnOff { on_ns, off_ns } => {
                // time "on" needed for k packets at the peak rate rate·(on+off)/on
                let (on, period) = (u128::from(on_ns), u128::from(on_ns + off_ns));
                let v = u128::from(div_ceil(
                    u128::from(self.k) * frame * NS_PER_S * on,
                    rate * period,
                ));
                let real = (v / on) * period + v % on;
                self.start_ns + real as u64
            }
        }
    }
}

fn div_ceil(a: u128, b: u128) -> u64 {
    a.div_ceil(b) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(pattern: Pattern, seed: u64) -> CrossSource {
        CrossSource::new(
            CrossConfig {
                port: 0,
                rate_bytes_per_s: 1_514_000, // 1000 frames per second
                frame_bytes: 1514,
                pattern,
                ect: false,
                seed,
            },
            5_000,
        )
    }

    fn arrivals(s: &mut CrossSource, until: u64) -> Vec<u64> {
        let mut out = vec![];
        while let Some(t) = s.take_due(until) {
            out.push(t);
        }
        out
    }

    #[test]
    fn constant_arrivals_are_evenly_spaced_from_the_start() {
        let mut s = source(Pattern::Constant, 1);
        let a = arrivals(&mut s, 5_000 + 10_000_000);
        assert_eq!(a.len(), 11);
        assert_eq!(a[0], 5_000);
        assert!(a.windows(2).all(|w| w[1] - w[0] == 1_000_000));
        assert_eq!(s.next_arrival(), Some(5_000 + 11_000_000));
        assert_eq!(s.stats().offered_bytes, 11 * 1514);
    }

    #[test]
    fn poisson_has_the_mean_rate_and_a_seeded_sequence() {
        let mut a = source(Pattern::Poisson, 7);
        let n = arrivals(&mut a, 100_000_000_000).len() as f64; // 100 s: 100 000 expected
        assert!((n / 100_000.0 - 1.0).abs() < 0.01, "{n}");
        let first = |seed| arrivals(&mut source(Pattern::Poisson, seed), 50_000_000);
        assert_eq!(first(7), first(7));
        assert_ne!(first(7), first(8));
        // exponential gaps: their coefficient of variation is 1 (a constant source's is 0)
        let t = first(7);
        let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!(sd / mean > 0.6, "{}", sd / mean);
    }

    #[test]
    fn on_off_sends_only_when_on_at_the_peak_rate_and_keeps_the_mean() {
        // 10 ms on, 30 ms off: the mean 1000 frames/s is 4000/s while on, 40 per on period
        let mut s = source(
            Pattern::OnOff {
                on_ns: 10_000_000,
                off_ns: 30_000_000,
            },
            1,
        );
        let a = arrivals(&mut s, 5_000 + 4_000_000_000 - 1);
        assert_eq!(a.len(), 4000);
        for &t in &a {
            let phase = (t - 5_000) % 40_000_000;
            assert!(phase < 10_000_000, "arrival {t} in an off period");
        }
        assert_eq!(a[1] - a[0], 250_000);
        assert_eq!(
            a[40] - 5_000,
            40_000_000,
            "the next on period starts the next burst"
        );
    }

    #[test]
    fn a_stopped_source_has_no_arrivals() {
        let mut s = source(Pattern::Constant, 1);
        assert_eq!(arrivals(&mut s, 5_000).len(), 1);
        s.stop();
        assert_eq!(s.next_arrival(), None);
        assert!(arrivals(&mut s, u64::MAX / 2).is_empty());
        assert!(!s.stats().running);
        s.start(2_000_000_000);
        assert_eq!(
            arrivals(&mut s, 2_001_000_000),
            [2_000_000_000, 2_001_000_000]
        );
        assert_eq!(s.stats().offered_packets, 3);
    }
}
