//! The simulator's input and output values (serde), with units in every field name.
//!
//! Bytes are decimal counts held in `f64` (exact below 2^53), rates are bytes or cycles per
//! second, times are virtual seconds from the start of the run.

use serde::{Deserialize, Serialize};

// The Net-Aware estimates live with the planner that reads them (netaware does not import this
// module); they are re-exported here as part of the run's result values.
pub use crate::netaware::{NetworkEstimate, OperatorEstimate};

/// A cluster of identical machines whose cores form one FIFO pool.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ClusterConfig {
    pub machines: u32,
    pub cores_per_machine: u32,
    /// Clock rate of one core, cycles per second.
    pub core_hz: f64,
    /// Fraction of a core's cycles that do useful work (storage-side software overhead), (0, 1].
    #[serde(default = "one")]
    pub efficiency: f64,
}

impl ClusterConfig {
    pub fn cores(&self) -> u32 {
        self.machines * self.cores_per_machine
    }
    /// Useful cycles per second of one core.
    pub fn effective_hz(&self) -> f64 {
        self.core_hz * self.efficiency
    }
}

/// False for zero, negatives and NaN.
fn positive(x: f64) -> bool {
    x > 0.0
}

fn one() -> f64 {
    1.0
}

/// How the network shares its links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// Fluid flows sharing links by max-min fairness, recomputed at every arrival and departure.
    Flow,
    /// Transfers split into chunks that hold their path's links one at a time, round robin (the
    /// SparkNDP SimPy simulator's model), to cross-check the flow model.
    Chunk,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct NetworkConfig {
    pub mode: NetworkMode,
    /// Capacity of the link between the storage and the compute cluster, bytes/s.
    pub inter_cluster_bytes_per_s: f64,
    /// Capacity of each storage machine's uplink, bytes/s; absent: not modelled.
    #[serde(default)]
    pub storage_nic_bytes_per_s: Option<f64>,
    /// Bytes added once per transfer (request and response headers).
    #[serde(default)]
    pub header_bytes_per_flow: f64,
    /// Bytes added per packet of `mss_bytes` payload (TCP/IP headers).
    #[serde(default)]
    pub header_bytes_per_packet: f64,
    #[serde(default = "default_mss")]
    pub mss_bytes: f64,
    /// Chunk size in chunk mode, bytes.
    #[serde(default = "default_chunk")]
    pub chunk_bytes: f64,
    /// S_max: how many jobs may transfer at once; the others wait in arrival order.
    pub max_concurrent_jobs: u32,
    /// How many transfers may be in flight at once over all jobs (executor cores fetching their
    /// partition); the others wait in FIFO order. Absent: the number of compute cores.
    #[serde(default)]
    pub max_concurrent_flows: Option<u32>,
    /// Which admitted job a free transfer slot goes to.
    #[serde(default)]
    pub slot_order: SlotOrder,
}

/// Which admitted job gets a free transfer slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotOrder {
    /// the job with the fewest transfers in flight, ties in turn (Spark's FAIR scheduler: the
    /// job furthest below its share of the executor cores gets the next free one), so each of
    /// S admitted jobs moves data at about B/S whatever the size of its transfers
    #[default]
    Fair,
    /// one transfer per job in turn (a job of small transfers gets a slot only every S turns)
    RoundRobin,
}

fn default_mss() -> f64 {
    1448.0
}
fn default_chunk() -> f64 {
    1_048_576.0
}

impl NetworkConfig {
    /// Bytes on the wire for a transfer of `payload_bytes`.
    pub fn wire_bytes(&self, payload_bytes: f64) -> f64 {
        let packets = (payload_bytes / self.mss_bytes).ceil().max(1.0);
        payload_bytes + self.header_bytes_per_flow + packets * self.header_bytes_per_packet
    }
}

/// One operator of a query's chain.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct OperatorConfig {
    pub name: String,
    /// CPU cycles per input byte.
    pub cycles_per_byte: f64,
    /// Input bytes / output bytes (60 means the output is 60 times smaller).
    pub reduction_factor: f64,
    #[serde(default = "yes")]
    pub pushable: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct JobConfig {
    pub arrival_s: f64,
    pub input_bytes: f64,
    /// Input bytes of one task (one partition); the last task takes the remainder.
    pub task_input_bytes: f64,
    pub operators: Vec<OperatorConfig>,
    /// Operators pushed to storage under the `fixed` policy (a prefix length).
    #[serde(default)]
    pub pushed_ops: Option<u32>,
}

impl JobConfig {
    pub fn tasks(&self) -> u32 {
        (self.input_bytes / self.task_input_bytes).ceil().max(1.0) as u32
    }
    /// The longest prefix of pushable operators.
    pub fn max_pushable(&self) -> u32 {
        self.operators.iter().take_while(|o| o.pushable).count() as u32
    }
    /// Input bytes of the task with this index.
    pub fn task_bytes(&self, index: u32) -> f64 {
        let start = index as f64 * self.task_input_bytes;
        (self.input_bytes - start).min(self.task_input_bytes)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Every job pushes its `pushed_ops`.
    Fixed,
    /// Seed 003's Net-Aware model, evaluated on the simulated state at each job's arrival.
    NetAware,
    /// [`crate::netaware::plan_chain`]: every prefix priced as a whole (an extension).
    NetAwareChain,
    /// [`crate::netaware::plan_fluid`]: the chain pricing with a per-transfer fluid view of the
    /// network and the delay a choice imposes on the transfers already in it (an extension).
    NetAwareFluid,
    /// For each job in arrival order, simulate every prefix (earlier jobs fixed, later ones
    /// absent) and keep the one with the least total completion time so far.
    Oracle,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Config {
    pub compute: ClusterConfig,
    pub storage: ClusterConfig,
    pub network: NetworkConfig,
    pub jobs: Vec<JobConfig>,
    pub policy: Policy,
    #[serde(default)]
    pub seed: u64,
    /// Each task's CPU cost is multiplied by a uniform draw from [1 - j, 1 + j].
    #[serde(default)]
    pub cpu_jitter: f64,
    /// Record the network's allocation at every recomputation (for tests; costs memory).
    #[serde(default)]
    pub record_trace: bool,
}

impl Config {
    pub fn validate(&self) -> Result<(), String> {
        for (name, c) in [("compute", &self.compute), ("storage", &self.storage)] {
            if c.machines == 0 || c.cores_per_machine == 0 {
                return Err(format!("{name}: needs at least one machine and one core"));
            }
            if !(positive(c.core_hz) && c.efficiency > 0.0 && c.efficiency <= 1.0) {
                return Err(format!(
                    "{name}: core_hz must be > 0 and efficiency in (0, 1]"
                ));
            }
        }
        let n = &self.network;
        if !positive(n.inter_cluster_bytes_per_s) {
            return Err("network: inter_cluster_bytes_per_s must be > 0".into());
        }
        if let Some(r) = n.storage_nic_bytes_per_s {
            if !positive(r) {
                return Err("network: storage_nic_bytes_per_s must be > 0".into());
            }
        }
        if n.max_concurrent_flows == Some(0) {
            return Err("network: max_concurrent_flows must be > 0".into());
        }
        if n.max_concurrent_jobs == 0 || !positive(n.chunk_bytes) || !positive(n.mss_bytes) {
            return Err("network: max_concurrent_jobs, chunk_bytes, mss_bytes must be > 0".into());
        }
        if !(0.0..1.0).contains(&self.cpu_jitter) {
            return Err("cpu_jitter must be in [0, 1)".into());
        }
        for (i, j) in self.jobs.iter().enumerate() {
            if !(positive(j.input_bytes) && positive(j.task_input_bytes) && j.arrival_s >= 0.0) {
                return Err(format!("jobs[{i}]: sizes must be > 0 and arrival_s >= 0"));
            }
            for o in &j.operators {
                if !(positive(o.reduction_factor) && o.cycles_per_byte >= 0.0) {
                    return Err(format!("jobs[{i}].{}: bad reduction or cycles", o.name));
                }
            }
            if self.policy == Policy::Fixed {
                match j.pushed_ops {
                    Some(k) if k <= j.max_pushable() => {}
                    _ => {
                        return Err(format!(
                            "jobs[{i}]: fixed policy needs pushed_ops <= {}",
                            j.max_pushable()
                        ))
                    }
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PlannerRecord {
    pub operators: Vec<OperatorEstimate>,
    pub network: NetworkEstimate,
    /// the per-transfer view (Net-Aware fluid only)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfers: Option<crate::netaware::TransferView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobResult {
    pub job: usize,
    pub arrival_s: f64,
    pub pushed_ops: u32,
    pub tasks: u32,
    pub finish_s: f64,
    pub duration_s: f64,
    pub payload_bytes: f64,
    pub wire_bytes: f64,
    pub storage_cpu_s: f64,
    pub compute_cpu_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planner: Option<PlannerRecord>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LinkResult {
    pub name: String,
    pub capacity_bytes_per_s: f64,
    /// Bytes the link carried, integrated from the allocated rates.
    pub carried_bytes: f64,
    /// Wire bytes of the transfers whose path crosses the link.
    pub flow_bytes: f64,
}

/// One network recomputation: for each group of flows with the same path, the path (link
/// indices), the number of flows and the rate of each, bytes/s.
#[derive(Debug, Clone, Serialize)]
pub struct TraceRecord {
    pub t_s: f64,
    pub groups: Vec<(Vec<usize>, usize, f64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub jobs: Vec<JobResult>,
    pub links: Vec<LinkResult>,
    pub makespan_s: f64,
    pub events: u64,
    pub storage_busy_core_s: f64,
    pub compute_busy_core_s: f64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<TraceRecord>,
}
