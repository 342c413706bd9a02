//! Spark applications as stage DAGs on a data-center fabric.
//!
//! An application is a list of stages (each after the stages it names in `after`, which come
//! earlier in the list) of tasks with a compute time and shuffle bytes written and read. It
//! arrives at a time (fixed, or a Poisson process with a seed), gets `executors` hosts
//! (`spread`: evenly apart over all hosts, across racks; `pack`: consecutive hosts, filling racks,
//! each application after the previous one's block) and runs its tasks on their cores.
//!
//! - A stage is ready `delay_s` (driver time) after every stage of its `after` ended; its tasks
//!   queue FIFO in its application; a free core of a host goes to the earliest-arrived
//!   application with a queued task on that host (Spark's FIFO scheduler); a stage's tasks are
//!   dealt to the application's hosts round robin.
//! - A task that reads shuffle data first fetches its blocks: one block from every map task of
//!   its `reads_from` stages that wrote bytes, of size write(m) × read(task) / Σ write (the
//!   per-pair bytes are not recorded; every reducer reads its recorded bytes), in a seeded random
//!   order, with the fabric's fetch window (`max_reqs_in_flight`, `max_bytes_in_flight`, one
//!   fetch always may go out). Blocks on its own host are read off the network. A remote fetch is
//!   a max-min fluid flow on its ECMP path, FCT = 2 × one-way delay + transfer; a block that fits
//!   in TCP's initial window (`initial_window_bytes`) is not a flow: FCT = 2 × one-way delay + its
//!   serialisation on the slowest link (its bytes count in the links' carried bytes and the heat
//!   map, but do not take rate from other flows). Then it computes
//!   for `compute_s` (fetch and compute do not overlap). Its output stays on its host.
//! - The application ends `tail_s` after its last stage.
//!
//! `mode = "packet"`: the fabric's packet-faithful pass re-times the fetches and the stages are
//! replayed with them (`apps_engine.rs`).
//!
//! Not modelled: packets, queues, congestion-control differences (as in [`crate::fabric`]; in
//! the max-min mode), processor sharing between tasks (one task per core), speculative or failed
//! tasks, disk, cross traffic and link failures (the fabric's all-to-all model has them).

use serde::{Deserialize, Serialize};

pub use crate::fabric::Mode;
use crate::maxmin::Recompute;
use crate::packet::PacketSummary;
pub use crate::summary::{FctBucket, Heatmap, TierResult};
use crate::tcpmodel::{LinkCorrection, TcpModel};
use crate::topology::TopologySpec;

/// The most fetches (reducers × source map tasks, summed over stages and applications).
pub const MAX_FETCHES: u64 = 20_000_000;
pub const MAX_TASKS: u64 = 5_000_000;

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct StageSpec {
    #[serde(default)]
    pub id: i64,
    #[serde(default)]
    pub after: Vec<u32>,
    #[serde(default)]
    pub reads_from: Vec<u32>,
    #[serde(default)]
    pub delay_s: f64,
    pub compute_s: Vec<f64>,
    pub write_bytes: Vec<f64>,
    pub read_bytes: Vec<f64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    #[default]
    Spread,
    Pack,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct AppSpec {
    #[serde(default)]
    pub name: String,
    /// Hosts given to the application (default: all).
    #[serde(default)]
    pub executors: Option<u32>,
    #[serde(default)]
    pub placement: Placement,
    /// With `arrival.kind = "fixed"`.
    #[serde(default)]
    pub arrival_s: f64,
    #[serde(default)]
    pub tail_s: f64,
    pub stages: Vec<StageSpec>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Arrival {
    /// Each application at its `arrival_s`.
    #[default]
    Fixed,
    /// The first application at 0, the others after exponential gaps of this mean (seeded).
    Poisson { mean_gap_s: f64 },
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct AppsConfig {
    pub topology: TopologySpec,
    #[serde(default = "one")]
    pub cores_per_host: u32,
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub recompute: Recompute,
    #[serde(default = "unbounded_reqs")]
    pub max_reqs_in_flight: u32,
    #[serde(default = "spark_bytes_in_flight")]
    pub max_bytes_in_flight: f64,
    /// A block of at most this many bytes goes out in TCP's initial window: it takes one round
    /// trip plus its serialisation on the path's slowest link, off the max-min network (0: every
    /// block is a flow). Default 10 segments of 1448 B (Linux's initial window).
    #[serde(default = "initial_window")]
    pub initial_window_bytes: f64,
    #[serde(default)]
    pub arrival: Arrival,
    pub apps: Vec<AppSpec>,
    #[serde(default = "default_edges")]
    pub fct_bucket_edges_bytes: Vec<f64>,
    #[serde(default = "default_bins")]
    pub heatmap_bins: u32,
    /// Congestion control and queue discipline of the fabric's TCP flows: a per-link-class
    /// correction from the packet-level probe ([`crate::tcpmodel`]). Absent: pure max-min.
    #[serde(default)]
    pub tcp: Option<TcpModel>,
    /// `packet`: the max-min schedule's fetches re-timed at packet level per saturated link
    /// (as the fabric's `mode`), each task's fetch phase replaced by its packet-level one and
    /// the applications' stage DAGs replayed with them. Needs `tcp`.
    #[serde(default)]
    pub mode: Mode,
}
fn one() -> u32 {
    1
}
fn unbounded_reqs() -> u32 {
    i32::MAX as u32
}
fn spark_bytes_in_flight() -> f64 {
    48.0 * 1024.0 * 1024.0
}
fn initial_window() -> f64 {
    10.0 * 1448.0
}
fn default_edges() -> Vec<f64> {
    vec![1e4, 1e5, 1e6, 1e7]
}
fn default_bins() -> u32 {
    60
}

#[derive(Debug, Clone, Serialize)]
pub struct StageResult {
    pub id: i64,
    pub tasks: u32,
    pub ready_s: f64,
    pub end_s: f64,
    pub remote_bytes: f64,
    pub remote_fetches: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AppResult {
    pub name: String,
    pub executors: u32,
    pub arrival_s: f64,
    /// null if the application did not finish
    pub end_s: Option<f64>,
    pub job_time_s: Option<f64>,
    pub stages: Vec<StageResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AppsResult {
    pub hosts: u32,
    pub links: u32,
    pub apps: Vec<AppResult>,
    /// The last application's end (null if one did not finish).
    pub makespan_s: Option<f64>,
    pub tasks: u64,
    pub remote_fetches: u64,
    pub local_fetches: u64,
    pub remote_bytes: f64,
    /// remote fetches sent in the initial window (off the max-min network)
    pub initial_window_fetches: u64,
    pub fct: Vec<FctBucket>,
    pub tiers: Vec<TierResult>,
    pub heatmap: Heatmap,
    pub end_s: f64,
    pub events: u64,
    pub solves: u64,
    pub flows_solved: u64,
    /// The probe's correction per link class (with a `tcp` model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_links: Option<Vec<LinkCorrection>>,
    /// The packet-level pass (`mode = "packet"` only; absent: the max-min mode produced this).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packet: Option<PacketSummary>,
}

impl AppsConfig {
    pub fn validate(&self) -> Result<(), String> {
        let ok = |x: f64| x.is_finite() && x >= 0.0;
        if self.apps.is_empty() {
            return Err("apps: at least one application".into());
        }
        if let Some(t) = &self.tcp {
            t.validate()?;
        }
        if self.mode == Mode::Packet && self.tcp.is_none() {
            return Err(
                "mode: 'packet' needs a tcp model (the congestion control and the queues to simulate)"
                    .into(),
            );
        }
        if self.cores_per_host == 0 || self.max_reqs_in_flight == 0 {
            return Err("cores_per_host and max_reqs_in_flight must be > 0".into());
        }
        if !(self.max_bytes_in_flight.is_finite() && self.max_bytes_in_flight > 0.0) {
            return Err("max_bytes_in_flight must be > 0".into());
        }
        if !ok(self.initial_window_bytes) {
            return Err("initial_window_bytes must be >= 0".into());
        }
        if let Arrival::Poisson { mean_gap_s } = self.arrival {
            if !(mean_gap_s.is_finite() && mean_gap_s > 0.0) {
                return Err("arrival: mean_gap_s must be > 0".into());
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
        let (mut fetches, mut tasks) = (0u64, 0u64);
        for (a, app) in self.apps.iter().enumerate() {
            if !ok(app.arrival_s) || !ok(app.tail_s) {
                return Err(format!("apps[{a}]: arrival_s and tail_s must be >= 0"));
            }
            if app.executors == Some(0) || app.stages.is_empty() {
                return Err(format!("apps[{a}]: executors > 0 and at least one stage"));
            }
            for (s, st) in app.stages.iter().enumerate() {
                let w = format!("apps[{a}].stages[{s}]");
                let n = st.compute_s.len();
                if n == 0 || st.write_bytes.len() != n || st.read_bytes.len() != n {
                    return Err(format!(
                        "{w}: compute_s, write_bytes and read_bytes: one value per task, >= 1 task"
                    ));
                }
                let all = st
                    .compute_s
                    .iter()
                    .chain(&st.write_bytes)
                    .chain(&st.read_bytes);
                if !all.copied().all(|x| ok(x) && x <= 1e15) || !ok(st.delay_s) {
                    return Err(format!("{w}: times and bytes must be finite and >= 0"));
                }
                if st
                    .after
                    .iter()
                    .chain(&st.reads_from)
                    .any(|&p| p as usize >= s)
                {
                    return Err(format!(
                        "{w}: after and reads_from must name earlier stages"
                    ));
                }
                if st.reads_from.iter().any(|p| !st.after.contains(p)) {
                    return Err(format!("{w}: a stage in reads_from must be in after"));
                }
                tasks += n as u64;
                let maps: u64 = st
                    .reads_from
                    .iter()
                    .map(|&p| app.stages[p as usize].compute_s.len() as u64)
                    .sum();
                fetches += maps * n as u64;
            }
        }
        if tasks > MAX_TASKS {
            return Err(format!("apps: {tasks} tasks, more than {MAX_TASKS}"));
        }
        if fetches > MAX_FETCHES {
            return Err(format!(
                "apps: {fetches} fetches (reducers × map tasks), more than {MAX_FETCHES}"
            ));
        }
        Ok(())
    }
}

#[path = "apps_engine.rs"]
mod engine;
pub use engine::run_apps;

pub fn run_apps_json(config_json: &str) -> Result<String, String> {
    let cfg: AppsConfig =
        serde_json::from_str(config_json).map_err(|e| format!("apps configuration: {e}"))?;
    let result = run_apps(&cfg)?;
    serde_json::to_string(&result).map_err(|e| e.to_string())
}

#[cfg(test)]
#[path = "apps_tests.rs"]
mod tests;
