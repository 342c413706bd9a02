//! The fabric engine with a TCP model ([`crate::tcpmodel`]): the probe's efficiency in the solve,
//! the standing queue of saturated links on a fetch's latency, and no change without a model.
use super::*;
use crate::tcpmodel::{Cc, Discipline};

const RATE: f64 = 1.25e9;
const HOP: f64 = 25e-6;

fn two_hosts() -> TopologySpec {
    TopologySpec::LeafSpine {
        leaves: 1,
        hosts_per_leaf: 2,
        spines: 1,
        host_bytes_per_s: RATE,
        uplink_bytes_per_s: RATE,
        host_delay_s: HOP,
        uplink_delay_s: 0.0,
    }
}

/// Two maps and two reducers on two hosts: each reducer reads one block locally and fetches one
/// of `bytes` from the other host.
fn swap(bytes: f64) -> FabricConfig {
    FabricConfig {
        topology: two_hosts(),
        cores_per_host: 1,
        seed: 1,
        recompute: Recompute::Incremental,
        shuffle: Shuffle {
            maps: 2,
            reducers: 2,
            sizes: Some(Sizes::Constant { bytes }),
            matrix: None,
            max_reqs_in_flight: 1,
            max_bytes_in_flight: 1e15,
            start_s: 0.0,
        },
        cross: Vec::new(),
        failures: Vec::new(),
        fct_bucket_edges_bytes: vec![1e6],
        heatmap_bins: 10,
        tcp: None,
        mode: Default::default(),
        packet: Default::default(),
    }
}

fn tcp(cc: Cc, discipline: Discipline) -> TcpModel {
    serde_json::from_value(serde_json::json!({"cc": cc, "discipline": discipline})).unwrap()
}

#[test]
fn without_a_model_nothing_changes() {
    let c = swap(1e8);
    let r = run_fabric(&c).unwrap();
    assert!(r.tcp_links.is_none());
    let json = serde_json::to_value(&r).unwrap();
    assert!(json.get("tcp_links").is_none(), "no key without a model");
    // one one-way delay for the request, the transfer at the link's rate, one for the last byte
    let want = 2.0 * HOP + 1e8 / RATE + 2.0 * HOP;
    assert!((r.shuffle_completion_s.unwrap() - want).abs() < 1e-12);
}

#[test]
fn the_solver_shares_capacity_times_the_probe_efficiency() {
    let mut c = swap(1e8);
    for (cc, disc) in [
        (Cc::Reno, Discipline::Droptail),
        (Cc::Cubic, Discipline::Droptail),
        (Cc::Dctcp, Discipline::Step),
    ] {
        c.tcp = Some(tcp(cc, disc));
        let r = run_fabric(&c).unwrap();
        let links = r.tcp_links.clone().unwrap();
        assert_eq!(links.len(), 1, "one link class");
        let k = links[0];
        // the longest path: host → leaf → host, twice for the round trip
        assert!((k.base_rtt_s - 4.0 * HOP).abs() < 1e-12, "{k:?}");
        assert!(k.efficiency > 0.5 && k.efficiency <= 1.0, "{cc:?}: {k:?}");
        // both fetches start on idle links: no standing queue in their latency
        let want = 4.0 * HOP + 1e8 / (RATE * k.efficiency);
        let got = r.shuffle_completion_s.unwrap();
        assert!((got - want).abs() < 1e-9, "{cc:?}: {got} vs {want}");
    }
}

#[test]
fn a_fetch_started_across_a_saturated_link_waits_its_standing_queue() {
    // endless TCP cross traffic from host 0 to host 1 saturates that direction; the shuffle
    // starts later, so the fetch 0 → 1 starts on two saturated links, the fetch 1 → 0 on idle ones
    let mut c = swap(1e8);
    c.shuffle.start_s = 0.1;
    c.cross.push(Cross {
        src: 0,
        dst: 1,
        kind: CrossKind::Tcp,
        rate_bytes_per_s: 0.0,
        udp_mode: UdpMode::Priority,
        start_s: 0.0,
        stop_s: None,
        bytes: None,
    });
    c.tcp = Some(TcpModel {
        queue_packets: 200.0,
        ..tcp(Cc::Cubic, Discipline::Droptail)
    });
    let r = run_fabric(&c).unwrap();
    let k = r.tcp_links.unwrap()[0];
    assert!(k.queue_delay_s > 1e-5, "cubic fills a deep buffer: {k:?}");
    let usable = RATE * k.efficiency;
    // reducer 0 (host 0) fetches from host 1 over idle links, alone
    let r0 = 0.1 + 4.0 * HOP + 1e8 / usable;
    // reducer 1 (host 1) shares host 0's links with the cross flow, and waits two queues
    let r1 = 0.1 + 4.0 * HOP + 1e8 / (usable / 2.0) + 2.0 * k.queue_delay_s;
    let f = &r.reducer_finish_s;
    assert!((f[0] - r0).abs() < 1e-9, "{} vs {r0}", f[0]);
    assert!((f[1] - r1).abs() < 1e-9, "{} vs {r1}", f[1]);
    // DCTCP keeps the queue near K: a shorter wait on the same links
    c.tcp = Some(TcpModel {
        queue_packets: 200.0,
        ..tcp(Cc::Dctcp, Discipline::Step)
    });
    let d = run_fabric(&c).unwrap();
    let kd = d.tcp_links.unwrap()[0];
    assert!(kd.queue_delay_s < k.queue_delay_s, "{kd:?} vs {k:?}");
}

#[test]
fn a_bad_model_is_refused_naming_the_field() {
    let mut c = swap(1e8);
    c.tcp = Some(tcp(Cc::Dctcp, Discipline::Droptail));
    assert!(run_fabric(&c).unwrap_err().contains("tcp.discipline"));
    c.tcp = Some(TcpModel {
        queue_packets: -1.0,
        ..tcp(Cc::Cubic, Discipline::Droptail)
    });
    assert!(run_fabric(&c).unwrap_err().contains("tcp.queue_packets"));
    let bad = r#"{"topology": {"kind": "leaf_spine"}, "shuffle": {}, "tcp": {"cc": "vegas"}}"#;
    assert!(run_fabric_json(bad).is_err());
}
