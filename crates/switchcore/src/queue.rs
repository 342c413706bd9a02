//! One egress port: a FIFO queue drained by a token bucket (rate, burst), then a fixed
//! propagation delay, with a byte/packet limit and a discipline (droptail, or RED that marks ECN
//! on ECT packets and drops the others).
//!
//! The model is exact in time: a packet leaves the queue at the first instant the bucket holds
//! enough tokens (never earlier than its arrival or the previous departure), whatever instant the
//! caller happens to poll at, and is delivered `delay_ns` later. Backlog (what RED and telemetry
//! see) is the queue only, not packets "on the wire" in the delay line, like a kernel qdisc.
//!
//! Use: [`EgressQueue::admit`] decides (accept / mark / drop) for a packet arriving at `now`; the
//! caller applies the mark (it owns the bytes) and then [`EgressQueue::push`]es it;
//! [`EgressQueue::poll`] returns packets due at `now`; [`EgressQueue::next_wakeup`] says when to
//! poll next.

use std::collections::VecDeque;

use crate::rng::Rng;

const NS_PER_S: i128 = 1_000_000_000;

/// Random early detection parameters (byte thresholds, as in Linux `red` and seed 001).
#[derive(Debug, Clone, PartialEq)]
pub struct RedConfig {
    /// Below this (average) backlog in bytes nothing is marked.
    pub min_bytes: u64,
    /// At or above this (average) backlog every packet is marked (or dropped).
    pub max_bytes: u64,
    /// Marking probability reached at `max_bytes` (0..=1).
    pub max_p: f64,
    /// EWMA weight of the average queue; `None` = use the instantaneous backlog.
    pub ewma_weight: Option<f64>,
    /// Mark ECT packets with CE instead of dropping them.
    pub ecn: bool,
    /// RED's gentle mode: between `max_bytes` and twice it the probability rises from `max_p`
    /// to 1 (instead of jumping to 1 at `max_bytes`).
    pub gentle: bool,
    /// Seed of the marking decisions (reproducible simulations).
    pub seed: u64,
}

/// The queue discipline of a port.
#[derive(Debug, Clone, PartialEq)]
pub enum Discipline {
    DropTail,
    Red(RedConfig),
}

/// A port's configuration. Units are in the field names.
#[derive(Debug, Clone, PartialEq)]
pub struct PortConfig {
    /// Drain rate in bytes per second of frame bytes; 0 = unlimited.
    pub rate_bytes_per_s: u64,
    /// Bucket depth in bytes (a packet larger than this waits for a full bucket).
    pub burst_bytes: u64,
    /// Propagation delay added after the queue, in nanoseconds.
    pub delay_ns: u64,
    /// Queue limit in bytes (`None`: no byte limit).
    pub limit_bytes: Option<u64>,
    /// Queue limit in packets (`None`: no packet limit).
    pub limit_packets: Option<u32>,
    pub discipline: Discipline,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            rate_bytes_per_s: 0,
            burst_bytes: 3028,
            delay_ns: 0,
            limit_bytes: Some(1 << 20),
            limit_packets: None,
            discipline: Discipline::DropTail,
        }
    }
}

/// What happens to an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Queue it unchanged.
    Accept,
    /// Queue it with CE set (RED decided to mark an ECT packet).
    Mark,
    /// Drop it (queue limit, or RED on a non-ECT packet).
    Drop,
}

/// Cumulative counters of a port (monotone; `backlog_*` are instantaneous).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    pub offered_bytes: u64,
    pub offered_packets: u64,
    /// Left the queue (entered the delay line): what a qdisc reports as sent.
    pub sent_bytes: u64,
    pub sent_packets: u64,
    /// Left the delay line (handed back to the caller by `poll`).
    pub delivered_bytes: u64,
    pub delivered_packets: u64,
    pub drops: u64,
    pub drop_bytes: u64,
    pub marks: u64,
    /// Packets that had to wait for tokens (as HTB's "overlimits").
    pub overlimits: u64,
    pub backlog_bytes: u64,
    pub backlog_packets: u64,
    pub in_flight_bytes: u64,
}

struct Queued<T> {
    item: T,
    len: u64,
    at_ns: u64,
}

/// One egress port's queue + bucket + delay line, holding items of type `T` (frames for the
/// switch, anything for a simulator).
pub struct EgressQueue<T> {
    cfg: PortConfig,
    queue: VecDeque<Queued<T>>,
    wire: VecDeque<Queued<T>>, // at_ns = release time
    tokens: i128,              // bytes * 1e9
    tokens_at_ns: u64,
    last_departure_ns: u64,
    /// When the head may leave ([`Self::head_departure`] of the front; `None`: empty), kept up
    /// to date wherever the front, the bucket, the last departure or the configuration change:
    /// `advance` and `next_wakeup` read it instead of computing it again at every call.
    head_dep: Option<u64>,
    avg_bytes: f64,
    idle_since_ns: Option<u64>,
    red_count: i64,
    rng: Rng,
    stats: PortStats,
}

impl<T> EgressQueue<T> {
    /// An empty port whose bucket is full at time `now_ns`.
    pub fn new(cfg: PortConfig, now_ns: u64) -> Self {
        let seed = match &cfg.discipline {
            Discipline::Red(r) => r.seed,
            Discipline::DropTail => 1,
        };
        let tokens = i128::from(cfg.burst_bytes) * NS_PER_S;
        EgressQueue {
            cfg,
            queue: VecDeque::new(),
            wire: VecDeque::new(),
            tokens,
            tokens_at_ns: now_ns,
            last_departure_ns: now_ns,
            head_dep: None,
            avg_bytes: 0.0,
            idle_since_ns: Some(now_ns),
            red_count: -1,
            rng: Rng::new(seed),
            stats: PortStats::default(),
        }
    }

    pub fn config(&self) -> &PortConfig {
        &self.cfg
    }

    /// Counters as of the last call that advanced time.
    pub fn stats(&self) -> PortStats {
        self.stats
    }

    /// RED's current average backlog in bytes (the instantaneous backlog without EWMA).
    pub fn average_backlog_bytes(&self) -> f64 {
        self.avg_bytes
    }

    fn cap(&self) -> i128 {
        i128::from(self.cfg.burst_bytes) * NS_PER_S
    }

    fn refill(&mut self, t: u64) {
        if t > self.tokens_at_ns {
            let dt = i128::from(t - self.tokens_at_ns);
            self.tokens =
                (self.tokens + dt * i128::from(self.cfg.rate_bytes_per_s)).min(self.cap());
            self.tokens_at_ns = t;
        }
    }

    /// The earliest time the head (of `len` bytes, queued at `at_ns`) may leave.
    fn head_departure(&self, len: u64, at_ns: u64) -> u64 {
        let start = at_ns.max(self.last_departure_ns).max(self.tokens_at_ns);
        if self.cfg.rate_bytes_per_s == 0 {
            return start;
        }
        let rate = i128::from(self.cfg.rate_bytes_per_s);
        let tokens_at_start =
            (self.tokens + i128::from(start - self.tokens_at_ns) * rate).min(self.cap());
        let need = (i128::from(len) * NS_PER_S).min(self.cap());
        if tokens_at_start >= need {
            start
        } else {
            // the wait rounded up, in 64 bits where the deficit fits (a division in 128 bits
            // costs several times one in 64)
            let deficit = need - tokens_at_start;
            let wait = match (u64::try_from(deficit), u64::try_from(rate)) {
                (Ok(d), Ok(r)) => i128::from(d.div_ceil(r)),
                _ => (deficit + rate - 1) / rate,
            };
            start + wait as u64
        }
    }

    /// The head's departure as the state now stands (after any change to what it depends on).
    fn refresh_head(&mut self) {
        self.head_dep = self
            .queue
            .front()
            .map(|h| self.head_departure(h.len, h.at_ns));
    }

    /// Move every packet whose departure time is ≤ `now_ns` from the queue to the delay line.
    fn advance(&mut self, now_ns: u64) {
        while let Some(dep) = self.head_dep {
            if dep > now_ns {
                break;
            }
            let q = self.queue.pop_front().unwrap();
            if self.cfg.rate_bytes_per_s > 0 {
                if dep > q.at_ns.max(self.last_departure_ns) {
                    self.stats.overlimits += 1;
                }
                self.refill(dep);
                self.tokens -= i128::from(q.len) * NS_PER_S;
            }
            self.last_departure_ns = dep;
            self.stats.backlog_bytes -= q.len;
            self.stats.backlog_packets -= 1;
            self.stats.sent_bytes += q.len;
            self.stats.sent_packets += 1;
            self.stats.in_flight_bytes += q.len;
            if self.queue.is_empty() {
                self.idle_since_ns = Some(dep);
            }
            self.wire.push_back(Queued {
                item: q.item,
                len: q.len,
                at_ns: dep + self.cfg.delay_ns,
            });
            self.refresh_head();
        }
    }

    fn update_average(&mut self, now_ns: u64) {
        let Discipline::Red(red) = &self.cfg.discipline else {
            return;
        };
        let q = self.stats.backlog_bytes as f64;
        match red.ewma_weight {
            None => self.avg_bytes = q,
            Some(w) => {
                if let (Some(idle), true) = (self.idle_since_ns, self.queue.is_empty()) {
                    // the queue drained: decay as if small packets had gone by at line rate
                    let idle_ns = now_ns.saturating_sub(idle) as f64;
                    let per_pkt_ns = if self.cfg.rate_bytes_per_s > 0 {
                        500.0 * 1e9 / self.cfg.rate_bytes_per_s as f64
                    } else {
                        1000.0
                    };
                    let m = idle_ns / per_pkt_ns;
                    self.avg_bytes *= (1.0 - w).powf(m);
                    self.idle_since_ns = Some(now_ns);
                } else {
                    self.avg_bytes = (1.0 - w) * self.avg_bytes + w * q;
                }
            }
        }
    }

    fn red_decision(&mut self, ect: bool) -> Admit {
        let Discipline::Red(red) = &self.cfg.discipline else {
            return Admit::Accept;
        };
        let (min, max, max_p, ecn, gentle) = (
            red.min_bytes as f64,
            red.max_bytes as f64,
            red.max_p,
            red.ecn,
            red.gentle,
        );
        let avg = self.avg_bytes;
        let ramp_end = if gentle && max > min { 2.0 * max } else { max };
        let congested = if avg < min {
            self.red_count = -1;
            false
        } else if avg >= ramp_end {
            self.red_count = 0;
            true
        } else {
            self.red_count += 1;
            let pb = if avg < max {
                max_p * (avg - min) / (max - min).max(1.0)
            } else {
                // gentle: from max_p at max to 1 at 2·max
                max_p + (1.0 - max_p) * (avg - max) / max.max(1.0)
            };
            let denom = 1.0 - self.red_count as f64 * pb;
            let pa = if denom <= 0.0 { 1.0 } else { pb / denom };
            let hit = self.rng.next_f64() < pa;
            if hit {
                self.red_count = 0;
            }
            hit
        };
        match (congested, ecn && ect) {
            (false, _) => Admit::Accept,
            (true, true) => Admit::Mark,
            (true, false) => Admit::Drop,
        }
    }

    /// Decide the fate of a packet of `len` bytes arriving at `now_ns` (`ect`: its IP header
    /// says ECN-capable). Counts the drop or mark; the caller must `push` unless it is `Drop`.
    pub fn admit(&mut self, len: u64, ect: bool, now_ns: u64) -> Admit {
        self.advance(now_ns);
        self.stats.offered_bytes += len;
        self.stats.offered_packets += 1;
        self.update_average(now_ns);
        let mut verdict = self.red_decision(ect);
        let over_bytes = self
            .cfg
            .limit_bytes
            .is_some_and(|l| self.stats.backlog_bytes + len > l);
        let over_packets = self
            .cfg
            .limit_packets
            .is_some_and(|l| self.stats.backlog_packets + 1 > u64::from(l));
        if over_bytes || over_packets {
            verdict = Admit::Drop;
        }
        match verdict {
            Admit::Drop => {
                self.stats.drops += 1;
                self.stats.drop_bytes += len;
            }
            Admit::Mark => self.stats.marks += 1,
            Admit::Accept => {}
        }
        verdict
    }

    /// Queue `item` of `len` bytes at `now_ns` (after a non-drop [`admit`](Self::admit)).
    pub fn push(&mut self, item: T, len: u64, now_ns: u64) {
        self.advance(now_ns);
        if self.queue.is_empty() {
            self.idle_since_ns = None;
        }
        self.stats.backlog_bytes += len;
        self.stats.backlog_packets += 1;
        self.queue.push_back(Queued {
            item,
            len,
            at_ns: now_ns,
        });
        if self.queue.len() == 1 {
            self.refresh_head();
        }
    }

    /// The next packet due at `now_ns` (its delay elapsed), if any; call until `None`.
    pub fn poll(&mut self, now_ns: u64) -> Option<T> {
        self.advance(now_ns);
        if self.wire.front().is_some_and(|w| w.at_ns <= now_ns) {
            let w = self.wire.pop_front().unwrap();
            self.stats.in_flight_bytes -= w.len;
            self.stats.delivered_bytes += w.len;
            self.stats.delivered_packets += 1;
            return Some(w.item);
        }
        None
    }

    /// Like [`poll`](Self::poll) but also returns the instant the packet was due (its exact
    /// departure time plus delay), for tests and for measuring scheduling lateness.
    pub fn poll_timed(&mut self, now_ns: u64) -> Option<(T, u64)> {
        self.advance(now_ns);
        let due = self.wire.front().map(|w| w.at_ns)?;
        self.poll(now_ns).map(|t| (t, due))
    }

    /// When something next becomes due (a delivery, or the head leaving the queue); `None` if
    /// the port is empty.
    pub fn next_wakeup(&self) -> Option<u64> {
        let wire = self.wire.front().map(|w| w.at_ns);
        let head = self.head_dep.map(|dep| dep + self.cfg.delay_ns);
        match (wire, head) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Change the configuration live (bucket refilled to the new depth if it shrank).
    pub fn reconfigure(&mut self, cfg: PortConfig, now_ns: u64) {
        self.refill(now_ns);
        self.cfg = cfg;
        self.tokens = self.tokens.min(self.cap());
        self.refresh_head();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(rate: u64, delay: u64) -> PortConfig {
        PortConfig {
            rate_bytes_per_s: rate,
            burst_bytes: 1500,
            delay_ns: delay,
            limit_bytes: Some(15_000),
            limit_packets: None,
            discipline: Discipline::DropTail,
        }
    }

    #[test]
    fn serialises_at_rate_then_delays() {
        // 1500 B at 1.5 MB/s = 1 ms each; delay 5 ms
        let mut q = EgressQueue::new(cfg(1_500_000, 5_000_000), 0);
        for i in 0..3 {
            assert_eq!(q.admit(1500, false, 0), Admit::Accept);
            q.push(i, 1500, 0);
        }
        let mut due = vec![];
        let mut t = 0;
        while due.len() < 3 {
            t = q.next_wakeup().unwrap();
            while let Some((i, d)) = q.poll_timed(t) {
                due.push((i, d));
            }
        }
        assert_eq!(due, vec![(0, 5_000_000), (1, 6_000_000), (2, 7_000_000)]);
        assert_eq!(t, 7_000_000);
        assert_eq!(q.stats().overlimits, 2);
    }

    #[test]
    fn tail_drop_at_limit() {
        let mut q = EgressQueue::new(cfg(1000, 0), 0);
        let mut accepted = 0;
        for i in 0..20 {
            if q.admit(1500, false, 0) != Admit::Drop {
                q.push(i, 1500, 0);
                accepted += 1;
            }
        }
        // the first leaves at once (full bucket), then 10 fit the 15 000 B limit
        assert_eq!(accepted, 11);
        assert_eq!(q.stats().drops, 9);
    }

    #[test]
    fn red_step_marks_ect_and_drops_non_ect() {
        let mut c = cfg(1000, 0);
        c.limit_bytes = Some(1_000_000);
        c.discipline = Discipline::Red(RedConfig {
            min_bytes: 6000,
            max_bytes: 6000,
            max_p: 1.0,
            ewma_weight: None,
            ecn: true,
            gentle: false,
            seed: 7,
        });
        let mut q = EgressQueue::new(c, 0);
        let mut verdicts = vec![];
        for i in 0..8 {
            let v = q.admit(1500, i % 2 == 0, 0);
            if v != Admit::Drop {
                q.push(i, 1500, 0);
            }
            verdicts.push(v);
        }
        // first leaves at once; 4 more fill 6000 B; from then: ECT marked, non-ECT dropped
        assert_eq!(&verdicts[..5], &[Admit::Accept; 5]);
        assert_eq!(verdicts[5], Admit::Drop);
        assert_eq!(verdicts[6], Admit::Mark);
    }

    #[test]
    fn red_gentle_ramps_to_certain_between_max_and_twice_max() {
        // instantaneous average; a queue held at a fixed backlog, then the share of ECT packets
        // marked counted over many arrivals
        let share = |gentle: bool, backlog_pkts: u64| {
            let mut c = cfg(1, 0); // 1 B/s: nothing drains during the test
            c.limit_bytes = Some(10_000_000);
            c.discipline = Discipline::Red(RedConfig {
                min_bytes: 3000,
                max_bytes: 9000,
                max_p: 0.1,
                ewma_weight: None,
                ecn: true,
                gentle,
                seed: 3,
            });
            let mut q = EgressQueue::new(c, 0);
            for i in 0..=backlog_pkts {
                q.push(i, 1500, 0);
            }
            while q.stats().backlog_bytes > backlog_pkts * 1500 {
                q.poll(0); // the first leaves on the full bucket
            }
            assert_eq!(q.stats().backlog_bytes, backlog_pkts * 1500);
            let marks = (0..4000)
                .filter(|_| q.admit(1500, true, 0) == Admit::Mark)
                .count();
            marks as f64 / 4000.0
        };
        // at 10 500 B (max + 1 500): RED without gentle marks all; gentle's probability is
        // 0.1 + 0.9 · 1500 / 9000 = 0.25, which RED's count spreading turns into a mark at
        // least every 3rd packet
        assert_eq!(share(false, 7), 1.0);
        let g = share(true, 7);
        assert!(g > 0.33 && g < 0.7, "{g}");
        // below max both are the same; at 2 × max both mark everything
        assert_eq!(share(true, 4), share(false, 4));
        assert_eq!(share(true, 12), 1.0);
    }
}
