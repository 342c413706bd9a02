//! Per-congestion-control corrections for the flow-level fabric models.
//!
//! The max-min solver gives every elastic flow its fair rate at once and sees no queue. With a
//! [`TcpModel`] each link class (a distinct capacity) is run once through the packet-level
//! bottleneck probe ([`crate::bottleneck`], built on `switchcore`'s queue and window logic) with
//! `flows` long-lived senders of the chosen congestion control through the chosen discipline, at
//! the fabric's base round trip. Two numbers come back and are applied:
//!
//! - `efficiency` = the senders' goodput / the link's rate: the solver shares
//!   `capacity × efficiency` instead of the capacity (a link DCTCP leaves under-filled, or one that
//!   Reno's halvings drain, carries less);
//! - `queue_delay_s` = the probe's mean backlog / the link's rate: the standing queue. It is added
//!   to a link's one-way delay while the link is saturated (its solved load at its usable capacity),
//!   so the round trips of initial-window fetches and the latency of flows started across a busy
//!   link include it; an idle link adds nothing.
//!
//! Not modelled: slow start, losses and retransmission timeouts of individual flows (incast), the
//! queue of a link that is loaded but not saturated, the dependence on the actual number of flows
//! on a link (the probe runs `flows` of them), per-flow unfairness (RTT bias), and interactions
//! between links in series.
use serde::{Deserialize, Serialize};

use crate::bottleneck::{operating_point, Growth, Probe, RedSpec, Sender};
use crate::linksim::DelayedAck;
use crate::topology::Topology;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cc {
    Reno,
    Cubic,
    Dctcp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Discipline {
    /// A FIFO of `queue_packets`; ECN-capable senders are dropped like the others.
    #[default]
    Droptail,
    /// RED on the average queue (`red_min_packets`..`red_max_packets`, max_p 0.1, weight 0.002,
    /// gentle); marks ECT packets when `ecn`.
    Red,
    /// Marking on the instantaneous queue above `mark_packets` (DCTCP's K).
    Step,
}

/// The congestion control and queue discipline of every TCP flow and switch port of a fabric.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TcpModel {
    pub cc: Cc,
    #[serde(default)]
    pub discipline: Discipline,
    #[serde(default = "queue")]
    pub queue_packets: f64,
    #[serde(default = "red_min")]
    pub red_min_packets: f64,
    #[serde(default = "red_max")]
    pub red_max_packets: f64,
    #[serde(default = "mark")]
    pub mark_packets: f64,
    /// Loss-based senders send ECT (marked instead of dropped by RED/step). DCTCP always does.
    #[serde(default = "yes")]
    pub ecn: bool,
    /// Long-lived flows sharing a link in the probe.
    #[serde(default = "flows")]
    pub flows: u32,
    /// The packet-faithful mode's receivers delay their ACKs (absent: every segment ACKed at once).
    #[serde(default)]
    pub delayed_ack: Option<DelayedAck>,
    /// The packet-faithful mode's ACKs wait behind the data of the links they cross: each link is
    /// simulated with the cable's other direction (false: ACKs cross no queue).
    #[serde(default)]
    pub queued_acks: bool,
    /// The applications' packet mode's ACKs wait at the links of their own way back, from the
    /// receiver to the sender, behind the packets those links' simulations sent (in this pass where
    /// simulated before, else in the pass before) (false: as `queued_acks` says; not with it;
    /// refused on a fabric's replayed schedule).
    #[serde(default)]
    pub path_acks: bool,
}
fn queue() -> f64 {
    100.0
}
fn red_min() -> f64 {
    20.0
}
fn red_max() -> f64 {
    60.0
}
fn mark() -> f64 {
    20.0
}
fn yes() -> bool {
    true
}
fn flows() -> u32 {
    8
}

/// What the probe found for one link class.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkCorrection {
    pub bytes_per_s: f64,
    pub base_rtt_s: f64,
    pub efficiency: f64,
    pub queue_delay_s: f64,
    pub mark_share: f64,
    pub drop_share: f64,
}

const MSS_WIRE: f64 = 1514.0;

impl TcpModel {
    pub fn validate(&self) -> Result<(), String> {
        let pos = |v: f64, name: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("tcp.{name}: must be a positive number, got {v}"))
            }
        };
        pos(self.queue_packets, "queue_packets")?;
        pos(self.red_min_packets, "red_min_packets")?;
        pos(self.red_max_packets, "red_max_packets")?;
        pos(self.mark_packets, "mark_packets")?;
        if self.red_min_packets >= self.red_max_packets {
            return Err("tcp.red_min_packets: must be below red_max_packets".into());
        }
        if self.cc == Cc::Dctcp && self.discipline == Discipline::Droptail {
            return Err(
                "tcp.discipline: DCTCP needs a marking queue ('red' or 'step'), not 'droptail'"
                    .into(),
            );
        }
        if !(1..=1000).contains(&self.flows) {
            return Err(format!("tcp.flows: must be 1..=1000, got {}", self.flows));
        }
        if let Some(d) = &self.delayed_ack {
            d.validate().map_err(|e| format!("tcp.delayed_ack.{e}"))?;
        }
        Ok(())
    }

    /// The probe of one link of `bytes_per_s` at a base round trip of `base_rtt_s`.
    pub fn probe(&self, bytes_per_s: f64, base_rtt_s: f64) -> Probe {
        let red = match self.discipline {
            Discipline::Droptail => None,
            Discipline::Red => Some(RedSpec {
                min_bytes: self.red_min_packets * MSS_WIRE,
                max_bytes: self.red_max_packets * MSS_WIRE,
                max_p: 0.1,
                ewma_weight: Some(0.002),
                ecn: true,
                gentle: true,
            }),
            Discipline::Step => Some(RedSpec::step(self.mark_packets * MSS_WIRE)),
        };
        Probe {
            link_bytes_per_s: bytes_per_s,
            queue_bytes: self.queue_packets * MSS_WIRE,
            red,
            base_rtt_s,
            flows: self.flows,
            sender: if self.cc == Cc::Dctcp {
                Sender::Dctcp
            } else {
                Sender::Loss
            },
            ecn_capable: self.ecn && self.cc != Cc::Dctcp,
            growth: if self.cc == Cc::Reno {
                Growth::Reno
            } else {
                Growth::Cubic
            },
            cross_bytes_per_s: 0.0,
            mss_wire_bytes: MSS_WIRE,
            min_window_segments: 2.0,
            warmup_packets: 4_000,
            measure_packets: 16_000,
            seed: 1,
        }
    }

    pub fn correction(&self, bytes_per_s: f64, base_rtt_s: f64) -> Result<LinkCorrection, String> {
        let op = operating_point(&self.probe(bytes_per_s, base_rtt_s))?;
        Ok(LinkCorrection {
            bytes_per_s,
            base_rtt_s,
            efficiency: (op.tcp_bytes_per_s / bytes_per_s).clamp(1e-3, 1.0),
            queue_delay_s: op.mean_backlog_bytes / bytes_per_s,
            mark_share: op.mark_share,
            drop_share: op.drop_share,
        })
    }
}

/// One link's (efficiency, standing-queue delay in seconds).
pub type LinkFactors = (f64, f64);

/// Per-link (efficiency, standing-queue delay) for links of `capacities` at `base_rtt_s`, the probe
/// run once per distinct capacity; the distinct classes, ascending by rate.
pub fn per_link(
    model: &TcpModel,
    capacities: &[f64],
    base_rtt_s: f64,
) -> Result<(Vec<LinkFactors>, Vec<LinkCorrection>), String> {
    let mut classes: Vec<LinkCorrection> = Vec::new();
    let mut out = Vec::with_capacity(capacities.len());
    for &c in capacities {
        let k = match classes
            .iter()
            .position(|x| x.bytes_per_s.to_bits() == c.to_bits())
        {
            Some(k) => k,
            None => {
                classes.push(model.correction(c, base_rtt_s)?);
                classes.len() - 1
            }
        };
        out.push((classes[k].efficiency, classes[k].queue_delay_s));
    }
    classes.sort_by(|a, b| a.bytes_per_s.total_cmp(&b.bytes_per_s));
    Ok((out, classes))
}

/// The fabric's base round trip for the probe: twice the propagation delay from the first host to
/// the last (the longest path of a leaf-spine or fat tree), at least 1 µs.
pub fn base_rtt(topo: &mut Topology) -> f64 {
    let last = topo.hosts.len().saturating_sub(1) as u32;
    let one_way: f64 = topo.route(0, last, 0).map_or(0.0, |p| {
        p.iter().map(|&l| topo.links[l as usize].delay_s).sum()
    });
    (2.0 * one_way).max(1e-6)
}

/// A TCP model applied to a fabric's links, shared by the engines: each link's efficiency (the
/// factor on its capacity in the max-min solve) and its standing-queue delay while saturated.
/// Without a model every efficiency is 1 and no link has a queue (results as before).
#[derive(Debug, Clone)]
pub struct Applied {
    pub efficiency: Vec<f64>,
    pub queue_delay: Vec<f64>,
    /// The probe's correction per link class (with a model only).
    pub classes: Option<Vec<LinkCorrection>>,
}

impl Applied {
    /// The correction of `topo`'s links under `model` (the probe run once per link class).
    pub fn new(model: Option<&TcpModel>, topo: &mut Topology) -> Result<Applied, String> {
        let n = topo.links.len();
        let mut out = Applied {
            efficiency: vec![1.0; n],
            queue_delay: vec![0.0; n],
            classes: None,
        };
        if let Some(model) = model {
            let nominal: Vec<f64> = topo.links.iter().map(|l| l.capacity).collect();
            let rtt = base_rtt(topo);
            let (per, classes) = per_link(model, &nominal, rtt)?;
            for (l, (eff, q)) in per.into_iter().enumerate() {
                out.efficiency[l] = eff;
                out.queue_delay[l] = q;
            }
            out.classes = Some(classes);
        }
        Ok(out)
    }

    /// `capacity` as the solver shares it on link `l` (unchanged without a model).
    pub fn usable(&self, l: u32, capacity: f64) -> f64 {
        if self.classes.is_none() {
            return capacity;
        }
        capacity * self.efficiency[l as usize]
    }

    /// The standing queues a packet meets on `path` now: those of its links whose solved load is
    /// at their usable capacity (`usable(l)`); 0 without a model.
    pub fn path_queue_delay(
        &self,
        path: &[u32],
        load: impl Fn(u32) -> f64,
        usable: impl Fn(u32) -> f64,
    ) -> f64 {
        if self.classes.is_none() {
            return 0.0;
        }
        path.iter()
            .filter(|&&l| load(l) >= usable(l) * (1.0 - 1e-9))
            .map(|&l| self.queue_delay[l as usize])
            .sum()
    }
}
