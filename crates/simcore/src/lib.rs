//! shufflelab's cluster-scale simulator core.
//!
//! A pure discrete-event model in virtual time (no clock, no I/O): jobs made of a chain of
//! operators, split into tasks; a storage and a compute cluster whose cores are FIFO pools; a
//! network of links shared by max-min fairness (or, to cross-check, by round-robin chunks). The
//! Python binding (feature `python`) takes and returns JSON documents described in [`model`].
//! [`sparkjob`] is the calibration model: a Spark application's stages on a few executors that
//! share a host's cores and one bottleneck (`shufflelab calibrate`). [`bottleneck`] runs the
//! userspace switch's queue and DCTCP window logic (crate `switchcore`) on virtual packets for the
//! operating point of a RED/ECN bottleneck. [`fabric`] runs all-to-all shuffles on data-center
//! [`topology`]s (leaf-spine, fat tree, graphs) with [`maxmin`] rates recomputed incrementally;
//! [`apps`] runs recorded Spark applications (stage DAGs) on the same fabrics. [`linksim`] runs one
//! link at packet level with finite TCP flows: the per-link engine of the fabric's packet-faithful
//! mode (`mode = "packet"`, module `packet`).

#![forbid(unsafe_code)]

pub mod apps;
pub mod bottleneck;
mod completions;
pub mod engine;
pub mod fabric;
mod fluid;
mod linkcluster;
pub mod linksim;
pub mod maxmin;
pub mod model;
pub mod netaware;
pub mod network;
mod packet;
mod radixheap;
pub mod sparkjob;
mod summary;
pub mod tcpmodel;
pub mod topology;

pub use engine::run;

/// Run a JSON configuration ([`model::Config`]) and return the JSON result ([`model::RunResult`]).
pub fn run_json(config_json: &str) -> Result<String, String> {
    let cfg: model::Config =
        serde_json::from_str(config_json).map_err(|e| format!("configuration: {e}"))?;
    let result = run(&cfg)?;
    serde_json::to_string(&result).map_err(|e| e.to_string())
}

/// Net-Aware prefix for a JSON document `{"operators": [...], "network": {...}}`; `chain`
/// selects [`netaware::plan_chain`]; a `"transfers": {"transfers": [...], "queued": n}` member
/// selects [`netaware::plan_fluid`].
pub fn plan_json(input_json: &str, chain: bool) -> Result<u32, String> {
    #[derive(serde::Deserialize)]
    struct Input {
        operators: Vec<model::OperatorEstimate>,
        network: model::NetworkEstimate,
        #[serde(default)]
        transfers: Option<netaware::TransferView>,
    }
    let input: Input =
        serde_json::from_str(input_json).map_err(|e| format!("planner input: {e}"))?;
    Ok(match (&input.transfers, chain) {
        (Some(view), _) => netaware::plan_fluid(&input.operators, &input.network, view),
        (None, true) => netaware::plan_chain(&input.operators, &input.network),
        (None, false) => netaware::plan(&input.operators, &input.network),
    })
}

/// [`netaware::fluid_finish_s`] for `{"transfers": [...], "bandwidth_gbps": b,
/// "max_concurrent": n}`: the finish times as a JSON list (null for never).
pub fn fluid_json(input_json: &str) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct Input {
        transfers: Vec<netaware::PendingTransfer>,
        bandwidth_gbps: f64,
        max_concurrent: usize,
    }
    let input: Input = serde_json::from_str(input_json).map_err(|e| format!("fluid input: {e}"))?;
    let ends =
        netaware::fluid_finish_s(&input.transfers, input.bandwidth_gbps, input.max_concurrent);
    let ends: Vec<Option<f64>> = ends
        .into_iter()
        .map(|e| e.is_finite().then_some(e))
        .collect();
    serde_json::to_string(&ends).map_err(|e| e.to_string())
}

#[cfg(feature = "python")]
mod python {
    use pyo3::exceptions::PyValueError;
    use pyo3::prelude::*;

    /// Run a simulation: JSON configuration in, JSON result out. Releases the GIL.
    #[pyfunction]
    fn run(py: Python<'_>, config_json: String) -> PyResult<String> {
        py.allow_threads(move || super::run_json(&config_json))
            .map_err(PyValueError::new_err)
    }

    /// Simulate a Spark application (the calibration model): JSON in, JSON out. Releases the GIL.
    #[pyfunction]
    fn run_spark(py: Python<'_>, config_json: String) -> PyResult<String> {
        py.allow_threads(move || super::sparkjob::run_spark_json(&config_json))
            .map_err(PyValueError::new_err)
    }

    /// The Net-Aware planner's choice (number of pushed operators) for a JSON input.
    #[pyfunction]
    #[pyo3(signature = (input_json, chain = false))]
    fn net_aware_plan(input_json: &str, chain: bool) -> PyResult<u32> {
        super::plan_json(input_json, chain).map_err(PyValueError::new_err)
    }

    /// The fluid planner's transfer finish times (seconds from now) for a JSON input.
    #[pyfunction]
    fn net_aware_fluid_finish(input_json: &str) -> PyResult<String> {
        super::fluid_json(input_json).map_err(PyValueError::new_err)
    }

    /// Operating point of a packet-level bottleneck (switchcore's queue and windows): JSON in/out.
    #[pyfunction]
    fn bottleneck_operating_point(py: Python<'_>, probe_json: String) -> PyResult<String> {
        py.allow_threads(move || super::bottleneck::operating_point_json(&probe_json))
            .map_err(PyValueError::new_err)
    }

    /// Simulate a shuffle on a data-center fabric: JSON in, JSON out. Releases the GIL.
    #[pyfunction]
    fn run_fabric(py: Python<'_>, config_json: String) -> PyResult<String> {
        py.allow_threads(move || super::fabric::run_fabric_json(&config_json))
            .map_err(PyValueError::new_err)
    }

    /// Simulate Spark applications (stage DAGs) on a data-center fabric: JSON in, JSON out.
    #[pyfunction]
    fn run_apps(py: Python<'_>, config_json: String) -> PyResult<String> {
        py.allow_threads(move || super::apps::run_apps_json(&config_json))
            .map_err(PyValueError::new_err)
    }

    /// One link at packet level with the finite TCP flows crossing it (the packet-faithful mode's
    /// per-link engine): JSON in, JSON out. Releases the GIL.
    #[pyfunction]
    fn run_link(py: Python<'_>, config_json: String) -> PyResult<String> {
        py.allow_threads(move || super::linksim::simulate_json(&config_json))
            .map_err(PyValueError::new_err)
    }

    /// Max-min fair rates of flows over links (the fabric's solver): JSON in, JSON list out.
    #[pyfunction]
    fn max_min_rates(input_json: &str) -> PyResult<String> {
        super::maxmin::rates_json(input_json).map_err(PyValueError::new_err)
    }

    #[pymodule]
    fn shufflelab_simcore(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_function(wrap_pyfunction!(run, m)?)?;
        m.add_function(wrap_pyfunction!(run_spark, m)?)?;
        m.add_function(wrap_pyfunction!(run_fabric, m)?)?;
        m.add_function(wrap_pyfunction!(run_apps, m)?)?;
        m.add_function(wrap_pyfunction!(max_min_rates, m)?)?;
        m.add_function(wrap_pyfunction!(run_link, m)?)?;
        m.add_function(wrap_pyfunction!(net_aware_plan, m)?)?;
        m.add_function(wrap_pyfunction!(bottleneck_operating_point, m)?)?;
        m.add_function(wrap_pyfunction!(net_aware_fluid_finish, m)?)?;
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        Ok(())
    }
}
