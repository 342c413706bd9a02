//! A Spark application on a small cluster: the model behind `shufflelab calibrate`,
//! fitted from a real run's event log and simulated on the network of an experiment spec.
//!
//! The Python twin `src/shufflelab/sim/sparkjob.py` documents the model in full and is the
//! oracle the tests compare this engine against, operation for operation. In short: stages run
//! in sequence with driver gaps; tasks take executor slots (optionally pinned to the executor
//! that holds their cached input); a task spends a control latency (plus queueing round trips
//! while the bottleneck's FIFO stands full), then fetches its remote blocks as fluid flows over
//! the one shared bottleneck while computing under processor sharing of the host's cores, never
//! ahead of the data that has arrived. Cross traffic reduces the capacity TCP gets (loss-based:
//! `C − U` with a minimum-window floor; BBR: `C·b/(U+b)`, `b = C − U/1.25`) and takes
//! `background_cores` of CPU.

use serde::{Deserialize, Serialize};

use crate::bottleneck::{operating_point, Growth, OperatingPoint, Probe, RedSpec, Sender};

const EPS: f64 = 1e-9;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TcpKind {
    /// cubic, reno: back off on loss.
    Loss,
    /// BBR: paces at its delivery-rate estimate, ignores loss.
    Bbr,
    /// DCTCP (in the host or in the switch): reacts to ECN marks by α/2.
    Dctcp,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Platform {
    /// Executor task slots (executors × cores per executor).
    pub slots: u32,
    #[serde(default = "one_u32")]
    pub slots_per_executor: u32,
    /// Physical cores the executors share.
    pub host_cores: f64,
    /// Cores taken by other load (cross traffic's forwarding).
    #[serde(default)]
    pub background_cores: f64,
    /// Bottleneck capacity on the wire, bytes/s.
    pub link_bytes_per_s: f64,
    /// Unresponsive (UDP) cross traffic on the bottleneck, wire bytes/s.
    #[serde(default)]
    pub cross_bytes_per_s: f64,
    /// Long-lived TCP flows sharing the bottleneck with the shuffle.
    #[serde(default)]
    pub cross_tcp_flows: u32,
    /// The bottleneck's FIFO limit, bytes.
    pub queue_bytes: f64,
    pub tcp: TcpKind,
    #[serde(default = "mss_wire")]
    pub mss_wire_bytes: f64,
    /// Segments per queueing round trip a loss-based flow keeps at a permanently full queue.
    #[serde(default = "min_window")]
    pub min_window_segments: f64,
    /// Round trip without queueing (propagation delay of the switch's ports), seconds.
    #[serde(default)]
    pub base_rtt_s: f64,
    /// RED/ECN at the bottleneck (the userspace switch); absent: droptail FIFO.
    #[serde(default)]
    pub red: Option<RedSpec>,
    /// Loss-based senders negotiate ECN (a RED queue with `ecn` marks them, it does not drop
    /// them); Linux's default (`tcp_ecn = 2`) does not for the connections it opens.
    #[serde(default)]
    pub ecn_capable: bool,
    /// Window rule of the loss-based senders at the packet-level bottleneck.
    #[serde(default)]
    pub growth: Growth,
    /// Mean loss-recovery time (retransmission timeouts) a control round trip adds while the
    /// cross traffic alone keeps the droptail FIFO full (`cross_bytes_per_s >= link_bytes_per_s`),
    /// seconds; measured on the fabric by `benchmarks/control_latency.py`.
    #[serde(default)]
    pub control_loss_s: f64,
}

impl Platform {
    /// The bottleneck needs the packet-level model: a RED queue or DCTCP senders.
    pub fn packet_bottleneck(&self) -> bool {
        self.red.is_some() || self.tcp == TcpKind::Dctcp
    }

    /// The packet-level probe of this bottleneck with `flows` TCP flows.
    pub fn probe(&self, flows: usize) -> Probe {
        Probe {
            link_bytes_per_s: self.link_bytes_per_s,
            queue_bytes: self.queue_bytes,
            red: self.red.clone(),
            base_rtt_s: self.base_rtt_s,
            flows: flows as u32,
            sender: if self.tcp == TcpKind::Dctcp {
                Sender::Dctcp
            } else {
                Sender::Loss
            },
            ecn_capable: self.ecn_capable,
            growth: self.growth,
            cross_bytes_per_s: self.cross_bytes_per_s,
            mss_wire_bytes: self.mss_wire_bytes,
            min_window_segments: 2.0,
            warmup_packets: 4_000,
            measure_packets: 16_000,
            seed: 1,
        }
    }
}

/// The bottleneck as the Spark model sees it: the fluid formulas for a droptail FIFO, the
/// packet-level operating point (switchcore's queue and windows) for a RED/ECN queue or DCTCP.
/// Each operating point is simulated once per flow count and kept in `ops` for the lifetime of
/// this value (one model run): the only cache, owned by the model.
pub struct Bottleneck<'a> {
    p: &'a Platform,
    ops: std::collections::HashMap<usize, OperatingPoint>,
}

impl<'a> Bottleneck<'a> {
    pub fn new(p: &'a Platform) -> Self {
        Bottleneck {
            p,
            ops: std::collections::HashMap::new(),
        }
    }

    fn op(&mut self, flows: usize) -> Result<OperatingPoint, String> {
        if let Some(op) = self.ops.get(&flows) {
            return Ok(*op);
        }
        let op = operating_point(&self.p.probe(flows))?;
        self.ops.insert(flows, op);
        Ok(op)
    }

    /// Round trip of a control message with `flows` TCP flows active.
    pub fn round_trip_s(&mut self, flows: usize) -> Result<f64, String> {
        if !self.p.packet_bottleneck() {
            return Ok(self.p.base_rtt_s + queue_round_trip_s(self.p, flows));
        }
        let op = self.op(flows)?;
        Ok(self.p.base_rtt_s + 2.0 * op.mean_backlog_bytes / self.p.link_bytes_per_s)
    }

    /// Wire bytes/s the `flows` TCP flows get together.
    pub fn tcp_capacity(&mut self, flows: usize) -> Result<f64, String> {
        if !self.p.packet_bottleneck() {
            return Ok(tcp_capacity_bytes_per_s(self.p, flows));
        }
        if flows == 0 {
            return Ok(0.0);
        }
        // the same minimum-window floor as the fluid model: flows whose every window is cut
        // still move min_window_segments per round trip (the probe has no retransmission timer)
        let rtt = self.round_trip_s(flows)?;
        let floor = if rtt > 0.0 {
            flows as f64 * self.p.min_window_segments * self.p.mss_wire_bytes / rtt
        } else {
            0.0
        };
        let got = self.op(flows)?.tcp_bytes_per_s;
        Ok(self.p.link_bytes_per_s.min(got.max(floor)))
    }
}

fn one_u32() -> u32 {
    1
}
fn mss_wire() -> f64 {
    1514.0
}
fn min_window() -> f64 {
    1.5
}
fn minus_one() -> i64 {
    -1
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct TaskSpec {
    /// Control time (scheduling, RPCs), seconds.
    pub latency_s: f64,
    /// CPU work, core-seconds.
    pub cpu_s: f64,
    /// Wire bytes from each remote source (one flow each).
    #[serde(default)]
    pub fetch_bytes: Vec<f64>,
    /// Share of the task's input read locally (available at once), [0, 1].
    #[serde(default)]
    pub local_fraction: f64,
    /// Queueing round trips on the task's control path.
    #[serde(default)]
    pub control_round_trips: f64,
    /// Executor the task waits for (cached input); -1: any.
    #[serde(default = "minus_one")]
    pub executor: i64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct StageSpec {
    pub stage_id: i64,
    /// Driver time before the stage starts, seconds after the previous stage ended.
    #[serde(default)]
    pub gap_s: f64,
    pub tasks: Vec<TaskSpec>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct SparkConfig {
    pub platform: Platform,
    pub stages: Vec<StageSpec>,
    #[serde(default)]
    pub tail_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskRecord {
    pub stage_id: i64,
    pub index: usize,
    pub slot: usize,
    pub start_s: f64,
    pub work_at_s: f64,
    pub blocked_s: f64,
    pub end_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageRecord {
    pub stage_id: i64,
    pub start_s: f64,
    pub end_s: f64,
    pub tasks: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct SparkResult {
    pub job_time_s: f64,
    pub stages: Vec<StageRecord>,
    pub tasks: Vec<TaskRecord>,
    pub network_bytes: f64,
}

/// Round trip through the bottleneck's FIFO when it stands full, else 0.
pub fn queue_round_trip_s(p: &Platform, flows: usize) -> f64 {
    let c = p.link_bytes_per_s;
    let u = p.cross_bytes_per_s;
    let standing = u >= c || (flows > 0 && (p.tcp == TcpKind::Loss || u > 0.0));
    if standing {
        2.0 * p.queue_bytes / c
    } else {
        0.0
    }
}

/// Loss recovery a control round trip adds: only while unresponsive cross traffic alone keeps a
/// droptail FIFO full (the regime the fabric's control-latency benchmark measures).
pub fn control_loss_s(p: &Platform) -> f64 {
    if p.red.is_none() && p.cross_bytes_per_s >= p.link_bytes_per_s {
        p.control_loss_s
    } else {
        0.0
    }
}

/// Capacity of the bottleneck left to `flows` TCP flows next to the cross traffic.
pub fn tcp_capacity_bytes_per_s(p: &Platform, flows: usize) -> f64 {
    let c = p.link_bytes_per_s;
    let u = p.cross_bytes_per_s;
    if u <= 0.0 {
        return c;
    }
    let rtt = queue_round_trip_s(p, flows);
    let floor = if rtt > 0.0 {
        flows as f64 * p.min_window_segments * p.mss_wire_bytes / rtt
    } else {
        0.0
    };
    let share = match p.tcp {
        TcpKind::Bbr => {
            let b = c - u / 1.25;
            if b > 0.0 {
                c * b / (u + b)
            } else {
                0.0
            }
        }
        TcpKind::Loss | TcpKind::Dctcp => c - u,
    };
    c.min(share.max(floor))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Pending,
    Control,
    Work,
    Done,
}

#[derive(Debug, Clone)]
struct Task {
    index: usize,
    phase: Phase,
    control_end: f64,
    flows: Vec<f64>,
    fetch_total: f64,
    fetched: f64,
    work: f64,
    done: f64,
    local: f64,
    start_s: f64,
    work_at_s: f64,
    blocked_s: f64,
    slot: usize,
}

impl Task {
    fn new(index: usize, spec: &TaskSpec) -> Self {
        let fetch_total: f64 = spec.fetch_bytes.iter().filter(|b| **b > 0.0).sum();
        Task {
            index,
            phase: Phase::Pending,
            control_end: 0.0,
            flows: Vec::new(),
            fetch_total,
            fetched: 0.0,
            work: spec.cpu_s,
            done: 0.0,
            local: if fetch_total > 0.0 {
                spec.local_fraction
            } else {
                1.0
            },
            start_s: f64::NAN,
            work_at_s: f64::NAN,
            blocked_s: 0.0,
            slot: usize::MAX,
        }
    }

    /// CPU work whose input has arrived.
    fn available(&self) -> f64 {
        if self.fetch_total <= 0.0 {
            return self.work;
        }
        self.work * (self.local + (1.0 - self.local) * (self.fetched / self.fetch_total).min(1.0))
    }

    fn live_flows(&self) -> usize {
        self.flows.iter().filter(|b| **b > 0.0).count()
    }
}

fn validate(cfg: &SparkConfig) -> Result<(), String> {
    let p = &cfg.platform;
    if p.slots < 1 {
        return Err("platform.slots: at least one executor task slot".into());
    }
    if p.host_cores.is_nan() || p.host_cores <= 0.0 {
        return Err("platform.host_cores: must be > 0".into());
    }
    if p.link_bytes_per_s.is_nan() || p.link_bytes_per_s <= 0.0 {
        return Err("platform.link_bytes_per_s: must be > 0".into());
    }
    if !(p.base_rtt_s >= 0.0 && p.base_rtt_s.is_finite()) {
        return Err("platform.base_rtt_s: must be >= 0".into());
    }
    if !(p.control_loss_s >= 0.0 && p.control_loss_s.is_finite()) {
        return Err("platform.control_loss_s: must be >= 0".into());
    }
    if p.packet_bottleneck() {
        p.probe(1)
            .validate()
            .map_err(|e| e.replacen("probe.", "platform.", 1))?;
    }
    for s in &cfg.stages {
        for t in &s.tasks {
            if t.cpu_s < 0.0 || t.latency_s < 0.0 || t.fetch_bytes.iter().any(|b| *b < 0.0) {
                return Err(format!("stage {}: negative task cost", s.stage_id));
            }
            if !(0.0..=1.0).contains(&t.local_fraction) {
                return Err(format!(
                    "stage {}: local_fraction outside [0, 1]",
                    s.stage_id
                ));
            }
        }
    }
    Ok(())
}

struct State<'a> {
    net: Bottleneck<'a>,
    error: Option<String>,
    specs: &'a [TaskSpec],
    tasks: Vec<Task>,
    running: Vec<usize>,
    pending: Vec<usize>,
    free_slots: Vec<usize>,
    now: f64,
    per_executor: usize,
    n_executors: usize,
    cross_flows: usize,
}

impl State<'_> {
    fn pinned(&self, t: usize) -> i64 {
        let ex = self.specs[t].executor;
        if ex >= 0 && (ex as usize) < self.n_executors {
            ex
        } else {
            -1
        }
    }

    fn next_start(&self) -> Option<(usize, usize)> {
        for &slot in &self.free_slots {
            let ex = (slot / self.per_executor) as i64;
            if let Some(&t) = self.pending.iter().find(|&&t| self.pinned(t) == ex) {
                return Some((t, slot));
            }
            if let Some(&t) = self.pending.iter().find(|&&t| self.pinned(t) < 0) {
                return Some((t, slot));
            }
        }
        None
    }

    fn n_flows(&self) -> usize {
        self.running
            .iter()
            .filter(|&&t| self.tasks[t].phase == Phase::Work)
            .map(|&t| self.tasks[t].live_flows())
            .sum()
    }

    fn start_task(&mut self, t: usize, slot: usize) {
        self.pending.retain(|&x| x != t);
        self.free_slots.retain(|&s| s != slot);
        let flows = self.n_flows() + self.cross_flows;
        let mut rtt = match self.net.round_trip_s(flows) {
            Ok(r) => r,
            Err(e) => {
                self.error.get_or_insert(e);
                0.0
            }
        };
        rtt += control_loss_s(self.net.p);
        let spec = &self.specs[t];
        let task = &mut self.tasks[t];
        task.slot = slot;
        task.start_s = self.now;
        task.phase = Phase::Control;
        task.control_end = self.now + spec.latency_s + spec.control_round_trips * rtt;
        self.running.push(t);
    }

    /// Move task `t` past what is over at `now`; true if its phase changed.
    fn step(&mut self, t: usize) -> bool {
        let now = self.now;
        let task = &mut self.tasks[t];
        if task.phase == Phase::Control && task.control_end <= now + EPS {
            task.phase = Phase::Work;
            task.work_at_s = now;
            task.flows = self.specs[t]
                .fetch_bytes
                .iter()
                .copied()
                .filter(|b| *b > 0.0)
                .collect();
            if task.flows.is_empty() {
                task.fetched = task.fetch_total;
            }
            self.step(t);
            return true;
        }
        if task.phase == Phase::Work && task.live_flows() == 0 && task.done >= task.work - EPS {
            task.phase = Phase::Done;
            return true;
        }
        false
    }
}

/// Run one configuration.
pub fn run_spark(cfg: &SparkConfig) -> Result<SparkResult, String> {
    validate(cfg)?;
    let p = &cfg.platform;
    let stages = &cfg.stages;
    let cpu_avail = (p.host_cores - p.background_cores).max(1e-3 * p.host_cores);
    let per_executor = p.slots_per_executor.max(1) as usize;
    let n_executors = ((p.slots as usize) / per_executor).max(1);
    let mut stage_rows = Vec::new();
    let mut task_rows = Vec::new();
    let mut network_bytes = 0.0;
    let mut started = 0usize; // stages started so far
    let mut active = false;
    let mut left = 0usize;
    let mut stage_start = 0.0;
    let mut next_stage_at = stages.first().map_or(0.0, |s| s.gap_s);
    let empty: Vec<TaskSpec> = Vec::new();
    let mut st = State {
        net: Bottleneck::new(p),
        error: None,
        specs: &empty,
        tasks: Vec::new(),
        running: Vec::new(),
        pending: Vec::new(),
        free_slots: (0..p.slots as usize).collect(),
        now: 0.0,
        per_executor,
        n_executors,
        cross_flows: p.cross_tcp_flows as usize,
    };

    loop {
        // Settle everything that happens at `now` without time passing.
        let mut changed = true;
        while changed {
            changed = false;
            if !active && st.now >= next_stage_at - EPS && started < stages.len() {
                let s = &stages[started];
                started += 1;
                stage_start = st.now;
                st.specs = &s.tasks;
                st.tasks = s
                    .tasks
                    .iter()
                    .enumerate()
                    .map(|(i, spec)| Task::new(i, spec))
                    .collect();
                st.pending = (0..s.tasks.len()).collect();
                left = s.tasks.len();
                active = true;
                changed = true;
            }
            while let Some((t, slot)) = st.next_start() {
                st.start_task(t, slot);
                changed = true;
            }
            let snapshot = st.running.clone();
            for t in snapshot {
                if st.step(t) {
                    changed = true;
                }
                if st.tasks[t].phase == Phase::Done {
                    st.running.retain(|&x| x != t);
                    let task = &st.tasks[t];
                    st.free_slots.push(task.slot);
                    st.free_slots.sort_unstable();
                    task_rows.push(TaskRecord {
                        stage_id: stages[started - 1].stage_id,
                        index: task.index,
                        slot: task.slot,
                        start_s: task.start_s,
                        work_at_s: task.work_at_s,
                        blocked_s: task.blocked_s,
                        end_s: st.now,
                    });
                    left -= 1;
                }
            }
            if active && left == 0 {
                let s = &stages[started - 1];
                stage_rows.push(StageRecord {
                    stage_id: s.stage_id,
                    start_s: stage_start,
                    end_s: st.now,
                    tasks: s.tasks.len(),
                });
                active = false;
                next_stage_at = st.now + stages.get(started).map_or(0.0, |n| n.gap_s);
                changed = true;
            }
        }
        if !active && started >= stages.len() {
            break;
        }
        // Network: equal shares of what TCP gets of the bottleneck.
        let flows = st.n_flows();
        let all = flows + st.cross_flows;
        let flow_rate = if flows > 0 {
            st.net.tcp_capacity(all)? / all as f64
        } else {
            0.0
        };
        // CPU: who computes and who is blocked on its data.
        let working: Vec<usize> = st
            .running
            .iter()
            .copied()
            .filter(|&t| {
                st.tasks[t].phase == Phase::Work && st.tasks[t].done < st.tasks[t].work - EPS
            })
            .collect();
        let supply = |t: usize| -> f64 {
            let task = &st.tasks[t];
            let lf = task.live_flows();
            if lf > 0 {
                task.work * (1.0 - task.local) * lf as f64 * flow_rate / task.fetch_total
            } else {
                0.0
            }
        };
        let mut computing = working.clone();
        let mut blocked: Vec<usize> = Vec::new();
        loop {
            let rate = if computing.is_empty() {
                0.0
            } else {
                (cpu_avail / computing.len() as f64).min(1.0)
            };
            let caught: Vec<usize> = computing
                .iter()
                .copied()
                .filter(|&t| st.tasks[t].done >= st.tasks[t].available() - EPS && supply(t) < rate)
                .collect();
            if caught.is_empty() {
                break;
            }
            computing.retain(|t| !caught.contains(t));
            blocked.extend(caught);
        }
        let cpu_rate = if computing.is_empty() {
            0.0
        } else {
            (cpu_avail / computing.len() as f64).min(1.0)
        };
        // Time to the next event.
        let mut dt = if active {
            f64::INFINITY
        } else {
            next_stage_at - st.now
        };
        for &t in &st.running {
            let task = &st.tasks[t];
            match task.phase {
                Phase::Control => dt = dt.min(task.control_end - st.now),
                Phase::Work if task.live_flows() > 0 => {
                    let m = task
                        .flows
                        .iter()
                        .copied()
                        .filter(|b| *b > 0.0)
                        .fold(f64::INFINITY, f64::min);
                    dt = dt.min(m / flow_rate);
                }
                _ => {}
            }
        }
        for &t in &computing {
            let task = &st.tasks[t];
            dt = dt.min((task.work - task.done) / cpu_rate);
            let avail = task.available();
            let gap = avail - task.done;
            let s = supply(t);
            if avail < task.work && cpu_rate > s && gap > EPS {
                dt = dt.min(gap / (cpu_rate - s));
            }
        }
        if !dt.is_finite() {
            return Err("simulation stalled (no event ahead)".into());
        }
        let dt = dt.max(0.0);
        // Advance the fluid to the event.
        let running = st.running.clone();
        for t in running {
            let task = &mut st.tasks[t];
            if task.phase == Phase::Work && !task.flows.is_empty() {
                for b in task.flows.iter_mut() {
                    if *b > 0.0 {
                        let moved = b.min(flow_rate * dt);
                        network_bytes += moved;
                        task.fetched += moved;
                        *b = if *b - moved > 1e-6 { *b - moved } else { 0.0 };
                    }
                }
                if task.live_flows() == 0 {
                    task.fetched = task.fetch_total;
                }
            }
        }
        for &t in &computing {
            let task = &mut st.tasks[t];
            let avail = task.available();
            task.done = task
                .work
                .min(task.done + cpu_rate * dt)
                .min(avail.max(task.done));
        }
        for &t in &blocked {
            let task = &mut st.tasks[t];
            let avail = task.available();
            task.done = task.work.min(task.done.max(avail));
            task.blocked_s += dt;
        }
        st.now += dt;
    }

    if let Some(e) = st.error {
        return Err(e);
    }
    Ok(SparkResult {
        job_time_s: st.now + cfg.tail_s,
        stages: stage_rows,
        tasks: task_rows,
        network_bytes,
    })
}

/// JSON in, JSON out (the Python binding's `run_spark`).
pub fn run_spark_json(config_json: &str) -> Result<String, String> {
    let cfg: SparkConfig =
        serde_json::from_str(config_json).map_err(|e| format!("configuration: {e}"))?;
    let result = run_spark(&cfg)?;
    serde_json::to_string(&result).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: f64 = 12.5e6;

    fn platform() -> Platform {
        Platform {
            slots: 3,
            slots_per_executor: 1,
            host_cores: 2.0,
            background_cores: 0.0,
            link_bytes_per_s: C,
            cross_bytes_per_s: 0.0,
            cross_tcp_flows: 0,
            queue_bytes: 250_000.0,
            tcp: TcpKind::Loss,
            mss_wire_bytes: 1514.0,
            min_window_segments: 1.5,
            base_rtt_s: 0.0,
            red: None,
            ecn_capable: false,
            growth: Growth::Reno,
            control_loss_s: 0.0,
        }
    }

    fn task(cpu: f64, fetch: &[f64], executor: i64) -> TaskSpec {
        TaskSpec {
            latency_s: 0.0,
            cpu_s: cpu,
            fetch_bytes: fetch.to_vec(),
            local_fraction: 0.0,
            control_round_trips: 0.0,
            executor,
        }
    }

    fn one_stage(p: Platform, tasks: Vec<TaskSpec>) -> f64 {
        let cfg = SparkConfig {
            platform: p,
            stages: vec![StageSpec {
                stage_id: 0,
                gap_s: 0.0,
                tasks,
            }],
            tail_s: 0.0,
        };
        run_spark(&cfg).unwrap().job_time_s
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn processor_sharing_of_two_cores() {
        assert!(close(one_stage(platform(), vec![task(1.0, &[], -1)]), 1.0));
        assert!(close(
            one_stage(platform(), vec![task(1.0, &[], -1); 3]),
            1.5
        ));
        assert!(close(
            one_stage(platform(), vec![task(1.0, &[], -1); 4]),
            2.5
        ));
    }

    #[test]
    fn flows_share_the_link_and_overlap_with_cpu() {
        assert!(close(
            one_stage(
                platform(),
                vec![task(0.0, &[C, C], -1), task(0.0, &[C], -1)]
            ),
            3.0
        ));
        // 1 s of CPU over 1 s of fetch: the work follows the data, ends just after it
        let t = one_stage(platform(), vec![task(0.5, &[C], -1)]);
        assert!(close(t, 1.0));
    }

    #[test]
    fn pinned_tasks_wait_for_their_executor() {
        let mut p = platform();
        p.host_cores = 3.0;
        let t = one_stage(
            p,
            vec![task(1.0, &[], 0), task(0.1, &[], 1), task(0.1, &[], 0)],
        );
        assert!(close(t, 1.1));
    }

    #[test]
    fn cross_traffic_capacity() {
        let mut p = platform();
        p.cross_bytes_per_s = 0.9 * C;
        assert!(close(tcp_capacity_bytes_per_s(&p, 6), 0.1 * C));
        p.cross_bytes_per_s = C;
        let rtt = 2.0 * 250_000.0 / C;
        assert!(close(
            tcp_capacity_bytes_per_s(&p, 6),
            6.0 * 1.5 * 1514.0 / rtt
        ));
        p.tcp = TcpKind::Bbr;
        let b = C - C / 1.25;
        assert!(close(tcp_capacity_bytes_per_s(&p, 6), C * b / (C + b)));
    }

    #[test]
    fn bad_configuration_is_refused() {
        let mut p = platform();
        p.slots = 0;
        let cfg = SparkConfig {
            platform: p,
            stages: vec![],
            tail_s: 0.0,
        };
        assert!(run_spark(&cfg).is_err());
    }

    #[test]
    fn red_ecn_bottleneck_uses_the_switch_logic() {
        // Same job, same 250 kB buffer: droptail + cubic stands full, a DCTCP-marking queue
        // (K = 30 kB, the switch's step marking) keeps control round trips short.
        let tasks = || {
            vec![
                TaskSpec {
                    control_round_trips: 20.0,
                    ..task(0.05, &[2e6, 2e6], -1)
                },
                TaskSpec {
                    control_round_trips: 20.0,
                    ..task(0.05, &[2e6, 2e6], -1)
                },
                TaskSpec {
                    control_round_trips: 20.0,
                    ..task(0.05, &[2e6, 2e6], -1)
                },
            ]
        };
        let mut p = platform();
        p.cross_bytes_per_s = 0.3 * C;
        let droptail = one_stage(p.clone(), tasks());
        p.tcp = TcpKind::Dctcp;
        p.red = Some(RedSpec::step(30_000.0));
        let mut net = Bottleneck::new(&p);
        let rtt = net.round_trip_s(6).unwrap();
        assert!(rtt < 2.0 * 60_000.0 / C && rtt > 0.0, "rtt {rtt}");
        let cap = net.tcp_capacity(6).unwrap();
        assert!(cap > 0.7 * C - 1.0 && cap <= C, "cap {cap}");
        let dctcp = one_stage(p.clone(), tasks());
        assert!(dctcp < droptail, "dctcp {dctcp} droptail {droptail}");
        p.red.as_mut().unwrap().max_bytes = 1e9;
        let err = run_spark(&SparkConfig {
            platform: p,
            stages: vec![],
            tail_s: 0.0,
        })
        .unwrap_err();
        assert!(err.contains("platform.red"), "{err}");
    }
}
