//! One link at packet level with the flows that cross it: finite TCP flows (slow start, window
//! growth and cuts, loss detection by duplicate ACKs, retransmission timeouts) through the
//! switch's own queue (`switchcore::queue::EgressQueue`: droptail, RED, ECN marking) next to
//! constant-rate unresponsive cross traffic. The per-link piece of the fabric's packet-faithful
//! mode ([`crate::fabric`], `mode = "packet"`): every congested link is simulated with the flows
//! crossing it, and a flow's delays on the links of its path are added up (Parsimon, NSDI'23).
//!
//! The senders: a window in bytes of `mss_bytes` segments (`switchcore::window::DctcpWindow`'s
//! arithmetic: slow start from `init_cwnd_segments`, at most 2 segments per ACK, ended for Cubic
//! by HyStart's ACK-train test ([`hystart`]); one segment per window after it for Reno, Cubic's
//! TCP-friendly +0.53 and cut to 0.7 (data-center round trips keep Cubic in that region), DCTCP's
//! α with g = 1/16 updated once per window of data and, at the first echoed mark of a window, a
//! cut to cwnd·(1 − α/2) reached by proportional rate reduction, as Linux's and ns-3's CWR state:
//! [`prr_step`]). Reno's and Cubic's answer to an echoed mark (half, 0.7) is reached the same way,
//! and so is every control's answer to a loss (half; Cubic's 0.7), as Linux's recovery state and
//! ns-3's PRR recovery. A reduction lasts until the cumulative ACK reaches its recovery point (the
//! next new segment when it began: Linux's `high_seq`, ns-3's `m_recover`), so a lost
//! retransmission holds it: no new cut and no growth meanwhile. The window grows only on an ACK
//! that moves the cumulative ACK (Linux's `tcp_may_raise_cwnd`, ns-3's `ProcessAck`), never on a
//! SACK above a hole.
//! Reno and Cubic with `ecn` send new data ECN-capable and retransmissions not (RFC 3168,
//! section 6.1.5, as Linux and ns-3 do): where the queue would mark a retransmission it drops it.
//! DCTCP's retransmissions are ECN-capable. Reno and Cubic
//! answer an echoed mark only on an ACK that advances the cumulative ACK, as ns-3 does (Linux
//! answers none while it recovers a loss).
//! Every packet is ACKed alone, or, with [`DelayedAck`], every second one as Linux's receivers
//! do (at once on a gap, a change of DCTCP's CE state, in quick-ACK mode; else after a timer).
//! ACKs cross no queue, or, with a [`Twin`] (the cable's other direction, its own flows' data
//! `reverse`), each flow's ACKs wait in the other direction's queue behind its data: one packet
//! of [`ACK_WIRE`] bytes per ACK the receiver sends (a delayed ACK's two segments in one, but for
//! DCTCP's two ACKs at a change of the CE state), never dropped or marked, taking its bytes of
//! the queue and the link.
//! A dropped segment is detected when three segments sent after it have arrived (SACK's rule,
//! RFC 6675) and is resent; the window is cut once per reduction. A dropped retransmission is
//! detected, as Linux's RACK finds one (`rack_retransmissions`, on by default), once a segment of
//! its flow that reached the queue more than RACK's reordering window after it has arrived (a
//! quarter of the base round trip); what that lets the sender send again is what proportional
//! rate reduction allows. With `rack_reorder_timer` (off by default, on in the packet-faithful
//! mode) RACK's reordering as
//! Linux's: no window while a loss is recovered (`tcp_rack_reo_wnd`), and its timer
//! (`tcp_rack_reo_timeout`) marks lost a drop that a later segment's arrival has revealed but
//! no third one has (or, a retransmission, not by more than the window) once the window has
//! passed since, whether or not another ACK comes; in a recovery what it finds goes again as far
//! as the window allows, and a loss found in an ECN reduction makes it a recovery (Linux's
//! `tcp_enter_recovery` from CWR). A sender that hears nothing for its retransmission timeout
//! (`min_rto_s`, doubled per timeout in a row) resends what was lost with a window of one segment
//! and ssthresh at half the flight (at least 2 segments, Linux's floor). The timer restarts on an
//! ACK that moves the receiver's cumulative ACK ([`CumAck`]: its segment was the next one
//! expected), as Linux's does; Reno's and Cubic's answer to an echoed mark waits for one too.
//! Before the timer, Linux's tail loss probe (`tail_loss_probe`, on by default as in Linux): a
//! sender with data in flight, recovering no loss and with no segment known to have arrived above
//! a drop, sends two smoothed round trips and 2 ms after its last new data or advancing ACK a new
//! segment past its window, or else its last segment again if that was dropped; the probe's
//! arrival marks every drop sent before it lost (RACK: sent earlier by far more than its
//! reordering window), once per episode, and the timer restarts from it.
//! Each sender injects its packets no faster than its access link (`access_bytes_per_s`), and
//! flows that enter from one shared link (`ingress`, a sending host's own link) take turns on it,
//! one packet at a time at its rate, in the order their packets reach it; a
//! flow's last segment carries what is left of its bytes (its wire size in the queue, as a
//! byte-counting port admits and sends it). The propagation of a flow's
//! round trip is all after the queue: a packet's ACK reaches its sender `base_rtt_s` after it
//! left the queue, its data reaches the receiver `one_way_s` after.
//!
//! A flow may start on a delivery instead of at a time (a request released by another's block):
//! by the flow it names, or, in a request loop (`loop_id`), by whichever of the loop's flows is
//! delivered next; a loop may also keep at most `loop_slots` of its flows going here, a later one
//! waiting for a slot.
//!
//! Output per flow: its completion time (first packet sent to the last byte received), the
//! timeouts it took, and the link's drop and mark counts. Deterministic for a seed.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use switchcore::queue::{Admit, EgressQueue, PortConfig};
use switchcore::window::DctcpWindow;

use crate::bottleneck::{port_config, Growth, RedSpec};
use crate::tcpmodel::Cc;

const NS: f64 = 1e9;
/// DCTCP's gain for α.
const G: f64 = 1.0 / 16.0;
/// Cubic's HyStart looks for the end of slow start from this window on (segments).
const HYSTART_LOW_WINDOW: u64 = 16;
/// HyStart's ACK train: ACKs at most this far apart (ns) belong to one train.
const HYSTART_ACK_DELTA_NS: u64 = 2_000_000;
/// Segments that must arrive after a lost one before its loss is detected.
const DUP_THRESH: u32 = 3;
/// The tail loss probe's margin over two smoothed round trips with more than one segment in
/// flight (Linux's `TCP_TIMEOUT_MIN`, 2 ms).
const TLP_MIN_NS: u64 = 2_000_000;

/// One TCP flow across the link.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
pub struct LinkFlow {
    /// Payload bytes.
    pub bytes: f64,
    pub start_s: f64,
    /// Round trip without queueing at this link (the whole path's propagation and the other
    /// hops' serialization).
    pub base_rtt_s: f64,
    /// From leaving this link's queue to the receiver (its last byte's latency after the queue).
    pub one_way_s: f64,
    /// The rate the sender can inject at (its host link); 0: unlimited.
    #[serde(default)]
    pub access_bytes_per_s: f64,
    /// Start when this earlier flow of the list is delivered, its releaser's `hold_s` and then
    /// `after_gap_s` later (a request released by a delivery), instead of at `start_s`.
    #[serde(default)]
    pub after: Option<u32>,
    #[serde(default)]
    pub after_gap_s: f64,
    /// After its delivery here it holds its request slot this much longer: its block reaches the
    /// receiver that much later (held up on another link of its path).
    #[serde(default)]
    pub hold_s: f64,
    /// The request loop it belongs to (one reduce task's fetches under `max_reqs_in_flight`): a
    /// delivery of any of the loop's flows here releases the loop's next flow waiting for one (the
    /// earliest of the list with `after` set), as a freed request slot takes the next request in
    /// Spark's fetch loop, whichever flow `after` names. None: the flow `after` names releases it.
    #[serde(default)]
    pub loop_id: Option<u32>,
    /// Its loop's request slots (`max_reqs_in_flight`; 0: unlimited): a flow of the loop not
    /// released by a delivery (`after` unset) that would start while that many of the loop's
    /// flows here are going waits for the first of them to free its slot (delivered, then
    /// `hold_s`), and starts `after_gap_s` later (its request's leg).
    #[serde(default)]
    pub loop_slots: u32,
    /// Its data crosses the twin's queue ([`LinkSim::twin`], the cable's other direction) and its
    /// ACKs this link's.
    #[serde(default)]
    pub reverse: bool,
    /// With a twin: from leaving its data's queue until its ACK reaches the other direction's
    /// queue (s); the rest of its round trip after that queue.
    #[serde(default)]
    pub ack_queue_s: f64,
    /// The link it enters this one from, shared with the other flows that name it (an index of
    /// [`LinkSim::ingress_bytes_per_s`]): their packets take turns on it (a sending host's own
    /// link: one packet at a time whichever of its flows sends). None: its own access link only.
    #[serde(default)]
    pub ingress: Option<u32>,
    /// Its ACKs' way back, an index of [`LinkSim::back_paths`]: the loaded links they cross after
    /// the receiver, each's queue as its own simulation left it ([`simulate_with`]). None: they
    /// cross no queue (or the twin's, with one).
    #[serde(default)]
    pub back: Option<u32>,
}

/// A loaded link on a way back ([`LinkSim::back_paths`]): one of the queues given to
/// [`simulate_with`], and the time from the point before it (the receiver, or the hop before) to
/// it (s).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
pub struct BackHop {
    pub queue: u32,
    pub after_s: f64,
}

/// The cable's other direction, simulated with the link: each flow's ACKs wait behind the other
/// direction's data in its queue (never dropped, never marked; they take their bytes of it).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Twin {
    pub link_bytes_per_s: f64,
    pub queue_bytes: f64,
    #[serde(default)]
    pub red: Option<RedSpec>,
}

/// A pure ACK on the wire (bytes): Ethernet, IP and TCP headers with timestamps.
const ACK_WIRE: u64 = 66;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct LinkSim {
    /// Drain rate, wire bytes/s.
    pub link_bytes_per_s: f64,
    /// Queue limit, wire bytes.
    pub queue_bytes: f64,
    /// RED/ECN or step marking; absent: droptail.
    #[serde(default)]
    pub red: Option<RedSpec>,
    pub cc: Cc,
    /// Reno/Cubic send ECT (marked instead of dropped by a marking queue). DCTCP always does.
    #[serde(default)]
    pub ecn: bool,
    #[serde(default = "mss")]
    pub mss_bytes: f64,
    /// A segment on the wire: payload and headers.
    #[serde(default = "wire")]
    pub wire_bytes: f64,
    #[serde(default = "init_cwnd")]
    pub init_cwnd_segments: f64,
    #[serde(default = "min_rto")]
    pub min_rto_s: f64,
    /// Unresponsive, non-ECT cross traffic offered to the queue, wire bytes/s.
    #[serde(default)]
    pub cross_bytes_per_s: f64,
    /// The cross traffic's send-time jitter: each packet arrives U[0, J) packet times of the link
    /// after its constant-rate instant (a real sender's interrupts and NIC; J <= 1 keeps the order
    /// up to the link's rate). 0: exactly periodic, so that at a rate whose period is a whole number
    /// of packet times its arrivals meet departures on the same nanosecond.
    #[serde(default)]
    pub cross_jitter_packets: f64,
    /// Flows not done by then are reported as not done (NaN).
    #[serde(default = "horizon")]
    pub horizon_s: f64,
    #[serde(default = "seed")]
    pub seed: u64,
    /// The receivers delay their ACKs ([`DelayedAck`]); absent: every segment is ACKed at once.
    #[serde(default)]
    pub delayed_ack: Option<DelayedAck>,
    /// The senders' tail loss probe (Linux's default, `net.ipv4.tcp_early_retrans` = 3); false:
    /// a tail loss waits for the retransmission timer (ns-3.44's senders).
    #[serde(default = "yes")]
    pub tail_loss_probe: bool,
    /// A lost retransmission is found as Linux's RACK finds it (a segment sent after it by more
    /// than a quarter of the round trip delivered); false: only the retransmission timer finds it
    /// (ns-3.44's senders, RFC 6675's recovery).
    #[serde(default = "yes")]
    pub rack_retransmissions: bool,
    /// RACK's reordering as Linux's (`tcp_rack_reo_timeout`, `tcp_rack_reo_wnd`): a drop revealed
    /// by a later segment's arrival (but not by three, or a retransmission by one sent within the
    /// reordering window after it) is marked lost when that window has passed, not left to the
    /// next ACK or the retransmission timer; no window while a loss is recovered; a loss found in
    /// an ECN reduction makes it a recovery. Off by default (a quarter round trip throughout and
    /// no timer, ns-3's RACK without `--rackReo`); the packet-faithful mode turns it on
    /// (docs/design-sim.md, "Packet-faithful mode").
    #[serde(default)]
    pub rack_reorder_timer: bool,
    /// The cable's other direction in the same simulation; absent: ACKs cross no queue.
    #[serde(default)]
    pub twin: Option<Twin>,
    /// The rates (wire bytes/s) of the links the flows enter from ([`LinkFlow::ingress`]).
    #[serde(default)]
    pub ingress_bytes_per_s: Vec<f64>,
    /// The ways back of the flows' ACKs ([`LinkFlow::back`]), each its hops in order: an ACK waits
    /// at each hop behind every packet queued there before it came (FIFO), never dropped.
    #[serde(default)]
    pub back_paths: Vec<Vec<BackHop>>,
    /// Record when each packet was queued here and when it was on the wire
    /// ([`LinkResult::departures`]): the queue another link's ACKs cross on their way back.
    #[serde(default)]
    pub record_departures: bool,
    pub flows: Vec<LinkFlow>,
}

/// Receivers that delay their ACKs as Linux's do (`__tcp_ack_snd_check`, `tcp_event_data_recv`
/// in `net/ipv4/tcp_input.c`): one ACK for every second segment; at once for a segment that
/// arrives while a segment before it is missing or that fills such a hole, for a segment whose CE
/// mark differs from the one before under DCTCP (`dctcp_ece_ack_update`: the held segment's ACK
/// first, with the old echo, then this one's), for a marked segment under classic ECN (Linux's
/// receiver stops delaying while it owes an echo), for a segment carrying CWR (an ECN-capable
/// sender's first new segment after a cut: `tcp_ecn_accept_cwr`, "its cwnd may be very low") and
/// in quick-ACK mode; otherwise after `timeout_s`. ns-3's receivers (`TcpSocketBase::ReceivedData`,
/// `DelAckCount` 2) follow the same rule without the quick-ACK mode and the ECN cases.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DelayedAck {
    /// The delayed-ACK timer, s (Linux's `TCP_DELACK_MIN`: 40 ms).
    #[serde(default = "delack_timeout")]
    pub timeout_s: f64,
    /// Quick-ACK mode at a flow's start: its first segments ACKed one by one (Linux: half the
    /// receive window in segments, at most 16, so 5 on a new connection, whose window is 10
    /// segments; ns-3: none).
    #[serde(default = "quick_acks")]
    pub quick_acks: u32,
    /// The same after the flow was silent for longer than `min_rto_s` (Linux: 16, the window
    /// having grown; ns-3: none).
    #[serde(default = "idle_quick_acks")]
    pub idle_quick_acks: u32,
}

fn yes() -> bool {
    true
}
fn delack_timeout() -> f64 {
    0.04
}
fn quick_acks() -> u32 {
    5
}
fn idle_quick_acks() -> u32 {
    16
}

impl DelayedAck {
    /// The first field out of range, named.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.timeout_s > 0.0 && self.timeout_s <= 1.0) {
            return Err(format!("timeout_s: in (0, 1], got {}", self.timeout_s));
        }
        if self.quick_acks > 1000 || self.idle_quick_acks > 1000 {
            return Err(format!(
                "quick_acks / idle_quick_acks: at most 1000, got {} / {}",
                self.quick_acks, self.idle_quick_acks
            ));
        }
        Ok(())
    }
}

fn mss() -> f64 {
    1448.0
}
fn wire() -> f64 {
    1514.0
}
fn init_cwnd() -> f64 {
    10.0
}
fn min_rto() -> f64 {
    0.2
}
fn horizon() -> f64 {
    120.0
}
fn seed() -> u64 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkResult {
    /// Per flow, first packet to last byte at the receiver, seconds (NaN: not done).
    pub fct_s: Vec<f64>,
    /// Per flow, when it started (its `start_s`, or its predecessor's delivery + gap; NaN: never).
    pub start_s: Vec<f64>,
    /// Per flow, retransmission timeouts.
    pub timeouts: Vec<u32>,
    /// This link's drops and marks (its twin's apart).
    pub drops: u64,
    pub marks: u64,
    /// The twin's ([`LinkSim::twin`]; 0 without).
    #[serde(default)]
    pub twin_drops: u64,
    #[serde(default)]
    pub twin_marks: u64,
    /// Cross traffic delivered, wire bytes/s over the run.
    pub cross_bytes_per_s: f64,
    pub end_s: f64,
    pub events: u64,
    /// With [`LinkSim::record_departures`]: per packet that left this link's queue, in order, when
    /// it was queued and when it was on the wire (ns; a whole segment's time after it started).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub departures: Vec<(u64, u64)>,
}

impl LinkSim {
    pub fn validate(&self) -> Result<(), String> {
        let pos = |x: f64| x > 0.0 && x.is_finite();
        if !pos(self.link_bytes_per_s) {
            return Err("link.link_bytes_per_s: must be > 0".into());
        }
        if !pos(self.wire_bytes) || !pos(self.mss_bytes) || self.mss_bytes > self.wire_bytes {
            return Err("link.mss_bytes / wire_bytes: 0 < mss <= wire".into());
        }
        if !pos(self.queue_bytes) || self.queue_bytes < self.wire_bytes {
            return Err("link.queue_bytes: must hold at least one packet".into());
        }
        if !(self.init_cwnd_segments >= 1.0 && self.init_cwnd_segments <= 1000.0) {
            return Err("link.init_cwnd_segments: in [1, 1000]".into());
        }
        if !pos(self.min_rto_s) || !pos(self.horizon_s) {
            return Err("link.min_rto_s / horizon_s: must be > 0".into());
        }
        if !(self.cross_bytes_per_s >= 0.0 && self.cross_bytes_per_s.is_finite()) {
            return Err("link.cross_bytes_per_s: must be >= 0".into());
        }
        if !(0.0..=1.0).contains(&self.cross_jitter_packets) {
            return Err("link.cross_jitter_packets: in [0, 1]".into());
        }
        if let Some(d) = &self.delayed_ack {
            d.validate().map_err(|e| format!("link.delayed_ack.{e}"))?;
        }
        if let Some(r) = &self.red {
            if !r.fits(self.queue_bytes) {
                return Err("link.red: need 0 <= min_bytes <= max_bytes <= queue_bytes".into());
            }
        }
        if let Some(t) = &self.twin {
            if !pos(t.link_bytes_per_s) {
                return Err("link.twin.link_bytes_per_s: must be > 0".into());
            }
            if !pos(t.queue_bytes) || t.queue_bytes < self.wire_bytes {
                return Err("link.twin.queue_bytes: must hold at least one packet".into());
            }
            if t.red.as_ref().is_some_and(|r| !r.fits(t.queue_bytes)) {
                return Err(
                    "link.twin.red: need 0 <= min_bytes <= max_bytes <= queue_bytes".into(),
                );
            }
        }
        if let Some(i) = self.ingress_bytes_per_s.iter().position(|&r| !pos(r)) {
            return Err(format!("link.ingress_bytes_per_s[{i}]: must be > 0"));
        }
        for (i, f) in self.flows.iter().enumerate() {
            if f.ingress
                .is_some_and(|g| g as usize >= self.ingress_bytes_per_s.len())
            {
                return Err(format!(
                    "link.flows[{i}].ingress: not an index of link.ingress_bytes_per_s"
                ));
            }
            if f.back.is_some_and(|b| b as usize >= self.back_paths.len()) {
                return Err(format!(
                    "link.flows[{i}].back: not an index of link.back_paths"
                ));
            }
            if f.back.is_some() && self.twin.is_some() {
                return Err(format!(
                    "link.flows[{i}].back: a way back and a twin exclude each other"
                ));
            }
            let ack_ok = f.ack_queue_s >= 0.0 && f.ack_queue_s <= f.base_rtt_s;
            if (f.reverse && self.twin.is_none()) || !ack_ok {
                return Err(format!(
                    "link.flows[{i}]: reverse needs link.twin; ack_queue_s in [0, base_rtt_s]"
                ));
            }
            let ok = pos(f.bytes)
                && f.bytes <= 1e13
                && f.start_s >= 0.0
                && f.start_s.is_finite()
                && f.base_rtt_s >= 0.0
                && f.base_rtt_s.is_finite()
                && f.one_way_s >= 0.0
                && f.one_way_s.is_finite()
                && f.access_bytes_per_s >= 0.0
                && f.access_bytes_per_s.is_finite()
                && f.after.is_none_or(|a| (a as usize) < i)
                && f.after_gap_s >= 0.0
                && f.after_gap_s.is_finite()
                && f.hold_s >= 0.0
                && f.hold_s.is_finite()
                && (f.loop_slots == 0 || f.loop_id.is_some())
                && f.loop_id.is_none_or(|_| {
                    f.after
                        .is_none_or(|a| self.flows[a as usize].loop_id == f.loop_id)
                });
            if !ok {
                return Err(format!(
                    "link.flows[{i}]: bytes > 0, times and rates >= 0, after an earlier flow of its loop"
                ));
            }
        }
        Ok(())
    }

    fn port(&self) -> PortConfig {
        port_config(
            self.link_bytes_per_s,
            self.wire_bytes as u64,
            self.queue_bytes,
            self.red.as_ref(),
            self.seed,
        )
    }

    /// The twin's port (this link's without a twin: then nothing enters it).
    fn twin_port(&self) -> PortConfig {
        match &self.twin {
            Some(t) => port_config(
                t.link_bytes_per_s,
                self.wire_bytes as u64,
                t.queue_bytes,
                t.red.as_ref(),
                self.seed ^ 0x7715_0000,
            ),
            None => self.port(),
        }
    }
}

/// A packet in the queue: flow (`CROSS`: cross traffic), transmission number, mark.
#[derive(Debug, Clone, Copy)]
struct Pkt {
    flow: u32,
    tx: u64,
    /// The segment it carries.
    seq: u64,
    marked: bool,
    /// A retransmission (its arrival fills a hole).
    retx: bool,
    /// It carries CWR: the first new segment after a cut of an ECN-capable sender.
    cwr: bool,
    /// When it reached the queue (ns): its ACK's round-trip sample starts here.
    queued: u64,
    /// A pure ACK in the other direction's queue (`seq`: its cumulative ACK, `marked`: its echo).
    ack: bool,
}

const CROSS: u32 = u32::MAX;

/// An ACK of transmission `tx` of `flow` (`ce`: it echoes a mark; `retx`: it answers a
/// retransmission; `queued`: when that reached the queue; `cum`: the receiver's cumulative ACK, the
/// next segment it expects).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct AckMsg {
    flow: u32,
    tx: u64,
    ce: bool,
    retx: bool,
    queued: u64,
    cum: u64,
}

impl AckMsg {
    /// It as a pure ACK in the other direction's queue.
    fn packet(self) -> Pkt {
        Pkt {
            flow: self.flow,
            tx: self.tx,
            seq: self.cum,
            marked: self.ce,
            retx: self.retx,
            cwr: false,
            queued: self.queued,
            ack: true,
        }
    }

    /// The ACK a pure ACK packet carries.
    fn of_packet(p: &Pkt) -> Self {
        AckMsg {
            flow: p.flow,
            tx: p.tx,
            ce: p.marked,
            retx: p.retx,
            queued: p.queued,
            cum: p.seq,
        }
    }
}

/// Transmission `tx` of segment `seq` of `flow` on its way to the queue (`retx`: sent again;
/// `cwr`: it says the sender cut its window).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Sent {
    flow: u32,
    tx: u64,
    seq: u64,
    retx: bool,
    cwr: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// Flow `flow` starts sending.
    Start(u32),
    /// A flow of request loop `loop_id` frees its slot (after its delivery and `hold_s`).
    Free(u32),
    /// The ACK reaches its sender.
    Ack(AckMsg),
    /// The ACK reaches the other direction's queue; `true`: it takes its bytes of the link
    /// (false: it goes in the same packet as the next one).
    AckQueue(AckMsg, bool),
    /// A packet reaches the queue (after its access link).
    Arrive(Sent),
    /// The retransmission timer of `flow`, armed as its `gen`-th.
    Timeout { flow: u32, gen: u64 },
    /// The tail loss probe's timer of `flow` (one pending at a time: `Sender::tlp_pending`).
    Probe(u32),
    /// RACK's reordering timer of `flow` (one pending at a time: `Sender::reo_pending`).
    Reo(u32),
    /// The delayed-ACK timer of `flow`'s receiver, armed as its `gen`-th.
    DelAck { flow: u32, gen: u64 },
    /// The next cross-traffic packet arrives.
    Cross,
    /// A packet reaches its flow's shared ingress link ([`LinkFlow::ingress`]).
    Ingress(Sent),
}

/// The pending events, taken in the order of `(time, Ev)` (what one binary heap of them gives):
/// a binary heap, and beside it a FIFO for the retransmission timer that every ACK re-arms
/// `min_rto` ahead. Those timers come in time order and most are stale by their time; in the
/// heap they would outnumber every other event (an ACK rate times `min_rto`) and make each push
/// and pop walk a heap of that size.
struct Events {
    heap: BinaryHeap<Reverse<(u64, Ev)>>,
    /// Sorted by `(time, Ev)`; only [`Events::push_rearm`] adds to it.
    fifo: VecDeque<(u64, Ev)>,
}

impl Events {
    fn new() -> Self {
        Events {
            heap: BinaryHeap::new(),
            fifo: VecDeque::new(),
        }
    }

    fn push(&mut self, t: u64, ev: Ev) {
        self.heap.push(Reverse((t, ev)));
    }

    /// [`Events::push`] for an event no earlier than the FIFO's last (a timer re-armed a fixed
    /// time ahead of a clock that only advances); any other goes to the heap.
    fn push_rearm(&mut self, t: u64, ev: Ev) {
        match self.fifo.back() {
            Some(&(last, _)) if t < last => self.heap.push(Reverse((t, ev))),
            Some(&(last, _)) if t == last => {
                // equal times: in the event's order, as the heap would give them
                let mut i = self.fifo.len();
                while i > 0 && self.fifo[i - 1] > (t, ev) {
                    i -= 1;
                }
                self.fifo.insert(i, (t, ev));
            }
            _ => self.fifo.push_back((t, ev)),
        }
    }

    /// The earliest event's time.
    fn next_time(&self) -> Option<u64> {
        let h = self.heap.peek().map(|Reverse((t, _))| *t);
        let f = self.fifo.front().map(|(t, _)| *t);
        match (h, f) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Take the earliest event if it is due at `now`.
    fn pop_due(&mut self, now: u64) -> Option<(u64, Ev)> {
        let from_heap = match (self.heap.peek(), self.fifo.front()) {
            (None, None) => return None,
            (Some(Reverse(h)), Some(f)) => h < f,
            (h, _) => h.is_some(),
        };
        if from_heap {
            let &Reverse((t, _)) = self.heap.peek()?;
            if t > now {
                return None;
            }
            self.heap.pop().map(|Reverse(e)| e)
        } else {
            if self.fifo.front()?.0 > now {
                return None;
            }
            self.fifo.pop_front()
        }
    }
}

struct Sender {
    win: DctcpWindow,
    /// Segments of the flow.
    total: u64,
    /// The wire size of its last segment (bytes).
    last_wire: u64,
    next_new: u64,
    next_tx: u64,
    resend: VecDeque<u64>,
    /// Sent, neither acknowledged nor known lost.
    in_flight: u64,
    /// Segments dropped and not yet delivered by a retransmission.
    holes: u64,
    /// Retransmissions dropped.
    #[cfg(test)]
    retx_drops: u64,
    /// Segments sent while DCTCP's reduction lasted.
    #[cfg(test)]
    sent_reducing: u64,
    /// ACKs the receiver sent (one may cover two segments), and of them those sent at once only
    /// because of a change of DCTCP's mark, or only because the segment carried CWR.
    #[cfg(test)]
    acks_sent: u64,
    #[cfg(test)]
    acks_for_flip: u64,
    #[cfg(test)]
    acks_for_cwr: u64,
    /// Bytes its ACKs took of the other direction's link (with a twin).
    #[cfg(test)]
    ack_bytes: u64,
    /// Dropped transmissions not yet detected: (tx, segment, later arrivals seen, when it reached
    /// the queue in ns); a dropped retransmission counts no arrivals (`u32::MAX`): RACK finds it
    /// from the time a later one arrives (`rack_retransmissions`), or the timer does. RACK's
    /// reordering timer finds either once revealed ([`revealed`]).
    dropped: VecDeque<(u64, u64, u32, u64)>,
    /// A cut happens only for a transmission at or after this one (one cut per reduction).
    recover: u64,
    /// The recovery point of the reduction in progress: the next new segment when it began (0:
    /// none). It lasts until the cumulative ACK reaches it.
    high_seq: u64,
    /// The cumulative ACK the sender has heard (the next segment the receiver expects).
    snd_una: u64,
    window_end: u64,
    grow: f64,
    received: u64,
    /// Injection: the access link is free from this time on (ns).
    access_free: u64,
    access_ns: u64,
    /// The shared ingress link it enters from ([`LinkFlow::ingress`]).
    ingress: Option<u32>,
    rto_gen: u64,
    /// When the retransmission timer armed last is due (ns).
    rto_at: u64,
    backoff: u32,
    timeouts: u32,
    /// The smoothed round trip (ns), as Linux's `srtt` (gain 1/8), from the path's base round trip.
    srtt_ns: u64,
    /// A loss is being recovered (from its detection or a timeout until its reduction ends):
    /// Linux's Recovery and Loss states, where no tail loss probe is sent.
    loss_recovery: bool,
    /// The tail loss probe: when it is due (`u64::MAX`: not armed), when its pending event is,
    /// the transmission that probed last and, while a probe is out, the next new segment when it
    /// left (Linux's `tlp_high_seq`: one probe per episode).
    tlp_at: u64,
    tlp_pending: Option<u64>,
    tlp_tx: u64,
    tlp_high: Option<u64>,
    /// RACK: the latest time a delivered segment reached the queue (its send time here), that
    /// segment's round trip, and when the reordering timer's pending event is.
    rack_q: u64,
    rack_rtt: u64,
    reo_pending: Option<u64>,
    #[cfg(test)]
    probes: u32,
    started_ns: u64,
    done_s: f64,
    /// Cubic's HyStart still looks for the end of slow start.
    hystart: bool,
    /// The smallest round trip sampled (ns).
    delay_min: u64,
    /// HyStart's current round: its start, its train's last ACK, the first transmission after it.
    round_start: u64,
    last_ack: u64,
    round_end: u64,
    /// A window reduction by an echoed mark in progress ([`prr_step`]).
    prr: Option<Prr>,
    /// An ECN-capable sender cut its window: its next new segment carries CWR.
    cwr: bool,
    /// The receiver (with delayed ACKs): the ACK it holds, its timer's generation, the segments
    /// dropped and not yet delivered, DCTCP's CE state (the last segment's mark), the quick ACKs
    /// left and when the last segment came (ns).
    held: Option<Ev>,
    delack_gen: u64,
    rx_holes: u64,
    ce_state: bool,
    quick: u32,
    last_rx: u64,
    /// The receiver's cumulative ACK.
    rcv: CumAck,
}

/// A receiver's cumulative ACK: the next segment it expects, and the segments it holds above it.
#[derive(Debug, Default)]
struct CumAck {
    next: u64,
    above: BTreeSet<u64>,
}

impl CumAck {
    /// Segment `seq` arrives: whether it moves the cumulative ACK (it is the next expected one;
    /// the ACK then moves over the segments held above it too).
    fn deliver(&mut self, seq: u64) -> bool {
        if seq != self.next {
            if seq > self.next {
                self.above.insert(seq);
            }
            return false;
        }
        self.next += 1;
        while self.above.remove(&self.next) {
            self.next += 1;
        }
        true
    }
}

/// A proportional rate reduction (RFC 6937): the flight when it began, the segments delivered
/// and the segments it let the sender send since.
#[derive(Debug, Clone, Copy)]
struct Prr {
    flight: u64,
    delivered: u64,
    sent: u64,
}

/// What every sender's send path needs: segment size, minimum RTO, a packet time of the link,
/// whether tail loss probes go, and the control's answer to a loss.
struct Consts {
    mss: u64,
    rto_ns: u64,
    tx_ns: u64,
    tlp: bool,
    dctcp: bool,
    /// The senders are ECN-capable.
    ect: bool,
    /// What a loss-based control keeps of its window at a cut.
    keep: f64,
    min_cwnd: u64,
    /// Per shared ingress link, its packet time (ns).
    ingress_ns: Vec<u64>,
}

/// Simulate the link and its flows.
pub fn simulate(p: &LinkSim) -> Result<LinkResult, String> {
    run(p, &[]).map(|(r, _)| r)
}

/// [`simulate`] with the queues the flows' ACKs cross on their way back ([`LinkSim::back_paths`]):
/// per queue, each packet it sent, in order, as (queued, on the wire) in ns
/// ([`LinkResult::departures`]).
pub fn simulate_with(p: &LinkSim, back: &[&[(u64, u64)]]) -> Result<LinkResult, String> {
    run(p, back).map(|(r, _)| r)
}

/// [`simulate_with`], and every sender's state at the end.
fn run(p: &LinkSim, back: &[&[(u64, u64)]]) -> Result<(LinkResult, Vec<Sender>), String> {
    p.validate()?;
    for (w, hops) in p.back_paths.iter().enumerate() {
        for (j, h) in hops.iter().enumerate() {
            if h.queue as usize >= back.len() || !(h.after_s >= 0.0 && h.after_s.is_finite()) {
                return Err(format!(
                    "link.back_paths[{w}][{j}]: queue not given, or after_s not >= 0"
                ));
            }
        }
    }
    let mss = p.mss_bytes.round() as u64;
    let wire = p.wire_bytes.round() as u64;
    let min_cwnd = 2 * mss;
    let dctcp = p.cc == Cc::Dctcp;
    let ect = dctcp || p.ecn;
    let (ai, keep) = match p.cc {
        Cc::Cubic => Growth::Cubic.aimd(),
        _ => Growth::Reno.aimd(),
    };
    let rto_ns = (p.min_rto_s * NS) as u64;
    let delack_ns = p
        .delayed_ack
        .map_or(0, |d| (d.timeout_s * NS).round() as u64);
    let horizon_ns = (p.horizon_s * NS) as u64;
    let rtt_ns: Vec<u64> = p
        .flows
        .iter()
        .map(|f| (f.base_rtt_s * NS).round() as u64)
        .collect();
    // RACK's reordering window: a quarter of the (minimum) round trip
    let rack_window: Vec<u64> = rtt_ns.iter().map(|r| r / 4).collect();
    let tx_ns = (p.wire_bytes / p.link_bytes_per_s * NS).max(1.0) as u64;
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed ^ 0x11AC_0000);
    let k = Consts {
        mss,
        rto_ns,
        tx_ns,
        tlp: p.tail_loss_probe,
        dctcp,
        ect,
        keep,
        min_cwnd,
        ingress_ns: p
            .ingress_bytes_per_s
            .iter()
            .map(|&r| (p.wire_bytes / r * NS).round() as u64)
            .collect(),
    };
    let mut qs: [EgressQueue<Pkt>; 2] = [
        EgressQueue::new(p.port(), 0),
        EgressQueue::new(p.twin_port(), 0),
    ];
    // with a twin: from leaving a flow's data queue to its ACK reaching the other queue, and from
    // leaving that queue to its sender (ns)
    let ack_q_ns: Vec<u64> = p
        .flows
        .iter()
        .map(|f| (f.ack_queue_s * NS).round() as u64)
        .collect();
    let ack_rest_ns: Vec<u64> = rtt_ns
        .iter()
        .zip(&ack_q_ns)
        .map(|(r, a)| r.saturating_sub(*a))
        .collect();
    let twin = p.twin.is_some();
    // each way back's hops: its queue and the ns from the point before
    let back_ns: Vec<Vec<(usize, u64)>> = p
        .back_paths
        .iter()
        .map(|hops| {
            hops.iter()
                .map(|h| (h.queue as usize, (h.after_s * NS).round() as u64))
                .collect()
        })
        .collect();
    let one_way_ns: Vec<u64> = p
        .flows
        .iter()
        .map(|f| (f.one_way_s * NS).round() as u64)
        .collect();
    // per flow, when its last ACK reached it over its way back (they keep their order)
    let mut back_last = vec![0u64; p.flows.len()];
    // when and as what a receiver's ACK leaves for its sender, sent at `now` (the queue's time)
    let mut ack_at = |ev: Ev, f: usize, now: u64, wire: bool| -> (u64, Ev) {
        match ev {
            Ev::Ack(m) if twin => (now + ack_q_ns[f], Ev::AckQueue(m, wire)),
            e => match p.flows[f].back {
                None => (now + rtt_ns[f], e),
                Some(w) => {
                    // at each hop behind every packet queued there before it came
                    let mut at = now + one_way_ns[f];
                    let mut wait = 0;
                    for &(q, after) in &back_ns[w as usize] {
                        at += after;
                        let sent = back[q];
                        let i = sent.partition_point(|d| d.0 <= at);
                        if let Some(&(_, left)) = i.checked_sub(1).map(|i| &sent[i]) {
                            if left > at {
                                wait += left - at;
                                at = left;
                            }
                        }
                    }
                    let t = (now + rtt_ns[f] + wait).max(back_last[f]);
                    back_last[f] = t;
                    (t, e)
                }
            },
        }
    };
    let mut departures: Vec<(u64, u64)> = Vec::new();
    let mut pending = Events::new();
    let mut senders: Vec<Sender> = p
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let start = (f.start_s * NS).round() as u64;
            if f.after.is_none() {
                pending.push(start, Ev::Start(i as u32));
            }
            let win = DctcpWindow::new((p.init_cwnd_segments * p.mss_bytes) as u64, 1.0);
            Sender {
                win,
                total: (f.bytes / p.mss_bytes).ceil().max(1.0) as u64,
                last_wire: {
                    let segs = (f.bytes / p.mss_bytes).ceil().max(1.0);
                    let left = f.bytes - (segs - 1.0) * p.mss_bytes;
                    ((left + p.wire_bytes - p.mss_bytes).round() as u64).clamp(1, wire)
                },
                next_new: 0,
                next_tx: 0,
                resend: VecDeque::new(),
                in_flight: 0,
                holes: 0,
                #[cfg(test)]
                retx_drops: 0,
                #[cfg(test)]
                sent_reducing: 0,
                #[cfg(test)]
                acks_sent: 0,
                #[cfg(test)]
                acks_for_flip: 0,
                #[cfg(test)]
                acks_for_cwr: 0,
                #[cfg(test)]
                ack_bytes: 0,
                dropped: VecDeque::new(),
                recover: 0,
                high_seq: 0,
                snd_una: 0,
                window_end: 0,
                grow: 0.0,
                received: 0,
                access_free: start,
                ingress: f.ingress,
                access_ns: if f.access_bytes_per_s > 0.0 {
                    (p.wire_bytes / f.access_bytes_per_s * NS).round() as u64
                } else {
                    0
                },
                rto_gen: 0,
                rto_at: 0,
                backoff: 0,
                timeouts: 0,
                // the connection's first sample: its handshake's (or, kept open, its last) round trip
                srtt_ns: (f.base_rtt_s * NS).round() as u64,
                loss_recovery: false,
                tlp_at: u64::MAX,
                tlp_pending: None,
                tlp_tx: u64::MAX,
                tlp_high: None,
                rack_q: 0,
                rack_rtt: 0,
                reo_pending: None,
                #[cfg(test)]
                probes: 0,
                started_ns: u64::MAX,
                done_s: f64::NAN,
                hystart: p.cc == Cc::Cubic,
                delay_min: u64::MAX,
                round_start: 0,
                last_ack: 0,
                round_end: 0,
                held: None,
                prr: None,
                delack_gen: 0,
                cwr: false,
                rx_holes: 0,
                ce_state: false,
                quick: 0,
                last_rx: u64::MAX,
                rcv: CumAck::default(),
            }
        })
        .collect();
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); p.flows.len()];
    // per request loop, its flows waiting for a release, in the list's order
    let mut waiting: HashMap<u32, VecDeque<u32>> = HashMap::new();
    // per request loop with slots: the slots taken, and the flows waiting for one (in the order
    // their starts came); a flow that took its slot when it was held
    let mut taken: HashMap<u32, u32> = HashMap::new();
    let mut blocked: HashMap<u32, VecDeque<u32>> = HashMap::new();
    let mut slotted = vec![false; p.flows.len()];
    for (i, f) in p.flows.iter().enumerate() {
        match (f.after, f.loop_id) {
            (Some(_), Some(l)) => waiting.entry(l).or_default().push_back(i as u32),
            (Some(a), None) => children[a as usize].push(i as u32),
            (None, _) => {}
        }
    }
    let cross_gap_ns = if p.cross_bytes_per_s > 0.0 {
        (p.wire_bytes / p.cross_bytes_per_s * NS).max(1.0) as u64
    } else {
        0
    };
    // the cross traffic's jitter from a stream of its own: the senders' draws are the same with or
    // without it
    let cross_jitter_ns = (p.cross_jitter_packets * k.tx_ns as f64) as u64;
    let mut cross_rng = ChaCha8Rng::seed_from_u64(p.seed ^ 0xC205_5000);
    let mut cross_sent = 0u64;
    let mut cross_at = |sent: u64| {
        let jitter = if cross_jitter_ns > 0 {
            cross_rng.random_range(0..cross_jitter_ns)
        } else {
            0
        };
        sent * cross_gap_ns + jitter
    };
    if cross_gap_ns > 0 {
        pending.push(cross_at(0), Ev::Cross);
    }
    let (mut drops, mut marks, mut cross_bytes, mut events) = (0u64, 0u64, 0u64, 0u64);
    let (mut twin_drops, mut twin_marks) = (0u64, 0u64);
    // per shared ingress link, when it is free (ns)
    let mut ingress_free = vec![0u64; p.ingress_bytes_per_s.len()];
    let mut left = senders.len();
    let mut now = 0u64;
    // Bounded: far above any real need (each segment is sent, queued and ACKed a few times).
    let mut budget = senders
        .iter()
        .map(|s| s.total)
        .sum::<u64>()
        .saturating_mul(40)
        .saturating_add(1_000_000);

    // Send segment `seq` of `f` (`retx`: again) at `now`, after its access link.
    #[allow(clippy::too_many_arguments)]
    fn transmit(
        s: &mut Sender,
        f: u32,
        seq: u64,
        retx: bool,
        now: u64,
        k: &Consts,
        pending: &mut Events,
        rng: &mut ChaCha8Rng,
    ) {
        let tx = s.next_tx;
        s.next_tx += 1;
        s.in_flight += 1;
        #[cfg(test)]
        {
            s.sent_reducing += u64::from(s.prr.is_some());
        }
        // an ECN-capable sender's first new segment after a cut says so (CWR)
        let cwr = s.cwr && !retx;
        s.cwr &= !cwr;
        let at = now.max(s.access_free);
        s.access_free = at + s.access_ns;
        let sent = Sent {
            flow: f,
            tx,
            seq,
            retx,
            cwr,
        };
        if s.ingress.is_some() {
            // then one packet at a time on the link it shares with the others entering from it
            pending.push(at, Ev::Ingress(sent));
            return;
        }
        // a host's send times wander by up to a packet time of the link (interrupts, the
        // NIC): without it a full drop-tail queue locks to the senders' phases and always
        // admits the same flow (Floyd and Jacobson's phase effects)
        let at = at + rng.random_range(0..k.tx_ns);
        pending.push(at, Ev::Arrive(sent));
    }

    // Send what the window of `f` allows at `now`; whether a new segment went.
    fn pump(
        s: &mut Sender,
        f: u32,
        now: u64,
        k: &Consts,
        pending: &mut Events,
        rng: &mut ChaCha8Rng,
    ) -> bool {
        let cwnd_segments = (s.win.cwnd / k.mss).max(1);
        let was_idle = s.in_flight == 0;
        let mut fresh = false;
        while s.in_flight < cwnd_segments {
            let (seq, retx) = if let Some(seq) = s.resend.pop_front() {
                (seq, true)
            } else if s.next_new < s.total {
                s.next_new += 1;
                (s.next_new - 1, false)
            } else {
                break;
            };
            fresh |= !retx;
            transmit(s, f, seq, retx, now, k, pending, rng);
        }
        if was_idle && s.in_flight > 0 {
            arm_rto(s, f, now + (k.rto_ns << s.backoff.min(6)), pending);
        }
        fresh
    }

    // Arm the retransmission timer of `f` for `at` (a later arming replaces it).
    fn arm_rto(s: &mut Sender, f: u32, at: u64, pending: &mut Events) {
        s.rto_gen += 1;
        s.rto_at = at;
        pending.push(
            at,
            Ev::Timeout {
                flow: f,
                gen: s.rto_gen,
            },
        );
    }

    // RACK's reordering timer (tcp_rack_reo_timeout; Linux's default): a drop that a segment
    // sent after it and delivered has revealed, sent within the reordering window `w` of that
    // one, is not lost yet; it is once its send time + that segment's round trip + `w` has
    // passed, and the timer marks it then, whether or not another ACK comes. One event pending
    // per flow: a later due time is taken up when the pending one fires.
    fn arm_reo(s: &mut Sender, f: u32, now: u64, w: u64, pending: &mut Events) {
        let due = s
            .dropped
            .iter()
            .filter(|d| revealed(d, s.rack_q))
            .map(|d| (d.3 + s.rack_rtt + w).max(now))
            .min();
        if let Some(due) = due {
            if s.reo_pending.is_none_or(|t| t > due) {
                s.reo_pending = Some(due);
                pending.push(due, Ev::Reo(f));
            }
        }
    }

    // Linux's tail loss probe (tcp_schedule_loss_probe; net.ipv4.tcp_early_retrans = 3, its
    // default): with data in flight, outside a loss's recovery and before any segment above a hole
    // has arrived (the Open and CWR states), a probe is due two smoothed round trips and 2 ms
    // after new data left or an ACK moved the cumulative ACK (the minimum RTO instead of 2 ms with
    // one segment in flight), unless the retransmission timer is due first. One event pending
    // per flow: a later due time is taken up when the pending one fires.
    fn arm_probe(s: &mut Sender, f: u32, now: u64, k: &Consts, pending: &mut Events) {
        s.tlp_at = u64::MAX;
        if !k.tlp || s.in_flight == 0 || !probe_allowed(s) {
            return;
        }
        let margin = if s.in_flight == 1 {
            k.rto_ns
        } else {
            TLP_MIN_NS
        };
        let due = now + 2 * s.srtt_ns + margin;
        if due >= s.rto_at {
            return;
        }
        s.tlp_at = due;
        if s.tlp_pending.is_none_or(|t| t > due) {
            s.tlp_pending = Some(due);
            pending.push(due, Ev::Probe(f));
        }
    }

    while left > 0 {
        if budget == 0 {
            return Err("link: did not finish within its event budget".into());
        }
        budget -= 1;
        let t_heap = pending.next_time();
        let t_q = qs[0].next_wakeup();
        let t_r = if twin { qs[1].next_wakeup() } else { None };
        let Some(t) = [t_heap, t_q, t_r].into_iter().flatten().min() else {
            break;
        };
        if t > horizon_ns {
            break;
        }
        now = t;
        for pkt in std::iter::from_fn(|| match qs[0].poll(now) {
            None if twin => qs[1].poll(now),
            got => got,
        }) {
            events += 1;
            if p.record_departures && !twin {
                // its transmission starts now (the port's bucket let it go): what comes after it
                // waits until it is on the wire, a packet time (a whole segment's)
                departures.push((pkt.queued, now + k.tx_ns));
            }
            if pkt.ack {
                let f = pkt.flow as usize;
                pending.push(now + ack_rest_ns[f], Ev::Ack(AckMsg::of_packet(&pkt)));
                continue;
            }
            if pkt.flow == CROSS {
                cross_bytes += wire;
                continue;
            }
            let f = pkt.flow as usize;
            let s = &mut senders[f];
            if dctcp {
                s.win.count(mss, pkt.marked);
            }
            s.received += 1;
            if s.received == s.total {
                let delivered = now + (p.flows[f].one_way_s * NS).round() as u64;
                s.done_s = (delivered - s.started_ns) as f64 / NS;
                left -= 1;
                let next = p.flows[f]
                    .loop_id
                    .and_then(|l| waiting.get_mut(&l))
                    .and_then(VecDeque::pop_front);
                for &c in children[f].iter().chain(&next) {
                    let gap = p.flows[f].hold_s + p.flows[c as usize].after_gap_s;
                    pending.push(delivered + (gap * NS).round() as u64, Ev::Start(c));
                }
                if let (None, Some(l), true) = (next, p.flows[f].loop_id, p.flows[f].loop_slots > 0)
                {
                    let freed = delivered + (p.flows[f].hold_s * NS).round() as u64;
                    pending.push(freed, Ev::Free(l));
                }
            }
            s.rcv.deliver(pkt.seq);
            let ack = Ev::Ack(AckMsg {
                cum: s.rcv.next,
                ..AckMsg::of_packet(&pkt)
            });
            #[cfg(test)]
            {
                s.acks_sent += 1;
            }
            let Some(d) = &p.delayed_ack else {
                let (t, e) = ack_at(ack, f, now, true);
                pending.push(t, e);
                continue;
            };
            // the receiver's rule ([`DelayedAck`]); its times are the queue's, the ACK reaches the
            // sender a round trip after
            if s.last_rx == u64::MAX {
                s.quick = d.quick_acks;
            } else if now - s.last_rx > rto_ns {
                s.quick = s.quick.max(d.idle_quick_acks);
            }
            s.last_rx = now;
            let gap = s.rx_holes > 0;
            s.rx_holes -= u64::from(pkt.retx);
            let flip = dctcp && pkt.marked != s.ce_state;
            s.ce_state = pkt.marked;
            let echo = !dctcp && p.ecn && pkt.marked;
            if gap || flip || echo || pkt.cwr || s.quick > 0 || s.held.is_some() {
                #[cfg(test)]
                {
                    // sent at once for that alone: no gap, no quick ACK, nothing held
                    let alone = !gap && s.quick == 0 && s.held.is_none();
                    s.acks_for_flip += u64::from(alone && flip);
                    s.acks_for_cwr += u64::from(alone && pkt.cwr && !flip);
                }
                let mut acked = 1;
                if let Some(h) = s.held.take() {
                    // one ACK for both segments, but for a change of DCTCP's mark (two ACKs)
                    let (t, e) = ack_at(h, f, now, flip);
                    pending.push(t, e);
                    acked += 1;
                }
                s.delack_gen += 1;
                s.quick = s.quick.saturating_sub(acked);
                let (t, e) = ack_at(ack, f, now, true);
                pending.push(t, e);
            } else {
                #[cfg(test)]
                {
                    s.acks_sent -= 1;
                }
                s.held = Some(ack);
                s.delack_gen += 1;
                let gen = s.delack_gen;
                pending.push(
                    now + delack_ns,
                    Ev::DelAck {
                        flow: pkt.flow,
                        gen,
                    },
                );
            }
        }
        while let Some((_, ev)) = pending.pop_due(now) {
            events += 1;
            match ev {
                Ev::Cross => {
                    match qs[0].admit(wire, false, now) {
                        Admit::Drop => drops += 1,
                        v => {
                            marks += u64::from(v == Admit::Mark);
                            let pkt = Pkt {
                                flow: CROSS,
                                tx: 0,
                                seq: 0,
                                marked: false,
                                retx: false,
                                cwr: false,
                                queued: now,
                                ack: false,
                            };
                            qs[0].push(pkt, wire, now);
                        }
                    }
                    cross_sent += 1;
                    pending.push(cross_at(cross_sent).max(now), Ev::Cross);
                }
                Ev::Free(l) => {
                    let next = blocked.get_mut(&l).and_then(VecDeque::pop_front);
                    match next {
                        Some(b) => {
                            slotted[b as usize] = true;
                            let gap = (p.flows[b as usize].after_gap_s * NS).round() as u64;
                            pending.push(now + gap, Ev::Start(b));
                        }
                        None => *taken.entry(l).or_default() -= 1,
                    }
                }
                Ev::Start(f) => {
                    let fl = &p.flows[f as usize];
                    if let (Some(l), true, None, false) =
                        (fl.loop_id, fl.loop_slots > 0, fl.after, slotted[f as usize])
                    {
                        let t = taken.entry(l).or_default();
                        if *t >= fl.loop_slots {
                            blocked.entry(l).or_default().push_back(f);
                            continue;
                        }
                        *t += 1;
                        slotted[f as usize] = true;
                    }
                    let s = &mut senders[f as usize];
                    s.started_ns = now;
                    s.access_free = now;
                    if pump(s, f, now, &k, &mut pending, &mut rng) {
                        arm_probe(s, f, now, &k, &mut pending);
                    }
                }
                Ev::AckQueue(m, wire) => {
                    let back = 1 - usize::from(p.flows[m.flow as usize].reverse);
                    let bytes = if wire { ACK_WIRE } else { 0 };
                    #[cfg(test)]
                    {
                        senders[m.flow as usize].ack_bytes += bytes;
                    }
                    qs[back].push(m.packet(), bytes, now);
                }
                Ev::Ingress(sent) => {
                    let g = senders[sent.flow as usize].ingress.unwrap_or(0) as usize;
                    let at = now.max(ingress_free[g]);
                    ingress_free[g] = at + k.ingress_ns[g];
                    let at = at + rng.random_range(0..k.tx_ns);
                    pending.push(at, Ev::Arrive(sent));
                }
                Ev::Arrive(Sent {
                    flow,
                    tx,
                    seq,
                    retx,
                    cwr,
                }) => {
                    let s = &mut senders[flow as usize];
                    // a retransmission is not ECN-capable under classic ECN (RFC 3168 6.1.5,
                    // Linux's tcp_ecn_send, ns-3's ECN_RESTRICTION_MAP): a queue that would mark
                    // it drops it; DCTCP's are (RFC 8257, and both stacks for DCTCP)
                    let ect = ect && (dctcp || !retx);
                    // a flow's last segment carries what is left of its bytes
                    let size = if seq + 1 == s.total {
                        s.last_wire
                    } else {
                        wire
                    };
                    let d = usize::from(p.flows[flow as usize].reverse);
                    match qs[d].admit(size, ect, now) {
                        Admit::Drop => {
                            drops += u64::from(d == 0);
                            twin_drops += u64::from(d == 1);
                            // a lost retransmission leaves the hole its segment already is
                            s.holes += u64::from(!retx);
                            s.rx_holes += u64::from(!retx);
                            #[cfg(test)]
                            {
                                s.retx_drops += u64::from(retx);
                            }
                            s.dropped
                                .push_back((tx, seq, if retx { u32::MAX } else { 0 }, now));
                        }
                        v => {
                            let marked = v == Admit::Mark;
                            marks += u64::from(marked && d == 0);
                            twin_marks += u64::from(marked && d == 1);
                            let pkt = Pkt {
                                flow,
                                tx,
                                seq,
                                marked,
                                retx,
                                cwr,
                                queued: now,
                                ack: false,
                            };
                            qs[d].push(pkt, size, now);
                        }
                    }
                }
                Ev::Ack(AckMsg {
                    flow,
                    tx,
                    ce,
                    retx,
                    queued,
                    cum,
                }) => {
                    let s = &mut senders[flow as usize];
                    s.in_flight -= 1;
                    if s.hystart {
                        hystart(s, now, now - queued, tx, mss);
                    }
                    if !retx {
                        // Linux's srtt (no samples from retransmissions: Karn)
                        let sample = now - queued;
                        s.srtt_ns = s.srtt_ns - s.srtt_ns / 8 + sample / 8;
                    }
                    // only an ACK that moves the cumulative ACK restarts the timer (as Linux's)
                    let advanced = cum > s.snd_una;
                    s.snd_una = s.snd_una.max(cum);
                    // a reduction lasts until the cumulative ACK reaches its recovery point (Linux's
                    // high_seq, ns-3's m_recover): a lost retransmission holds it, no new cut and
                    // no growth meanwhile
                    let reducing = tx < s.recover || s.snd_una < s.high_seq;
                    s.loss_recovery &= reducing;
                    if s.tlp_high.is_some_and(|h| s.snd_una >= h) {
                        s.tlp_high = None;
                    }
                    if retx {
                        s.holes -= 1;
                    }
                    // SACK: every undetected drop sent before this transmission saw one more
                    // arrival; three make it a loss. A tail loss probe's arrival, sent two round
                    // trips after them, makes every earlier drop a loss (Linux's RACK: sent
                    // before a delivered segment by more than its reordering window). A dropped
                    // retransmission is lost once this segment reached the queue later than it by
                    // more than RACK's reordering window (a quarter of the round trip)
                    s.rack_q = s.rack_q.max(queued);
                    s.rack_rtt = now - s.rack_q;
                    let w = reo_window(s, rack_window[flow as usize], p.rack_reorder_timer);
                    let seen = if tx == s.tlp_tx { DUP_THRESH } else { 1 };
                    let mut lost = false;
                    let mut found = false;
                    for d in s.dropped.iter_mut() {
                        if d.2 == u32::MAX {
                            if p.rack_retransmissions && d.3 + w < queued {
                                d.2 = DUP_THRESH;
                                found = true;
                            }
                        } else if d.0 < tx {
                            d.2 = d.2.saturating_add(seen).min(u32::MAX - 1);
                            found |= d.2 >= DUP_THRESH;
                        }
                    }
                    if found {
                        lost = take_lost(s);
                        // a loss found in an ECN reduction: a recovery from here (Linux's
                        // tcp_enter_recovery from CWR, the reduction kept)
                        s.loss_recovery |= p.rack_reorder_timer;
                    }
                    if lost {
                        enter_loss(s, &k);
                    } else if dctcp && ce && !reducing {
                        // DCTCP answers the first echoed mark of a window (Linux's and ns-3's CWR):
                        // ssthresh = cwnd·(1 − α/2), reached by proportional rate reduction
                        s.cwr = true;
                        begin_reduction(s, s.win.reduced(min_cwnd), mss);
                    } else if dctcp && reducing {
                        // no growth while a reduction lasts
                        prr_step(s, mss);
                    } else if dctcp {
                        if s.prr.take().is_some() {
                            s.win.cwnd = s.win.ssthresh;
                        }
                        // the window grows only on an ACK that moves the cumulative ACK (Linux's
                        // tcp_may_raise_cwnd, ns-3's ProcessAck): a SACK above a hole does not
                        if advanced {
                            s.win.on_new_ack(mss, mss);
                        }
                    } else if ce && p.ecn && !reducing && advanced {
                        // an echoed mark counts only on an ACK that advances the cumulative ACK
                        // (ns-3's ReceivedAck; Linux answers none in recovery or loss): while a
                        // lost segment holds it back, the SACKed data's marks go unanswered. The
                        // cut is ssthresh, reached by proportional rate reduction as DCTCP's
                        // (Linux's tcp_enter_cwr, ns-3's EnterCwr)
                        if s.prr.take().is_some() {
                            s.win.cwnd = s.win.ssthresh;
                        }
                        s.grow = 0.0;
                        s.cwr = true;
                        begin_reduction(s, cut_to(s.win.cwnd, keep, min_cwnd), mss);
                    } else if reducing {
                        // no growth while a reduction lasts
                        prr_step(s, mss);
                    } else {
                        if s.prr.take().is_some() {
                            s.win.cwnd = s.win.ssthresh;
                        }
                        if advanced {
                            grow(s, mss, ai);
                        }
                    }
                    if tx >= s.window_end {
                        if dctcp {
                            s.win.update_alpha(G);
                        }
                        s.window_end = s.next_tx;
                    }
                    if advanced {
                        s.backoff = 0;
                    }
                    if advanced && (s.in_flight > 0 || !s.dropped.is_empty()) {
                        s.rto_gen += 1;
                        s.rto_at = now + rto_ns;
                        pending.push_rearm(
                            now + rto_ns,
                            Ev::Timeout {
                                flow,
                                gen: s.rto_gen,
                            },
                        );
                    }
                    let fresh = pump(s, flow, now, &k, &mut pending, &mut rng);
                    if advanced || fresh {
                        arm_probe(s, flow, now, &k, &mut pending);
                    }
                    if p.rack_reorder_timer {
                        let w = reo_window(s, rack_window[flow as usize], true);
                        arm_reo(s, flow, now, w, &mut pending);
                    }
                }
                Ev::Reo(flow) => {
                    let s = &mut senders[flow as usize];
                    if s.reo_pending != Some(now) || s.received == s.total {
                        continue;
                    }
                    s.reo_pending = None;
                    // what the timer was armed for is lost now (tcp_rack_reo_timeout)
                    let w = reo_window(s, rack_window[flow as usize], true);
                    let (rack_q, rack_rtt) = (s.rack_q, s.rack_rtt);
                    let mut found = false;
                    for d in s.dropped.iter_mut() {
                        if revealed(d, rack_q) && d.3 + rack_rtt + w <= now {
                            d.2 = DUP_THRESH;
                            found = true;
                        }
                    }
                    if found {
                        let recovering = s.loss_recovery;
                        if take_lost(s) {
                            enter_loss(s, &k);
                        } else if !recovering {
                            // in an ECN reduction: a recovery from here, one segment's worth of
                            // its reduction (tcp_cwnd_reduction(sk, 1, ...))
                            s.loss_recovery = true;
                            prr_step(s, mss);
                        }
                        // in a recovery the window stays: what was found lost goes again as far
                        // as it allows
                        if pump(s, flow, now, &k, &mut pending, &mut rng) {
                            arm_probe(s, flow, now, &k, &mut pending);
                        }
                    }
                    arm_reo(s, flow, now, w, &mut pending);
                }
                Ev::Probe(flow) => {
                    let s = &mut senders[flow as usize];
                    if s.tlp_pending != Some(now) {
                        continue;
                    }
                    s.tlp_pending = None;
                    if s.tlp_at == u64::MAX {
                        continue;
                    }
                    if now < s.tlp_at {
                        s.tlp_pending = Some(s.tlp_at);
                        pending.push(s.tlp_at, Ev::Probe(flow));
                        continue;
                    }
                    s.tlp_at = u64::MAX;
                    if s.tlp_high.is_some()
                        || s.received == s.total
                        || s.in_flight == 0
                        || !probe_allowed(s)
                    {
                        continue;
                    }
                    // the probe (tcp_send_loss_probe): a new segment past the window if there is
                    // one, else the last one again -- if it was dropped; otherwise its ACK is on
                    // its way (no ACK is lost here) and the probe would be a duplicate
                    if s.next_new < s.total {
                        s.next_new += 1;
                        transmit(
                            s,
                            flow,
                            s.next_new - 1,
                            false,
                            now,
                            &k,
                            &mut pending,
                            &mut rng,
                        );
                    } else if let Some(i) = s.dropped.iter().position(|d| d.1 == s.total - 1) {
                        s.dropped.remove(i);
                        s.in_flight -= 1;
                        transmit(s, flow, s.total - 1, true, now, &k, &mut pending, &mut rng);
                    } else {
                        continue;
                    }
                    #[cfg(test)]
                    {
                        s.probes += 1;
                    }
                    s.tlp_tx = s.next_tx - 1;
                    s.tlp_high = Some(s.next_new);
                    // the retransmission timer starts again from the probe (tcp_rearm_rto)
                    arm_rto(s, flow, now + (rto_ns << s.backoff.min(6)), &mut pending);
                }
                Ev::DelAck { flow, gen } => {
                    let s = &mut senders[flow as usize];
                    if gen == s.delack_gen {
                        if let Some(h) = s.held.take() {
                            #[cfg(test)]
                            {
                                s.acks_sent += 1;
                            }
                            let (t, e) = ack_at(h, flow as usize, now, true);
                            pending.push(t, e);
                        }
                    }
                }
                Ev::Timeout { flow, gen } => {
                    let s = &mut senders[flow as usize];
                    if gen != s.rto_gen || s.received == s.total {
                        continue;
                    }
                    if s.dropped.is_empty() {
                        if s.in_flight > 0 {
                            // still queued: wait again
                            arm_rto(s, flow, now + (rto_ns << s.backoff.min(6)), &mut pending);
                        }
                        continue;
                    }
                    s.timeouts += 1;
                    let flight = s.in_flight;
                    while let Some((_, seq, _, _)) = s.dropped.pop_front() {
                        s.in_flight -= 1;
                        s.resend.push_back(seq);
                    }
                    s.win.ssthresh = (flight * mss / 2).max(min_cwnd);
                    s.win.cwnd = mss;
                    s.grow = 0.0;
                    s.cwr = ect;
                    s.prr = None;
                    // Cubic starts over after a timeout: HyStart looks again, from new samples
                    s.hystart = p.cc == Cc::Cubic;
                    s.delay_min = u64::MAX;
                    s.round_end = 0;
                    // the loss state after a timeout ends with the first ACK of a transmission after
                    // it (its slow start grows meanwhile, as Linux's)
                    s.recover = s.next_tx;
                    s.high_seq = 0;
                    s.window_end = s.next_tx;
                    s.loss_recovery = true;
                    s.tlp_high = None;
                    s.tlp_at = u64::MAX;
                    s.backoff += 1;
                    // (the timers armed before are stale from here, whether or not one is armed)
                    s.rto_gen += 1;
                    if s.in_flight > 0 {
                        arm_rto(s, flow, now + (rto_ns << s.backoff.min(6)), &mut pending);
                    }
                    let was = s.backoff;
                    pump(s, flow, now, &k, &mut pending, &mut rng);
                    s.backoff = was;
                }
            }
        }
    }
    let end_s = now as f64 / NS;
    let r = LinkResult {
        fct_s: senders.iter().map(|s| s.done_s).collect(),
        start_s: senders
            .iter()
            .map(|s| match s.started_ns {
                u64::MAX => f64::NAN,
                t => t as f64 / NS,
            })
            .collect(),
        timeouts: senders.iter().map(|s| s.timeouts).collect(),
        drops,
        marks,
        twin_drops,
        twin_marks,
        cross_bytes_per_s: if end_s > 0.0 {
            cross_bytes as f64 / end_s
        } else {
            0.0
        },
        end_s,
        events,
        departures,
    };
    Ok((r, senders))
}

/// Take what is known lost out of `s.dropped` and queue it to be sent again; whether a loss of
/// them starts a new reduction (sent at or after the last one's start, none lasting).
fn take_lost(s: &mut Sender) -> bool {
    let mut lost = false;
    let mut i = 0;
    while i < s.dropped.len() {
        let (dtx, seq, n, _) = s.dropped[i];
        if n == u32::MAX || n < DUP_THRESH {
            i += 1;
            continue;
        }
        s.dropped.remove(i);
        s.in_flight -= 1;
        s.resend.push_back(seq);
        lost |= dtx >= s.recover && s.snd_una >= s.high_seq;
    }
    lost
}

/// A loss: ssthresh at half the window (DCTCP's too, RFC 8257 3.5), 0.7 for Cubic, reached by
/// proportional rate reduction as an echoed mark's (Linux's `tcp_enter_recovery`, ns-3's PRR
/// recovery).
fn enter_loss(s: &mut Sender, k: &Consts) {
    if s.prr.take().is_some() {
        s.win.cwnd = s.win.ssthresh;
    }
    let keep = if k.dctcp { 0.5 } else { k.keep };
    s.grow = 0.0;
    s.cwr = k.ect;
    s.window_end = s.next_tx;
    s.loss_recovery = true;
    s.tlp_high = None;
    begin_reduction(s, cut_to(s.win.cwnd, keep, k.min_cwnd), k.mss);
}

/// RACK's reordering window for `s` (`w`: a quarter of its base round trip): with Linux's
/// reordering (`linux`), none while a loss is recovered (`tcp_rack_reo_wnd`, no reordering seen).
fn reo_window(s: &Sender, w: u64, linux: bool) -> u64 {
    if linux && s.loss_recovery {
        0
    } else {
        w
    }
}

/// Whether RACK's reordering timer is armed for undetected drop `d` (see `Sender::dropped`): a
/// retransmission once a segment that reached the queue after it has been delivered (`rack_q`,
/// the latest such time), a first transmission once a segment sent after it has arrived.
fn revealed(d: &(u64, u64, u32, u64), rack_q: u64) -> bool {
    if d.2 == u32::MAX {
        d.3 < rack_q
    } else {
        d.2 > 0 && d.2 < DUP_THRESH
    }
}

/// Whether a tail loss probe may go (Linux's Open and CWR states): no loss being recovered and
/// no segment known to have arrived above an undetected drop (Disorder).
fn probe_allowed(s: &Sender) -> bool {
    !s.loss_recovery && s.dropped.iter().all(|d| d.2 == 0)
}

/// Cubic's HyStart, its ACK-train test (ns-3's TcpCubic, unpaced): once the window holds
/// `HYSTART_LOW_WINDOW` segments in slow start, the ACKs of a round that keep arriving within
/// `HYSTART_ACK_DELTA_NS` of each other for longer than the smallest round trip sampled end slow
/// start at the window reached (ssthresh = cwnd). A round starts at the first ACK of data sent
/// after the previous round's start. The delay test (round trips 4 ms above the minimum) is left
/// out: the queues simulated here add less than that.
fn hystart(s: &mut Sender, now: u64, rtt: u64, tx: u64, mss: u64) {
    s.delay_min = s.delay_min.min(rtt);
    if s.win.cwnd >= s.win.ssthresh || s.win.cwnd < HYSTART_LOW_WINDOW * mss {
        return;
    }
    if tx >= s.round_end {
        s.round_start = now;
        s.last_ack = now;
        s.round_end = s.next_tx;
    }
    if now - s.last_ack <= HYSTART_ACK_DELTA_NS {
        s.last_ack = now;
        if now - s.round_start > s.delay_min {
            s.win.ssthresh = s.win.cwnd;
            s.hystart = false;
        }
    }
}

/// A reduction to `ssthresh` bytes begins (an echoed mark's or a loss's), reached by proportional
/// rate reduction from the flight now ([`prr_step`] for this ACK too). It lasts until the
/// transmissions sent so far are acknowledged and the cumulative ACK reaches the next new segment.
fn begin_reduction(s: &mut Sender, ssthresh: u64, mss: u64) {
    s.win.ssthresh = ssthresh;
    s.prr = Some(Prr {
        flight: s.in_flight.max(1),
        delivered: 0,
        sent: 0,
    });
    s.recover = s.next_tx;
    s.high_seq = s.next_new;
    prr_step(s, mss);
}

/// One segment delivered during a reduction by an echoed mark or a loss (Linux's `tcp_cwnd_reduction`):
/// while the flight is above ssthresh, the sender may send ssthresh / the flight at the
/// reduction's start per segment delivered (so the flight falls to ssthresh over a round trip and
/// new segments keep coming, whose arrivals reveal losses); below it, as many as were delivered and
/// not yet answered, at least one, up to ssthresh. Nothing sent yet in the reduction, it sends at
/// least one (Linux's "force a fast retransmit upon entering fast recovery", which its CWR state
/// shares, as ns-3's PRR). The window is the flight plus that.
fn prr_step(s: &mut Sender, mss: u64) {
    let Some(mut r) = s.prr else { return };
    r.delivered += 1;
    let ssthresh = s.win.ssthresh / mss;
    let allowed = if s.in_flight > ssthresh {
        (r.delivered * ssthresh)
            .div_ceil(r.flight)
            .saturating_sub(r.sent)
    } else {
        (ssthresh - s.in_flight).min(r.delivered.saturating_sub(r.sent).max(1))
    };
    let allowed = if r.sent == 0 { allowed.max(1) } else { allowed };
    r.sent += allowed;
    s.prr = Some(r);
    s.win.cwnd = (s.in_flight + allowed).max(1) * mss;
}

/// `keep` of a window of `cwnd` bytes, not below `min_cwnd` (Reno's half as `DctcpWindow::on_loss`).
fn cut_to(cwnd: u64, keep: f64, min_cwnd: u64) -> u64 {
    if keep == 0.5 {
        (cwnd / 2).max(min_cwnd)
    } else {
        ((cwnd as f64 * keep) as u64).max(min_cwnd)
    }
}

/// A loss-based sender's growth for one acknowledged segment: slow start below ssthresh, else
/// `ai` segments per window.
fn grow(s: &mut Sender, mss: u64, ai: f64) {
    if s.win.cwnd < s.win.ssthresh || ai == 1.0 {
        s.win.on_new_ack(mss, mss);
        return;
    }
    s.grow += ai * (mss * mss) as f64 / s.win.cwnd as f64;
    if s.grow >= mss as f64 {
        let add = (s.grow / mss as f64).floor();
        s.win.cwnd += add as u64 * mss;
        s.grow -= add * mss as f64;
    }
}

/// [`simulate`] for a JSON [`LinkSim`], as JSON.
pub fn simulate_json(json: &str) -> Result<String, String> {
    let p: LinkSim = serde_json::from_str(json).map_err(|e| format!("link: {e}"))?;
    let r = simulate(&p)?;
    serde_json::to_string(&r).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_events_come_in_the_order_one_heap_gives(
            steps in prop::collection::vec(
                (prop::collection::vec((0u8..5, 0u64..50, 0u32..3, 0u64..4), 0..6), 0u64..30),
                1..60,
            )
        ) {
            // timers re-armed a fixed time ahead of a clock that advances (often at equal
            // times), other events before and after them, some equal
            let rto = 40;
            let mut pending = Events::new();
            let mut reference = BinaryHeap::new();
            let mut now = 0;
            for (pushes, dt) in steps {
                for (kind, d, flow, x) in pushes {
                    let ev = match kind {
                        0 => Ev::Start(flow),
                        1 => Ev::Arrive(Sent { flow, tx: x, seq: x, retx: false, cwr: false }),
                        2 => Ev::Ack(AckMsg { flow, tx: x, ce: false, retx: false, queued: 0, cum: 0 }),
                        3 => Ev::Cross,
                        _ => Ev::Timeout { flow, gen: x },
                    };
                    if kind == 4 && d % 2 == 0 {
                        pending.push_rearm(now + rto, ev);
                        reference.push(Reverse((now + rto, ev)));
                    } else {
                        pending.push(now + d, ev);
                        reference.push(Reverse((now + d, ev)));
                    }
                }
                now += dt;
                loop {
                    let want = reference
                        .peek()
                        .filter(|Reverse((t, _))| *t <= now)
                        .map(|Reverse(e)| *e);
                    let got = pending.pop_due(now);
                    prop_assert_eq!(got, want);
                    if got.is_none() {
                        break;
                    }
                    reference.pop();
                }
                prop_assert_eq!(pending.next_time(), reference.peek().map(|Reverse((t, _))| *t));
            }
        }
    }

    /// `p` with DCTCP senders through a 100-packet queue that marks every packet from `k_packets`
    /// on (step marking, as the switch's DCTCP ports).
    fn dctcp_step(mut p: LinkSim, k_packets: f64) -> LinkSim {
        p.cc = Cc::Dctcp;
        p.queue_bytes = 100.0 * p.wire_bytes;
        let k = k_packets * p.wire_bytes;
        p.red = Some(RedSpec::step(k));
        p
    }

    /// 16 Reno senders x 200 kB through 1 Gbit/s into a 10-packet drop-tail queue: losses of
    /// first transmissions and of retransmissions, some found only by the timer.
    fn crowded(seed: u64) -> LinkSim {
        let pkt = 1502.0;
        let rtt = 300e-6 + 2.0 * pkt / 1.25e9;
        LinkSim {
            link_bytes_per_s: 125e6,
            queue_bytes: 10.0 * pkt,
            red: None,
            cc: Cc::Reno,
            ecn: false,
            mss_bytes: 1448.0,
            wire_bytes: pkt,
            init_cwnd_segments: 10.0,
            min_rto_s: 0.2,
            cross_bytes_per_s: 0.0,
            cross_jitter_packets: 0.0,
            horizon_s: 60.0,
            seed,
            delayed_ack: None,
            tail_loss_probe: true,
            rack_retransmissions: true,
            rack_reorder_timer: false,
            twin: None,
            ingress_bytes_per_s: Vec::new(),
            back_paths: Vec::new(),
            record_departures: false,
            flows: vec![
                LinkFlow {
                    bytes: 200e3,
                    start_s: 0.0,
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
                };
                16
            ],
        }
    }

    #[test]
    fn flows_entering_from_one_link_take_turns_on_it() {
        // two Reno flows whose own access links are as fast as the link: apart they fill it, through
        // one ingress link of half its rate (one sending host's) they get half of it together
        let mut p = crowded(1);
        p.queue_bytes = 200.0 * p.wire_bytes;
        p.flows.truncate(2);
        p.flows.iter_mut().for_each(|f| {
            f.bytes = 2e6;
            f.access_bytes_per_s = p.link_bytes_per_s;
        });
        let wire = 2.0 * 2e6 / p.mss_bytes * p.wire_bytes;
        let apart = run(&p, &[]).unwrap().0;
        p.ingress_bytes_per_s = vec![0.5 * p.link_bytes_per_s];
        p.flows.iter_mut().for_each(|f| f.ingress = Some(0));
        let shared = run(&p, &[]).unwrap().0;
        // at half the link's rate no queue builds
        assert_eq!(shared.drops, 0);
        let rate = |r: &LinkResult| wire / r.fct_s.iter().copied().fold(0.0, f64::max);
        assert!(rate(&apart) > 0.9 * p.link_bytes_per_s, "{apart:?}");
        let half = 0.5 * p.link_bytes_per_s;
        assert!(
            rate(&shared) <= half && rate(&shared) > 0.9 * half,
            "{shared:?}"
        );
        // the two alike flows share it alike
        let (a, b) = (shared.fct_s[0], shared.fct_s[1]);
        assert!((a - b).abs() < 0.05 * a.max(b), "{shared:?}");
        // an index past the list, a rate not above 0: refused by name
        p.flows[1].ingress = Some(1);
        let e = p.validate().unwrap_err();
        assert!(e.contains("flows[1].ingress"), "{e}");
        p.flows[1].ingress = Some(0);
        p.ingress_bytes_per_s = vec![0.0];
        let e = p.validate().unwrap_err();
        assert!(e.contains("ingress_bytes_per_s[0]"), "{e}");
    }

    #[test]
    fn jittered_cross_traffic_keeps_its_rate_and_is_checked() {
        // a quarter of the link next to one flow held to another quarter by its access link: the
        // queue stays short, and jitter moves each cross packet within its packet time and keeps
        // the rate (a packet more or less by the end)
        let mut p = crowded(1);
        p.flows.truncate(1);
        p.flows[0].bytes = 2e6;
        p.flows[0].access_bytes_per_s = 0.25 * p.link_bytes_per_s;
        p.cross_bytes_per_s = 0.25 * p.link_bytes_per_s;
        let plain = run(&p, &[]).unwrap().0;
        p.cross_jitter_packets = 1.0;
        let jittered = run(&p, &[]).unwrap().0;
        assert_eq!((plain.drops, jittered.drops), (0, 0));
        for r in [&plain, &jittered] {
            let packets = r.cross_bytes_per_s * r.end_s / p.wire_bytes;
            let want = p.cross_bytes_per_s * r.end_s / p.wire_bytes;
            assert!(
                (packets - want).abs() <= 1.5,
                "{packets} cross packets, {want} offered: {r:?}"
            );
        }
        for bad in [-0.1, 1.5, f64::NAN] {
            p.cross_jitter_packets = bad;
            assert!(p.validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_reduction_sends_one_segment_on_its_first_ack_even_with_the_flight_at_ssthresh() {
        // Reno at 3 segments answers a mark: ssthresh 2 (the floor), and the ACK that carried the
        // echo leaves 2 in flight. Linux's tcp_cwnd_reduction (and ns-3's PRR) still send one
        // segment then ("force a fast retransmit upon entering fast recovery"); later ACKs send
        // only what keeps the flight at ssthresh.
        let (_, mut senders) = run(&crowded(1), &[]).unwrap();
        let s = &mut senders[0];
        let mss = 1448;
        s.in_flight = 2;
        s.win.ssthresh = 2 * mss;
        s.prr = Some(Prr {
            flight: 3,
            delivered: 0,
            sent: 0,
        });
        prr_step(s, mss);
        assert_eq!(s.win.cwnd, 3 * mss, "one segment on the first ACK");
        prr_step(s, mss);
        assert_eq!(s.win.cwnd, 2 * mss, "then the flight held at ssthresh");
    }

    #[test]
    fn reno_and_cubic_answer_an_echoed_mark_and_a_loss_by_proportional_rate_reduction() {
        // four ECN-capable senders through 100 packets marked from 20 (no loss): each answer to
        // an echoed mark keeps segments going while the window comes down, as Linux's CWR state
        // (tcp_cwnd_reduction) and ns-3's do. Without ECN the same queue drops instead, and a
        // loss is answered the same way (Linux's recovery state, ns-3's PRR recovery).
        for cc in [Cc::Reno, Cc::Cubic] {
            let mut p = dctcp_step(crowded(1), 20.0);
            p.cc = cc;
            p.ecn = true;
            p.flows.truncate(4);
            p.flows.iter_mut().for_each(|f| f.bytes = 2e6);
            let (r, senders) = run(&p, &[]).unwrap();
            assert!(r.marks > 100 && r.drops == 0, "{cc:?}: {r:?}");
            assert!(senders.iter().all(|s| s.sent_reducing > 0), "{cc:?}");
            p.ecn = false;
            let (r, senders) = run(&p, &[]).unwrap();
            assert!(r.marks == 0 && r.drops > 0, "{cc:?}: {r:?}");
            assert!(senders.iter().all(|s| s.sent_reducing > 0), "{cc:?}");
        }
    }

    #[test]
    fn dctcp_keeps_sending_while_it_reduces_and_finds_the_start_up_losses_without_the_timer() {
        // 32 DCTCP senders' initial windows (320 segments) into 100 packets marked from 20: most
        // of each first window is dropped. Each sender's first echoed mark starts a proportional
        // rate reduction that keeps new segments coming (about one per two delivered), whose
        // arrivals reveal the losses; cutting the window at once left senders with more lost
        // segments in flight than their window allowed, and nothing to reveal them until the
        // timer (this model before: 15.8 timeouts a run; now at most one flow in 8 waits for it)
        let mut p = dctcp_step(crowded(1), 20.0);
        // the validation's incast: 1 MB from each of 32 hosts with 1 Gbit/s links
        let rtt = 80e-6 + 2.0 * p.wire_bytes / p.link_bytes_per_s;
        let f = LinkFlow {
            bytes: 1e6,
            base_rtt_s: rtt,
            one_way_s: rtt / 2.0,
            access_bytes_per_s: p.link_bytes_per_s,
            ..p.flows[0]
        };
        p.flows = vec![f; 32];
        for seed in 1..=3 {
            p.seed = seed;
            let (r, senders) = run(&p, &[]).unwrap();
            assert!(r.drops > 100 && r.marks > 0, "{r:?}");
            assert!(r.timeouts.iter().sum::<u32>() <= 4, "seed {seed}: {r:?}");
            assert!(senders.iter().all(|s| s.sent_reducing > 0), "seed {seed}");
        }
    }

    fn linux_acks() -> DelayedAck {
        DelayedAck {
            timeout_s: 0.04,
            quick_acks: 5,
            idle_quick_acks: 16,
        }
    }

    #[test]
    fn a_window_of_one_segment_waits_for_the_delayed_ack_timer_outside_quick_ack_mode() {
        // one flow of 3 segments from a window of 1 alone on the link: its first segment is
        // ACKed at once in quick-ACK mode, as with an ACK per segment (the same run exactly), and
        // after the 40 ms timer without that mode (ns-3's receivers)
        let mut p = crowded(1);
        p.flows.truncate(1);
        p.flows[0].bytes = 3.0 * p.mss_bytes;
        p.init_cwnd_segments = 1.0;
        let each = simulate(&p).unwrap();
        p.delayed_ack = Some(linux_acks());
        let quick = simulate(&p).unwrap();
        p.delayed_ack = Some(DelayedAck {
            quick_acks: 0,
            ..linux_acks()
        });
        let held = simulate(&p).unwrap();
        assert!(each.fct_s[0] < 0.002, "{each:?}");
        assert_eq!(quick.fct_s, each.fct_s);
        assert!(held.fct_s[0] > 0.04 && held.fct_s[0] < 0.045, "{held:?}");
    }

    #[test]
    fn delayed_acks_leave_a_flow_with_a_large_window_as_fast_and_no_hole_behind() {
        // a long flow alone, held to half the link by its host link: two segments per ACK grow
        // its window as fast (2 segments per ACK in slow start), so it ends as with an ACK per
        // segment, within the last segment's timer; in the crowded queue every flow ends and, once
        // its ACKs are back, has no hole left at the sender or the receiver
        let mut p = crowded(1);
        p.flows.truncate(1);
        p.flows[0].bytes = 2e6;
        p.flows[0].access_bytes_per_s = 0.5 * p.link_bytes_per_s;
        let each = simulate(&p).unwrap();
        p.delayed_ack = Some(linux_acks());
        let delayed = simulate(&p).unwrap();
        assert_eq!((each.drops, delayed.drops), (0, 0));
        assert!(
            (delayed.fct_s[0] - each.fct_s[0]).abs() < 0.002,
            "{each:?} {delayed:?}"
        );
        for seed in 1..=3 {
            let mut p = crowded(seed);
            p.delayed_ack = Some(linux_acks());
            let (r, senders) = run(&p, &[]).unwrap();
            assert!(r.timeouts.iter().sum::<u32>() > 0, "{r:?}");
            for (i, s) in senders.iter().enumerate() {
                assert!(r.fct_s[i].is_finite(), "seed {seed} flow {i}: {r:?}");
                assert_eq!(s.rx_holes, 0, "seed {seed} flow {i}");
                if s.in_flight == 0 && s.held.is_none() {
                    assert_eq!((s.holes, s.dropped.len()), (0, 0), "seed {seed} flow {i}");
                }
            }
        }
    }

    #[test]
    fn delayed_acks_halve_the_acks_and_answer_a_change_of_mark_or_cwr_at_once() {
        // four DCTCP flows through step marking at 2 packets: the marks come and go and every
        // reduction's first new segment carries CWR. With an ACK per segment there are as many
        // ACKs as segments; with delayed ACKs (no quick ACKs) about half, and the receiver ACKs at
        // once the segments whose CE state differs from the last one's or that carry CWR, as
        // Linux's (`dctcp_ece_ack_update`, `tcp_ecn_accept_cwr`)
        let mut p = dctcp_step(crowded(1), 2.0);
        p.flows.truncate(4);
        for f in &mut p.flows {
            f.bytes = 2e6;
        }
        let (each, senders) = run(&p, &[]).unwrap();
        assert!(each.marks > 100 && each.drops == 0, "{each:?}");
        for s in &senders {
            assert_eq!(
                (s.acks_sent, s.acks_for_flip, s.acks_for_cwr),
                (s.received, 0, 0)
            );
        }
        p.delayed_ack = Some(DelayedAck {
            quick_acks: 0,
            idle_quick_acks: 0,
            ..linux_acks()
        });
        let (_, senders) = run(&p, &[]).unwrap();
        for (i, s) in senders.iter().enumerate() {
            let share = s.acks_sent as f64 / s.received as f64;
            assert!((0.5..0.8).contains(&share), "flow {i}: {share}");
            assert!(s.acks_for_flip > 100, "flow {i}: {}", s.acks_for_flip);
            assert!(s.acks_for_cwr > 10, "flow {i}: {}", s.acks_for_cwr);
        }
    }

    #[test]
    fn a_delayed_ack_out_of_range_is_refused_by_name() {
        let mut p = crowded(1);
        for (d, field) in [
            (
                DelayedAck {
                    timeout_s: 0.0,
                    ..linux_acks()
                },
                "timeout_s",
            ),
            (
                DelayedAck {
                    timeout_s: f64::NAN,
                    ..linux_acks()
                },
                "timeout_s",
            ),
            (
                DelayedAck {
                    quick_acks: 5000,
                    ..linux_acks()
                },
                "quick_acks",
            ),
        ] {
            p.delayed_ack = Some(d);
            let e = p.validate().unwrap_err();
            assert!(
                e.starts_with("link.delayed_ack.") && e.contains(field),
                "{e}"
            );
        }
    }

    #[test]
    fn a_flow_s_last_segment_takes_the_link_for_the_bytes_it_carries() {
        // one flow of a segment and 100 bytes on an idle link: its last packet is 154 bytes on
        // the wire (100 + the 54 of headers the 1448-byte segments pay), not a full 1502, so the
        // flow ends up to (1502 - 154) / 125 MB/s = 10.8 µs sooner than one of two full segments
        // (the port's token bucket, a packet deep, lets part of a packet through early: 10.0 µs)
        let fct = |bytes: f64| {
            let mut p = crowded(1);
            p.flows.truncate(1);
            p.flows[0].bytes = bytes;
            let (r, senders) = run(&p, &[]).unwrap();
            (r.fct_s[0], senders[0].last_wire)
        };
        let (short, last) = fct(1548.0);
        let (full, full_last) = fct(2.0 * 1448.0);
        assert_eq!((last, full_last), (154, 1502));
        let sooner = full - short;
        let most = 1348.0 / 125e6;
        assert!(
            sooner > 0.9 * most && sooner < most + 1e-7,
            "{short} {full}"
        );
    }

    #[test]
    fn a_lost_retransmission_leaves_no_hole_once_its_segment_is_delivered() {
        // a segment lost twice is one hole: once a later retransmission delivers it, a flow
        // whose every ACK is back has nothing missing and nothing waiting to be resent (the
        // run ends at the last delivery, so the last flows may still have ACKs on their way)
        let mut checked = 0;
        for seed in 1..=8 {
            let (r, senders) = run(&crowded(seed), &[]).unwrap();
            for (i, s) in senders.iter().enumerate() {
                assert!(r.fct_s[i].is_finite(), "seed {seed} flow {i}: {r:?}");
                if s.in_flight > 0 {
                    continue;
                }
                assert_eq!(
                    (s.holes, s.dropped.len(), s.resend.len()),
                    (0, 0, 0),
                    "seed {seed} flow {i} ({} retransmissions lost)",
                    s.retx_drops
                );
                checked += u32::from(s.retx_drops > 0);
            }
        }
        assert!(
            checked >= 3,
            "flows checked that lost a retransmission: {checked}"
        );
    }

    #[test]
    fn tail_loss_probes_recover_tails_the_timer_would_have_waited_for() {
        // sixteen Reno flows into ten packets: windows whose last segments were dropped, with
        // nothing sent after them to reveal it, wait 200 ms for the timer without the probe; with
        // it, two round trips and 2 ms (over eight seeds: 52 timeouts instead of 72, the mean
        // FCT 0.097 s instead of 0.126 s). Without RACK's reordering timer, which finds many of
        // the same tails (a later segment delivered) before the probe is due
        let (mut with, mut without) = ((0, 0, 0.0), (0, 0, 0.0));
        for seed in 1..=8 {
            for tlp in [true, false] {
                let p = LinkSim {
                    tail_loss_probe: tlp,
                    rack_retransmissions: true,
                    rack_reorder_timer: false,
                    ..crowded(seed)
                };
                let (r, senders) = run(&p, &[]).unwrap();
                let t = if tlp { &mut with } else { &mut without };
                t.0 += r.timeouts.iter().sum::<u32>();
                t.1 += senders.iter().map(|s| s.probes).sum::<u32>();
                t.2 += r.fct_s.iter().sum::<f64>() / r.fct_s.len() as f64 / 8.0;
            }
        }
        assert_eq!(without.1, 0);
        assert!(with.1 >= 16, "probes sent: {with:?}");
        assert!(
            with.0 * 5 <= without.0 * 4,
            "timeouts: {with:?} {without:?}"
        );
        assert!(with.2 < 0.85 * without.2, "mean FCT: {with:?} {without:?}");
    }

    #[test]
    fn the_reordering_timer_finds_drops_that_no_third_segment_reveals() {
        // eight Reno flows of eleven segments into ten packets: a dropped segment with only one
        // or two of its window's segments after it is never revealed by three; RACK's timer
        // (Linux's) marks it lost a quarter of a round trip after a later one was delivered,
        // instead of the retransmission timer's 200 ms (over eight seeds: 6 timeouts instead of
        // 41, the mean FCT 0.021 s instead of 0.131 s)
        let (mut with, mut without) = ((0, 0.0), (0, 0.0));
        for seed in 1..=8 {
            for reo in [true, false] {
                let mut p = LinkSim {
                    rack_reorder_timer: reo,
                    ..crowded(seed)
                };
                p.flows.truncate(8);
                for f in p.flows.iter_mut() {
                    f.bytes = 15e3;
                }
                let r = simulate(&p).unwrap();
                let t = if reo { &mut with } else { &mut without };
                t.0 += r.timeouts.iter().sum::<u32>();
                t.1 += r.fct_s.iter().sum::<f64>() / r.fct_s.len() as f64 / 8.0;
            }
        }
        assert!(with.0 * 4 <= without.0, "timeouts: {with:?} {without:?}");
        assert!(with.1 < 0.3 * without.1, "mean FCT: {with:?} {without:?}");
    }

    #[test]
    fn the_cumulative_ack_moves_on_the_next_expected_segment_and_over_those_held_above_it() {
        let mut r = CumAck::default();
        let moved: Vec<bool> = [0, 2, 3, 1, 1, 5, 4, 6]
            .into_iter()
            .map(|seq| r.deliver(seq))
            .collect();
        // 1 fills the hole below 2 and 3 (the ACK jumps to 4); the second 1 is a duplicate
        let want = [true, false, false, true, false, false, true, true];
        assert_eq!(moved, want);
        assert_eq!((r.next, r.above.len()), (7, 0));
    }

    #[test]
    fn every_flow_s_receiver_has_every_segment_in_order_at_the_end() {
        // the crowded link loses segments and retransmissions: once a flow is done, its
        // cumulative ACK covers all of its segments and holds nothing above
        for seed in 1..=3 {
            let (r, senders) = run(&crowded(seed), &[]).unwrap();
            assert!(r.drops > 0);
            for (i, s) in senders.iter().enumerate() {
                assert_eq!(
                    (s.rcv.next, s.rcv.above.len()),
                    (s.total, 0),
                    "seed {seed} flow {i}"
                );
            }
        }
    }

    /// One Cubic flow of 1 MB through 1 Gbit/s (100-packet drop-tail ports), and `back` flows of
    /// `back_bytes` the other way, on the link's twin (if `twin`: else its ACKs cross no queue).
    fn duplex(twin: bool, back: usize, back_bytes: f64) -> LinkSim {
        let mut p = crowded(1);
        p.cc = Cc::Cubic;
        p.queue_bytes = 100.0 * p.wire_bytes;
        let rtt = 100e-6;
        let flow = LinkFlow {
            bytes: 1e6,
            base_rtt_s: rtt,
            one_way_s: rtt / 2.0,
            ack_queue_s: rtt / 2.0,
            ingress: None,
            back: None,
            ..p.flows[0]
        };
        p.flows = vec![flow];
        p.flows.extend((0..back).map(|_| LinkFlow {
            bytes: back_bytes,
            reverse: true,
            ..flow
        }));
        p.twin = twin.then_some(Twin {
            link_bytes_per_s: p.link_bytes_per_s,
            queue_bytes: p.queue_bytes,
            red: None,
        });
        p
    }

    #[test]
    fn acks_queued_behind_the_other_direction_s_data_slow_their_flow() {
        let alone = simulate(&duplex(false, 0, 0.0)).unwrap().fct_s[0];
        let empty = simulate(&duplex(true, 0, 0.0)).unwrap().fct_s[0];
        let behind = simulate(&duplex(true, 4, 5e6)).unwrap();
        // an empty twin costs an ACK at most its 66 bytes' time on the way back
        assert!(empty >= alone && empty < alone * 1.01, "{alone} {empty}");
        // behind up to 100 packets (1.2 ms) of the other direction's data at each round trip
        assert!(behind.fct_s[0] > 1.5 * alone, "{alone} {}", behind.fct_s[0]);
        assert!(behind.fct_s.iter().all(|f| f.is_finite()));
    }

    #[test]
    fn acks_wait_at_their_way_back_behind_what_its_queue_sent_before_them() {
        // the other direction as its own simulation left it: four flows of 5 MB filling its queue
        let mut other = duplex(false, 0, 0.0);
        other.flows = vec![
            LinkFlow {
                bytes: 5e6,
                ..other.flows[0]
            };
            4
        ];
        other.record_departures = true;
        let sent = simulate(&other).unwrap().departures;
        let segments = (4.0 * 5e6 / other.mss_bytes).ceil() as usize;
        assert!(sent.len() >= segments, "{} for {segments}", sent.len());
        // in order, one at a time (a flow's last segment is short), each left after it was queued
        assert!(sent.windows(2).all(|w| w[0].0 <= w[1].0 && w[1].1 > w[0].1));
        assert!(sent.iter().all(|d| d.1 > d.0));
        let p = duplex(false, 0, 0.0);
        let alone = simulate(&p).unwrap().fct_s[0];
        let mut back = p.clone();
        back.back_paths = vec![vec![BackHop {
            queue: 0,
            after_s: 10e-6,
        }]];
        back.flows[0].back = Some(0);
        // an empty queue on the way back holds up nothing
        assert_eq!(simulate_with(&back, &[&[]]).unwrap().fct_s[0], alone);
        // behind up to 100 packets (1.2 ms) of the other direction's data at each round trip
        let behind = simulate_with(&back, &[&sent]).unwrap().fct_s[0];
        assert!(behind > 1.5 * alone, "{alone} {behind}");
        // a queue not given, a way back not listed, a way back beside a twin: refused by name
        let e = simulate_with(&back, &[]).unwrap_err();
        assert!(e.starts_with("link.back_paths[0][0]"), "{e}");
        back.flows[0].back = Some(1);
        let e = back.validate().unwrap_err();
        assert!(e.starts_with("link.flows[0].back"), "{e}");
        let mut both = duplex(true, 0, 0.0);
        both.back_paths = vec![Vec::new()];
        both.flows[0].back = Some(0);
        let e = both.validate().unwrap_err();
        assert!(e.contains("twin"), "{e}");
    }

    #[test]
    fn a_delayed_ack_takes_one_packet_of_the_way_back_for_two_segments() {
        // one flow alone, its twin empty: every segment's ACK is a packet of 66 bytes on the way
        // back; with delayed ACKs (no quick ACKs) one packet for two segments, not two (counted
        // until the flow is delivered: its last few ACKs are still on their way then)
        let mut p = duplex(true, 0, 0.0);
        let (_, every) = run(&p, &[]).unwrap();
        assert_eq!(every[0].ack_bytes % ACK_WIRE, 0);
        let every = every[0].ack_bytes / ACK_WIRE;
        let segments = (p.flows[0].bytes / p.mss_bytes).ceil() as u64;
        assert!(
            every <= segments && every + 10 >= segments,
            "{every} for {segments}"
        );
        p.delayed_ack = Some(DelayedAck {
            quick_acks: 0,
            idle_quick_acks: 0,
            ..linux_acks()
        });
        let (_, delayed) = run(&p, &[]).unwrap();
        let delayed = delayed[0].ack_bytes / ACK_WIRE;
        assert!(
            delayed + 5 >= segments / 2 && delayed <= segments / 2 + 2,
            "{delayed} ACK packets for {segments} segments"
        );
    }

    #[test]
    fn a_flow_of_the_other_direction_needs_the_twin_and_acks_a_round_trip_at_most_away() {
        let mut p = duplex(false, 1, 1e6);
        let e = p.validate().unwrap_err();
        assert!(e.starts_with("link.flows[1]") && e.contains("twin"), "{e}");
        p = duplex(true, 1, 1e6);
        p.flows[0].ack_queue_s = 2.0 * p.flows[0].base_rtt_s;
        let e = p.validate().unwrap_err();
        assert!(
            e.starts_with("link.flows[0]") && e.contains("ack_queue_s"),
            "{e}"
        );
        p.flows[0].ack_queue_s = 0.0;
        p.twin.as_mut().unwrap().queue_bytes = 10.0;
        let e = p.validate().unwrap_err();
        assert!(e.starts_with("link.twin.queue_bytes"), "{e}");
    }
}
