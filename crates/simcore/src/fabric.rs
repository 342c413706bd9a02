//! A shuffle on a data-center fabric: all-to-all fetches as max-min fair fluid flows.
//!
//! Map task j of M writes its output on host ⌊j·H/M⌋; reduce task r of R runs on host ⌊r·H/R⌋
//! (each spread evenly over the H hosts), at most `cores_per_host` at a time per host (the others wait, FIFO). A reducer fetches one
//! block from every map task, in a seeded random order (as Spark shuffles its fetch requests),
//! keeping at most `max_reqs_in_flight` fetches and `max_bytes_in_flight` bytes outstanding
//! (one fetch always may go out: Spark's maxReqsInFlight / maxBytesInFlight, one block per
//! request). A block on the reducer's own host is read locally, off the network. A remote fetch's
//! request takes the path's one-way delay, its data is a fluid flow on the ECMP path from the
//! map host to the reducer host, and its last byte arrives one one-way delay after the fluid
//! finished: FCT = 2·delay + transfer time at the max-min rates.
//!
//! Cross traffic: UDP at a constant rate either takes its share first (the capacity the other
//! flows see is reduced by it; nothing is lost unless it alone exceeds a link) or is a
//! non-responsive flow capped at its rate inside the max-min allocation; TCP cross traffic is an
//! elastic flow (endless, or of a given size). Link failures take both directions of a cable
//! down at a time (and optionally back up); flows crossing it are rerouted by ECMP over the
//! remaining shortest paths, or wait until a path exists.
//!
//! With `tcp` (a [`TcpModel`]) the links carry the per-congestion-control correction of
//! [`crate::tcpmodel`], applied as in the applications engine: the solver shares
//! capacity × efficiency (less priority UDP), and a fetch whose data starts while links of its path
//! are saturated has their standing queues added to the one-way delay of its last byte. The ideal
//! FCT of the slowdown stays the nominal one (no queue, full capacity).
//!
//! Not modelled: packets, losses, slow start (every elastic flow is at its max-min rate at once),
//! queues and congestion-control differences beyond the `tcp` correction, CPU time of tasks, disk.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::completions::Completions;
use crate::fluid::{Engine, Events, Progress};
use crate::maxmin::{MaxMin, Recompute};
use crate::packet::{bucket_and_end, refine, PacketOptions, PacketSummary, Starts, Traced};
use crate::summary::{fct_buckets, heatmap, tier_results, LinkMeter};
pub use crate::summary::{FctBucket, Heatmap, TierResult};
use crate::tcpmodel::{Applied, LinkCorrection, TcpModel};
use crate::topology::{Topology, TopologySpec};

/// The most remote + local fetches of one run (maps × reducers).
pub const MAX_FETCHES: u64 = 20_000_000;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Sizes {
    Constant {
        bytes: f64,
    },
    /// Lognormal with this mean and σ of the underlying normal.
    Lognormal {
        mean_bytes: f64,
        sigma: f64,
    },
    /// Uniform draws from these sizes (a trace).
    Empirical {
        bytes: Vec<f64>,
    },
}

/// An explicit traffic matrix: fetch i moves `bytes[i]` from host `src[i]` to host `dst[i]`
/// (columns of equal length). Every destination host runs one fetching task that requests its
/// rows, in a seeded random order, through the shuffle's fetch window.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Matrix {
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub bytes: Vec<f64>,
}

/// The workload: an all-to-all (`maps` × `reducers` blocks of `sizes`) or a `matrix`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Shuffle {
    #[serde(default)]
    pub maps: u32,
    #[serde(default)]
    pub reducers: u32,
    #[serde(default)]
    pub sizes: Option<Sizes>,
    /// An explicit traffic matrix instead of the all-to-all (then no maps, reducers or sizes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<Matrix>,
    #[serde(default = "unbounded_reqs")]
    pub max_reqs_in_flight: u32,
    #[serde(default = "spark_bytes_in_flight")]
    pub max_bytes_in_flight: f64,
    #[serde(default)]
    pub start_s: f64,
}
fn unbounded_reqs() -> u32 {
    i32::MAX as u32 // Spark's default Int.MaxValue
}
fn spark_bytes_in_flight() -> f64 {
    48.0 * 1024.0 * 1024.0 // spark.reducer.maxSizeInFlight = 48m
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CrossKind {
    Udp,
    Tcp,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UdpMode {
    /// Served before every elastic flow (link capacity reduced by its rate).
    #[default]
    Priority,
    /// A flow capped at its rate inside the max-min allocation.
    Fair,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Cross {
    pub src: u32,
    pub dst: u32,
    pub kind: CrossKind,
    #[serde(default)]
    pub rate_bytes_per_s: f64,
    #[serde(default)]
    pub udp_mode: UdpMode,
    #[serde(default)]
    pub start_s: f64,
    #[serde(default)]
    pub stop_s: Option<f64>,
    /// TCP: bytes to send (absent: until `stop_s` or the end of the shuffle).
    #[serde(default)]
    pub bytes: Option<f64>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Failure {
    pub a: String,
    pub b: String,
    pub down_s: f64,
    #[serde(default)]
    pub up_s: Option<f64>,
}

/// Which model produces the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Flow level: max-min fair rates (with the `tcp` correction when given). The fast mode.
    #[default]
    Maxmin,
    /// Packet-faithful: the max-min schedule's fetches re-timed by per-link packet-level
    /// simulations ([`crate::packet`]). Needs `tcp`.
    Packet,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct FabricConfig {
    pub topology: TopologySpec,
    #[serde(default = "one")]
    pub cores_per_host: u32,
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub recompute: Recompute,
    pub shuffle: Shuffle,
    #[serde(default)]
    pub cross: Vec<Cross>,
    #[serde(default)]
    pub failures: Vec<Failure>,
    #[serde(default = "default_edges")]
    pub fct_bucket_edges_bytes: Vec<f64>,
    #[serde(default = "default_bins")]
    pub heatmap_bins: u32,
    /// Congestion control and queue discipline of the fabric's TCP flows: a per-link-class
    /// correction from the packet-level probe ([`crate::tcpmodel`]). Absent: pure max-min.
    #[serde(default)]
    pub tcp: Option<TcpModel>,
    #[serde(default)]
    pub mode: Mode,
    /// Options of the packet mode (clustering of alike links); the max-min mode ignores them.
    #[serde(default)]
    pub packet: PacketOptions,
}
fn one() -> u32 {
    1
}
fn default_edges() -> Vec<f64> {
    vec![1e5, 1e6, 1e7, 1e8]
}
fn default_bins() -> u32 {
    60
}

#[derive(Debug, Clone, Serialize)]
pub struct CrossResult {
    pub delivered_bytes: f64,
    pub active_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FabricResult {
    pub hosts: u32,
    pub links: u32,
    /// From the shuffle's start to its last reducer's end; null if fetches were stranded.
    pub shuffle_completion_s: Option<f64>,
    pub reducers_done: u32,
    pub reducer_finish_s: Vec<f64>,
    pub remote_fetches: u64,
    pub local_fetches: u64,
    pub remote_bytes: f64,
    pub fct: Vec<FctBucket>,
    pub tiers: Vec<TierResult>,
    pub heatmap: Heatmap,
    pub cross: Vec<CrossResult>,
    pub rerouted_flows: u64,
    pub stranded_flows: u64,
    pub end_s: f64,
    pub events: u64,
    pub solves: u64,
    /// flows whose rates were recomputed, summed over the solves
    pub flows_solved: u64,
    /// The probe's correction per link class (with a `tcp` model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_links: Option<Vec<LinkCorrection>>,
    /// The packet-level pass (`mode = "packet"` only; absent: the max-min mode produced this).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packet: Option<PacketSummary>,
}

impl FabricConfig {
    pub fn validate(&self) -> Result<(), String> {
        let s = &self.shuffle;
        let size_ok = |b: f64| b.is_finite() && b > 0.0 && b <= 1e15;
        if let Some(m) = &s.matrix {
            if s.maps != 0 || s.reducers != 0 || s.sizes.is_some() {
                return Err(
                    "shuffle: a matrix replaces maps, reducers and sizes (give one or the other)"
                        .into(),
                );
            }
            if m.src.len() != m.dst.len() || m.src.len() != m.bytes.len() {
                return Err("shuffle.matrix: src, dst and bytes must have the same length".into());
            }
            if m.src.is_empty() || m.src.len() as u64 > MAX_FETCHES {
                return Err(format!(
                    "shuffle.matrix: between 1 and {MAX_FETCHES} fetches"
                ));
            }
            for i in 0..m.src.len() {
                if m.src[i] == m.dst[i] {
                    return Err(format!(
                        "shuffle.matrix[{i}]: src and dst are the same host ({})",
                        m.src[i]
                    ));
                }
                if !size_ok(m.bytes[i]) {
                    return Err(format!(
                        "shuffle.matrix[{i}]: bytes must be in (0, 1e15], got {}",
                        m.bytes[i]
                    ));
                }
            }
        } else {
            if s.maps == 0 || s.reducers == 0 {
                return Err("shuffle: maps and reducers must be > 0".into());
            }
            if s.maps as u64 * s.reducers as u64 > MAX_FETCHES {
                return Err(format!(
                    "shuffle: maps × reducers exceeds {MAX_FETCHES} fetches"
                ));
            }
        }
        if s.max_reqs_in_flight == 0
            || !(s.max_bytes_in_flight.is_finite() && s.max_bytes_in_flight > 0.0)
        {
            return Err("shuffle: max_reqs_in_flight and max_bytes_in_flight must be > 0".into());
        }
        if !(s.start_s.is_finite() && s.start_s >= 0.0) {
            return Err("shuffle: start_s must be >= 0".into());
        }
        match &s.sizes {
            None if s.matrix.is_none() => return Err("shuffle: sizes (or a matrix) needed".into()),
            Some(Sizes::Constant { bytes }) if !size_ok(*bytes) => {
                return Err("shuffle.sizes: bytes must be in (0, 1e15]".into())
            }
            Some(Sizes::Lognormal { mean_bytes, sigma })
                if !(size_ok(*mean_bytes) && sigma.is_finite() && (0.0..=5.0).contains(sigma)) =>
            {
                return Err("shuffle.sizes: mean_bytes in (0, 1e15], sigma in [0, 5]".into())
            }
            Some(Sizes::Empirical { bytes })
                if bytes.is_empty() || !bytes.iter().all(|&b| size_ok(b)) =>
            {
                return Err("shuffle.sizes: a non-empty list of sizes in (0, 1e15]".into())
            }
            _ => {}
        }
        if self.cores_per_host == 0 {
            return Err("cores_per_host must be > 0".into());
        }
        self.packet.validate()?;
        if let Some(t) = &self.tcp {
            t.validate()?;
        }
        if self.mode == Mode::Packet {
            if self.tcp.is_none() {
                return Err(
                    "mode: 'packet' needs a tcp model (the congestion control and the \
                            ports' queues to simulate)"
                        .into(),
                );
            }
            if !self.failures.is_empty() {
                return Err("failures: link failures are not modelled in mode 'packet'".into());
            }
            if let Some(i) = self.cross.iter().position(|c| c.kind != CrossKind::Udp) {
                return Err(format!(
                    "cross[{i}]: TCP cross traffic is not modelled in mode 'packet' (UDP only)"
                ));
            }
        }
        if self.heatmap_bins == 0 || self.heatmap_bins > 10_000 {
            return Err("heatmap_bins must be in [1, 10000]".into());
        }
        if self.fct_bucket_edges_bytes.len() > 64
            || self
                .fct_bucket_edges_bytes
                .windows(2)
                .any(|w| w[0].partial_cmp(&w[1]) != Some(std::cmp::Ordering::Less))
        {
            return Err("fct_bucket_edges_bytes: at most 64 increasing sizes".into());
        }
        for (i, c) in self.cross.iter().enumerate() {
            let t_ok = c.start_s.is_finite() && c.start_s >= 0.0;
            let stop_ok = c.stop_s.is_none_or(|s| s.is_finite() && s >= c.start_s);
            if !(t_ok && stop_ok) {
                return Err(format!("cross[{i}]: start_s >= 0 and stop_s >= start_s"));
            }
            if c.kind == CrossKind::Udp
                && !(c.rate_bytes_per_s.is_finite() && c.rate_bytes_per_s > 0.0)
            {
                return Err(format!("cross[{i}]: UDP needs rate_bytes_per_s > 0"));
            }
            if c.bytes.is_some_and(|b| !size_ok(b)) {
                return Err(format!("cross[{i}]: bytes must be in (0, 1e15]"));
            }
        }
        for (i, f) in self.failures.iter().enumerate() {
            let ok = f.down_s.is_finite() && f.down_s >= 0.0;
            if !(ok && f.up_s.is_none_or(|u| u.is_finite() && u >= f.down_s)) {
                return Err(format!("failures[{i}]: down_s >= 0 and up_s >= down_s"));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    ShuffleStart,
    /// the request of reducer r for map m reached the map host: its data starts
    FetchData {
        r: u32,
        m: u32,
        bytes: f64,
        issued_s: f64,
        /// the traced fetch whose delivery released this request (mode 'packet'; `u32::MAX`: none)
        after: u32,
    },
    /// the last byte of a fetch reached the reducer
    Delivered {
        r: u32,
        m: u32,
        bytes: f64,
        issued_s: f64,
        ideal_s: f64,
    },
    CrossStart(u32),
    CrossStop(u32),
    LinkDown(u32),
    LinkUp(u32),
}

#[derive(Debug, Clone, Copy)]
enum Owner {
    Fetch {
        r: u32,
        m: u32,
        issued_s: f64,
        ideal_s: f64,
        delay_s: f64,
    },
    Cross(u32),
}

#[derive(Debug, Clone, Copy)]
struct Flow {
    owner: Owner,
    src: u32,
    dst: u32,
    key: u64,
    cap: f64,
    p: Progress,
}

struct Reducer {
    host: u32,
    /// (map, bytes) still to request, in request order (popped from the back)
    todo: Vec<(u32, f64)>,
    reqs: u32,
    bytes_in_flight: f64,
    outstanding: u32,
}

struct Sim<'a> {
    cfg: &'a FabricConfig,
    topo: Topology,
    mm: MaxMin,
    now: f64,
    events: Events<Ev>,
    /// Virtual time each flow slot completes at its current rate (infinity: free, or never).
    done_at: Completions,
    flows: Vec<Option<Flow>>,
    stranded: Vec<Flow>,
    reducers: Vec<Reducer>,
    waiting: Vec<std::collections::VecDeque<u32>>,
    running: Vec<u32>,
    reducer_finish: Vec<f64>,
    reducers_done: u32,
    has_delay: bool,
    nominal: Vec<f64>,
    /// The TCP model's correction per link (none: efficiency 1, no standing queues).
    tcp: Applied,
    prio: Vec<f64>,
    prio_path: Vec<Option<Vec<u32>>>,
    cross_slot: Vec<Option<u32>>,
    cross_out: Vec<CrossResult>,
    cross_since: Vec<f64>,
    failure_links: Vec<Vec<u32>>,
    // accounting
    meter: LinkMeter,
    fct: Vec<Vec<(f64, f64)>>,
    remote: u64,
    local: u64,
    remote_bytes: f64,
    rerouted: u64,
    n_events: u64,
    /// The remote fetches as scheduled, and the links the schedule saturated (mode 'packet').
    trace: Vec<Traced>,
    saturated: Vec<bool>,
    /// Trace index per (reducer, map) key, and the fetch whose delivery is issuing requests now.
    trace_index: std::collections::HashMap<u64, u32>,
    releasing: u32,
    /// With a matrix: the rows each reducer (destination host) fetches.
    rows: Vec<Vec<u32>>,
}

/// Host of task `i` of `n` spread evenly over `hosts` (⌊i·H/n⌋: every host when n ≥ H, hosts
/// evenly apart across racks when n < H).
pub(crate) fn spread(i: u32, n: u32, hosts: u32) -> u32 {
    (i as u64 * hosts as u64 / n as u64) as u32
}

impl<'a> Sim<'a> {
    fn push(&mut self, t: f64, ev: Ev) {
        self.events.push(t, ev);
    }

    fn sizes_for(&self, r: u32) -> Vec<(u32, f64)> {
        let s = &self.cfg.shuffle;
        let mut rng = ChaCha8Rng::seed_from_u64(self.cfg.seed ^ (0xA5A5_0000_0000 + r as u64));
        let mut v: Vec<(u32, f64)> = match (&s.matrix, &s.sizes) {
            (Some(m), _) => self.rows[r as usize]
                .iter()
                .map(|&i| (i, m.bytes[i as usize]))
                .collect(),
            (None, Some(sizes)) => {
                let mut draw = || -> f64 {
                    match sizes {
                        Sizes::Constant { bytes } => *bytes,
                        Sizes::Lognormal { mean_bytes, sigma } => {
                            let mu = mean_bytes.ln() - sigma * sigma / 2.0;
                            let (u1, u2): (f64, f64) = (rng.random(), rng.random());
                            let z = (-2.0 * (1.0 - u1).ln()).sqrt()
                                * (std::f64::consts::TAU * u2).cos();
                            (mu + sigma * z).exp().clamp(1.0, 1e15)
                        }
                        Sizes::Empirical { bytes } => bytes[rng.random_range(0..bytes.len())],
                    }
                };
                (0..s.maps).map(|m| (m, draw())).collect()
            }
            (None, None) => Vec::new(),
        };
        // Fisher-Yates with the same stream: the request order
        for i in (1..v.len()).rev() {
            let j = rng.random_range(0..=i);
            v.swap(i, j);
        }
        v.reverse(); // popped from the back
        v
    }

    /// The host block `m` is on: map task m's, or row m's source with a matrix.
    fn map_host(&self, m: u32) -> u32 {
        match &self.cfg.shuffle.matrix {
            Some(mx) => mx.src[m as usize],
            None => spread(m, self.cfg.shuffle.maps, self.topo.hosts.len() as u32),
        }
    }

    /// A fetch's key (its ECMP hash and trace entry): reducer × maps + map, or the matrix row.
    fn key(&self, r: u32, m: u32) -> u64 {
        match self.cfg.shuffle.matrix {
            Some(_) => m as u64,
            None => r as u64 * self.cfg.shuffle.maps as u64 + m as u64,
        }
    }

    /// The capacity the solver shares on link `l`: its nominal × the TCP efficiency, less UDP.
    fn solver_capacity(&self, l: u32) -> f64 {
        let li = l as usize;
        (self.tcp.usable(l, self.nominal[li]) - self.prio[li]).max(0.0)
    }

    /// The standing queues of `path`'s saturated links now (0 without a TCP model).
    fn queue_delay(&self, path: &[u32]) -> f64 {
        self.tcp
            .path_queue_delay(path, |l| self.mm.link_load(l), |l| self.solver_capacity(l))
    }

    fn path_delay(&self, path: &[u32]) -> f64 {
        path.iter()
            .map(|&l| self.topo.links[l as usize].delay_s)
            .sum()
    }

    fn start_reducer(&mut self, r: u32) {
        let todo = self.sizes_for(r);
        let red = &mut self.reducers[r as usize];
        red.outstanding = todo.len() as u32;
        red.todo = todo;
        let host = red.host;
        // local blocks are read at once, off the network
        let local: Vec<usize> = (0..self.reducers[r as usize].todo.len())
            .filter(|&i| self.map_host(self.reducers[r as usize].todo[i].0) == host)
            .collect();
        for &i in local.iter().rev() {
            self.reducers[r as usize].todo.remove(i);
            self.reducers[r as usize].outstanding -= 1;
            self.local += 1;
        }
        self.issue(r);
        self.check_done(r);
    }

    fn issue(&mut self, r: u32) {
        let s = &self.cfg.shuffle;
        loop {
            let red = &self.reducers[r as usize];
            let Some(&(m, bytes)) = red.todo.last() else {
                return;
            };
            let fits = red.reqs == 0
                || (red.reqs < s.max_reqs_in_flight
                    && red.bytes_in_flight + bytes <= s.max_bytes_in_flight);
            if !fits {
                return;
            }
            let red = &mut self.reducers[r as usize];
            red.todo.pop();
            red.reqs += 1;
            red.bytes_in_flight += bytes;
            let key = self.key(r, m);
            let (src, dst) = (self.map_host(m), self.reducers[r as usize].host);
            let delay = match self.has_delay {
                true => self
                    .topo
                    .route(src, dst, key)
                    .map_or(0.0, |p| self.path_delay(&p)),
                false => 0.0,
            };
            let ev = Ev::FetchData {
                r,
                m,
                bytes,
                issued_s: self.now,
                after: self.releasing,
            };
            if delay > 0.0 {
                self.push(self.now + delay, ev);
            } else {
                self.handle(ev);
            }
        }
    }

    fn check_done(&mut self, r: u32) {
        let red = &self.reducers[r as usize];
        if red.outstanding > 0 {
            return;
        }
        let h = red.host as usize;
        self.reducer_finish[r as usize] = self.now;
        self.reducers_done += 1;
        self.reducers[r as usize].todo = Vec::new(); // its memory back
        self.running[h] -= 1;
        if let Some(next) = self.waiting[h].pop_front() {
            self.running[h] += 1;
            self.start_reducer(next);
        }
    }

    /// Put a flow on the network along its ECMP path (or strand it if there is none).
    fn place(&mut self, mut f: Flow) {
        f.p.t0 = self.now;
        f.p.rate = 0.0;
        match self.topo.route(f.src, f.dst, f.key) {
            Some(p) if !p.is_empty() => {
                let id = self.mm.add(&p, f.cap) as usize;
                if self.flows.len() <= id {
                    self.flows.resize(id + 1, None);
                }
                self.done_at.set(id as u32, f64::INFINITY);
                if let Owner::Cross(i) = f.owner {
                    self.cross_slot[i as usize] = Some(id as u32);
                }
                self.flows[id] = Some(f);
            }
            _ => self.stranded.push(f),
        }
    }

    /// Take a flow off the network, its bytes sent counted up to now.
    fn unplace(&mut self, id: u32) -> Flow {
        let mut f = self.flows[id as usize].take().expect("flow");
        f.p.advance(self.now);
        self.done_at.set(id, f64::INFINITY);
        self.mm.remove(id);
        if let Owner::Cross(i) = f.owner {
            self.cross_slot[i as usize] = None;
        }
        f
    }

    fn set_prio(&mut self, path: &[u32], delta: f64) {
        for &l in path {
            self.prio[l as usize] += delta;
            let cap = self.solver_capacity(l);
            self.mm.set_capacity(l, cap);
        }
    }

    fn handle(&mut self, ev: Ev) {
        self.n_events += 1;
        match ev {
            Ev::ShuffleStart => {
                for r in 0..self.reducers.len() as u32 {
                    let h = self.reducers[r as usize].host as usize;
                    if self.running[h] < self.cfg.cores_per_host {
                        self.running[h] += 1;
                        self.start_reducer(r);
                    } else {
                        self.waiting[h].push_back(r);
                    }
                }
            }
            Ev::FetchData {
                r,
                m,
                bytes,
                issued_s,
                after,
            } => {
                let (src, dst) = (self.map_host(m), self.reducers[r as usize].host);
                let key = self.key(r, m);
                let (ideal, delay) = match self.topo.route(src, dst, key) {
                    Some(p) => {
                        let slowest = p
                            .iter()
                            .map(|&l| self.nominal[l as usize])
                            .fold(f64::INFINITY, f64::min);
                        let d = self.path_delay(&p);
                        let ideal = bytes / slowest + 2.0 * d;
                        if self.cfg.mode == Mode::Packet {
                            self.trace_index.insert(key, self.trace.len() as u32);
                            self.trace.push(Traced {
                                r,
                                issued_s,
                                data_s: self.now,
                                bytes,
                                ideal_s: ideal,
                                path: p.clone(),
                                after: (after != u32::MAX).then_some(after),
                                maxmin_end_s: f64::NAN,
                            });
                        }
                        (ideal, d + self.queue_delay(&p))
                    }
                    None => (f64::NAN, 0.0),
                };
                self.remote += 1;
                self.remote_bytes += bytes;
                self.place(Flow {
                    owner: Owner::Fetch {
                        r,
                        m,
                        issued_s,
                        ideal_s: ideal,
                        delay_s: delay,
                    },
                    src,
                    dst,
                    key,
                    cap: f64::INFINITY,
                    p: Progress::new(bytes, self.now),
                });
            }
            Ev::Delivered {
                r,
                m,
                bytes,
                issued_s,
                ideal_s,
            } => {
                let fct = self.now - issued_s;
                let edges = &self.cfg.fct_bucket_edges_bytes;
                let b = edges.iter().take_while(|&&e| bytes >= e).count();
                self.fct[b].push((fct, fct / ideal_s));
                let red = &mut self.reducers[r as usize];
                red.reqs -= 1;
                red.bytes_in_flight -= bytes;
                red.outstanding -= 1;
                // the requests this delivery releases follow it (the packet mode keeps the loop)
                let key = self.key(r, m);
                self.releasing = self.trace_index.get(&key).copied().unwrap_or(u32::MAX);
                self.issue(r);
                self.releasing = u32::MAX;
                self.check_done(r);
            }
            Ev::CrossStart(i) => {
                let c = &self.cfg.cross[i as usize];
                self.cross_since[i as usize] = self.now;
                let key = u64::MAX - i as u64;
                if c.kind == CrossKind::Udp && c.udp_mode == UdpMode::Priority {
                    if let Some(p) = self.topo.route(c.src, c.dst, key) {
                        self.set_prio(&p, c.rate_bytes_per_s);
                        self.prio_path[i as usize] = Some(p);
                    }
                    return;
                }
                let cap = if c.kind == CrossKind::Udp {
                    c.rate_bytes_per_s
                } else {
                    f64::INFINITY
                };
                self.place(Flow {
                    owner: Owner::Cross(i),
                    src: c.src,
                    dst: c.dst,
                    key,
                    cap,
                    p: Progress::new(c.bytes.unwrap_or(f64::INFINITY), self.now),
                });
            }
            Ev::CrossStop(i) => {
                self.stop_cross(i);
            }
            Ev::LinkDown(i) | Ev::LinkUp(i) => {
                let up = matches!(ev, Ev::LinkUp(_));
                let links = self.failure_links[i as usize].clone();
                for &l in &links {
                    self.topo.set_up(l, up);
                    let nominal = if up {
                        self.topo.links[l as usize].capacity
                    } else {
                        0.0
                    };
                    self.nominal[l as usize] = nominal;
                    self.mm.set_capacity(l, self.solver_capacity(l));
                }
                if up {
                    for f in std::mem::take(&mut self.stranded) {
                        self.place(f);
                    }
                } else {
                    let mut moved: Vec<u32> = Vec::new();
                    for &l in &links {
                        moved.extend(self.mm.link_flows(l).iter().copied());
                    }
                    moved.sort_unstable();
                    moved.dedup();
                    for id in moved {
                        let f = self.unplace(id);
                        self.rerouted += 1;
                        self.place(f);
                    }
                }
                // priority UDP follows the new routes
                for c in 0..self.cfg.cross.len() {
                    if let Some(p) = self.prio_path[c].take() {
                        self.set_prio(&p, -self.cfg.cross[c].rate_bytes_per_s);
                        let key = u64::MAX - c as u64;
                        let (s, d) = (self.cfg.cross[c].src, self.cfg.cross[c].dst);
                        if let Some(np) = self.topo.route(s, d, key) {
                            self.set_prio(&np, self.cfg.cross[c].rate_bytes_per_s);
                            self.prio_path[c] = Some(np);
                        }
                    }
                }
            }
        }
    }

    fn stop_cross(&mut self, i: u32) {
        let c = &self.cfg.cross[i as usize];
        let rate = c.rate_bytes_per_s;
        if let Some(p) = self.prio_path[i as usize].take() {
            // delivered: its rate, less whatever the path could not carry
            let carried = p
                .iter()
                .map(|&l| self.nominal[l as usize].min(rate))
                .fold(rate, f64::min);
            self.cross_out[i as usize].delivered_bytes +=
                carried * (self.now - self.cross_since[i as usize]);
            self.set_prio(&p, -rate);
        }
        if let Some(id) = self.cross_slot[i as usize] {
            let f = self.unplace(id);
            self.cross_out[i as usize].delivered_bytes += f.p.sent;
        }
        self.cross_out[i as usize].active_s += self.now - self.cross_since[i as usize];
    }

    fn complete(&mut self, id: u32) {
        let f = self.unplace(id);
        match f.owner {
            Owner::Fetch {
                r,
                m,
                issued_s,
                ideal_s,
                delay_s,
            } => {
                if let Some(&i) = self.trace_index.get(&self.key(r, m)) {
                    self.trace[i as usize].maxmin_end_s = self.now;
                }
                let ev = Ev::Delivered {
                    r,
                    m,
                    bytes: f.p.bytes,
                    issued_s,
                    ideal_s,
                };
                if delay_s > 0.0 {
                    self.push(self.now + delay_s, ev);
                } else {
                    self.handle(ev);
                }
            }
            Owner::Cross(i) => {
                self.cross_out[i as usize].delivered_bytes += f.p.bytes;
                self.cross_out[i as usize].active_s += self.now - self.cross_since[i as usize];
                self.cross_since[i as usize] = self.now;
            }
        }
    }

    fn run(&mut self) {
        let (mut solved, mut touched) = (Vec::new(), Vec::new());
        self.run_events(&mut solved, &mut touched);
        // endless flows end with the run
        for i in 0..self.cfg.cross.len() as u32 {
            if self.prio_path[i as usize].is_some() || self.cross_slot[i as usize].is_some() {
                self.stop_cross(i);
            }
        }
        self.settle(&mut solved, &mut touched);
        self.meter.finish(self.now);
    }
}

impl Engine for Sim<'_> {
    type Ev = Ev;

    fn now(&self) -> f64 {
        self.now
    }
    fn set_now(&mut self, t: f64) {
        self.now = t;
    }
    fn events(&mut self) -> &mut Events<Ev> {
        &mut self.events
    }
    fn completions(&mut self) -> &mut Completions {
        &mut self.done_at
    }
    fn solver(&mut self) -> &mut MaxMin {
        &mut self.mm
    }
    fn meter(&mut self) -> &mut LinkMeter {
        &mut self.meter
    }
    fn topology(&self) -> &Topology {
        &self.topo
    }
    fn progress(&mut self, id: u32) -> &mut Progress {
        &mut self.flows[id as usize].as_mut().expect("solved flow").p
    }
    fn holds_flow(&self, id: u32) -> bool {
        self.flows[id as usize].is_some()
    }
    /// The solved load plus the priority UDP the link can carry.
    fn link_load(&self, l: u32) -> f64 {
        let li = l as usize;
        self.mm.link_load(l) + self.prio[li].min(self.nominal[li])
    }
    /// The run ends with the shuffle (cross traffic and later events too).
    fn finished(&self) -> bool {
        self.reducers_done as usize == self.reducers.len()
    }
    fn complete(&mut self, id: u32) {
        Sim::complete(self, id);
    }
    fn handle(&mut self, ev: Ev) {
        Sim::handle(self, ev);
    }
    fn loaded(&mut self, l: u32, load: f64) {
        if self.cfg.mode == Mode::Packet && load >= self.solver_capacity(l) * (1.0 - 1e-6) {
            self.saturated[l as usize] = true;
        }
    }
}

pub fn run_fabric(cfg: &FabricConfig) -> Result<FabricResult, String> {
    cfg.validate()?;
    let mut topo = Topology::build(&cfg.topology, cfg.seed)?;
    let h = topo.hosts.len() as u32;
    for (i, c) in cfg.cross.iter().enumerate() {
        if c.src >= h || c.dst >= h || c.src == c.dst {
            return Err(format!(
                "cross[{i}]: src and dst must be two hosts in [0, {h})"
            ));
        }
    }
    let mut failure_links = Vec::new();
    for (i, f) in cfg.failures.iter().enumerate() {
        let links = topo
            .cable(&f.a, &f.b)
            .ok_or_else(|| format!("failures[{i}]: no link between {:?} and {:?}", f.a, f.b))?;
        failure_links.push(links);
    }
    let nominal: Vec<f64> = topo.links.iter().map(|l| l.capacity).collect();
    let n_links = nominal.len();
    let n_tiers = topo.tiers.len();
    let tcp = Applied::new(cfg.tcp.as_ref(), &mut topo)?;
    let usable: Vec<f64> = (0..n_links)
        .map(|l| tcp.usable(l as u32, nominal[l]))
        .collect();
    // with a matrix, one reducer per destination host (in host order) fetching its rows
    let (hosts, rows): (Vec<u32>, Vec<Vec<u32>>) = match &cfg.shuffle.matrix {
        Some(m) => {
            let mut by_dst: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
            for (i, (&s, &d)) in m.src.iter().zip(&m.dst).enumerate() {
                if s >= h || d >= h {
                    return Err(format!(
                        "shuffle.matrix[{i}]: src {s} and dst {d} must be hosts in [0, {h})"
                    ));
                }
                by_dst.entry(d).or_default().push(i as u32);
            }
            by_dst.into_iter().unzip()
        }
        None => (
            (0..cfg.shuffle.reducers)
                .map(|r| spread(r, cfg.shuffle.reducers, h))
                .collect(),
            Vec::new(),
        ),
    };
    let n_reducers = hosts.len();
    let reducers = hosts
        .into_iter()
        .map(|host| Reducer {
            host,
            todo: Vec::new(),
            reqs: 0,
            bytes_in_flight: 0.0,
            outstanding: 0,
        })
        .collect();
    let nc = cfg.cross.len();
    let mut sim = Sim {
        cfg,
        mm: MaxMin::new(&usable, cfg.recompute),
        now: 0.0,
        events: Events::default(),
        done_at: Completions::default(),
        flows: Vec::new(),
        stranded: Vec::new(),
        reducers,
        waiting: vec![Default::default(); h as usize],
        running: vec![0; h as usize],
        reducer_finish: vec![f64::NAN; n_reducers],
        reducers_done: 0,
        has_delay: topo.links.iter().any(|l| l.delay_s > 0.0),
        nominal,
        tcp,
        prio: vec![0.0; n_links],
        prio_path: vec![None; nc],
        cross_slot: vec![None; nc],
        cross_out: vec![
            CrossResult {
                delivered_bytes: 0.0,
                active_s: 0.0
            };
            nc
        ],
        cross_since: vec![0.0; nc],
        failure_links,
        meter: LinkMeter::new(n_links, n_tiers, cfg.heatmap_bins),
        fct: vec![Vec::new(); cfg.fct_bucket_edges_bytes.len() + 1],
        remote: 0,
        local: 0,
        remote_bytes: 0.0,
        rerouted: 0,
        n_events: 0,
        trace: Vec::new(),
        saturated: vec![false; n_links],
        trace_index: Default::default(),
        releasing: u32::MAX,
        rows,
        topo,
    };
    sim.push(cfg.shuffle.start_s, Ev::ShuffleStart);
    for (i, c) in cfg.cross.iter().enumerate() {
        sim.push(c.start_s, Ev::CrossStart(i as u32));
        if let Some(s) = c.stop_s {
            sim.push(s, Ev::CrossStop(i as u32));
        }
    }
    for (i, f) in cfg.failures.iter().enumerate() {
        sim.push(f.down_s, Ev::LinkDown(i as u32));
        if let Some(u) = f.up_s {
            sim.push(u, Ev::LinkUp(i as u32));
        }
    }
    sim.run();
    let packet = match (cfg.mode, &cfg.tcp) {
        (Mode::Packet, Some(tcp)) => Some(sim.packet_pass(tcp)?),
        _ => None,
    };
    let mut result = sim.result();
    result.packet = packet;
    Ok(result)
}

impl Sim<'_> {
    /// Mode 'packet': re-time every remote fetch by the per-link packet-level pass; its FCTs
    /// replace the max-min ones and a reducer ends with its last fetch.
    fn packet_pass(&mut self, tcp: &TcpModel) -> Result<PacketSummary, String> {
        let mut udp = vec![0.0; self.topo.links.len()];
        for (i, c) in self.cfg.cross.iter().enumerate() {
            if let Some(p) = self.topo.route(c.src, c.dst, u64::MAX - i as u64) {
                for l in p {
                    udp[l as usize] += c.rate_bytes_per_s;
                }
            }
        }
        // (starts as scheduled: one pass, no others)
        let (fct, shift, summary, _) = refine(
            &self.topo,
            tcp,
            self.cfg.seed,
            &udp,
            &self.saturated,
            &self.trace,
            Starts::Schedule,
            self.cfg.packet,
        )?;
        let end = bucket_and_end(
            &self.trace,
            &fct,
            &shift,
            &self.cfg.fct_bucket_edges_bytes,
            &mut self.fct,
            self.reducers.len(),
        );
        for (r, e) in end.into_iter().enumerate() {
            // a reducer without remote fetches keeps its end; an unfinished fetch, none
            if e.is_nan() {
                self.reducer_finish[r] = f64::NAN;
            } else if e.is_finite() {
                self.reducer_finish[r] = e;
            }
        }
        Ok(summary)
    }

    fn result(mut self) -> FabricResult {
        let start = self.cfg.shuffle.start_s;
        let done: Vec<f64> = self
            .reducer_finish
            .iter()
            .copied()
            .filter(|x| !x.is_nan())
            .collect();
        let complete = done.len() == self.reducer_finish.len();
        let end = done.iter().copied().fold(start, f64::max);
        let span = (end - start).max(1e-300);
        let fct = fct_buckets(&mut self.fct, &self.cfg.fct_bucket_edges_bytes);
        let tiers = tier_results(&self.topo, &self.meter.carried, span);
        let heat = heatmap(&self.meter.hist, &tiers, self.now);
        FabricResult {
            hosts: self.topo.hosts.len() as u32,
            links: self.topo.links.len() as u32,
            shuffle_completion_s: complete.then_some(end - start),
            reducers_done: done.len() as u32,
            reducer_finish_s: done,
            remote_fetches: self.remote,
            local_fetches: self.local,
            remote_bytes: self.remote_bytes,
            fct,
            tiers,
            heatmap: heat,
            cross: self.cross_out.clone(),
            rerouted_flows: self.rerouted,
            stranded_flows: self.stranded.len() as u64,
            end_s: self.now,
            events: self.n_events,
            solves: self.mm.solves,
            flows_solved: self.mm.flows_solved,
            tcp_links: self.tcp.classes.take(),
            packet: None,
        }
    }
}

pub fn run_fabric_json(config_json: &str) -> Result<String, String> {
    let cfg: FabricConfig =
        serde_json::from_str(config_json).map_err(|e| format!("fabric configuration: {e}"))?;
    let result = run_fabric(&cfg)?;
    serde_json::to_string(&result).map_err(|e| e.to_string())
}

#[cfg(test)]
#[path = "fabric_tcp_tests.rs"]
mod tcp_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf_spine(leaves: u32, hosts: u32, spines: u32, host: f64, up: f64) -> TopologySpec {
        TopologySpec::LeafSpine {
            leaves,
            hosts_per_leaf: hosts,
            spines,
            host_bytes_per_s: host,
            uplink_bytes_per_s: up,
            host_delay_s: 0.0,
            uplink_delay_s: 0.0,
        }
    }

    fn config(topology: TopologySpec, maps: u32, reducers: u32, sizes: Sizes) -> FabricConfig {
        FabricConfig {
            topology,
            cores_per_host: 1,
            seed: 1,
            recompute: Recompute::Incremental,
            shuffle: Shuffle {
                maps,
                reducers,
                sizes: Some(sizes),
                matrix: None,
                max_reqs_in_flight: unbounded_reqs(),
                max_bytes_in_flight: 1e15,
                start_s: 0.0,
            },
            cross: Vec::new(),
            failures: Vec::new(),
            fct_bucket_edges_bytes: default_edges(),
            heatmap_bins: 10,
            tcp: None,
            mode: Default::default(),
            packet: Default::default(),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn tasks_are_spread_over_all_hosts() {
        assert_eq!((0..2).map(|i| spread(i, 2, 4)).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(
            (0..8).map(|i| spread(i, 8, 4)).collect::<Vec<_>>(),
            [0, 0, 1, 1, 2, 2, 3, 3]
        );
        let hosts: std::collections::BTreeSet<u32> =
            (0..317).map(|i| spread(i, 317, 1000)).collect();
        assert_eq!(hosts.len(), 317);
        assert_eq!(
            *hosts.last().unwrap() / 40,
            24,
            "the last rack holds tasks too"
        );
    }

    #[test]
    fn two_hosts_swap_blocks_at_link_rate() {
        let cfg = config(
            leaf_spine(1, 2, 1, 10.0, 10.0),
            2,
            2,
            Sizes::Constant { bytes: 50.0 },
        );
        let r = run_fabric(&cfg).unwrap();
        assert_eq!((r.remote_fetches, r.local_fetches), (2, 2));
        assert!(close(r.shuffle_completion_s.unwrap(), 5.0));
        assert_eq!(r.fct[0].count, 2);
        assert!(close(r.fct[0].mean_slowdown, 1.0));
        let up = r.tiers.iter().find(|t| t.name == "host→leaf").unwrap();
        assert!(close(up.carried_bytes, 100.0));
        assert!(close(up.mean_utilisation, 1.0));
    }

    #[test]
    fn one_request_in_flight_serialises_the_fetches() {
        // 1 reducer on h0 fetching 3 remote blocks (hosts 1-3 share h0's downlink)
        let mut cfg = config(
            leaf_spine(1, 4, 1, 10.0, 10.0),
            4,
            1,
            Sizes::Constant { bytes: 20.0 },
        );
        cfg.shuffle.max_reqs_in_flight = 1;
        let r = run_fabric(&cfg).unwrap();
        assert!(close(r.shuffle_completion_s.unwrap(), 6.0));
        assert!(close(r.fct[0].mean_s, 2.0));
        cfg.shuffle.max_reqs_in_flight = 3;
        let r = run_fabric(&cfg).unwrap();
        assert!(close(r.shuffle_completion_s.unwrap(), 6.0));
        assert!(close(r.fct[0].mean_s, 6.0), "three share the downlink");
        // bytes in flight: 40 allows two at a time: 2 together (4 s), then 1 alone (2 s)
        cfg.shuffle.max_bytes_in_flight = 40.0;
        let r = run_fabric(&cfg).unwrap();
        assert!(close(r.fct[0].mean_s, (4.0 + 4.0 + 2.0) / 3.0));
    }

    #[test]
    fn all_to_all_on_a_fat_tree_conserves_bytes_and_modes_agree() {
        let ft = TopologySpec::FatTree {
            k: 4,
            host_bytes_per_s: 100.0,
            edge_agg_bytes_per_s: 100.0,
            agg_core_bytes_per_s: 50.0,
            host_delay_s: 1e-3,
            edge_agg_delay_s: 1e-3,
            agg_core_delay_s: 1e-3,
        };
        let sizes = Sizes::Lognormal {
            mean_bytes: 100.0,
            sigma: 1.0,
        };
        let mut cfg = config(ft, 16, 32, sizes);
        cfg.cores_per_host = 1;
        cfg.shuffle.max_reqs_in_flight = 3;
        let a = run_fabric(&cfg).unwrap();
        cfg.recompute = Recompute::Full;
        let b = run_fabric(&cfg).unwrap();
        let (ta, tb) = (
            a.shuffle_completion_s.unwrap(),
            b.shuffle_completion_s.unwrap(),
        );
        assert!(
            (ta - tb).abs() <= 1e-9 * ta,
            "incremental {ta} vs full {tb}"
        );
        assert_eq!(a.remote_fetches, 32 * 15);
        assert_eq!(a.local_fetches, 32);
        let up = a.tiers.iter().find(|t| t.name == "host→edge").unwrap();
        let down = a.tiers.iter().find(|t| t.name == "edge→host").unwrap();
        assert!(close(up.carried_bytes, a.remote_bytes));
        assert!(close(down.carried_bytes, a.remote_bytes));
        assert!(a.tiers.iter().all(|t| t.max_link_utilisation <= 1.0 + 1e-9));
        assert!(b.flows_solved >= a.flows_solved);
        // a reducer's host receives its remote bytes through one 100 B/s link
        assert!(ta >= a.remote_bytes / (16.0 * 100.0) * 0.999);
        let heat_bytes: f64 = a.heatmap.utilisation[0]
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let covered =
                    (a.end_s.min((i + 1) as f64 * a.heatmap.bin_s)) - i as f64 * a.heatmap.bin_s;
                u * covered * 16.0 * 100.0
            })
            .sum();
        assert!(
            close(heat_bytes, up.carried_bytes),
            "heat map integrates to the bytes"
        );
    }

    #[test]
    fn udp_priority_takes_its_share_first_and_fair_udp_is_capped() {
        let mut cfg = config(
            leaf_spine(1, 2, 1, 10.0, 10.0),
            2,
            1,
            Sizes::Constant { bytes: 60.0 },
        );
        cfg.cross.push(Cross {
            src: 1,
            dst: 0,
            kind: CrossKind::Udp,
            rate_bytes_per_s: 8.0,
            udp_mode: UdpMode::Priority,
            start_s: 0.0,
            stop_s: None,
            bytes: None,
        });
        let r = run_fabric(&cfg).unwrap();
        assert!(
            close(r.shuffle_completion_s.unwrap(), 30.0),
            "60 B at 10 - 8"
        );
        assert!(close(r.cross[0].delivered_bytes, 8.0 * 30.0));
        cfg.cross[0].udp_mode = UdpMode::Fair;
        let r = run_fabric(&cfg).unwrap();
        assert!(
            close(r.shuffle_completion_s.unwrap(), 12.0),
            "max-min: 5 each"
        );
        cfg.cross[0].kind = CrossKind::Tcp;
        cfg.cross[0].bytes = Some(10.0);
        let r = run_fabric(&cfg).unwrap();
        // TCP 10 B at 5 B/s for 2 s, then the fetch alone: 10 + 50/10 = 7 s
        assert!(close(r.shuffle_completion_s.unwrap(), 7.0));
        assert!(close(r.cross[0].delivered_bytes, 10.0));
    }

    #[test]
    fn a_failed_spine_link_reroutes_and_a_cut_host_strands() {
        let mut cfg = config(
            leaf_spine(2, 2, 2, 10.0, 10.0),
            4,
            4,
            Sizes::Constant { bytes: 100.0 },
        );
        cfg.failures.push(Failure {
            a: "leaf0".into(),
            b: "spine0".into(),
            down_s: 1.0,
            up_s: None,
        });
        let r = run_fabric(&cfg).unwrap();
        assert!(r.shuffle_completion_s.is_some());
        assert!(r.rerouted_flows > 0);
        cfg.failures[0] = Failure {
            a: "h3".into(),
            b: "leaf1".into(),
            down_s: 1.0,
            up_s: Some(50.0),
        };
        let r = run_fabric(&cfg).unwrap();
        assert!(
            r.shuffle_completion_s.unwrap() > 50.0,
            "waits for the link to return"
        );
        cfg.failures[0].up_s = None;
        let r = run_fabric(&cfg).unwrap();
        assert!(r.shuffle_completion_s.is_none());
        assert!(r.stranded_flows > 0);
    }

    /// The all-to-all's remote fetches of `cfg` as an explicit matrix (every ordered pair of
    /// distinct map and reducer hosts, `bytes` each).
    fn as_matrix(mut cfg: FabricConfig, hosts: u32, bytes: f64) -> FabricConfig {
        let (mut src, mut dst) = (Vec::new(), Vec::new());
        for d in 0..hosts {
            for s in 0..hosts {
                if s != d {
                    src.push(s);
                    dst.push(d);
                }
            }
        }
        let n = src.len();
        cfg.shuffle.matrix = Some(Matrix {
            src,
            dst,
            bytes: vec![bytes; n],
        });
        (cfg.shuffle.maps, cfg.shuffle.reducers, cfg.shuffle.sizes) = (0, 0, None);
        cfg
    }

    #[test]
    fn a_matrix_of_the_all_to_all_fetches_runs_as_the_all_to_all() {
        let cfg = config(
            leaf_spine(2, 3, 1, 10.0, 15.0),
            6,
            6,
            Sizes::Constant { bytes: 40.0 },
        );
        let a = run_fabric(&cfg).unwrap();
        let m = run_fabric(&as_matrix(cfg, 6, 40.0)).unwrap();
        assert_eq!(m.remote_fetches, a.remote_fetches);
        assert_eq!(m.local_fetches, 0);
        assert!(close(m.remote_bytes, 30.0 * 40.0));
        assert!(close(
            m.shuffle_completion_s.unwrap(),
            a.shuffle_completion_s.unwrap()
        ));
        assert_eq!(m.reducer_finish_s.len(), 6);
    }

    #[test]
    fn a_matrix_fetches_only_its_rows_through_the_window() {
        // host 0 fetches 3 blocks of 20 B from hosts 1-3, one request at a time; host 2 one of
        // 10 B from host 3 (sharing host 3's uplink with host 0's fetch while both run)
        let mut cfg = config(
            leaf_spine(1, 4, 1, 10.0, 10.0),
            1,
            1,
            Sizes::Constant { bytes: 1.0 },
        );
        cfg.shuffle.matrix = Some(Matrix {
            src: vec![1, 2, 3, 3],
            dst: vec![0, 0, 0, 2],
            bytes: vec![20.0, 20.0, 20.0, 10.0],
        });
        (cfg.shuffle.maps, cfg.shuffle.reducers, cfg.shuffle.sizes) = (0, 0, None);
        cfg.shuffle.max_reqs_in_flight = 1;
        let r = run_fabric(&cfg).unwrap();
        assert_eq!((r.remote_fetches, r.local_fetches), (4, 0));
        assert!(close(r.remote_bytes, 70.0));
        assert_eq!(
            r.reducer_finish_s.len(),
            2,
            "one reducer per destination host"
        );
        let t = r.shuffle_completion_s.unwrap();
        assert!(
            (6.0..=7.0 + 1e-9).contains(&t),
            "three 2 s fetches in turn, {t}"
        );
        let up = r.tiers.iter().find(|t| t.name == "host→leaf").unwrap();
        assert!(close(up.carried_bytes, 70.0));
    }

    #[test]
    fn bad_matrices_name_the_row() {
        let mut cfg = config(
            leaf_spine(1, 4, 1, 10.0, 10.0),
            1,
            1,
            Sizes::Constant { bytes: 1.0 },
        );
        cfg.shuffle.matrix = Some(Matrix {
            src: vec![1, 2],
            dst: vec![0, 2],
            bytes: vec![1.0, 1.0],
        });
        assert!(run_fabric(&cfg).unwrap_err().contains("replaces maps"));
        (cfg.shuffle.maps, cfg.shuffle.reducers, cfg.shuffle.sizes) = (0, 0, None);
        assert!(run_fabric(&cfg)
            .unwrap_err()
            .contains("matrix[1]: src and dst"));
        cfg.shuffle.matrix.as_mut().unwrap().dst[1] = 9;
        assert!(run_fabric(&cfg)
            .unwrap_err()
            .contains("matrix[1]: src 2 and dst 9"));
        cfg.shuffle.matrix.as_mut().unwrap().dst[1] = 3;
        cfg.shuffle.matrix.as_mut().unwrap().bytes[0] = 0.0;
        assert!(run_fabric(&cfg).unwrap_err().contains("matrix[0]: bytes"));
        cfg.shuffle.matrix.as_mut().unwrap().bytes.pop();
        assert!(run_fabric(&cfg).unwrap_err().contains("same length"));
    }

    #[test]
    fn bad_configurations_are_refused() {
        let mut cfg = config(
            leaf_spine(1, 2, 1, 10.0, 10.0),
            2,
            2,
            Sizes::Constant { bytes: 1.0 },
        );
        cfg.shuffle.maps = 0;
        assert!(run_fabric(&cfg).unwrap_err().contains("maps"));
        cfg.shuffle.maps = 2;
        cfg.failures.push(Failure {
            a: "h0".into(),
            b: "spine9".into(),
            down_s: 0.0,
            up_s: None,
        });
        assert!(run_fabric(&cfg).unwrap_err().contains("failures[0]"));
    }
}
