//! The packet mode's clustering of alike links (`packet.cluster_tolerance`, [`crate::linkcluster`]):
//! alike links are simulated once and give what simulating each gives, unlike ones are not merged,
//! and where no two links are alike the result is the one without clustering, bit for bit.

use crate::fabric::{run_fabric, FabricConfig, FabricResult};
use crate::packet::tests::two_tier_all_to_all;
use crate::packet::PacketSummary;

/// The validation's two-tier all-to-all with DCTCP, step marking at K = 20 (the ns-3-checked
/// case of `packet_tests.rs`), with uplinks of `uplink` bytes/s.
fn all_to_all(uplink: f64) -> FabricConfig {
    let tcp = r#"{"cc": "dctcp", "discipline": "step", "queue_packets": 1000, "mark_packets": 20, "ecn": false}"#;
    two_tier_all_to_all(uplink, tcp)
}

fn both(cfg: &FabricConfig, tolerance: f64) -> (FabricResult, FabricResult) {
    let off = run_fabric(cfg).unwrap();
    let mut on = cfg.clone();
    on.packet.cluster_tolerance = Some(tolerance);
    (off, run_fabric(&on).unwrap())
}

fn summary(r: &FabricResult) -> &PacketSummary {
    r.packet.as_ref().unwrap()
}

/// Links simulated in the tiers whose names contain `part`.
fn simulated(p: &PacketSummary, part: &str) -> u32 {
    p.tiers
        .iter()
        .filter(|t| t.tier.contains(part))
        .map(|t| t.links_simulated)
        .sum()
}

#[test]
fn alike_links_are_simulated_once_per_cluster_and_give_what_simulating_each_gives() {
    // at 1:1 every host link, a sender's or a receiver's, carries 7 fetches of 10 MB that start
    // at once with the same round trips, and every leaf's uplink 16: two kinds of alike links, 18
    // simulations without clustering (the spine's two downlinks, each fed by the other leaf's
    // uplink alone, cannot queue and are not simulated)
    let (off, on) = both(&all_to_all(500e6), 0.05);
    let (p_off, p_on) = (summary(&off), summary(&on));
    assert_eq!((p_off.links_simulated, p_off.clusters), (18, 0));
    assert_eq!(p_off.links_represented, 0);
    assert_eq!((p_on.links_simulated, p_on.clusters), (2, 2), "{p_on:?}");
    assert_eq!((p_on.links_represented, p_on.largest_cluster), (16, 16));
    for t in &p_on.tiers {
        let before = p_off.tiers.iter().find(|b| b.tier == t.tier).unwrap();
        assert_eq!(
            t.links_simulated + t.links_represented,
            before.links_simulated
        );
        assert_eq!(t.flows, before.flows);
    }
    assert!(
        p_on.events * 4 < p_off.events,
        "{} {}",
        p_on.events,
        p_off.events
    );
    // the same answer within the seeded send-time jitter of each link's own simulation
    // (measured: mean 0.5759 s against 0.5757 s, p99 and the shuffle's end within 0.01 %)
    let close = |a: f64, b: f64, tol: f64| (a - b).abs() / b < tol;
    let (f_off, f_on) = (&off.fct[0], &on.fct[0]);
    assert_eq!(f_on.count, f_off.count);
    assert!(close(f_on.mean_s, f_off.mean_s, 0.01), "{f_on:?} {f_off:?}");
    assert!(close(f_on.p99_s, f_off.p99_s, 0.01), "{f_on:?} {f_off:?}");
    let (c_off, c_on) = (
        off.shuffle_completion_s.unwrap(),
        on.shuffle_completion_s.unwrap(),
    );
    assert!(close(c_on, c_off, 0.01), "{c_on} {c_off}");
}

#[test]
fn unlike_links_are_not_merged() {
    // at 4:1 the uplinks (1 Gbit/s, 16 fetches each) have the host links' capacity but not
    // their workload (7 fetches, some held back upstream): one cluster each, the host links'
    // represented by a host link and the uplinks' by an uplink
    let (off, on) = both(&all_to_all(125e6), 0.05);
    let (p_off, p_on) = (summary(&off), summary(&on));
    assert_eq!((p_off.links_simulated, p_on.clusters), (18, 2), "{p_on:?}");
    assert_eq!(simulated(p_on, "host"), 1, "{p_on:?}");
    assert_eq!(simulated(p_on, "spine"), 1, "{p_on:?}");
    let (f_off, f_on) = (&off.fct[0], &on.fct[0]);
    assert!((f_on.mean_s - f_off.mean_s).abs() / f_off.mean_s < 0.01);
}

#[test]
fn where_every_cluster_has_one_link_the_result_is_bit_identical() {
    // an incast: the receiver's port is the only saturated link
    let json = r#"{"topology": {"kind": "leaf_spine", "leaves": 5, "hosts_per_leaf": 8, "spines": 1,
         "host_bytes_per_s": 125e6, "uplink_bytes_per_s": 500e6,
         "host_delay_s": 1e-5, "uplink_delay_s": 1e-5},
        "shuffle": {"maps": 17, "reducers": 1, "sizes": {"kind": "constant", "bytes": 1e6}},
        "tcp": {"cc": "cubic", "discipline": "droptail", "queue_packets": 100, "ecn": false},
        "fct_bucket_edges_bytes": [], "mode": "packet", "seed": 1}"#;
    let cfg: FabricConfig = serde_json::from_str(json).unwrap();
    let (off, on) = both(&cfg, 0.05);
    assert_eq!(
        (summary(&on).clusters, summary(&on).links_represented),
        (1, 0)
    );
    assert_eq!(summary(&on).events, summary(&off).events);
    let bits = |r: &FabricResult| {
        let f = &r.fct[0];
        let mut v: Vec<u64> = r.reducer_finish_s.iter().map(|x| x.to_bits()).collect();
        v.extend([f.mean_s, f.p50_s, f.p99_s, f.max_s].map(f64::to_bits));
        v.push(r.shuffle_completion_s.unwrap().to_bits());
        v
    };
    assert_eq!(bits(&on), bits(&off));
    // a tolerance of 0 merges identical workloads only: the 1:1 all-to-all's host links (and
    // its uplinks) are alike to the last bit
    let (_, zero) = both(&all_to_all(500e6), 0.0);
    assert_eq!(summary(&zero).clusters, 2);
}

#[test]
fn the_tolerance_is_checked() {
    let mut cfg = all_to_all(500e6);
    cfg.packet.cluster_tolerance = Some(1.5);
    assert!(run_fabric(&cfg)
        .unwrap_err()
        .contains("packet.cluster_tolerance"));
    // absent and null are both "off"
    let json = serde_json::to_string(&all_to_all(500e6)).unwrap();
    let null: FabricConfig = serde_json::from_str(
        &json.replace(r#""packet":{"cluster_tolerance":null}"#, r#""packet":{}"#),
    )
    .unwrap();
    assert_eq!(null.packet.cluster_tolerance, None);
}
