//! Time one fabric run from a JSON configuration (the core's `run_fabric` input), without Python:
//! `cargo run --release -p shufflelab-simcore --example fabric_scale -- CONFIG.json [RECOMPUTE]`
//! (`benchmarks/fabric_scale/*.json`: the configurations `benchmarks/sim_scale.py` builds).
//! Prints one JSON line: wall seconds, the result's counters, its shuffle completion and FCTs (per
//! non-empty size bucket), and in the packet-faithful mode (`"mode": "packet"`) its links simulated
//! (per tier, and with `"packet": {"cluster_tolerance": ...}` the clusters and the links that took
//! their representative's delays), timeouts, drops and events.

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
            "fct": r.fct.iter().filter(|b| b.count > 0).map(|b| serde_json::json!({
                "lo_bytes": b.lo_bytes,
                "count": b.count,
                "mean_s": b.mean_s,
                "p99_s": b.p99_s,
                "max_s": b.max_s,
            })).collect::<Vec<_>>(),
            "packet": r.packet.as_ref().map(|p| serde_json::json!({
                "links_with_flows": p.links_with_flows,
                "links_simulated": p.links_simulated,
                "clusters": p.clusters,
                "links_represented": p.links_represented,
                "largest_cluster": p.largest_cluster,
                "tiers": p.tiers.iter().map(|t| serde_json::json!({
                    "tier": t.tier,
                    "links_simulated": t.links_simulated,
                    "links_represented": t.links_represented,
                })).collect::<Vec<_>>(),
                "flows": p.flows,
                "timeouts": p.timeouts,
                "drops": p.drops,
                "events": p.events,
            })),
        })
    );
    Ok(())
}
