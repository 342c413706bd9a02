//! The event loop of [`super`]: applications, stages, tasks on cores, fetches as max-min flows.
//!
//! Mode `packet` (as the fabric's, [`crate::packet`]): the max-min run traces every remote fetch
//! (its request, its data's start, its bytes, its ECMP path; initial-window blocks included) and
//! the links the schedule saturated; the per-link packet-level pass re-times each fetch, its
//! starts paced by each reducer's request loop on the reducer's own link and the senders' own
//! links queueing without loss ([`Starts::Paced`]: the max-min run sends an initial-window block
//! in one round trip whatever the load, so its start times alone would replay bursts no link
//! could carry); a task's fetch phase becomes its fetches' latest packet-level delivery less its
//! start in the max-min run; then the same loop replays the applications (stages, barriers, cores,
//! FIFO between applications) with those fixed fetch phases and no network. So a task's first
//! requests leave at the max-min schedule's time (a task that waits longer at packet level does
//! not move the traffic of the tasks after it), the links past the reducer's see the starts its
//! loop paced (not slowed by their own queues), and tiers and heat maps are the max-min run's.

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{AppResult, AppsConfig, AppsResult, Arrival, Mode, Placement, StageResult};
use crate::completions::Completions;
use crate::fluid::{Engine, Events, Progress};
use crate::maxmin::MaxMin;
use crate::packet::{
    bucket_and_end, refine, PacketOptions, PacketSummary, PassJobTime, Starts, Traced,
};
use crate::summary::{fct_buckets, heatmap, tier_results, LinkMeter};
use crate::tcpmodel::{Applied, TcpModel};
use crate::topology::Topology;

#[derive(Debug, Clone, Copy)]
enum Ev {
    Arrive(u32),
    StageReady(u32, u32),
    /// a request reached the map host: its data starts
    FetchData {
        rt: u32,
        src: u32,
        key: u64,
        bytes: f64,
        issued_s: f64,
        /// the traced fetch whose delivery released this request (mode 'packet'; `u32::MAX`: none)
        after: u32,
    },
    Delivered {
        rt: u32,
        bytes: f64,
        issued_s: f64,
        ideal_s: f64,
        /// its trace (mode 'packet'; `u32::MAX`: none)
        trace: u32,
    },
    TaskDone(u32),
}

#[derive(Debug, Clone, Copy)]
struct Flow {
    rt: u32,
    issued_s: f64,
    ideal_s: f64,
    delay_s: f64,
    trace: u32,
    p: Progress,
}

/// A running task.
struct Run {
    app: u32,
    stage: u32,
    task: u32,
    host: u32,
    /// the task's index over every application and stage
    gid: u32,
    /// (map host, bytes) still to request, popped from the back
    todo: Vec<(u32, f64)>,
    reqs: u32,
    bytes_in_flight: f64,
    outstanding: u32,
}

struct AppState {
    hosts: Vec<u32>,
    cursor: usize,
    arrival: f64,
    queue: VecDeque<(u32, u32)>,
    waiting: Vec<usize>,
    left: Vec<u32>,
    stages_left: usize,
    map_host: Vec<Vec<u32>>,
    dependents: Vec<Vec<u32>>,
    out: AppResult,
}

struct Sim<'a> {
    cfg: &'a AppsConfig,
    topo: Topology,
    mm: MaxMin,
    now: f64,
    events: Events<Ev>,
    done_at: Completions,
    flows: Vec<Option<Flow>>,
    runs: Vec<Option<Run>>,
    run_free: Vec<u32>,
    apps: Vec<AppState>,
    free_cores: Vec<u32>,
    apps_on_host: Vec<Vec<u32>>,
    has_delay: bool,
    /// Each link's capacity as the solver shares it (× the TCP model's efficiency).
    usable: Vec<f64>,
    /// The TCP model's correction per link (none: efficiency 1, no standing queues).
    tcp: Applied,
    meter: LinkMeter,
    fct: Vec<Vec<(f64, f64)>>,
    tasks: u64,
    remote: u64,
    local: u64,
    remote_bytes: f64,
    small: u64,
    n_events: u64,
    apps_done: usize,
    /// Mode 'packet', first pass: trace the remote fetches and the saturated links.
    packet: bool,
    trace: Vec<Traced>,
    saturated: Vec<bool>,
    /// The fetch whose delivery is issuing requests now (`u32::MAX`: none).
    releasing: u32,
    /// First index of each application's stages' tasks (`gid` = it + the task).
    task_base: Vec<Vec<u32>>,
    /// When each task started (mode 'packet', first pass).
    task_start: Vec<f64>,
    /// Mode 'packet', second pass: each task's fetch phase, no network (NaN: never fetched).
    replay: Option<Vec<f64>>,
}

/// The hosts of application `a` of `n`: `e` of `h` hosts.
fn place(p: Placement, a: u32, e: u32, h: u32, pack_from: u32) -> Vec<u32> {
    match p {
        Placement::Spread => (0..e)
            .map(|i| (crate::fabric::spread(i, e, h) + a) % h)
            .collect(),
        Placement::Pack => (0..e).map(|i| (pack_from + i) % h).collect(),
    }
}

impl<'a> Sim<'a> {
    fn push(&mut self, t: f64, ev: Ev) {
        self.events.push(t, ev);
    }

    fn at(&mut self, t: f64, ev: Ev) {
        if t > self.now {
            self.push(t, ev);
        } else {
            self.handle(ev);
        }
    }

    fn stage_ready(&mut self, a: u32, s: u32) {
        let n = self.cfg.apps[a as usize].stages[s as usize].compute_s.len() as u32;
        let st = &mut self.apps[a as usize];
        st.out.stages[s as usize].ready_s = self.now;
        st.queue.extend((0..n).map(|t| (s, t)));
        // deal the queued tasks to the application's free cores, round robin over its hosts
        let hn = st.hosts.len();
        let mut idle = 0;
        while idle < hn && !self.apps[a as usize].queue.is_empty() {
            let st = &mut self.apps[a as usize];
            let h = st.hosts[st.cursor];
            st.cursor = (st.cursor + 1) % hn;
            if self.free_cores[h as usize] > 0 {
                idle = 0;
                let (s, t) = st.queue.pop_front().expect("queued");
                self.start_task(a, s, t, h);
            } else {
                idle += 1;
            }
        }
    }

    /// A core of host `h` is free: the earliest application with queued work there takes it.
    fn offer(&mut self, h: u32) {
        for i in 0..self.apps_on_host[h as usize].len() {
            if self.free_cores[h as usize] == 0 {
                return;
            }
            let a = self.apps_on_host[h as usize][i];
            if let Some((s, t)) = self.apps[a as usize].queue.pop_front() {
                self.start_task(a, s, t, h);
            }
        }
    }

    fn start_task(&mut self, a: u32, s: u32, t: u32, h: u32) {
        self.free_cores[h as usize] -= 1;
        self.tasks += 1;
        let app = &self.cfg.apps[a as usize];
        let st = &app.stages[s as usize];
        self.apps[a as usize].map_host[s as usize][t as usize] = h;
        let gid = self.task_base[a as usize][s as usize] + t;
        if let Some(phase) = &self.replay {
            let (d, c) = (phase[gid as usize], st.compute_s[t as usize]);
            let rt = self.new_run(a, s, t, h, gid, Vec::new());
            if !d.is_nan() {
                self.push(self.now + d + c, Ev::TaskDone(rt));
            }
            return;
        }
        if self.packet {
            self.task_start[gid as usize] = self.now;
        }
        let read = st.read_bytes[t as usize];
        let mut todo = Vec::new();
        if read > 0.0 && !st.reads_from.is_empty() {
            let total: f64 = st
                .reads_from
                .iter()
                .map(|&p| app.stages[p as usize].write_bytes.iter().sum::<f64>())
                .sum();
            if total > 0.0 {
                for &p in &st.reads_from {
                    let hosts = &self.apps[a as usize].map_host[p as usize];
                    for (m, &w) in app.stages[p as usize].write_bytes.iter().enumerate() {
                        if w <= 0.0 {
                            continue; // Spark skips empty blocks
                        }
                        if hosts[m] == h {
                            self.local += 1;
                        } else {
                            todo.push((hosts[m], w * read / total));
                        }
                    }
                }
            }
        }
        let key = self.cfg.seed ^ ((a as u64) << 48) ^ ((s as u64) << 32) ^ t as u64;
        let mut rng = ChaCha8Rng::seed_from_u64(key);
        for i in (1..todo.len()).rev() {
            let j = rng.random_range(0..=i);
            todo.swap(i, j);
        }
        let rt = self.new_run(a, s, t, h, gid, todo);
        self.issue(rt);
        self.check_fetched(rt);
    }

    fn new_run(&mut self, a: u32, s: u32, t: u32, h: u32, gid: u32, todo: Vec<(u32, f64)>) -> u32 {
        let run = Run {
            app: a,
            stage: s,
            task: t,
            host: h,
            gid,
            outstanding: todo.len() as u32,
            todo,
            reqs: 0,
            bytes_in_flight: 0.0,
        };
        match self.run_free.pop() {
            Some(i) => {
                self.runs[i as usize] = Some(run);
                i
            }
            None => {
                self.runs.push(Some(run));
                (self.runs.len() - 1) as u32
            }
        }
    }

    fn issue(&mut self, rt: u32) {
        loop {
            let r = self.runs[rt as usize].as_mut().expect("run");
            let Some(&(src, bytes)) = r.todo.last() else {
                return;
            };
            let fits = r.reqs == 0
                || (r.reqs < self.cfg.max_reqs_in_flight
                    && r.bytes_in_flight + bytes <= self.cfg.max_bytes_in_flight);
            if !fits {
                return;
            }
            r.todo.pop();
            r.reqs += 1;
            r.bytes_in_flight += bytes;
            let (dst, left) = (r.host, r.todo.len());
            let key = self.flow_key(rt, left);
            let delay = match self.has_delay {
                true => self
                    .topo
                    .route(src, dst, key)
                    .map_or(0.0, |p| self.path_delay(&p)),
                false => 0.0,
            };
            let ev = Ev::FetchData {
                rt,
                src,
                key,
                bytes,
                issued_s: self.now,
                after: self.releasing,
            };
            self.at(self.now + delay, ev);
        }
    }

    fn flow_key(&self, rt: u32, i: usize) -> u64 {
        let r = self.runs[rt as usize].as_ref().expect("run");
        ((r.app as u64) << 52) ^ ((r.stage as u64) << 40) ^ ((r.task as u64) << 20) ^ i as u64
    }

    fn path_delay(&self, path: &[u32]) -> f64 {
        path.iter()
            .map(|&l| self.topo.links[l as usize].delay_s)
            .sum()
    }

    /// The standing queues a packet meets on `path` now: those of its saturated links.
    fn queue_delay(&self, path: &[u32]) -> f64 {
        self.tcp
            .path_queue_delay(path, |l| self.mm.link_load(l), |l| self.usable[l as usize])
    }

    /// Every block arrived: the task computes.
    fn check_fetched(&mut self, rt: u32) {
        let r = self.runs[rt as usize].as_mut().expect("run");
        if r.outstanding > 0 {
            return;
        }
        r.todo = Vec::new();
        let c = self.cfg.apps[r.app as usize].stages[r.stage as usize].compute_s[r.task as usize];
        // pushed, not handled at once: a chain of zero-time tasks must not recurse
        self.push(self.now + c, Ev::TaskDone(rt));
    }

    fn task_done(&mut self, rt: u32) {
        let r = self.runs[rt as usize].take().expect("run");
        self.run_free.push(rt);
        self.free_cores[r.host as usize] += 1;
        let (a, s) = (r.app as usize, r.stage as usize);
        self.apps[a].left[s] -= 1;
        if self.apps[a].left[s] == 0 {
            self.apps[a].out.stages[s].end_s = self.now;
            self.apps[a].stages_left -= 1;
            if self.apps[a].stages_left == 0 {
                let end = self.now + self.cfg.apps[a].tail_s;
                let out = &mut self.apps[a].out;
                out.end_s = Some(end);
                out.job_time_s = Some(end - out.arrival_s);
                self.apps_done += 1;
            }
            for q in self.apps[a].dependents[s].clone() {
                self.apps[a].waiting[q as usize] -= 1;
                if self.apps[a].waiting[q as usize] == 0 {
                    let d = self.cfg.apps[a].stages[q as usize].delay_s;
                    self.push(self.now + d, Ev::StageReady(a as u32, q));
                }
            }
        }
        self.offer(r.host);
    }

    fn handle(&mut self, ev: Ev) {
        self.n_events += 1;
        match ev {
            Ev::Arrive(a) => {
                for s in 0..self.cfg.apps[a as usize].stages.len() {
                    if self.apps[a as usize].waiting[s] == 0 {
                        let d = self.cfg.apps[a as usize].stages[s].delay_s;
                        self.push(self.now + d, Ev::StageReady(a, s as u32));
                    }
                }
            }
            Ev::StageReady(a, s) => self.stage_ready(a, s),
            Ev::FetchData {
                rt,
                src,
                key,
                bytes,
                issued_s,
                after,
            } => {
                let r = self.runs[rt as usize].as_ref().expect("run");
                let (dst, gid) = (r.host, r.gid);
                let (a, s) = (r.app as usize, r.stage as usize);
                self.remote += 1;
                self.remote_bytes += bytes;
                self.apps[a].out.stages[s].remote_bytes += bytes;
                self.apps[a].out.stages[s].remote_fetches += 1;
                let Some(p) = self.topo.route(src, dst, key).filter(|p| !p.is_empty()) else {
                    // no path (cannot happen without failures): delivered at once
                    self.handle(Ev::Delivered {
                        rt,
                        bytes,
                        issued_s,
                        ideal_s: f64::NAN,
                        trace: u32::MAX,
                    });
                    return;
                };
                let slowest = p
                    .iter()
                    .map(|&l| self.topo.links[l as usize].capacity)
                    .fold(f64::INFINITY, f64::min);
                let prop = self.path_delay(&p);
                let d = prop + self.queue_delay(&p);
                let ideal = bytes / slowest + 2.0 * prop;
                let trace = if self.packet {
                    // every remote fetch, initial-window blocks too: at packet level they can be
                    // dropped and wait for a timeout
                    self.trace.push(Traced {
                        r: gid,
                        issued_s,
                        data_s: self.now,
                        bytes,
                        ideal_s: ideal,
                        path: p.clone(),
                        after: (after != u32::MAX).then_some(after),
                        maxmin_end_s: f64::NAN,
                    });
                    (self.trace.len() - 1) as u32
                } else {
                    u32::MAX
                };
                if bytes <= self.cfg.initial_window_bytes {
                    self.small += 1;
                    // its bytes count in the links' carried bytes, not in their rates
                    let ser = bytes / slowest;
                    for &l in &p {
                        let tier = self.topo.links[l as usize].tier as usize;
                        self.meter.burst(l as usize, tier, self.now, bytes, ser);
                    }
                    let ev = Ev::Delivered {
                        rt,
                        bytes,
                        issued_s,
                        ideal_s: ideal,
                        trace,
                    };
                    self.at(self.now + d + bytes / slowest, ev);
                    return;
                }
                let id = self.mm.add(&p, f64::INFINITY) as usize;
                if self.flows.len() <= id {
                    self.flows.resize(id + 1, None);
                }
                self.done_at.set(id as u32, f64::INFINITY);
                self.flows[id] = Some(Flow {
                    rt,
                    issued_s,
                    ideal_s: ideal,
                    delay_s: d,
                    trace,
                    p: Progress::new(bytes, self.now),
                });
            }
            Ev::Delivered {
                rt,
                bytes,
                issued_s,
                ideal_s,
                trace,
            } => {
                let fct = self.now - issued_s;
                let b = self
                    .cfg
                    .fct_bucket_edges_bytes
                    .iter()
                    .take_while(|&&e| bytes >= e)
                    .count();
                self.fct[b].push((fct, fct / ideal_s));
                let r = self.runs[rt as usize].as_mut().expect("run");
                r.reqs -= 1;
                r.bytes_in_flight -= bytes;
                r.outstanding -= 1;
                // the requests this delivery releases follow it (the packet mode keeps the loop)
                self.releasing = trace;
                self.issue(rt);
                self.releasing = u32::MAX;
                self.check_fetched(rt);
            }
            Ev::TaskDone(rt) => self.task_done(rt),
        }
    }

    fn complete(&mut self, id: u32) {
        let f = self.flows[id as usize].take().expect("flow");
        self.done_at.set(id, f64::INFINITY);
        self.mm.remove(id);
        let ev = Ev::Delivered {
            rt: f.rt,
            bytes: f.p.bytes,
            issued_s: f.issued_s,
            ideal_s: f.ideal_s,
            trace: f.trace,
        };
        self.at(self.now + f.delay_s, ev);
    }

    fn run(&mut self) {
        let (mut solved, mut touched) = (Vec::new(), Vec::new());
        self.run_events(&mut solved, &mut touched);
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
    fn link_load(&self, l: u32) -> f64 {
        self.mm.link_load(l)
    }
    fn finished(&self) -> bool {
        self.apps_done == self.apps.len()
    }
    fn complete(&mut self, id: u32) {
        Sim::complete(self, id);
    }
    fn handle(&mut self, ev: Ev) {
        Sim::handle(self, ev);
    }
    fn loaded(&mut self, l: u32, load: f64) {
        if self.packet && load >= self.usable[l as usize] * (1.0 - 1e-6) {
            self.saturated[l as usize] = true;
        }
    }
}

fn arrivals(cfg: &AppsConfig) -> Vec<f64> {
    match cfg.arrival {
        Arrival::Fixed => cfg.apps.iter().map(|a| a.arrival_s).collect(),
        Arrival::Poisson { mean_gap_s } => {
            let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x5EED_A991_0000);
            let mut t = 0.0;
            (0..cfg.apps.len())
                .map(|i| {
                    if i > 0 {
                        let u: f64 = rng.random();
                        t += -mean_gap_s * (1.0 - u).ln();
                    }
                    t
                })
                .collect()
        }
    }
}

pub fn run_apps(cfg: &AppsConfig) -> Result<AppsResult, String> {
    cfg.validate()?;
    let packet = cfg.mode == Mode::Packet;
    let mut sim = new_sim(cfg, cfg.tcp.as_ref(), packet, None)?;
    sim.run();
    let Some(tcp) = cfg.tcp.as_ref().filter(|_| packet) else {
        return Ok(sim.result());
    };
    let (phase, mut summary, others) = sim.packet_pass(tcp)?;
    // the same applications replayed with the packet-level fetch phases, no network
    let (end, timed) = replay(cfg, phase)?;
    if !others.is_empty() {
        // and with each other pass that could have been kept
        let mut times = vec![PassJobTime {
            pass: summary.pass_used,
            hold_gap_s: summary.pass_hold_gap_s,
            mean_job_time_s: mean_job_time(&timed),
        }];
        for (pass, hold_gap_s, phase) in others {
            let (_, t) = replay(cfg, phase)?;
            times.push(PassJobTime {
                pass,
                hold_gap_s,
                mean_job_time_s: mean_job_time(&t),
            });
        }
        times.sort_by_key(|t| t.pass);
        summary.pass_job_times = times;
    }
    let mut result = sim.result();
    for (a, t) in result.apps.iter_mut().zip(timed.apps) {
        (a.end_s, a.job_time_s) = (t.end_s, t.job_time_s);
        for (s, ts) in a.stages.iter_mut().zip(t.stages) {
            (s.ready_s, s.end_s) = (ts.ready_s, ts.end_s);
        }
    }
    result.makespan_s = timed.makespan_s;
    result.end_s = end;
    result.packet = Some(summary);
    Ok(result)
}

/// The applications run again with each task's fetch phase `phase` instead of the network: the
/// virtual time it ended and its result.
fn replay(cfg: &AppsConfig, phase: Vec<f64>) -> Result<(f64, AppsResult), String> {
    let mut replay = new_sim(cfg, None, false, Some(phase))?;
    replay.run();
    Ok((replay.now, replay.result()))
}

/// The applications' mean job time (NaN when one did not end).
fn mean_job_time(r: &AppsResult) -> f64 {
    let n = r.apps.len().max(1) as f64;
    r.apps
        .iter()
        .map(|a| a.job_time_s.unwrap_or(f64::NAN))
        .sum::<f64>()
        / n
}

/// The engine, its applications placed and their arrivals queued. `packet`: trace the fetches;
/// `replay`: each task's fetch phase instead of the network.
fn new_sim<'a>(
    cfg: &'a AppsConfig,
    tcp_model: Option<&TcpModel>,
    packet: bool,
    replay: Option<Vec<f64>>,
) -> Result<Sim<'a>, String> {
    let mut topo = Topology::build(&cfg.topology, cfg.seed)?;
    let h = topo.hosts.len() as u32;
    let times = arrivals(cfg);
    let mut apps = Vec::new();
    let mut apps_on_host = vec![Vec::new(); h as usize];
    let mut pack_from = 0u32;
    for (a, app) in cfg.apps.iter().enumerate() {
        let e = app.executors.unwrap_or(h);
        if e > h {
            return Err(format!("apps[{a}]: executors {e} > {h} hosts"));
        }
        let hosts = place(app.placement, a as u32, e, h, pack_from);
        if app.placement == Placement::Pack {
            pack_from = (pack_from + e) % h;
        }
        for &x in &hosts {
            apps_on_host[x as usize].push(a as u32);
        }
        let n = app.stages.len();
        let mut dependents = vec![Vec::new(); n];
        let mut waiting = vec![0; n];
        for (s, st) in app.stages.iter().enumerate() {
            let mut after = st.after.clone();
            after.sort_unstable();
            after.dedup();
            waiting[s] = after.len();
            for p in after {
                dependents[p as usize].push(s as u32);
            }
        }
        let stages = app
            .stages
            .iter()
            .map(|st| StageResult {
                id: st.id,
                tasks: st.compute_s.len() as u32,
                ready_s: f64::NAN,
                end_s: f64::NAN,
                remote_bytes: 0.0,
                remote_fetches: 0,
            })
            .collect();
        apps.push(AppState {
            hosts,
            cursor: 0,
            arrival: times[a],
            queue: VecDeque::new(),
            waiting,
            left: app
                .stages
                .iter()
                .map(|s| s.compute_s.len() as u32)
                .collect(),
            stages_left: n,
            map_host: app
                .stages
                .iter()
                .map(|s| vec![0; s.compute_s.len()])
                .collect(),
            dependents,
            out: AppResult {
                name: app.name.clone(),
                executors: e,
                arrival_s: times[a],
                end_s: None,
                job_time_s: None,
                stages,
            },
        });
    }
    for list in &mut apps_on_host {
        list.sort_by(|&x, &y| {
            times[x as usize]
                .total_cmp(&times[y as usize])
                .then(x.cmp(&y))
        });
    }
    let nominal: Vec<f64> = topo.links.iter().map(|l| l.capacity).collect();
    let (n_links, n_tiers) = (nominal.len(), topo.tiers.len());
    let tcp = Applied::new(tcp_model, &mut topo)?;
    let mut task_base = Vec::with_capacity(cfg.apps.len());
    let mut tasks = 0u32;
    for app in &cfg.apps {
        let mut v = Vec::with_capacity(app.stages.len());
        for st in &app.stages {
            v.push(tasks);
            tasks += st.compute_s.len() as u32;
        }
        task_base.push(v);
    }
    let usable: Vec<f64> = (0..n_links)
        .map(|l| tcp.usable(l as u32, nominal[l]))
        .collect();
    let mut sim = Sim {
        cfg,
        mm: MaxMin::new(&usable, cfg.recompute),
        now: 0.0,
        events: Events::default(),
        done_at: Completions::default(),
        flows: Vec::new(),
        runs: Vec::new(),
        run_free: Vec::new(),
        free_cores: vec![cfg.cores_per_host; h as usize],
        apps_on_host,
        has_delay: topo.links.iter().any(|l| l.delay_s > 0.0),
        usable,
        tcp,
        meter: LinkMeter::new(n_links, n_tiers, cfg.heatmap_bins),
        fct: vec![Vec::new(); cfg.fct_bucket_edges_bytes.len() + 1],
        tasks: 0,
        remote: 0,
        local: 0,
        remote_bytes: 0.0,
        small: 0,
        n_events: 0,
        apps_done: 0,
        packet,
        trace: Vec::new(),
        saturated: vec![false; if packet { n_links } else { 0 }],
        releasing: u32::MAX,
        task_base,
        task_start: vec![f64::NAN; if packet { tasks as usize } else { 0 }],
        replay,
        apps,
        topo,
    };
    for a in 0..sim.apps.len() {
        let t = sim.apps[a].arrival;
        sim.push(t, Ev::Arrive(a as u32));
    }
    Ok(sim)
}

impl Sim<'_> {
    /// Mode 'packet': re-time every traced fetch by the per-link packet-level pass; its FCTs
    /// replace the max-min ones. Returns each task's fetch phase: from its start in this run to
    /// its fetches' latest packet-level delivery (0 without remote fetches, NaN if one of them
    /// did not finish within the link simulation's horizon); and the same phases by every other
    /// pass that could have been kept, with its number and hold gap.
    #[allow(clippy::type_complexity)]
    fn packet_pass(
        &mut self,
        tcp: &TcpModel,
    ) -> Result<(Vec<f64>, PacketSummary, Vec<(u32, f64, Vec<f64>)>), String> {
        let udp = vec![0.0; self.topo.links.len()];
        let (fct, shift, summary, others) = refine(
            &self.topo,
            tcp,
            self.cfg.seed,
            &udp,
            &self.saturated,
            &self.trace,
            Starts::Paced,
            PacketOptions {
                loop_slots: self.cfg.max_reqs_in_flight,
                ..PacketOptions::default()
            },
        )?;
        // the other passes' FCTs fill scratch buckets: the result's are the kept pass's
        let mut scratch = vec![Vec::new(); self.fct.len()];
        let mut other_phases = Vec::with_capacity(others.len());
        for (pass, gap, fct, shift) in others {
            let end = bucket_and_end(
                &self.trace,
                &fct,
                &shift,
                &self.cfg.fct_bucket_edges_bytes,
                &mut scratch,
                self.task_start.len(),
            );
            other_phases.push((pass, gap, self.phases(&end)));
        }
        // a fetch not done leaves its task not done (NaN)
        let end = bucket_and_end(
            &self.trace,
            &fct,
            &shift,
            &self.cfg.fct_bucket_edges_bytes,
            &mut self.fct,
            self.task_start.len(),
        );
        Ok((self.phases(&end), summary, other_phases))
    }

    /// Each task's fetch phase from its fetches' latest delivery `end` (see [`Self::packet_pass`]).
    fn phases(&self, end: &[f64]) -> Vec<f64> {
        end.iter()
            .zip(&self.task_start)
            .map(|(&e, &s)| match e {
                e if e == f64::NEG_INFINITY => 0.0,
                e => (e - s).max(0.0),
            })
            .collect()
    }

    fn result(mut self) -> AppsResult {
        let span = self.now.max(1e-300);
        let fct = fct_buckets(&mut self.fct, &self.cfg.fct_bucket_edges_bytes);
        let tiers = tier_results(&self.topo, &self.meter.carried, span);
        let heat = heatmap(&self.meter.hist, &tiers, self.now);
        let apps: Vec<AppResult> = self.apps.into_iter().map(|a| a.out).collect();
        let makespan = apps
            .iter()
            .map(|a| a.end_s)
            .try_fold(0.0f64, |m, e| e.map(|e| m.max(e)));
        AppsResult {
            hosts: self.topo.hosts.len() as u32,
            links: self.topo.links.len() as u32,
            apps,
            makespan_s: makespan,
            tasks: self.tasks,
            remote_fetches: self.remote,
            local_fetches: self.local,
            remote_bytes: self.remote_bytes,
            initial_window_fetches: self.small,
            fct,
            tiers,
            heatmap: heat,
            end_s: self.now,
            events: self.n_events,
            solves: self.mm.solves,
            flows_solved: self.mm.flows_solved,
            tcp_links: self.tcp.classes.take(),
            packet: None,
        }
    }
}

#[cfg(test)]
#[path = "apps_packet_tests.rs"]
mod packet_tests;
