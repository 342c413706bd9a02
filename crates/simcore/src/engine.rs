//! The discrete-event engine: jobs arrive, their tasks pass through the storage cores (pushed
//! operators), the network (the partition's remaining bytes) and the compute cores (the rest).
//!
//! Each cluster's cores form one FIFO pool. At most `max_concurrent_jobs` jobs (S_max) move data
//! at once, admitted in arrival order; a free one of the `max_concurrent_flows` transfer slots
//! goes to the admitted job with the fewest in flight (or, optionally, to each in turn), so each
//! gets about B/S of the bandwidth as seed 003's model assumes. A job holds
//! its admission while it has transfers queued or in flight. Time is virtual and the engine is
//! pure: the same configuration and seed give the same result.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::model::{
    ClusterConfig, Config, JobConfig, JobResult, LinkResult, NetworkEstimate, NetworkMode,
    OperatorEstimate, PlannerRecord, Policy, RunResult, SlotOrder,
};
use crate::netaware;
use crate::network::{FlowNetwork, Link, Ord64};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Arrival(usize),
    StorageDone { task: usize, core: u32 },
    ComputeDone { task: usize, core: u32 },
    ChunkDone(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// no transfer queued or in flight
    Idle,
    /// transfers queued, waiting for admission (S_max reached)
    Waiting,
    /// admitted: its transfers share the network
    Active,
}

#[derive(Debug, Clone)]
struct Task {
    job: usize,
    storage_cycles: f64,
    compute_cycles: f64,
    wire_bytes: f64,
    source_machine: u32,
    // chunk mode: wire bytes still to send, and how many links of the path are held
    chunk_left_bytes: f64,
    links_held: usize,
}

#[derive(Debug, Clone)]
struct JobState {
    arrival_s: f64,
    pushed_ops: u32,
    tasks: u32,
    tasks_left: u32,
    transfers_left: u32,
    outstanding_wire_bytes: f64,
    slot: Slot,
    /// transfers ready but not started
    net_queue: VecDeque<usize>,
    flows_in_flight: u32,
    /// wire bytes of the transfers queued or in flight
    network_bytes: f64,
    finish_s: f64,
    payload_bytes: f64,
    wire_bytes: f64,
    storage_cycles: f64,
    compute_cycles: f64,
    planner: Option<PlannerRecord>,
    /// storage cycles of its pushed operators not yet done, and the wire bytes they will emit
    storage_cycles_left: f64,
    storage_wire_bytes: f64,
}

#[derive(Debug, Clone)]
struct Pool {
    cfg: ClusterConfig,
    free: BinaryHeap<Reverse<u32>>,
    queue: VecDeque<usize>,
    /// per core: (start, cycles/s) of the task it runs
    running: Vec<Option<f64>>,
    busy_core_s: f64,
    /// committed cycles not yet completed (queued, running, or still upstream)
    outstanding_cycles: f64,
}

impl Pool {
    fn new(cfg: &ClusterConfig) -> Self {
        let cores = cfg.cores();
        Pool {
            cfg: cfg.clone(),
            free: (0..cores).map(Reverse).collect(),
            queue: VecDeque::new(),
            running: vec![None; cores as usize],
            busy_core_s: 0.0,
            outstanding_cycles: 0.0,
        }
    }

    /// Committed work still to do at `now_s`, cycles.
    fn remaining_cycles(&self, now_s: f64) -> f64 {
        let hz = self.cfg.effective_hz();
        let done: f64 = self
            .running
            .iter()
            .flatten()
            .map(|start| (now_s - start) * hz)
            .sum();
        (self.outstanding_cycles - done).max(0.0)
    }
}

#[derive(Debug, Clone)]
pub struct Sim {
    cfg: Config,
    now_s: f64,
    seq: u64,
    events: BinaryHeap<Reverse<(Ord64, u64, Kind)>>,
    event_count: u64,
    jobs: Vec<Option<JobState>>,
    tasks: Vec<Task>,
    storage: Pool,
    compute: Pool,
    flow: FlowNetwork,
    // chunk mode: which task holds each link, and who waits for it
    chunk_holder: Vec<Option<usize>>,
    chunk_waiting: Vec<VecDeque<usize>>,
    /// admitted jobs, served round-robin from `next_turn`
    active_jobs: Vec<usize>,
    next_turn: usize,
    waiting_jobs: VecDeque<usize>,
    flows_in_flight: u32,
    max_flows: u32,
    completed: Vec<u64>,
}

impl Sim {
    /// A simulation with no job yet; see [`Sim::add_job`].
    pub fn new(cfg: &Config) -> Result<Self, String> {
        cfg.validate()?;
        let mut links = vec![Link {
            name: "inter_cluster".into(),
            capacity_bytes_per_s: cfg.network.inter_cluster_bytes_per_s,
            carried_bytes: 0.0,
            flow_bytes: 0.0,
        }];
        if let Some(nic) = cfg.network.storage_nic_bytes_per_s {
            for m in 0..cfg.storage.machines {
                links.push(Link {
                    name: format!("storage{m}_nic"),
                    capacity_bytes_per_s: nic,
                    carried_bytes: 0.0,
                    flow_bytes: 0.0,
                });
            }
        }
        let n_links = links.len();
        Ok(Sim {
            cfg: cfg.clone(),
            now_s: 0.0,
            seq: 0,
            events: BinaryHeap::new(),
            event_count: 0,
            jobs: vec![None; cfg.jobs.len()],
            tasks: Vec::new(),
            storage: Pool::new(&cfg.storage),
            compute: Pool::new(&cfg.compute),
            flow: FlowNetwork::new(links, cfg.record_trace),
            chunk_holder: vec![None; n_links],
            chunk_waiting: vec![VecDeque::new(); n_links],
            active_jobs: Vec::new(),
            next_turn: 0,
            waiting_jobs: VecDeque::new(),
            flows_in_flight: 0,
            max_flows: cfg
                .network
                .max_concurrent_flows
                .unwrap_or_else(|| cfg.compute.cores()),
            completed: Vec::new(),
        })
    }

    /// Schedule job `j` of the configuration; `pushed_ops` overrides the policy's choice.
    pub fn add_job(&mut self, j: usize, pushed_ops: Option<u32>) {
        let arrival = self.cfg.jobs[j].arrival_s;
        self.jobs[j] = Some(JobState {
            arrival_s: arrival,
            pushed_ops: pushed_ops.unwrap_or(u32::MAX),
            tasks: 0,
            tasks_left: 0,
            transfers_left: 0,
            outstanding_wire_bytes: 0.0,
            slot: Slot::Idle,
            net_queue: VecDeque::new(),
            flows_in_flight: 0,
            network_bytes: 0.0,
            finish_s: f64::NAN,
            payload_bytes: 0.0,
            wire_bytes: 0.0,
            storage_cycles: 0.0,
            compute_cycles: 0.0,
            planner: None,
            storage_cycles_left: 0.0,
            storage_wire_bytes: 0.0,
        });
        self.schedule(arrival, Kind::Arrival(j));
    }

    fn schedule(&mut self, t: f64, kind: Kind) {
        self.seq += 1;
        self.events.push(Reverse((Ord64(t), self.seq, kind)));
    }

    /// Process every event strictly before `limit_s`, then stand at `limit_s`.
    pub fn run_until(&mut self, limit_s: f64) {
        let flow_mode = self.cfg.network.mode == NetworkMode::Flow;
        loop {
            let t_net = if flow_mode {
                self.flow.settle(self.now_s);
                self.flow.next_completion_s()
            } else {
                f64::INFINITY
            };
            let t_ev = self
                .events
                .peek()
                .map_or(f64::INFINITY, |Reverse((t, _, _))| t.0);
            let t = t_net.min(t_ev);
            if t.is_infinite() || t >= limit_s {
                break;
            }
            self.event_count += 1;
            if t_net <= t_ev {
                self.now_s = t_net;
                self.flow.advance(t_net);
                let mut done = std::mem::take(&mut self.completed);
                self.flow.take_completed(&mut done);
                // Free every slot of the batch before handing any out again, so that the
                // order of simultaneous completions does not decide who gets them.
                for &task in &done {
                    self.transfer_done(task as usize);
                }
                self.dispatch();
                done.clear();
                self.completed = done;
            } else {
                let Reverse((t, _, kind)) = self.events.pop().expect("peeked");
                self.now_s = t.0;
                if flow_mode {
                    self.flow.advance(t.0);
                }
                self.handle(kind);
            }
        }
        if limit_s.is_finite() && limit_s > self.now_s {
            self.now_s = limit_s;
            if flow_mode {
                self.flow.advance(limit_s);
            }
        }
    }

    fn handle(&mut self, kind: Kind) {
        match kind {
            Kind::Arrival(j) => self.arrive(j),
            Kind::StorageDone { task, core } => {
                self.finish_on_core(true, task, core);
                let (cycles, wire) = (self.tasks[task].storage_cycles, self.tasks[task].wire_bytes);
                let job = self.jobs[self.tasks[task].job].as_mut().expect("job");
                job.storage_cycles_left -= cycles;
                job.storage_wire_bytes -= wire;
                self.network_ready(task);
            }
            Kind::ComputeDone { task, core } => {
                self.finish_on_core(false, task, core);
                self.task_done(task);
            }
            Kind::ChunkDone(task) => self.chunk_done(task),
        }
    }

    fn arrive(&mut self, j: usize) {
        let job_cfg = self.cfg.jobs[j].clone();
        let preset = self.jobs[j].as_ref().expect("added").pushed_ops;
        let mut planner = None;
        let k = if preset != u32::MAX {
            preset
        } else {
            match self.cfg.policy {
                Policy::Fixed => job_cfg.pushed_ops.unwrap_or(0),
                Policy::NetAware | Policy::NetAwareChain | Policy::NetAwareFluid => {
                    let mut rec = self.estimate(&job_cfg);
                    let k = match self.cfg.policy {
                        Policy::NetAware => netaware::plan(&rec.operators, &rec.network),
                        Policy::NetAwareChain => netaware::plan_chain(&rec.operators, &rec.network),
                        _ => {
                            let view = netaware::TransferView {
                                transfers: self.pending_transfers(),
                                queued: self.active_jobs.len() + self.waiting_jobs.len(),
                            };
                            let k = netaware::plan_fluid(&rec.operators, &rec.network, &view);
                            rec.transfers = Some(view);
                            k
                        }
                    };
                    planner = Some(rec);
                    k
                }
                Policy::Oracle => 0, // the oracle driver always presets
            }
        };
        let k = k.min(job_cfg.max_pushable());

        // Per-job random stream: draws do not depend on the policy or on other jobs.
        let mut rng = ChaCha8Rng::seed_from_u64(self.cfg.seed);
        rng.set_stream(j as u64);
        let n_tasks = job_cfg.tasks();
        let first = self.tasks.len();
        let (mut payload_sum, mut wire_sum, mut s_sum, mut c_sum) = (0.0, 0.0, 0.0, 0.0);
        let mut stored_wire = 0.0;
        for i in 0..n_tasks {
            let jitter: f64 = 1.0 + self.cfg.cpu_jitter * (2.0 * rng.random::<f64>() - 1.0);
            let source_machine = rng.random_range(0..self.cfg.storage.machines);
            let mut bytes = job_cfg.task_bytes(i);
            let (mut s_cyc, mut c_cyc) = (0.0, 0.0);
            let mut payload = 0.0;
            for (o, op) in job_cfg.operators.iter().enumerate() {
                if o as u32 == k {
                    payload = bytes;
                }
                let cycles = op.cycles_per_byte * bytes * jitter;
                if (o as u32) < k {
                    s_cyc += cycles;
                } else {
                    c_cyc += cycles;
                }
                bytes /= op.reduction_factor;
            }
            if k as usize == job_cfg.operators.len() {
                payload = bytes;
            }
            let wire = self.cfg.network.wire_bytes(payload);
            payload_sum += payload;
            wire_sum += wire;
            if s_cyc > 0.0 {
                stored_wire += wire;
            }
            s_sum += s_cyc;
            c_sum += c_cyc;
            self.tasks.push(Task {
                job: j,
                storage_cycles: s_cyc,
                compute_cycles: c_cyc,
                wire_bytes: wire,
                source_machine,
                chunk_left_bytes: wire,
                links_held: 0,
            });
        }
        self.storage.outstanding_cycles += s_sum;
        self.compute.outstanding_cycles += c_sum;
        {
            let job = self.jobs[j].as_mut().expect("added");
            job.pushed_ops = k;
            job.tasks = n_tasks;
            job.tasks_left = n_tasks;
            job.transfers_left = n_tasks;
            job.outstanding_wire_bytes = wire_sum;
            job.payload_bytes = payload_sum;
            job.wire_bytes = wire_sum;
            job.storage_cycles = s_sum;
            job.compute_cycles = c_sum;
            job.planner = planner;
            job.storage_cycles_left = s_sum;
            job.storage_wire_bytes = stored_wire;
        }
        for task in first..first + n_tasks as usize {
            if self.tasks[task].storage_cycles > 0.0 {
                self.submit(true, task);
            } else {
                self.network_ready(task);
            }
        }
    }

    /// The Net-Aware model's inputs for a job arriving now.
    fn estimate(&self, job: &JobConfig) -> PlannerRecord {
        let partitions = job.tasks() as f64;
        let mut total_in = job.input_bytes;
        let mut operators = Vec::new();
        let c_rem = self.compute.remaining_cycles(self.now_s);
        let s_rem = self.storage.remaining_cycles(self.now_s);
        let c_cap = self.compute.cfg.cores() as f64 * self.compute.cfg.effective_hz();
        let s_cap = self.storage.cfg.cores() as f64 * self.storage.cfg.effective_hz();
        for op in &job.operators {
            let cycles_per_partition = op.cycles_per_byte * total_in / partitions;
            let (cq, cx, sq, sx) = if cycles_per_partition > 0.0 {
                (
                    c_rem / cycles_per_partition,
                    c_cap / cycles_per_partition,
                    s_rem / cycles_per_partition,
                    s_cap / cycles_per_partition,
                )
            } else {
                (0.0, f64::INFINITY, 0.0, f64::INFINITY)
            };
            let total_out = total_in / op.reduction_factor;
            operators.push(OperatorEstimate {
                name: op.name.clone(),
                partitions,
                input_gb: total_in / 1e9,
                output_gb: total_out / 1e9,
                compute_queued_partitions: cq,
                compute_drain_partitions_per_s: cx,
                storage_queued_partitions: sq,
                storage_drain_partitions_per_s: sx,
                pushable: op.pushable,
            });
            total_in = total_out;
        }
        let mut others = 0u32;
        let mut backlog = 0.0;
        for job in self.jobs.iter().flatten() {
            if job.slot != Slot::Idle {
                others += 1;
                backlog += job.network_bytes;
            }
        }
        let s_max = self.cfg.network.max_concurrent_jobs as f64;
        PlannerRecord {
            transfers: None,
            operators,
            network: NetworkEstimate {
                bandwidth_gbps: self.cfg.network.inter_cluster_bytes_per_s * 8.0 / 1e9,
                concurrent_transfers: others as f64 + 1.0,
                max_concurrent_transfers: s_max,
                backlog_gb: backlog / s_max / 1e9,
            },
        }
    }

    /// Every job's data still to cross, for [`netaware::plan_fluid`]: the bytes queued or in
    /// flight (what is left of them), and the bytes its pushed operators will still emit, spread
    /// over the time the storage FIFO needs to reach and finish its tasks. In admission order.
    fn pending_transfers(&self) -> Vec<netaware::PendingTransfer> {
        // What is left of each job's flows in flight (flow mode; chunk mode counts whole tasks).
        let mut in_flight_of_job = vec![0.0; self.jobs.len()];
        for (flow, left) in self.flow.remaining_bytes() {
            in_flight_of_job[self.tasks[flow as usize].job] += left;
        }
        let s_cap = self.storage.cfg.cores() as f64 * self.storage.cfg.effective_hz();
        let mut order: Vec<usize> = self
            .active_jobs
            .iter()
            .copied()
            .chain(self.waiting_jobs.iter().copied())
            .collect();
        for (j, job) in self.jobs.iter().enumerate() {
            if let Some(job) = job {
                if job.slot == Slot::Idle && job.storage_wire_bytes > 0.0 {
                    order.push(j);
                }
            }
        }
        // The storage FIFO serves jobs in arrival order.
        let mut by_arrival: Vec<usize> = (0..self.jobs.len())
            .filter(|&j| {
                self.jobs[j]
                    .as_ref()
                    .is_some_and(|job| job.storage_cycles_left > 0.0)
            })
            .collect();
        by_arrival.sort_by(|&a, &b| {
            let (ja, jb) = (self.jobs[a].as_ref(), self.jobs[b].as_ref());
            ja.expect("job")
                .arrival_s
                .total_cmp(&jb.expect("job").arrival_s)
        });
        let mut window = std::collections::HashMap::new();
        let mut done_s = 0.0;
        for j in by_arrival {
            let job = self.jobs[j].as_ref().expect("job");
            let from = done_s;
            done_s += job.storage_cycles_left / s_cap;
            window.insert(j, (from, done_s));
        }
        let mut out = Vec::new();
        for j in order {
            let job = self.jobs[j].as_ref().expect("job");
            let queued: f64 = job
                .net_queue
                .iter()
                .map(|&t| self.tasks[t].wire_bytes)
                .sum();
            let in_flight = if self.cfg.network.mode == NetworkMode::Flow {
                in_flight_of_job[j]
            } else {
                job.network_bytes - queued
            };
            let (from_s, until_s) = window.get(&j).copied().unwrap_or((0.0, 0.0));
            out.push(netaware::PendingTransfer {
                ready_gb: (queued + in_flight) / 1e9,
                produced_gb: job.storage_wire_bytes.max(0.0) / 1e9,
                from_s,
                until_s,
            });
        }
        out
    }

    fn pool(&mut self, storage: bool) -> &mut Pool {
        if storage {
            &mut self.storage
        } else {
            &mut self.compute
        }
    }

    fn submit(&mut self, storage: bool, task: usize) {
        let core = self.pool(storage).free.pop();
        match core {
            Some(Reverse(core)) => self.start_on_core(storage, task, core),
            None => self.pool(storage).queue.push_back(task),
        }
    }

    fn start_on_core(&mut self, storage: bool, task: usize, core: u32) {
        let now = self.now_s;
        let t = &mut self.tasks[task];
        let (cycles, hz) = if storage {
            t.source_machine = core / self.storage.cfg.cores_per_machine;
            (t.storage_cycles, self.storage.cfg.effective_hz())
        } else {
            (t.compute_cycles, self.compute.cfg.effective_hz())
        };
        self.pool(storage).running[core as usize] = Some(now);
        let end = now + cycles / hz;
        let kind = if storage {
            Kind::StorageDone { task, core }
        } else {
            Kind::ComputeDone { task, core }
        };
        self.schedule(end, kind);
    }

    fn finish_on_core(&mut self, storage: bool, task: usize, core: u32) {
        let now = self.now_s;
        let cycles = if storage {
            self.tasks[task].storage_cycles
        } else {
            self.tasks[task].compute_cycles
        };
        let pool = self.pool(storage);
        let start = pool.running[core as usize].take().expect("core was busy");
        pool.busy_core_s += now - start;
        pool.outstanding_cycles -= cycles;
        match pool.queue.pop_front() {
            Some(next) => self.start_on_core(storage, next, core),
            None => self.pool(storage).free.push(Reverse(core)),
        }
    }

    fn network_ready(&mut self, task: usize) {
        let j = self.tasks[task].job;
        let wire = self.tasks[task].wire_bytes;
        let job = self.jobs[j].as_mut().expect("job");
        job.net_queue.push_back(task);
        job.network_bytes += wire;
        if job.slot == Slot::Idle {
            if self.active_jobs.len() < self.cfg.network.max_concurrent_jobs as usize {
                job.slot = Slot::Active;
                self.active_jobs.push(j);
            } else {
                job.slot = Slot::Waiting;
                self.waiting_jobs.push_back(j);
            }
        }
        self.dispatch();
    }

    /// Fill free transfer slots from the admitted jobs' queues: in turn, or to the job with the
    /// fewest transfers in flight (ties in turn).
    fn dispatch(&mut self) {
        let fair = self.cfg.network.slot_order == SlotOrder::Fair;
        while self.flows_in_flight < self.max_flows {
            let n = self.active_jobs.len();
            let mut pick: Option<(u32, usize)> = None;
            for i in 0..n {
                let idx = (self.next_turn + i) % n;
                let job = self.jobs[self.active_jobs[idx]].as_ref().expect("job");
                if job.net_queue.is_empty() {
                    continue;
                }
                if pick.is_none_or(|(f, _)| job.flows_in_flight < f) {
                    pick = Some((job.flows_in_flight, idx));
                }
                if !fair {
                    break;
                }
            }
            let Some((_, idx)) = pick else { break };
            let job = self.jobs[self.active_jobs[idx]].as_mut().expect("job");
            let task = job.net_queue.pop_front().expect("queued");
            job.flows_in_flight += 1;
            self.flows_in_flight += 1;
            self.next_turn = idx + 1;
            self.start_transfer(task);
        }
    }

    fn path(&self, task: usize) -> Vec<usize> {
        if self.cfg.network.storage_nic_bytes_per_s.is_some() {
            vec![0, 1 + self.tasks[task].source_machine as usize]
        } else {
            vec![0]
        }
    }

    fn start_transfer(&mut self, task: usize) {
        let path = self.path(task);
        match self.cfg.network.mode {
            NetworkMode::Flow => {
                let bytes = self.tasks[task].wire_bytes;
                self.flow.add(task as u64, path, bytes);
            }
            NetworkMode::Chunk => {
                for &l in &path {
                    self.flow.links[l].flow_bytes += self.tasks[task].wire_bytes;
                }
                self.tasks[task].links_held = 0;
                self.chunk_acquire(task);
            }
        }
    }

    /// Chunk mode: take the path's links in order; once all are held, send one chunk.
    fn chunk_acquire(&mut self, task: usize) {
        let path = self.path(task);
        while self.tasks[task].links_held < path.len() {
            let l = path[self.tasks[task].links_held];
            if self.chunk_holder[l].is_some() {
                self.chunk_waiting[l].push_back(task);
                return;
            }
            self.chunk_holder[l] = Some(task);
            self.tasks[task].links_held += 1;
        }
        let rate = path
            .iter()
            .map(|&l| self.flow.links[l].capacity_bytes_per_s)
            .fold(f64::INFINITY, f64::min);
        let size = self.tasks[task]
            .chunk_left_bytes
            .min(self.cfg.network.chunk_bytes);
        self.schedule(self.now_s + size / rate, Kind::ChunkDone(task));
    }

    fn chunk_done(&mut self, task: usize) {
        let path = self.path(task);
        let size = self.tasks[task]
            .chunk_left_bytes
            .min(self.cfg.network.chunk_bytes);
        self.tasks[task].chunk_left_bytes -= size;
        self.tasks[task].links_held = 0;
        for &l in &path {
            self.flow.links[l].carried_bytes += size;
            self.chunk_holder[l] = None;
            if let Some(next) = self.chunk_waiting[l].pop_front() {
                // The next in line takes this link and goes on to the rest of its path.
                self.chunk_holder[l] = Some(next);
                self.tasks[next].links_held += 1;
                self.chunk_acquire(next);
            }
        }
        if self.tasks[task].chunk_left_bytes > 1e-9 {
            self.chunk_acquire(task);
        } else {
            self.transfer_done(task);
            self.dispatch();
        }
    }

    /// A transfer ended: free its slot (the caller hands slots out again with `dispatch`).
    fn transfer_done(&mut self, task: usize) {
        let j = self.tasks[task].job;
        let wire = self.tasks[task].wire_bytes;
        self.flows_in_flight -= 1;
        let job = self.jobs[j].as_mut().expect("job");
        job.transfers_left -= 1;
        job.outstanding_wire_bytes -= wire;
        job.network_bytes -= wire;
        job.flows_in_flight -= 1;
        if job.flows_in_flight == 0 && job.net_queue.is_empty() {
            // Nothing left to move for now: give the admission to the next waiting job.
            job.slot = Slot::Idle;
            job.network_bytes = 0.0;
            let idx = self
                .active_jobs
                .iter()
                .position(|&a| a == j)
                .expect("active");
            self.active_jobs.remove(idx);
            if self.next_turn > idx {
                self.next_turn -= 1;
            }
            if let Some(next) = self.waiting_jobs.pop_front() {
                self.jobs[next].as_mut().expect("job").slot = Slot::Active;
                self.active_jobs.push(next);
            }
        }
        if self.tasks[task].compute_cycles > 0.0 {
            self.submit(false, task);
        } else {
            self.task_done(task);
        }
    }

    fn task_done(&mut self, task: usize) {
        let j = self.tasks[task].job;
        let now = self.now_s;
        let job = self.jobs[j].as_mut().expect("job");
        job.tasks_left -= 1;
        if job.tasks_left == 0 {
            job.finish_s = now;
        }
    }

    /// The jobs added so far, in job order, with the run's totals.
    pub fn result(mut self) -> RunResult {
        let s_hz = self.storage.cfg.effective_hz();
        let c_hz = self.compute.cfg.effective_hz();
        let mut jobs = Vec::new();
        let mut makespan: f64 = 0.0;
        for (j, job) in self.jobs.iter().enumerate() {
            let Some(job) = job else { continue };
            makespan = makespan.max(job.finish_s);
            jobs.push(JobResult {
                job: j,
                arrival_s: job.arrival_s,
                pushed_ops: job.pushed_ops,
                tasks: job.tasks,
                finish_s: job.finish_s,
                duration_s: job.finish_s - job.arrival_s,
                payload_bytes: job.payload_bytes,
                wire_bytes: job.wire_bytes,
                storage_cpu_s: job.storage_cycles / s_hz,
                compute_cpu_s: job.compute_cycles / c_hz,
                planner: job.planner.clone(),
            });
        }
        let links = self
            .flow
            .links
            .iter()
            .map(|l| LinkResult {
                name: l.name.clone(),
                capacity_bytes_per_s: l.capacity_bytes_per_s,
                carried_bytes: l.carried_bytes,
                flow_bytes: l.flow_bytes,
            })
            .collect();
        RunResult {
            jobs,
            links,
            makespan_s: makespan,
            events: self.event_count,
            storage_busy_core_s: self.storage.busy_core_s,
            compute_busy_core_s: self.compute.busy_core_s,
            trace: std::mem::take(&mut self.flow.trace),
        }
    }

    /// Sum of (finish - arrival) over the jobs added so far, after running to the end.
    fn total_job_time_s(&self) -> f64 {
        self.jobs
            .iter()
            .flatten()
            .map(|j| j.finish_s - j.arrival_s)
            .sum()
    }
}

/// Run a configuration to completion under its policy.
pub fn run(cfg: &Config) -> Result<RunResult, String> {
    let mut sim = Sim::new(cfg)?;
    if cfg.policy == Policy::Oracle {
        let mut order: Vec<usize> = (0..cfg.jobs.len()).collect();
        order.sort_by(|&a, &b| cfg.jobs[a].arrival_s.total_cmp(&cfg.jobs[b].arrival_s));
        for j in order {
            sim.run_until(cfg.jobs[j].arrival_s);
            let mut best = (f64::INFINITY, 0);
            for k in 0..=cfg.jobs[j].max_pushable() {
                let mut trial = sim.clone();
                trial.cfg.record_trace = false;
                trial.flow.record_trace = false;
                trial.add_job(j, Some(k));
                trial.run_until(f64::INFINITY);
                let cost = trial.total_job_time_s();
                if cost < best.0 {
                    best = (cost, k);
                }
            }
            sim.add_job(j, Some(best.1));
        }
    } else {
        for j in 0..cfg.jobs.len() {
            sim.add_job(j, None);
        }
    }
    sim.run_until(f64::INFINITY);
    if sim.jobs.iter().flatten().any(|j| j.finish_s.is_nan()) {
        return Err("a job did not finish (internal error)".into());
    }
    Ok(sim.result())
}
