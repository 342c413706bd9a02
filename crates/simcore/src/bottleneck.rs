//! A packet-level bottleneck run on the userspace switch's own logic, for the operating point the
//! fluid models cannot derive: where a RED/ECN queue settles under DCTCP or loss-based senders.
//!
//! The queue is `switchcore::queue::EgressQueue` (the token bucket, byte limit and RED/ECN
//! decision of the switch's ports, seeded) and every sender's window is
//! `switchcore::window::DctcpWindow` (the arithmetic of the switch's DCTCP-in-the-switch). Only
//! the surroundings are simplified: `flows` long-lived window-limited senders with an ACK clock of
//! `base_rtt_s` (all propagation on the return path), a lost segment detected one round trip later
//! (at most one window cut per window of data, as with fast recovery), and constant-rate
//! unresponsive cross traffic that is not ECN-capable (RED drops it). DCTCP senders send ECT, so a
//! RED queue with `ecn` marks them; loss-based senders do not, so RED drops them.
//!
//! [`operating_point`] runs `warmup_packets` departures, then measures over `measure_packets`
//! departures: the time-averaged backlog, the TCP goodput on the wire, the delivered cross
//! traffic, mark and drop shares. Deterministic for a seed; a few milliseconds per call. No state
//! is kept between calls: a caller that asks about the same probe again keeps the answer itself
//! (the Spark model's [`crate::sparkjob::Bottleneck`] holds one per flow count for its run).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};
use switchcore::queue::{Admit, Discipline, EgressQueue, PortConfig, RedConfig};
use switchcore::window::DctcpWindow;

const NS: f64 = 1e9;
/// DCTCP's gain for α (the switch's default).
const G: f64 = 1.0 / 16.0;

/// How the senders react.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sender {
    /// cubic, reno: cut on loss (or, with [`Probe::ecn_capable`], on a marked window).
    Loss,
    /// DCTCP (in the host or in the switch): ECN-capable, cut by α/2 per marked window.
    Dctcp,
}

/// How a loss-based sender's window grows and is cut (ignored for DCTCP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Growth {
    /// Reno: one segment per round trip, halved on congestion.
    #[default]
    Reno,
    /// Cubic at data-center round trips: its window stays in the TCP-friendly region (the cubic
    /// curve's K is seconds, the round trip well under a millisecond), so it grows by
    /// 3(1−β)/(1+β) ≈ 0.53 segments per round trip and is cut to β = 0.7.
    Cubic,
}

impl Growth {
    /// (segments added per round trip, factor kept on a cut)
    pub(crate) fn aimd(self) -> (f64, f64) {
        match self {
            Growth::Reno => (1.0, 0.5),
            Growth::Cubic => (3.0 * 0.3 / 1.7, 0.7),
        }
    }
}

/// RED with byte thresholds (seed 001's `red limit L min A max B`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct RedSpec {
    pub min_bytes: f64,
    pub max_bytes: f64,
    #[serde(default = "one")]
    pub max_p: f64,
    /// EWMA weight of the average queue; absent: instantaneous (DCTCP's step marking).
    #[serde(default)]
    pub ewma_weight: Option<f64>,
    /// Mark ECT packets instead of dropping them.
    #[serde(default = "yes")]
    pub ecn: bool,
    /// RED's gentle mode (probability from max_p at max_bytes to 1 at twice it).
    #[serde(default)]
    pub gentle: bool,
}

fn one() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}

impl RedSpec {
    /// DCTCP's step marking: every ECN-capable packet marked while the queue holds at least
    /// `k_bytes` (no average, no probability below 1).
    pub fn step(k_bytes: f64) -> Self {
        RedSpec {
            min_bytes: k_bytes,
            max_bytes: k_bytes,
            max_p: 1.0,
            ewma_weight: None,
            ecn: true,
            gentle: false,
        }
    }

    /// Whether the thresholds are ordered and fit a queue of `queue_bytes`.
    pub(crate) fn fits(&self, queue_bytes: f64) -> bool {
        self.min_bytes >= 0.0 && self.max_bytes >= self.min_bytes && self.max_bytes <= queue_bytes
    }
}

/// The switch port a packet-level run drains through: `rate_bytes_per_s` with a token bucket of
/// `burst_bytes`, a byte limit of `queue_bytes`, RED/ECN (seeded with `seed`) or droptail.
pub(crate) fn port_config(
    rate_bytes_per_s: f64,
    burst_bytes: u64,
    queue_bytes: f64,
    red: Option<&RedSpec>,
    seed: u64,
) -> PortConfig {
    let discipline = match red {
        None => Discipline::DropTail,
        Some(r) => Discipline::Red(RedConfig {
            min_bytes: r.min_bytes as u64,
            max_bytes: r.max_bytes as u64,
            max_p: r.max_p,
            ewma_weight: r.ewma_weight,
            ecn: r.ecn,
            gentle: r.gentle,
            seed,
        }),
    };
    PortConfig {
        rate_bytes_per_s: rate_bytes_per_s.round() as u64,
        burst_bytes,
        delay_ns: 0,
        limit_bytes: Some(queue_bytes as u64),
        limit_packets: None,
        discipline,
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Probe {
    /// Drain rate, wire bytes/s.
    pub link_bytes_per_s: f64,
    /// Queue limit, bytes.
    pub queue_bytes: f64,
    /// RED/ECN; absent: droptail.
    #[serde(default)]
    pub red: Option<RedSpec>,
    /// Round trip without queueing, seconds.
    pub base_rtt_s: f64,
    pub flows: u32,
    pub sender: Sender,
    /// Loss-based senders send ECT: a RED queue with `ecn` marks them instead of dropping them,
    /// and a marked window cuts like a loss (once per window, nothing resent).
    #[serde(default)]
    pub ecn_capable: bool,
    /// The loss-based senders' window rule.
    #[serde(default)]
    pub growth: Growth,
    /// Unresponsive cross traffic offered to the queue, wire bytes/s.
    #[serde(default)]
    pub cross_bytes_per_s: f64,
    #[serde(default = "mss_wire")]
    pub mss_wire_bytes: f64,
    /// The window never goes below this many segments (Linux: 2).
    #[serde(default = "two")]
    pub min_window_segments: f64,
    #[serde(default = "warmup")]
    pub warmup_packets: u64,
    #[serde(default = "measure")]
    pub measure_packets: u64,
    #[serde(default = "seed")]
    pub seed: u64,
}

fn mss_wire() -> f64 {
    1514.0
}
fn two() -> f64 {
    2.0
}
fn warmup() -> u64 {
    4_000
}
fn measure() -> u64 {
    16_000
}
fn seed() -> u64 {
    1
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OperatingPoint {
    /// Time-averaged queue backlog, bytes.
    pub mean_backlog_bytes: f64,
    /// Wire bytes/s delivered for the TCP senders together.
    pub tcp_bytes_per_s: f64,
    /// Wire bytes/s of cross traffic delivered.
    pub cross_bytes_per_s: f64,
    /// Marked share of the offered packets.
    pub mark_share: f64,
    /// Dropped share of the offered packets.
    pub drop_share: f64,
    /// Virtual time measured over, seconds.
    pub measured_s: f64,
}

impl Probe {
    pub fn validate(&self) -> Result<(), String> {
        let pos = |x: f64| x > 0.0 && x.is_finite();
        if !pos(self.link_bytes_per_s) {
            return Err("probe.link_bytes_per_s: must be > 0".into());
        }
        if !pos(self.queue_bytes) || self.queue_bytes < self.mss_wire_bytes {
            return Err("probe.queue_bytes: must hold at least one packet".into());
        }
        if !(self.base_rtt_s >= 0.0 && self.base_rtt_s.is_finite()) {
            return Err("probe.base_rtt_s: must be >= 0".into());
        }
        if !(self.cross_bytes_per_s >= 0.0 && self.cross_bytes_per_s.is_finite()) {
            return Err("probe.cross_bytes_per_s: must be >= 0".into());
        }
        if !pos(self.mss_wire_bytes) || !pos(self.min_window_segments) {
            return Err("probe.mss_wire_bytes / min_window_segments: must be > 0".into());
        }
        if let Some(r) = &self.red {
            if !r.fits(self.queue_bytes) {
                return Err("probe.red: need 0 <= min_bytes <= max_bytes <= queue_bytes".into());
            }
            if !(r.max_p > 0.0 && r.max_p <= 1.0) {
                return Err("probe.red.max_p: in (0, 1]".into());
            }
        }
        if self.measure_packets == 0 {
            return Err("probe.measure_packets: at least 1".into());
        }
        Ok(())
    }

    fn port(&self) -> PortConfig {
        port_config(
            self.link_bytes_per_s,
            (2.0 * self.mss_wire_bytes) as u64,
            self.queue_bytes,
            self.red.as_ref(),
            self.seed,
        )
    }
}

/// A packet in the queue: sender (`u32::MAX`: cross traffic) and segment number.
#[derive(Debug, Clone, Copy)]
struct Pkt {
    flow: u32,
    seq: u64,
    marked: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// The ACK of segment `seq` of `flow` reaches its sender (`ce`: it echoes a mark).
    Ack { flow: u32, seq: u64, ce: bool },
    /// The loss of segment `seq` of `flow` is detected by its sender.
    Loss { flow: u32, seq: u64 },
    /// The next cross-traffic packet arrives.
    Cross,
}

struct Flow {
    win: DctcpWindow,
    next_seq: u64,
    in_flight: u64,
    window_end: u64,
    recover: u64,
    /// Fractional bytes of additive increase not yet added to the window (loss-based senders).
    grow: f64,
}

impl Flow {
    /// A loss-based sender's congestion response: the window to `keep` of itself.
    fn cut(&mut self, keep: f64, min_cwnd: u64) {
        if keep == 0.5 {
            self.win.on_loss(min_cwnd);
            return;
        }
        self.win.cwnd = ((self.win.cwnd as f64 * keep) as u64).max(min_cwnd);
        self.win.ssthresh = self.win.cwnd;
        self.grow = 0.0;
    }

    /// A loss-based sender's growth for `acked` bytes: slow start below ssthresh, else `ai`
    /// segments per window of data.
    fn grow(&mut self, acked: u64, mss: u64, ai: f64) {
        if self.win.cwnd < self.win.ssthresh || ai == 1.0 {
            // (Reno's one segment per round trip is the window's own rule)
            self.win.on_new_ack(acked, mss);
            return;
        }
        self.grow += ai * (acked * mss) as f64 / self.win.cwnd as f64;
        if self.grow >= 1.0 {
            let add = self.grow.floor();
            self.win.cwnd += add as u64;
            self.grow -= add;
        }
    }
}

const CROSS: u32 = u32::MAX;

/// Simulate the probe and return its operating point.
pub fn operating_point(p: &Probe) -> Result<OperatingPoint, String> {
    p.validate()?;
    let mss = p.mss_wire_bytes.round() as u64;
    let min_cwnd = (p.min_window_segments * p.mss_wire_bytes).round() as u64;
    let rtt_ns = (p.base_rtt_s * NS).round() as u64;
    let dctcp = p.sender == Sender::Dctcp;
    let ect = dctcp || p.ecn_capable;
    let (ai, keep) = p.growth.aimd();
    let tx_ns = ((p.mss_wire_bytes / p.link_bytes_per_s * NS) as u64).max(1);
    if p.flows == 0 && p.cross_bytes_per_s <= 0.0 {
        return Ok(OperatingPoint {
            mean_backlog_bytes: 0.0,
            tcp_bytes_per_s: 0.0,
            cross_bytes_per_s: 0.0,
            mark_share: 0.0,
            drop_share: 0.0,
            measured_s: 0.0,
        });
    }
    let mut q: EgressQueue<Pkt> = EgressQueue::new(p.port(), 0);
    let mut heap: BinaryHeap<Reverse<(u64, Ev)>> = BinaryHeap::new();
    let mut flows: Vec<Flow> = (0..p.flows)
        .map(|_| Flow {
            win: DctcpWindow::new(10 * mss, 1.0),
            next_seq: 0,
            in_flight: 0,
            window_end: 0,
            recover: 0,
            grow: 0.0,
        })
        .collect();
    let cross_gap_ns = if p.cross_bytes_per_s > 0.0 {
        (p.mss_wire_bytes / p.cross_bytes_per_s * NS).max(1.0) as u64
    } else {
        0
    };
    if cross_gap_ns > 0 {
        heap.push(Reverse((0, Ev::Cross)));
    }
    // Staggered starts (1 µs apart) so the first windows do not arrive as one burst.
    let mut starts: Vec<(u64, u32)> = (0..p.flows).map(|f| (u64::from(f) * 1_000, f)).collect();
    starts.reverse();

    let mut departures = 0u64;
    let mut measuring = false;
    let mut t_prev = 0u64;
    let (mut area, mut t0) = (0.0f64, 0u64);
    let (mut tcp_bytes, mut cross_bytes) = (0u64, 0u64);
    let (mut offered, mut marked, mut dropped) = (0u64, 0u64, 0u64);
    let mut backlog = 0u64;
    let target = p.warmup_packets + p.measure_packets;
    // Bounded: at most this many loop iterations (a safety net far above any real need).
    let mut budget = 50 * (target + 1000) * (u64::from(p.flows) + 2);

    // Enqueue one packet at `now`; returns whether it was accepted.
    let send = |q: &mut EgressQueue<Pkt>,
                heap: &mut BinaryHeap<Reverse<(u64, Ev)>>,
                flow: u32,
                seq: u64,
                now: u64,
                measuring: bool,
                counters: &mut (u64, u64, u64)|
     -> Option<bool> {
        let is_ect = flow != CROSS && ect;
        let verdict = q.admit(mss, is_ect, now);
        if measuring {
            counters.0 += 1;
        }
        match verdict {
            Admit::Drop => {
                if measuring {
                    counters.2 += 1;
                }
                if flow != CROSS {
                    // detected by duplicate ACKs about one round trip (plus the queue) later
                    // (never sooner than one transmission time: no zero-time retry loops)
                    let qdelay = (q.stats().backlog_bytes as f64 / p.link_bytes_per_s * NS) as u64;
                    let at = now + rtt_ns.max(tx_ns) + qdelay;
                    heap.push(Reverse((at, Ev::Loss { flow, seq })));
                }
                Some(false)
            }
            v => {
                let m = v == Admit::Mark;
                if m && measuring {
                    counters.1 += 1;
                }
                q.push(
                    Pkt {
                        flow,
                        seq,
                        marked: m,
                    },
                    mss,
                    now,
                );
                Some(m)
            }
        }
    };

    loop {
        if budget == 0 {
            return Err("probe: did not converge within its event budget".into());
        }
        budget -= 1;
        let t_heap = heap.peek().map(|Reverse((t, _))| *t);
        let t_start = starts.last().map(|(t, _)| *t);
        let t_q = q.next_wakeup();
        let Some(now) = [t_heap, t_start, t_q].into_iter().flatten().min() else {
            break;
        };
        if measuring {
            area += backlog as f64 * (now - t_prev) as f64;
        }
        t_prev = now;
        let mut counters = (offered, marked, dropped);
        // departures due now
        while let Some(pkt) = q.poll(now) {
            departures += 1;
            if !measuring && departures >= p.warmup_packets {
                measuring = true;
                t0 = now;
            }
            if measuring {
                if pkt.flow == CROSS {
                    cross_bytes += mss;
                } else {
                    tcp_bytes += mss;
                }
            }
            if pkt.flow != CROSS {
                let f = &mut flows[pkt.flow as usize];
                if dctcp {
                    f.win.count(mss, pkt.marked);
                }
                heap.push(Reverse((
                    now + rtt_ns,
                    Ev::Ack {
                        flow: pkt.flow,
                        seq: pkt.seq,
                        ce: pkt.marked,
                    },
                )));
            }
        }
        if measuring && departures >= target {
            break;
        }
        let mut wake: Vec<u32> = Vec::new();
        while let Some(&(t, f)) = starts.last() {
            if t > now {
                break;
            }
            starts.pop();
            wake.push(f);
        }
        while let Some(&Reverse((t, ev))) = heap.peek() {
            if t > now {
                break;
            }
            heap.pop();
            match ev {
                Ev::Cross => {
                    send(&mut q, &mut heap, CROSS, 0, now, measuring, &mut counters);
                    heap.push(Reverse((now + cross_gap_ns, Ev::Cross)));
                }
                Ev::Ack { flow, seq, ce } => {
                    let f = &mut flows[flow as usize];
                    f.in_flight -= mss;
                    if dctcp {
                        f.win.on_new_ack(mss, mss);
                    } else if ce && seq >= f.recover {
                        // ECN echo: cut as for a loss, once per window; nothing to resend
                        f.cut(keep, min_cwnd);
                        f.recover = f.next_seq;
                    } else {
                        f.grow(mss, mss, ai);
                    }
                    if seq >= f.window_end {
                        if dctcp {
                            f.win.end_window(G, min_cwnd);
                        }
                        f.window_end = f.next_seq;
                    }
                    wake.push(flow);
                }
                Ev::Loss { flow, seq } => {
                    let f = &mut flows[flow as usize];
                    f.in_flight -= mss; // resent as new data: the fluid view of a retransmission
                    if seq >= f.recover {
                        if dctcp {
                            f.win.on_loss(min_cwnd);
                        } else {
                            f.cut(keep, min_cwnd);
                        }
                        f.recover = f.next_seq;
                        f.window_end = f.next_seq;
                    }
                    wake.push(flow);
                }
            }
        }
        for flow in wake {
            loop {
                let f = &mut flows[flow as usize];
                if f.in_flight + mss > f.win.cwnd.max(min_cwnd) {
                    break;
                }
                let seq = f.next_seq;
                f.next_seq += 1;
                f.in_flight += mss;
                send(&mut q, &mut heap, flow, seq, now, measuring, &mut counters);
            }
        }
        (offered, marked, dropped) = counters;
        backlog = q.stats().backlog_bytes;
    }
    let span = (t_prev - t0) as f64 / NS;
    if span <= 0.0 {
        return Err("probe: nothing measured (no departures)".into());
    }
    let share = |n: u64| {
        if offered > 0 {
            n as f64 / offered as f64
        } else {
            0.0
        }
    };
    Ok(OperatingPoint {
        mean_backlog_bytes: area / NS / span,
        tcp_bytes_per_s: tcp_bytes as f64 / span,
        cross_bytes_per_s: cross_bytes as f64 / span,
        mark_share: share(marked),
        drop_share: share(dropped),
        measured_s: span,
    })
}

/// [`operating_point`] for a JSON [`Probe`], as JSON.
pub fn operating_point_json(probe_json: &str) -> Result<String, String> {
    let p: Probe = serde_json::from_str(probe_json).map_err(|e| format!("probe: {e}"))?;
    let op = operating_point(&p)?;
    serde_json::to_string(&op).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: f64 = 100e6 / 8.0; // 100 Mbit/s

    fn probe(flows: u32, sender: Sender, red: Option<RedSpec>) -> Probe {
        Probe {
            link_bytes_per_s: C,
            queue_bytes: 500_000.0,
            red,
            base_rtt_s: 0.001,
            flows,
            sender,
            ecn_capable: false,
            growth: Growth::Reno,
            cross_bytes_per_s: 0.0,
            mss_wire_bytes: 1514.0,
            min_window_segments: 2.0,
            warmup_packets: 4_000,
            measure_packets: 16_000,
            seed: 1,
        }
    }

    fn step(k: f64) -> Option<RedSpec> {
        Some(RedSpec::step(k))
    }

    #[test]
    fn droptail_fills_and_dctcp_holds_the_threshold() {
        let cubic = operating_point(&probe(4, Sender::Loss, None)).unwrap();
        let dctcp = operating_point(&probe(4, Sender::Dctcp, step(30_000.0))).unwrap();
        // Reno's sawtooth in a 500 kB buffer (BDP 12.5 kB) stays between half and full
        assert!(cubic.mean_backlog_bytes > 200_000.0, "{cubic:?}");
        // DCTCP oscillates around K = 30 kB
        assert!(
            dctcp.mean_backlog_bytes > 10_000.0 && dctcp.mean_backlog_bytes < 60_000.0,
            "{dctcp:?}"
        );
        for op in [cubic, dctcp] {
            assert!(
                op.tcp_bytes_per_s > 0.95 * C && op.tcp_bytes_per_s <= C * 1.001,
                "{op:?}"
            );
        }
        assert!(dctcp.mark_share > 0.0 && dctcp.drop_share == 0.0);
    }

    #[test]
    fn many_dctcp_flows_stand_at_their_minimum_windows() {
        // 40 flows × 2 segments = 121 kB in flight > K + BDP: the queue cannot stay at K
        let op = operating_point(&probe(40, Sender::Dctcp, step(30_000.0))).unwrap();
        let floor = 40.0 * 2.0 * 1514.0 - C * 0.001;
        assert!(op.mean_backlog_bytes > 0.7 * floor, "{op:?} floor {floor}");
    }

    #[test]
    fn unresponsive_traffic_takes_its_rate_and_red_drops_it() {
        let mut p = probe(4, Sender::Dctcp, step(30_000.0));
        p.cross_bytes_per_s = 0.5 * C;
        let op = operating_point(&p).unwrap();
        // RED drops the non-ECT cross traffic whenever the queue is above K, where DCTCP keeps it
        assert!(
            op.cross_bytes_per_s < 0.5 * C && op.cross_bytes_per_s > 0.2 * C,
            "{op:?}"
        );
        assert!(op.drop_share > 0.0 && op.mark_share > 0.0, "{op:?}");
        assert!(
            op.tcp_bytes_per_s + op.cross_bytes_per_s > 0.95 * C,
            "{op:?}"
        );
        p.cross_bytes_per_s = 1.2 * C;
        let over = operating_point(&p).unwrap();
        assert!(over.drop_share > 0.1, "{over:?}");
        assert!(
            over.tcp_bytes_per_s > 0.0,
            "TCP keeps its minimum windows going: {over:?}"
        );
    }

    #[test]
    fn ecn_capable_loss_senders_are_marked_not_dropped() {
        let red = Some(RedSpec {
            min_bytes: 30_000.0,
            max_bytes: 90_000.0,
            max_p: 0.1,
            ewma_weight: Some(0.002),
            ecn: true,
            gentle: false,
        });
        let mut plain = probe(4, Sender::Loss, red);
        plain.cross_bytes_per_s = 0.9 * C;
        let mut ecn = plain.clone();
        ecn.ecn_capable = true;
        let (plain, ecn) = (
            operating_point(&plain).unwrap(),
            operating_point(&ecn).unwrap(),
        );
        // without ECN every congestion signal is a loss; with it the TCP packets are marked and
        // only the cross traffic is dropped
        assert_eq!(plain.mark_share, 0.0, "{plain:?}");
        assert!(ecn.mark_share > 0.0, "{ecn:?}");
        assert!(
            ecn.tcp_bytes_per_s + ecn.cross_bytes_per_s > 0.95 * C,
            "{ecn:?}"
        );
        assert!(
            ecn.tcp_bytes_per_s > 0.1 * C,
            "TCP takes part of the link back from the UDP: {ecn:?}"
        );
    }

    #[test]
    fn cubic_and_reno_cut_and_grow_by_their_own_rules() {
        assert_eq!(Growth::Reno.aimd(), (1.0, 0.5));
        let (ai, keep) = Growth::Cubic.aimd();
        assert!((ai - 0.529).abs() < 1e-3 && keep == 0.7);
        let mut f = Flow {
            win: DctcpWindow::new(100 * 1514, 1.0),
            next_seq: 0,
            in_flight: 0,
            window_end: 0,
            recover: 0,
            grow: 0.0,
        };
        f.cut(keep, 2 * 1514);
        assert_eq!(f.win.cwnd, 70 * 1514);
        assert_eq!(f.win.ssthresh, f.win.cwnd);
        // one window of ACKs in congestion avoidance adds about `ai` segments
        for _ in 0..70 {
            f.grow(1514, 1514, ai);
        }
        let added = (f.win.cwnd - 70 * 1514) as f64 / 1514.0;
        assert!((added - ai).abs() < 0.05, "{added}");
        f.cut(keep, 2 * 1514);
        f.cut(keep, 2 * 1514);
        assert!(f.win.cwnd >= 2 * 1514);
    }

    #[test]
    fn deterministic_and_bounded() {
        let a = operating_point(&probe(8, Sender::Loss, step(60_000.0))).unwrap();
        let b = operating_point(&probe(8, Sender::Loss, step(60_000.0))).unwrap();
        assert_eq!(a, b);
        assert!(a.tcp_bytes_per_s + a.cross_bytes_per_s <= C * 1.001);
        let mut bad = probe(1, Sender::Loss, None);
        bad.queue_bytes = 100.0;
        assert!(operating_point(&bad).unwrap_err().contains("queue_bytes"));
    }
}
