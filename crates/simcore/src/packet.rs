//! The fabric's packet-faithful mode (`mode = "packet"`): per-link decomposition after Parsimon
//! (Zhao et al., NSDI'23), on the switch's own queue logic.
//!
//! 1. **The flows**: the max-min engine runs the shuffle as in the fast mode and records every
//!    remote fetch: when its request left, when its data started, its bytes and its ECMP path.
//!    With every request out at once (no in-flight limit) these are the workload itself; with
//!    `max_reqs_in_flight` / `max_mib_in_flight` a fetch's start is the one the max-min schedule
//!    gave it (an approximation: a slower packet-level flow would delay the next request).
//! 2. **One packet-level simulation per loaded link**: every link crossed by at least two fetches
//!    (or by one fetch and UDP cross traffic) is simulated alone with the fetches that cross it
//!    ([`crate::linksim`]: slow start, window growth and cuts of the chosen congestion control,
//!    losses and retransmission timeouts, the port's droptail / RED / step marking through
//!    `switchcore`'s queue), each fetch with its whole path's round trip and its host link's rate.
//!    A fetch the max-min run held well below the fastest of a link's fetches (under 0.9 of its
//!    average rate) was limited by another link of its path, and enters that link no faster than
//!    its own max-min average rate: at 4:1 the fetches between two leaves, 16 to an uplink, leave
//!    their host links to the fetches within a leaf, as ns-3's do (simulated alone, a host link
//!    shared its rate seven ways and the fetches within a leaf took 0.56 s against ns-3's 0.34 s).
//!    A link crossed by a single fetch has no one to share with and is not simulated. With
//!    `packet.cluster_tolerance` links whose workloads are alike are simulated once per cluster and
//!    the others take their representative's delays ([`crate::linkcluster`]).
//! 3. **Per path**: a fetch's packet-level time is its time alone on its path's slowest link (the
//!    same engine with no other flow: slow start and propagation included) plus the most any
//!    simulated link of its path added (its time there − its time alone there). Parsimon adds the
//!    links' delays up; that counts twice a fetch whose rate is limited at two links at once, as
//!    every fetch of an all-to-all is at its sender's and its receiver's host links (the sum gave
//!    2.3x ns-3's mean FCT on the two-tier all-to-all, the largest is within a few percent). Its
//!    FCT = the request's one-way delay + that time.
//!
//! The applications' packet mode replays the starts paced instead ([`Starts::Paced`]): each
//! reducer's request loop is simulated first on its own link and sets its fetches' starts on the
//! others, in passes that hold a request slot while its block waits elsewhere on its path (the
//! loops closed over the whole path: [`refine`]), and a sending host's own link queues without
//! dropping or marking (a Linux sender's qdisc and TCP small queues hold its segments back; they
//! are not lost in its NIC). On its own link a loop's freed slot takes its next request whichever
//! fetch freed it, as Spark's fetch loop does (not the one that released it in the max-min run:
//! a block stuck behind a 200 ms timeout held up every request after it, where Spark's other
//! slots go on), and on every other link a loop keeps at most its `max_reqs_in_flight` fetches
//! going, a later one waiting for a slot (paced starts from loops not yet settled sent 126 fetches
//! at once into a spine port that the eight reducers' 40 slots bound: docs/results/sim-vs-ns3/loops.md).
//!
//! On one bottleneck this is that link's packet-level simulation. Across several loaded links in
//! series the largest delay stands for them all (queues that build at two links at once are
//! counted once), and upstream links do not reshape the packets a downstream link sees (a
//! lossless FIFO of the upstream link in front of each link was measured and not kept: the
//! all-to-all did not move, incast 16 Reno went from +29 to +49 % of ns-3's mean). ACKs cross no
//! queue: a flow's ACKs take its base round trip whatever the reverse path carries, where ns-3
//! drops ACKs at a full uplink (half of its DCTCP timeouts in the reducers' loops follow one).
//! With `tcp.queued_acks` each link is simulated with its cable's other direction, its ACKs
//! behind that direction's data; with `tcp.path_acks` (the applications' mode only) each fetch's
//! ACKs wait at the links of its own way back, from its receiver to its sender, behind the
//! packets those links' simulations sent (in this pass where simulated before it, else in the pass
//! before; never dropped). The tiers' utilisation and the heat map stay the
//! max-min schedule's. UDP cross traffic is constant-rate on every link of its path for the whole
//! run, each packet up to a packet time of the link after its constant-rate instant (as the hosts'
//! send times wander; exactly periodic, a rate whose period is a whole number of packet times would
//! meet the departures on the same nanosecond, an artefact of the model, not of a network); TCP
//! cross traffic and link failures are refused in this mode.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::linkcluster::{cluster, Feature, Transfer};
use crate::linksim::{simulate, simulate_with, BackHop, LinkFlow, LinkResult, LinkSim, Twin};
use crate::tcpmodel::{Cc, TcpModel};
use crate::topology::Topology;

/// A wire segment: 1448 bytes of payload, TCP with timestamps, IPv4, Ethernet.
const WIRE: f64 = 1514.0;
const MSS: f64 = 1448.0;

/// A remote fetch as the max-min schedule ran it.
#[derive(Debug, Clone)]
pub(crate) struct Traced {
    pub(crate) r: u32,
    pub(crate) issued_s: f64,
    pub(crate) data_s: f64,
    pub(crate) bytes: f64,
    pub(crate) ideal_s: f64,
    pub(crate) path: Vec<u32>,
    /// The fetch whose delivery released this one's request (an in-flight limit's loop).
    pub(crate) after: Option<u32>,
    /// When its last byte left the max-min solve (NaN when not recorded: the applications' mode).
    pub(crate) maxmin_end_s: f64,
}

/// What the packet-level pass did (in the result as `packet`; absent in the max-min mode).
#[derive(Debug, Clone, Serialize)]
pub struct PacketSummary {
    pub mode: &'static str,
    /// Links crossed by a fetch, and of those simulated at packet level.
    pub links_with_flows: u32,
    pub links_simulated: u32,
    /// With clustering ([`PacketOptions::cluster_tolerance`]): the clusters of alike links (each
    /// simulated once, by its first link), the links that took their representative's delays
    /// instead of being simulated, and the largest cluster's links. 0 without clustering.
    pub clusters: u32,
    pub links_represented: u32,
    pub largest_cluster: u32,
    pub cluster_tolerance: Option<f64>,
    pub flows: u64,
    /// Retransmission timeouts, drops and marks summed over the simulated links (a represented
    /// link counts its representative's).
    pub timeouts: u64,
    pub drops: u64,
    pub marks: u64,
    /// Fetches a link had not finished within its horizon (their FCT is unknown).
    pub flows_not_done: u64,
    /// Packet-level events over every link simulation, the solo runs included (every pass).
    pub events: u64,
    /// Passes made to close the request loops over the whole path (mode Paced; 1 otherwise), the
    /// one whose result this is (the pass whose request slots were held, on average over the
    /// fetches, nearest as long as its links found their blocks delayed: [`refine`]), how far its
    /// paced starts moved from the pass before (s, on average; 0 for the first pass: at most
    /// [`LOOP_SETTLED_S`] when the loops settled, more when the move stopped shrinking first,
    /// [`LOOP_PATIENCE`], fetches' timeouts coming and going, or at [`LOOP_PASSES`]), and that
    /// mean of held less found (s; above 0: its slots waited longer than its blocks did).
    pub passes: u32,
    pub pass_used: u32,
    pub pass_move_s: f64,
    pub pass_hold_gap_s: f64,
    /// The applications' mode: every pass that could have been kept ([`pass_may_be_kept`]) and the
    /// applications' mean job time with its fetches (s), the kept one's included: how far the
    /// choice among passes that did not settle moves the answer. Empty elsewhere.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pass_job_times: Vec<PassJobTime>,
    /// The same per tier of links (e.g. `host→leaf`: the senders' own links).
    pub tiers: Vec<TierPackets>,
}

/// A pass that could have been kept, the mean of what its slots were held less what its links
/// found (s, as [`PacketSummary::pass_hold_gap_s`]), and the applications' mean job time replayed
/// with it.
#[derive(Debug, Clone, Serialize)]
pub struct PassJobTime {
    pub pass: u32,
    pub hold_gap_s: f64,
    pub mean_job_time_s: f64,
}

/// A pass that could have been kept but was not: its number, its hold gap, and per fetch its FCT
/// and data shift as [`refine`] gives the kept one's.
pub(crate) type OtherPass = (u32, f64, Vec<f64>, Vec<f64>);

/// What [`refine`] gives: per fetch its FCT and data shift, the kept pass's summary, the others.
pub(crate) type Refined = (Vec<f64>, Vec<f64>, PacketSummary, Vec<OtherPass>);

/// What the packet-level pass did on one tier's links.
#[derive(Debug, Clone, Serialize)]
pub struct TierPackets {
    pub tier: String,
    pub links_simulated: u32,
    /// Links that took their cluster representative's delays (0 without clustering).
    pub links_represented: u32,
    /// Fetches over the tier's simulated links (a fetch counts once per link).
    pub flows: u64,
    pub timeouts: u64,
    pub drops: u64,
    pub marks: u64,
}

struct Ctx<'a> {
    topo: &'a Topology,
    tcp: &'a TcpModel,
    seed: u64,
    solo: HashMap<[u64; 5], f64>,
    events: u64,
    /// Links that queue without dropping or marking (a sending host's own link, mode Paced).
    lossless: Vec<bool>,
    /// Mode Paced: each request loop's slots ([`PacketOptions::loop_slots`]; 0: no limit), kept
    /// on every link; None (mode Schedule): a fetch is released by the one the max-min run named.
    loop_slots: Option<u32>,
    /// Per link, the cable's other direction simulated with it (ACKs behind that direction's
    /// data); None: its ACKs cross no queue.
    twin: Vec<Option<u32>>,
    /// With `tcp.path_acks`: per link, the cable's other direction (empty without).
    reverse: Vec<Option<u32>>,
    /// ... and per link, each packet its simulation in the pass before sent, as (queued, on the
    /// wire) in ns (empty: not simulated then, or the first pass) ...
    back: Vec<Vec<(u64, u64)>>,
    /// ... and in this pass, once it was simulated: the queue the ACKs crossing it wait in is
    /// this pass's where there is one ([`Ctx::queue_of`]).
    back_next: Vec<Vec<(u64, u64)>>,
}

impl Ctx<'_> {
    /// Link `l`'s simulation (its RED draws and send-time jitter seeded by the run's seed and `l`).
    fn link(&self, l: u32, cross: f64, mut flows: Vec<LinkFlow>) -> LinkSim {
        let cap = self.topo.links[l as usize].capacity;
        // the links the flows enter from (topology ids in `flow_at`) as indices of this simulation,
        // numbered in the order they first appear
        let mut index: HashMap<u32, u32> = HashMap::new();
        let mut ingress_bytes_per_s: Vec<f64> = Vec::new();
        for f in &mut flows {
            if let Some(g) = f.ingress {
                let i = *index.entry(g).or_insert_with(|| {
                    ingress_bytes_per_s.push(self.topo.links[g as usize].capacity);
                    ingress_bytes_per_s.len() as u32 - 1
                });
                f.ingress = Some(i);
            }
        }
        let horizon = flows.iter().map(|f| f.start_s).fold(0.0, f64::max) + 120.0;
        let lossless = self.is_lossless(l as usize);
        LinkSim {
            link_bytes_per_s: cap,
            queue_bytes: match lossless {
                // every byte of its flows fits: nothing is ever dropped
                true => flows.iter().map(|f| f.bytes).sum::<f64>() * 2.0 + 1e6,
                false => self.tcp.queue_packets * WIRE,
            },
            red: self.tcp.probe(cap, 0.0).red.filter(|_| !lossless),
            cc: self.tcp.cc,
            ecn: self.tcp.ecn && self.tcp.cc != Cc::Dctcp,
            mss_bytes: MSS,
            wire_bytes: WIRE,
            init_cwnd_segments: 10.0,
            min_rto_s: 0.2,
            cross_bytes_per_s: cross,
            // the UDP's send times wander by up to a packet time, as the hosts' do
            cross_jitter_packets: 1.0,
            horizon_s: horizon,
            seed: self.seed ^ (u64::from(l) << 32),
            delayed_ack: self.tcp.delayed_ack,
            tail_loss_probe: true,
            rack_retransmissions: true,
            // Linux's reordering window and timer, as the reference's `--rackReo` (`387e4eb`)
            rack_reorder_timer: true,
            twin: None,
            ingress_bytes_per_s,
            back_paths: Vec::new(),
            record_departures: false,
            flows,
        }
    }

    /// Whether link `l` queues without dropping or marking (a sending host's own, mode Paced).
    fn is_lossless(&self, l: usize) -> bool {
        self.lossless.get(l).copied().unwrap_or(false)
    }

    /// Link `m`'s queue as the ACKs crossing it find it (`tcp.path_acks`): the packets its
    /// simulation in this pass sent, once it was simulated, else in the pass before (a link's
    /// simulation sees the queues of the links simulated before it in this pass: with the pass
    /// before's alone, a fabric's all-to-all moved by up to 60 points from pass to pass, each pass
    /// answering the one before; docs/results/sim-vs-ns3/packet-mode-all.md).
    fn queue_of(&self, m: u32) -> &[(u64, u64)] {
        match &self.back_next[m as usize] {
            fresh if !fresh.is_empty() => fresh,
            _ => &self.back[m as usize],
        }
    }

    /// Link `l`'s simulation with path ACKs (`tcp.path_acks`) and the links whose queues it is
    /// given, in the order of their indices: each flow's ACKs wait at the links of its way back,
    /// from its receiver to its sender (each link's cable's other direction, in that order),
    /// behind the packets those links' simulations sent ([`Ctx::queue_of`]; a link not simulated,
    /// or a sending host's own link, holds none up: a Linux sender's fair queueing keeps ACKs out
    /// of bulk data's way); it records its own for the links after it and the next pass.
    fn link_with_back(
        &self,
        l: u32,
        cross: f64,
        flows: Vec<LinkFlow>,
        traces: &[Traced],
        ids: &[u32],
    ) -> (LinkSim, Vec<u32>) {
        let links = &self.topo.links;
        let mut sim = self.link(l, cross, flows);
        sim.record_departures = true;
        let mut queues: Vec<u32> = Vec::new();
        let mut index: HashMap<u32, u32> = HashMap::new();
        for (k, &i) in ids.iter().enumerate() {
            let mut hops = Vec::new();
            // from the receiver: the time to the link's queue, and to the hop before
            let (mut at, mut last) = (0.0, 0.0);
            for &h in traces[i as usize].path.iter().rev() {
                let Some(m) = self.reverse[h as usize] else {
                    continue;
                };
                if !self.is_lossless(m as usize) && !self.queue_of(m).is_empty() {
                    let q = *index.entry(m).or_insert_with(|| {
                        queues.push(m);
                        queues.len() as u32 - 1
                    });
                    hops.push(BackHop {
                        queue: q,
                        after_s: at - last,
                    });
                    last = at;
                }
                at += links[m as usize].delay_s;
            }
            if !hops.is_empty() {
                sim.flows[k].back = Some(sim.back_paths.len() as u32);
                sim.back_paths.push(hops);
            }
        }
        (sim, queues)
    }

    /// Fetch `t` as seen from link `l` of its path: its round trip and last-byte latency.
    fn flow_at(&self, t: &Traced, l: u32) -> LinkFlow {
        let links = &self.topo.links;
        let prop: f64 = t.path.iter().map(|&h| links[h as usize].delay_s).sum();
        let ser: f64 = t
            .path
            .iter()
            .filter(|&&h| h != l)
            .map(|&h| WIRE / links[h as usize].capacity)
            .sum();
        let k = t.path.iter().position(|&h| h == l).unwrap_or(0);
        let after: f64 = t.path[k + 1..]
            .iter()
            .map(|&h| links[h as usize].delay_s)
            .sum();
        LinkFlow {
            // the link before this one on its path (a topology id until `link` numbers them)
            ingress: k.checked_sub(1).map(|j| t.path[j]),
            back: None,
            reverse: false,
            // its ACK reaches the cable's other direction after the receiver and the hops back
            ack_queue_s: (prop + ser + after).min(2.0 * prop + ser),
            bytes: t.bytes,
            start_s: t.data_s,
            base_rtt_s: 2.0 * prop + ser,
            one_way_s: prop + ser,
            after: None,
            after_gap_s: t.data_s - t.issued_s,
            hold_s: 0.0,
            loop_id: None,
            loop_slots: 0,
            // it cannot arrive faster than the slowest of its other links lets it
            access_bytes_per_s: t
                .path
                .iter()
                .filter(|&&h| h != l)
                .map(|&h| links[h as usize].capacity)
                .fold(f64::INFINITY, f64::min)
                .min(1e15),
        }
    }

    /// Fetch `t`'s time alone on link `l` (memoised: equal fetches are simulated once).
    fn alone(&mut self, t: &Traced, l: u32) -> Result<f64, String> {
        let mut f = self.flow_at(t, l);
        f.start_s = 0.0;
        let cap = self.topo.links[l as usize].capacity;
        let key = [
            cap.to_bits(),
            f.bytes.to_bits(),
            f.base_rtt_s.to_bits(),
            f.one_way_s.to_bits(),
            f.access_bytes_per_s.to_bits(),
        ];
        if let Some(&v) = self.solo.get(&key) {
            return Ok(v);
        }
        let r = simulate(&self.link(l, 0.0, vec![f]))?;
        self.events += r.events;
        self.solo.insert(key, r.fct_s[0]);
        Ok(r.fct_s[0])
    }
}

/// Options of the packet mode (the fabric config's `packet`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize)]
pub struct PacketOptions {
    /// Simulate one link per cluster of links with alike workloads, within this tolerance
    /// ([`crate::linkcluster`]); absent: every link is simulated.
    #[serde(default)]
    pub cluster_tolerance: Option<f64>,
    /// Each request loop's slots (the applications' `max_reqs_in_flight`; 0: none), kept on every
    /// link a loop's fetches cross (mode Paced). Set by the applications' engine, not by a spec.
    #[serde(skip)]
    pub loop_slots: u32,
}

impl PacketOptions {
    pub fn validate(&self) -> Result<(), String> {
        match self.cluster_tolerance {
            Some(t) if !(0.0..=1.0).contains(&t) => {
                Err("packet.cluster_tolerance must be in [0, 1]".into())
            }
            _ => Ok(()),
        }
    }
}

/// Mode Paced: the passes [`refine`] makes at most to close the request loops over the whole path
/// (the first is the open loop: each receiver link's alone).
pub const LOOP_PASSES: u32 = 16;
#[cfg(test)]
thread_local! {
    // tests: the passes [`refine`] makes at most on this thread instead of [`LOOP_PASSES`]
    pub(crate) static PASSES_CAP: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}
/// ... and it stops earlier once the fetches' paced starts moved by at most this on average
/// between two passes (s), or once [`LOOP_PATIENCE`] passes in a row have not moved them less than
/// the least move so far: the bisection has then come as close as the fetches' timeouts let it (a
/// fetch that does or does not time out in a pass moves its successors by 200 ms).
pub const LOOP_SETTLED_S: f64 = 1e-3;
/// See [`LOOP_SETTLED_S`]: one pass's move may grow on the way down (at 4:1 on 1,000 hosts with
/// every block a max-min flow, the fourth pass's did before it halved eight times).
pub const LOOP_PATIENCE: u32 = 3;
/// ... counted only from this pass on. The bisection starts from [0, the open loop's delay] and
/// halves each fetch's bracket once a pass: before this many halvings (a 200 ms timeout's bracket
/// still wider than a millisecond) a small move says nothing about settling. On the 32-host loops
/// check one seed's second pass moved least by chance, three passes did not beat it, and that pass
/// (kept then, as the least move) took 2,652 timeouts where the other seeds' took 141–158 (ns-3: 157).
pub const LOOP_STALL_FROM: u32 = 8;

/// Whether `refine` stops after pass `pass` (of at most `passes`): the starts moved by at most
/// [`LOOP_SETTLED_S`], or the least move so far is [`LOOP_PATIENCE`] passes old and at least
/// [`LOOP_STALL_FROM`] passes were made, or no pass is left.
fn loops_stop(pass: u32, passes: u32, moved: f64, since_least: u32) -> bool {
    let stalled = since_least >= LOOP_PATIENCE && pass >= LOOP_STALL_FROM;
    pass >= passes || moved <= LOOP_SETTLED_S || stalled
}

/// Whether pass `pass` may be the one `refine` keeps: any but the open loop's first (it holds no
/// slot, so its holds are the furthest from what it finds), which stands only where the loops stop
/// at once.
fn pass_may_be_kept(pass: u32, stops: bool) -> bool {
    stops || pass >= 2
}

/// With `tcp.path_acks`, a fetch whose links found it delayed at least this much beyond its
/// receiver link (a retransmission timeout's delay: Linux's least is 200 ms) may hold its request
/// slot that whole delay in the next pass ([`whole_holds`]); its bisection ([`Bisection`]) goes on
/// over its other delays. Taken into the bisection, a timeout's delay stays in the fetch's bracket
/// and halves over the next passes (100, 50, 25 ms...) while the fetch mostly no longer times out:
/// on the loops check the slots were held longer than the links found in most passes after the
/// second (+0.2 to +2.3 ms a fetch in passes 3-5 at 2 x 8 hosts), the loops took two thirds of
/// ns-3's timeouts there and their Cubic came 13-43 % early (docs/results/sim-vs-ns3/loops.md).
pub const TIMEOUT_HELD_S: f64 = 0.1;

/// Which fetches hold a timeout's delay whole in the next pass, and that delay (0: none), given
/// what each fetch's links `found` in this pass and the whole delays `held` in it: timeouts worth
/// what this pass held of them and `damping` of the way to what it found (in seconds, summed over
/// the fetches; `damping` 1/2, the mean of the two, but after swings: [`damping_after`]), this
/// pass's timeouts first, then the ones it held that did not time out again, each group in an
/// order hashed from `seed` and `pass`, until that sum is reached. Held whole for one pass each
/// (every timeout found, and none held on), the passes alternated on 1,000 hosts at 4:1: a pass
/// that held the last one's timeouts took almost none and a job time of 20-30 s, the next one,
/// holding none, flooded the spines' ports (its blocks a mean 100-120 ms later than its slots were
/// held), and so on for 16 passes. The mean of the two damps that, though there the passes still
/// swung between 8.9 and 10.6 s from the 6th on until the damping was halved at each swing
/// ([`damping_after`]; sim-app-1000-cc-packet-path-acks, README); a quarter from the start came
/// down from the first pass's flood too slowly (still 9.9 s at the 11th). Where what is held is
/// what is found, this pass's timeouts are held
/// whole: on the loops check at 2 x 16 hosts the model's Cubic then comes within 4 % of ns-3's with
/// its timeouts (93 / 100 a run against 92 / 94), at 2 x 4 and 2 x 8 10-25 % late with more
/// (7-8 and 37-40 against 5 and 28-30; docs/results/sim-vs-ns3/loops.md).
fn whole_holds(found: &[f64], held: &[f64], damping: f64, seed: u64, pass: u32) -> Vec<f64> {
    let timeout = |f: f64| f >= TIMEOUT_HELD_S;
    let aim = (1.0 - damping) * held.iter().sum::<f64>()
        + damping * found.iter().filter(|&&f| timeout(f)).sum::<f64>();
    let key = |i: usize| crate::topology::splitmix(seed ^ (u64::from(pass) << 40) ^ i as u64);
    let mut new: Vec<usize> = (0..found.len()).filter(|&i| timeout(found[i])).collect();
    let mut old: Vec<usize> = (0..found.len())
        .filter(|&i| !timeout(found[i]) && held[i] > 0.0)
        .collect();
    new.sort_by_key(|&i| key(i));
    old.sort_by_key(|&i| key(i));
    let mut next = vec![0.0f64; found.len()];
    let mut sum = 0.0;
    for (i, delay) in new
        .into_iter()
        .map(|i| (i, found[i]))
        .chain(old.into_iter().map(|i| (i, held[i])))
    {
        if sum >= aim {
            break;
        }
        next[i] = delay;
        sum += delay;
    }
    next
}

/// A pass whose hold gap (mean held less found, s a fetch) changed sign from the pass before's and is
/// at least this large swung ([`damping_after`]). On the loops check (2 x 4 to 2 x 16 hosts) no
/// pass after the 2nd swings that far (its gaps within ±3 ms); on 1,000 hosts at 4:1 the damped
/// passes swung by 9-14 ms from the 6th on, between 8.9 and 10.6 s.
pub const SWING_S: f64 = 5e-3;

/// The damping of [`whole_holds`] after pass `pass` whose hold gap is `gap`, the pass before's
/// `last`: halved (to 1/16 at least) when this pass swung ([`SWING_S`]; from the 3rd pass, the 2nd
/// being the first to hold anything), else as it was. A damping of 1/2 throughout left the
/// 1,000-host passes swinging for the 16 passes the loops make; halved at each swing they end within
/// 8.9-9.3 s (sim-app-1000-cc-packet-path-acks, README; halved at every change of sign, with up to
/// 28 passes, they stayed within 8.8-9.4 s from the 13th). Halved at every change of sign, however
/// small, it took the 2 x 4 loops' Cubic 0.1 MB from +24 to +37 % of ns-3's mean over 30 seeds.
fn damping_after(damping: f64, pass: u32, gap: f64, last: f64) -> f64 {
    if pass >= 3 && gap * last < 0.0 && gap.abs() >= SWING_S {
        (0.5 * damping).max(1.0 / 16.0)
    } else {
        damping
    }
}

/// A fetch whose max-min rate is below this share of the fastest on a link is taken as limited
/// by another link of its path there.
const HELD_ELSEWHERE: f64 = 0.9;

/// A fetch's average rate in the max-min run (payload bytes/s; NaN when its end is not recorded).
fn maxmin_rate(t: &Traced) -> f64 {
    let d = t.maxmin_end_s - t.data_s;
    if d > 0.0 {
        t.bytes / d
    } else {
        f64::NAN
    }
}

/// How [`refine`] times the fetches' starts on the links it simulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Starts {
    /// Every link replays the max-min schedule's data starts; a fetch released by the delivery of
    /// one on the same link starts after that delivery there (the fabric's packet mode).
    Schedule,
    /// Paced by the receiver's link: first every receiver link (a path's last) that carries a
    /// request loop (a fetch released by another's delivery) is simulated, whether or not the
    /// max-min run saturated it, and the loop decides its fetches' starts there; every other link
    /// then starts each of those fetches at that paced start, never earlier than its max-min one
    /// (the applications' packet mode).
    Paced,
}

/// The packet-level FCT of every traced fetch (its request leg included), how much later its data
/// started than in the max-min schedule (the latest over its simulated links, at least 0), and the
/// summary. With `options.cluster_tolerance` (mode Schedule only) alike links are simulated once
/// per cluster ([`crate::linkcluster`]); a representative's own fetches take its results exactly
/// as without clustering, the other links' fetches take them by size and position.
///
/// Mode Paced closes the request loops over the whole path in passes: a receiver link's loop
/// releases a request when an earlier block is delivered there, and in the first pass that is all
/// it knows; a block held up on another link of its path (a spine port's timeouts) is delivered
/// end to end that much later, and holds its request slot until then. Each next pass delays each
/// release by how much later than on its receiver link its block is delivered end to end (its
/// largest delay over its links less its delay there), re-simulates every link with the starts the
/// loops then give, and stops once the paced starts moved by at most [`LOOP_SETTLED_S`] on average,
/// once that move stops shrinking ([`LOOP_PATIENCE`]), or after [`LOOP_PASSES`] passes. That
/// delay is found by bisection, fetch by fetch: the map from the delays assumed to the delays
/// found is decreasing (later releases, less load, shorter delays), so a delay found above the one
/// assumed brackets the settled one from below, one found at or under it from above; the first
/// bracket is [0, the open loop's]; with `tcp.path_acks` a retransmission timeout's delay is not
/// bisected but held whole in the next pass by as many fetches as [`whole_holds`] gives. The first pass alone releases on the receiver link's delivery, which overstates
/// the load elsewhere: at 4:1 on 1,000 hosts it lost 4.2 million packets at the spines where the
/// closed loops lose 60,000. The loops do not settle exactly where a few fetches' timeouts come and
/// go from pass to pass, and the last pass may be one where more of them time out: the result is
/// the pass whose loops are closed in the mean, the one whose request slots were held, on average
/// over the fetches, nearest as long as its links found their blocks delayed (|mean(held - found)|
/// least), among every pass but the first ([`pass_may_be_kept`]). Each fetch's bisection does not
/// converge where its timeouts come and go, and the pass whose paced starts moved least, kept
/// before, was one whose slots waited longer than its blocks did: on the 2 x 8 loops check (Cubic,
/// 0.3 MB, seed 1) its slots were held 6.1 ms a cross-leaf fetch where its links found 4.1 ms, the
/// uplink carried 13-23 cross-leaf fetches at a time where ns-3's carried 34-37, and it took 17
/// timeouts where ns-3 took 30 (docs/results/sim-vs-ns3/loops.md). Its summary is that pass's;
/// the events count every pass. With paced starts it gives every other
/// pass that could have been kept too (its FCTs and shifts), for the applications to be replayed
/// with each: where the loops do not settle, the kept pass is one of several near-fixed points,
/// and at 4:1 on 1,000 hosts the 12th pass, the first whose loops flooded the spines (the least
/// move's choice), gave 8.49 s where the calm passes 9-11 gave 8.28-8.29 s; by the hold gap the
/// 11th is kept (the 12th's blocks waited 7-11 ms a fetch longer than its slots were held).
#[allow(clippy::too_many_arguments)]
pub(crate) fn refine(
    topo: &Topology,
    tcp: &TcpModel,
    seed: u64,
    udp_on_link: &[f64],
    saturated: &[bool],
    traces: &[Traced],
    starts: Starts,
    options: PacketOptions,
) -> Result<Refined, String> {
    if options.cluster_tolerance.is_some() && starts == Starts::Paced {
        // the paced links depend on each other's starts: not independent, not clustered
        return Err("packet.cluster_tolerance: not available with paced starts".into());
    }
    let mut on_link: Vec<Vec<u32>> = vec![Vec::new(); topo.links.len()];
    for (i, t) in traces.iter().enumerate() {
        for &l in &t.path {
            on_link[l as usize].push(i as u32);
        }
    }
    let mut ctx = Ctx {
        topo,
        tcp,
        seed,
        solo: HashMap::new(),
        events: 0,
        lossless: match starts {
            Starts::Schedule => Vec::new(),
            Starts::Paced => {
                let mut host = vec![false; topo.names.len()];
                topo.hosts.iter().for_each(|&h| host[h as usize] = true);
                topo.links.iter().map(|l| host[l.from as usize]).collect()
            }
        },
        loop_slots: match starts {
            Starts::Paced => Some(options.loop_slots),
            Starts::Schedule => None,
        },
        twin: Vec::new(),
        reverse: Vec::new(),
        back: Vec::new(),
        back_next: Vec::new(),
    };
    if tcp.path_acks {
        if tcp.queued_acks {
            return Err("tcp.path_acks: not with tcp.queued_acks (one way for the ACKs)".into());
        }
        if starts != Starts::Paced {
            // a replayed schedule's passes would have to be counted, and they do not settle: the
            // two-tier 4:1 all-to-all's DCTCP went +16, +21, +23, +24 % of ns-3's mean in passes
            // 2-5 (docs/results/sim-vs-ns3/packet-mode-all.md)
            return Err(
                "tcp.path_acks: the applications' packet mode only (on a fabric's \
                        schedule its passes do not settle: docs/design-sim.md)"
                    .into(),
            );
        }
        ctx.reverse = cable_others(topo);
        ctx.back = vec![Vec::new(); topo.links.len()];
        ctx.back_next = vec![Vec::new(); topo.links.len()];
    }
    if tcp.queued_acks {
        // each link with the cable's other direction, but a sending host's own (lossless) link:
        // a Linux sender's qdisc is no switch port, and its fair queueing keeps ACKs out of bulk
        // data's way
        ctx.twin = cable_others(topo)
            .into_iter()
            .enumerate()
            .map(|(l, other)| {
                other
                    .filter(|&m| !ctx.is_lossless(l) && !ctx.is_lossless(m as usize))
                    // (the twin's queue takes no cross traffic: a cable with UDP keeps its ACKs free)
                    .filter(|&m| udp_on_link[l] == 0.0 && udp_on_link[m as usize] == 0.0)
            })
            .collect();
    }
    // the receiver links whose request loops pace the fetches (mode Paced), simulated first
    let mut loops = vec![false; topo.links.len()];
    if starts == Starts::Paced {
        for t in traces.iter().filter(|t| t.after.is_some()) {
            if let Some(&l) = t.path.last() {
                loops[l as usize] = true;
            }
        }
    }
    let order: Vec<usize> = (0..topo.links.len())
        .filter(|&l| loops[l])
        .chain((0..topo.links.len()).filter(|&l| !loops[l]))
        .filter(|&l| {
            let (n, cross) = (on_link[l].len(), udp_on_link[l]);
            let shared = n >= 2 || (n == 1 && cross > 0.0);
            // (the paths walked only for a link that would be simulated otherwise)
            loops[l]
                || shared
                    && (saturated[l] || cross > 0.0)
                    && (cross > 0.0 || !fed_by_one_link(topo, traces, &on_link[l], l))
        })
        .collect();
    let passes = match starts {
        Starts::Schedule => 1,
        Starts::Paced if !loops.iter().any(|&x| x) => 1,
        Starts::Paced => LOOP_PASSES,
    };
    #[cfg(test)]
    let passes = PASSES_CAP.with(std::cell::Cell::get).unwrap_or(passes);
    // per fetch: how much later than on its receiver link it is taken to be delivered end to end
    // (the next pass's releases wait that much longer), its bisection, and with path ACKs the
    // timeout's delay it holds whole instead (0: none; [`whole_holds`])
    let mut held = vec![0.0f64; traces.len()];
    let mut bisections = vec![Bisection::default(); traces.len()];
    let whole_timeouts = tcp.path_acks;
    let mut whole = vec![0.0f64; traces.len()];
    let (mut damping, mut last_gap) = (0.5, 0.0);
    let mut last_paced: Option<Vec<f64>> = None;
    let (mut least_moved, mut since_least) = (f64::INFINITY, 0);
    // the pass whose holds were nearest, in the mean, what its links found: its move and that gap
    let mut best: Option<(Pass, u32, f64, f64)> = None;
    // mode Paced: every pass that may be kept, its number, delays and shifts
    let mut candidates: Vec<(u32, f64, Vec<f64>, Vec<f64>)> = Vec::new();
    let mut pass = 0;
    loop {
        pass += 1;
        let out = one_pass(
            &mut ctx,
            traces,
            udp_on_link,
            &on_link,
            &order,
            &loops,
            starts,
            options,
            &held,
        )?;
        // how far the paced starts moved since the last pass, on average
        let moved = last_paced.as_ref().map_or(f64::INFINITY, |p| {
            p.iter()
                .zip(&out.paced)
                .map(|(a, b)| (a - b).abs())
                .sum::<f64>()
                / p.len().max(1) as f64
        });
        if moved < least_moved {
            (least_moved, since_least) = (moved, 0);
        } else {
            since_least += 1;
        }
        let mut settled = loops_stop(pass, passes, moved, since_least);
        // with path ACKs what this pass's links sent is the next one's ways back
        std::mem::swap(&mut ctx.back, &mut ctx.back_next);
        ctx.back_next.iter_mut().for_each(Vec::clear);
        // what each fetch's links found it delayed beyond its receiver link (its next hold's aim)
        let found: Vec<f64> = out
            .added
            .iter()
            .zip(&out.at_receiver)
            .map(|(a, r)| {
                let d = a - r;
                if d.is_finite() {
                    d.max(0.0)
                } else {
                    0.0
                }
            })
            .collect();
        let gap =
            held.iter().zip(&found).map(|(h, f)| h - f).sum::<f64>() / held.len().max(1) as f64;
        if !settled {
            let mut changed = false;
            if whole_timeouts {
                damping = damping_after(damping, pass, gap, last_gap);
                whole = whole_holds(&found, &whole, damping, ctx.seed, pass);
            }
            last_gap = gap;
            for (i, (h, b)) in held.iter_mut().zip(&mut bisections).enumerate() {
                let next = b.hold(found[i], whole_timeouts.then(|| whole[i]));
                changed |= next != *h;
                *h = next;
            }
            // unchanged, the next pass would be this one again
            settled = !changed;
        }
        let paced = out.paced.clone();
        let may = pass_may_be_kept(pass, settled);
        if may && starts == Starts::Paced {
            candidates.push((pass, gap, out.added.clone(), out.shift.clone()));
        }
        if may && best.as_ref().is_none_or(|b| gap.abs() < b.3.abs()) {
            best = Some((out, pass, moved, gap));
        }
        if settled {
            let (out, used, used_move, used_gap) = best.expect("a pass was made");
            let mut summary = out.summary;
            summary.passes = pass;
            summary.pass_used = used;
            summary.pass_move_s = if used > 1 { used_move } else { 0.0 };
            summary.pass_hold_gap_s = if used > 1 { used_gap } else { 0.0 };
            let mut others = Vec::new();
            for (p, g, added, shift) in candidates.into_iter().filter(|c| c.0 != used) {
                others.push((p, g, fcts(&mut ctx, traces, &added)?.0, shift));
            }
            let (fct, shift, summary) = finish(&mut ctx, traces, &out.added, out.shift, summary)?;
            return Ok((fct, shift, summary, others));
        }
        last_paced = Some(paced);
    }
}

/// One fetch's bisection of its hold ([`refine`]): the hold it gave last and its bracket.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Bisection {
    value: f64,
    lo: f64,
    hi: f64,
}

impl Bisection {
    /// The next hold, given what the fetch's links `found` with the last one: a delay found above
    /// it brackets the settled one from below, one at or under it from above; the bracket's middle.
    fn next(&mut self, found: f64) -> f64 {
        if found > self.value {
            self.lo = self.value;
            self.hi = self.hi.max(found);
        } else {
            self.hi = self.value;
        }
        self.value = 0.5 * (self.lo + self.hi);
        self.value
    }

    /// The next hold. With whole holds (`whole` Some: [`whole_holds`]): the timeout's delay given
    /// when above 0, else, when a timeout was `found` but is not held whole, the bisection's hold
    /// as it was, and the bisection's next otherwise; without (None) the bisection's next.
    fn hold(&mut self, found: f64, whole: Option<f64>) -> f64 {
        match whole {
            Some(d) if d > 0.0 => d,
            Some(_) if found >= TIMEOUT_HELD_S => self.value,
            _ => self.next(found),
        }
    }
}

/// Per link, its cable's other direction (the link from its end to its start; None: none).
fn cable_others(topo: &Topology) -> Vec<Option<u32>> {
    let mut by_ends: HashMap<(u32, u32), u32> = HashMap::new();
    for (m, k) in topo.links.iter().enumerate() {
        by_ends.insert((k.from, k.to), m as u32);
    }
    topo.links
        .iter()
        .map(|k| by_ends.get(&(k.to, k.from)).copied())
        .collect()
}

/// Whether every fetch of link `l` (`ids`) reaches it from one same link no faster than `l`: its
/// packets then arrive no faster than `l` sends them, and it cannot queue (the spine's downlink to
/// a leaf of a two-leaf fabric, behind the other leaf's uplink). Simulated alone, such a link would
/// see its fetches enter each at its own host link's rate and drop what the link before it already
/// dropped: at 4:1 with reducers' loops the model doubled the uplinks' drops and timeouts, which
/// ns-3's downlinks never see (docs/results/sim-vs-ns3/loops.md).
fn fed_by_one_link(topo: &Topology, traces: &[Traced], ids: &[u32], l: usize) -> bool {
    let mut from: Option<u32> = None;
    for &i in ids {
        let path = &traces[i as usize].path;
        let before = match path.iter().position(|&h| h as usize == l) {
            Some(k) if k > 0 => path[k - 1],
            _ => return false,
        };
        if from.is_some_and(|u| u != before) {
            return false;
        }
        from = Some(before);
    }
    from.is_some_and(|u| topo.links[u as usize].capacity <= topo.links[l].capacity)
}

/// What one pass of [`refine`] found: each fetch's largest delay over its simulated links
/// (`added`), its delay on its receiver link when that carries a loop (`at_receiver`, else 0), how
/// much later its data started than in the max-min schedule, its paced start, and the summary.
struct Pass {
    added: Vec<f64>,
    at_receiver: Vec<f64>,
    shift: Vec<f64>,
    paced: Vec<f64>,
    summary: PacketSummary,
}

/// One pass over the links of `order` (see [`refine`]); `held`: per fetch, how much later it was
/// delivered end to end than on its receiver link in the pass before (zeros in the first).
#[allow(clippy::too_many_arguments)]
fn one_pass(
    ctx: &mut Ctx,
    traces: &[Traced],
    udp_on_link: &[f64],
    on_link: &[Vec<u32>],
    order: &[usize],
    loops: &[bool],
    starts: Starts,
    options: PacketOptions,
    held: &[f64],
) -> Result<Pass, String> {
    let topo = ctx.topo;
    let mut summary = PacketSummary {
        mode: "packet",
        links_with_flows: on_link.iter().filter(|v| !v.is_empty()).count() as u32,
        links_simulated: 0,
        clusters: 0,
        links_represented: 0,
        largest_cluster: 0,
        cluster_tolerance: options.cluster_tolerance,
        flows: traces.len() as u64,
        timeouts: 0,
        drops: 0,
        marks: 0,
        flows_not_done: 0,
        events: 0,
        passes: 1,
        pass_used: 1,
        pass_move_s: 0.0,
        pass_hold_gap_s: 0.0,
        pass_job_times: Vec::new(),
        tiers: topo
            .tiers
            .iter()
            .map(|t| TierPackets {
                tier: t.clone(),
                links_simulated: 0,
                links_represented: 0,
                flows: 0,
                timeouts: 0,
                drops: 0,
                marks: 0,
            })
            .collect(),
    };
    // what each simulated link adds to each of its fetches
    let mut added = vec![0.0f64; traces.len()];
    let mut at_receiver = vec![0.0f64; traces.len()];
    let mut shift = vec![0.0f64; traces.len()];
    let mut pos: Vec<u32> = vec![u32::MAX; traces.len()];
    let mut paced: Vec<f64> = traces.iter().map(|t| t.data_s).collect();
    // each link's cluster representative (itself without clustering: every link is simulated)
    let mut rep_of = vec![u32::MAX; topo.links.len()];
    let mut cluster_size = vec![0u32; topo.links.len()];
    match options.cluster_tolerance {
        None => order.iter().for_each(|&l| rep_of[l] = l as u32),
        Some(tolerance) => {
            let features: Vec<Feature> = order
                .iter()
                .map(|&l| {
                    let flows = flows_at(
                        ctx,
                        traces,
                        &on_link[l],
                        l as u32,
                        true,
                        &paced,
                        held,
                        &mut pos,
                    );
                    let lossless = ctx.is_lossless(l);
                    let ends: Vec<f64> = on_link[l]
                        .iter()
                        .map(|&i| traces[i as usize].maxmin_end_s)
                        .collect();
                    let cap = topo.links[l].capacity;
                    Feature::new(cap, udp_on_link[l], lossless, &flows, &ends)
                })
                .collect();
            for (k, r) in cluster(&features, tolerance).into_iter().enumerate() {
                rep_of[order[k]] = order[r] as u32;
                cluster_size[order[r]] += 1;
            }
            summary.clusters = cluster_size.iter().filter(|&&n| n > 0).count() as u32;
            summary.largest_cluster = cluster_size.iter().copied().max().unwrap_or(0);
        }
    }
    // a representative's outcome for its cluster's other links, and its timeouts, drops and marks
    let mut transfers: HashMap<u32, (Transfer, [u64; 3])> = HashMap::new();
    // a twin's part of a duplex simulation made at its cable's first link in `order`
    let mut paired: HashMap<u32, LinkResult> = HashMap::new();
    let mut order_pos = vec![usize::MAX; topo.links.len()];
    order
        .iter()
        .enumerate()
        .for_each(|(k, &l)| order_pos[l] = k);
    for &l in order {
        if rep_of[l] != l as u32 {
            continue;
        }
        let ids = &on_link[l];
        let cross = udp_on_link[l];
        let keep_loop = starts == Starts::Schedule || loops[l];
        let l = l as u32;
        let r = match paired.remove(&l) {
            Some(r) => r,
            None => {
                let mut flows = flows_at(ctx, traces, ids, l, keep_loop, &paced, held, &mut pos);
                let twin = ctx
                    .twin
                    .get(l as usize)
                    .copied()
                    .flatten()
                    .filter(|&t| !on_link[t as usize].is_empty());
                match twin {
                    None if ctx.tcp.path_acks => {
                        let (sim, queues) = ctx.link_with_back(l, cross, flows, traces, ids);
                        let back: Vec<&[(u64, u64)]> =
                            queues.iter().map(|&m| ctx.queue_of(m)).collect();
                        let mut r = simulate_with(&sim, &back)?;
                        ctx.back_next[l as usize] = std::mem::take(&mut r.departures);
                        r
                    }
                    None => simulate(&ctx.link(l, cross, flows))?,
                    Some(t) => {
                        let n = flows.len();
                        let tk = starts == Starts::Schedule || loops[t as usize];
                        let back = flows_at(
                            ctx,
                            traces,
                            &on_link[t as usize],
                            t,
                            tk,
                            &paced,
                            held,
                            &mut pos,
                        );
                        flows.extend(back.into_iter().map(|mut f| {
                            f.reverse = true;
                            f.after = f.after.map(|a| a + n as u32);
                            f
                        }));
                        let other = ctx.link(t, udp_on_link[t as usize], Vec::new());
                        let mut sim = ctx.link(l, cross, flows);
                        sim.twin = Some(Twin {
                            link_bytes_per_s: other.link_bytes_per_s,
                            queue_bytes: other.queue_bytes,
                            red: other.red,
                        });
                        let r = simulate(&sim)?;
                        let pending = order_pos[t as usize] > order_pos[l as usize]
                            && rep_of[t as usize] == t;
                        if pending {
                            paired.insert(
                                t,
                                LinkResult {
                                    fct_s: r.fct_s[n..].to_vec(),
                                    start_s: r.start_s[n..].to_vec(),
                                    timeouts: r.timeouts[n..].to_vec(),
                                    drops: r.twin_drops,
                                    marks: r.twin_marks,
                                    twin_drops: 0,
                                    twin_marks: 0,
                                    cross_bytes_per_s: 0.0,
                                    end_s: r.end_s,
                                    events: 0,
                                    departures: Vec::new(),
                                },
                            );
                        }
                        LinkResult {
                            fct_s: r.fct_s[..n].to_vec(),
                            start_s: r.start_s[..n].to_vec(),
                            timeouts: r.timeouts[..n].to_vec(),
                            ..r
                        }
                    }
                }
            }
        };
        let timeouts = r.timeouts.iter().map(|&x| u64::from(x)).sum::<u64>();
        summary.links_simulated += 1;
        summary.timeouts += timeouts;
        summary.drops += r.drops;
        summary.marks += r.marks;
        let tier = &mut summary.tiers[topo.links[l as usize].tier as usize];
        tier.links_simulated += 1;
        tier.flows += ids.len() as u64;
        tier.timeouts += timeouts;
        tier.drops += r.drops;
        tier.marks += r.marks;
        ctx.events += r.events;
        let members = cluster_size[l as usize] > 1;
        let mut outcome = Vec::with_capacity(if members { ids.len() } else { 0 });
        for (k, &i) in ids.iter().enumerate() {
            let alone = ctx.alone(&traces[i as usize], l)?;
            // the largest delay of its links, not their sum: a fetch limited at two links at
            // once (its sender's and its receiver's host links in an all-to-all) waits once
            let d = r.fct_s[k] - alone;
            let a = &mut added[i as usize];
            *a = if d.is_nan() || a.is_nan() {
                f64::NAN
            } else {
                a.max(d)
            };
            let late = r.start_s[k] - traces[i as usize].data_s;
            shift[i as usize] = shift[i as usize].max(late);
            if loops[l as usize] {
                at_receiver[i as usize] = d;
                if r.start_s[k].is_finite() {
                    // never before its max-min start (the request cannot leave before it is issued)
                    paced[i as usize] = paced[i as usize].max(r.start_s[k]);
                }
            }
            if members {
                let t = &traces[i as usize];
                outcome.push((t.bytes, t.data_s, d, late));
            }
        }
        if members {
            let counts = [timeouts, r.drops, r.marks];
            transfers.insert(l, (Transfer::new(&outcome), counts));
        }
    }
    // the clusters' other links take their representative's delays, fetch by fetch
    for &l in order {
        let rep = rep_of[l];
        if rep == l as u32 {
            continue;
        }
        let (transfer, [timeouts, drops, marks]) = &transfers[&rep];
        let ids = &on_link[l];
        let fetches: Vec<(f64, f64)> = ids
            .iter()
            .map(|&i| (traces[i as usize].bytes, traces[i as usize].data_s))
            .collect();
        for (&i, (d, late)) in ids.iter().zip(transfer.take(&fetches, MSS)) {
            let a = &mut added[i as usize];
            *a = if d.is_nan() || a.is_nan() {
                f64::NAN
            } else {
                a.max(d)
            };
            shift[i as usize] = shift[i as usize].max(late);
        }
        summary.links_represented += 1;
        summary.timeouts += timeouts;
        summary.drops += drops;
        summary.marks += marks;
        let tier = &mut summary.tiers[topo.links[l].tier as usize];
        tier.links_represented += 1;
        tier.flows += ids.len() as u64;
        tier.timeouts += timeouts;
        tier.drops += drops;
        tier.marks += marks;
    }
    Ok(Pass {
        added,
        at_receiver,
        shift,
        paced,
        summary,
    })
}

/// Each fetch's FCT from the last pass: its request leg, its time alone on its path's slowest
/// link and the largest delay its links added.
fn finish(
    ctx: &mut Ctx,
    traces: &[Traced],
    added: &[f64],
    shift: Vec<f64>,
    mut summary: PacketSummary,
) -> Result<(Vec<f64>, Vec<f64>, PacketSummary), String> {
    let (fct, not_done) = fcts(ctx, traces, added)?;
    summary.flows_not_done += not_done;
    summary.events = ctx.events;
    Ok((fct, shift, summary))
}

/// Each fetch's FCT from a pass's delays `added` (see [`finish`]), and how many are not done.
fn fcts(ctx: &mut Ctx, traces: &[Traced], added: &[f64]) -> Result<(Vec<f64>, u64), String> {
    let topo = ctx.topo;
    let mut not_done = 0;
    let mut fct = Vec::with_capacity(traces.len());
    for (i, t) in traces.iter().enumerate() {
        let slowest = *t
            .path
            .iter()
            .min_by(|&&a, &&b| {
                let (ca, cb) = (
                    topo.links[a as usize].capacity,
                    topo.links[b as usize].capacity,
                );
                ca.total_cmp(&cb)
            })
            .expect("a remote fetch has a path");
        let v = (t.data_s - t.issued_s) + ctx.alone(t, slowest)? + added[i];
        if v.is_nan() {
            not_done += 1;
        }
        fct.push(v);
    }
    Ok((fct, not_done))
}

/// The flows link `l` is simulated with: its fetches `ids`, each as seen from `l` (`pos`: scratch,
/// all `u32::MAX`, left so). A fetch the max-min run held well below the fastest of the link's
/// enters no faster than its max-min rate; with `keep_loop` a fetch released by the delivery of
/// one on the same link starts after it (and `held` of that one later), else at its `paced` start.
#[allow(clippy::too_many_arguments)]
fn flows_at(
    ctx: &Ctx,
    traces: &[Traced],
    ids: &[u32],
    l: u32,
    keep_loop: bool,
    paced: &[f64],
    held: &[f64],
    pos: &mut [u32],
) -> Vec<LinkFlow> {
    for (k, &i) in ids.iter().enumerate() {
        pos[i as usize] = k as u32;
    }
    // the max-min average rate of each fetch here, and the fastest: a fetch well below the
    // fastest of this link's fetches was held back by another link of its path, and enters
    // here no faster than that (an oversubscribed uplink's fetches on their host links)
    let rates: Vec<f64> = ids
        .iter()
        .map(|&i| maxmin_rate(&traces[i as usize]))
        .collect();
    let top = rates
        .iter()
        .copied()
        .filter(|r| r.is_finite())
        .fold(0.0, f64::max);
    let flows = ids
        .iter()
        .zip(&rates)
        .map(|(&i, &rate)| {
            let t = &traces[i as usize];
            let mut f = ctx.flow_at(t, l);
            if rate.is_finite() && rate < HELD_ELSEWHERE * top {
                f.access_bytes_per_s = f.access_bytes_per_s.min(rate * WIRE / MSS);
            }
            // a fetch released by the delivery of one on the same link starts when that one is
            // delivered here (plus its request's leg): the in-flight limit's loop at packet level
            // (later by what its releaser was held up elsewhere on its path: `held`, mode Paced)
            if keep_loop {
                f.after = t
                    .after
                    .map(|a| pos[a as usize])
                    .filter(|&p| p != u32::MAX && ids.get(p as usize) == t.after.as_ref());
                f.hold_s = held[i as usize];
            } else {
                f.start_s = paced[i as usize];
            }
            // mode Paced: each fetch in its owner's request loop, on every link it crosses (the
            // whole loop on its receiver link, where a freed slot takes the next request)
            if let Some(slots) = ctx.loop_slots {
                f.loop_id = Some(t.r);
                f.loop_slots = slots;
            }
            f
        })
        .collect();
    for &i in ids {
        pos[i as usize] = u32::MAX;
    }
    flows
}

/// The packet-level FCTs of `traces` (from [`refine`]: `fct`, `shift`) put in the size buckets
/// `fct` (emptied first: they replace the max-min ones, as (FCT, FCT / ideal) per fetch), and
/// each owner's (`Traced::r` < `owners`) latest packet-level delivery: the request's time + its
/// data's shift + its FCT. An owner without traced fetches gets `-inf`; one with a fetch not done
/// within its link simulation's horizon, NaN (`f64::max` would drop it).
pub(crate) fn bucket_and_end(
    traces: &[Traced],
    fct: &[f64],
    shift: &[f64],
    edges: &[f64],
    buckets: &mut [Vec<(f64, f64)>],
    owners: usize,
) -> Vec<f64> {
    buckets.iter_mut().for_each(Vec::clear);
    let mut end = vec![f64::NEG_INFINITY; owners];
    for ((t, &f), &d) in traces.iter().zip(fct).zip(shift) {
        let b = edges.iter().take_while(|&&e| t.bytes >= e).count();
        buckets[b].push((f, f / t.ideal_s));
        let e = &mut end[t.r as usize];
        let at = t.issued_s + d + f;
        *e = if at.is_nan() || e.is_nan() {
            f64::NAN
        } else {
            e.max(at)
        };
    }
    end
}

#[cfg(test)]
#[path = "packet_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "packet_cluster_tests.rs"]
mod cluster_tests;
