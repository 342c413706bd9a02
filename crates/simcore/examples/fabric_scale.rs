//! Time one fabric run from a JSON configuration (the core's `run_fabric` input), without Python:
//! `cargo run --release -p shufflelab-simcore --example fabric_scale -- CONFIG.json [RECOMPUTE]`
//! (`benchmarks/fabric_scale/*.json`: the configurations `benchmarks/sim_scale.py` builds).
//! Prints one JSON line: wall seconds, the result's counters and its shuffle completion, and in
//! the packet-faithful mode (`"mode": "packet"`) its links simulated, timeouts, drops and events.

use std::time::Instant;

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: fabric_scale CONFIG.json [incremental|components|full]")?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let mut cfg: simcore::fabric::FabricConfig =
        serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    if let Some(mode) = args.next() {
        cfg.recompute = serde_json::from_str(&format!("{mode:?}")).map_err(|e| e.to_string())?;
    }
    let t0 = Instant::now();
    let r = simcore::fabric::run_fabric(&cfg)?;
    let wall = t0.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "wall_s": wall,
            "remote_fetches": r.remote_fetches,
            "events": r.events,
            "solves": r.solves,
            "flows_solved": r.flows_solved,
            "shuffle_completion_s": r.shuffle_completion_s,
            "packet": r.packet.as_ref().map(|p| serde_json::json!({
                "links_with_flows": p.links_with_flows,
                "links_simulated": p.links_simulated,
                "flows": p.flows,
                "timeouts": p.timeouts,
                "drops": p.drops,
                "events": p.events,
            })),
        })
    );
    Ok(())
}
