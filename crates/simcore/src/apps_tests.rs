use super::*;
use crate::tcpmodel::{Cc, Discipline, TcpModel};

fn leaf_spine(leaves: u32, hosts: u32, host: f64, up: f64) -> TopologySpec {
    TopologySpec::LeafSpine {
        leaves,
        hosts_per_leaf: hosts,
        spines: 1,
        host_bytes_per_s: host,
        uplink_bytes_per_s: up,
        host_delay_s: 0.0,
        uplink_delay_s: 0.0,
    }
}

fn stage(after: &[u32], reads: &[u32], compute: &[f64], write: &[f64], read: &[f64]) -> StageSpec {
    StageSpec {
        id: 0,
        after: after.to_vec(),
        reads_from: reads.to_vec(),
        delay_s: 0.0,
        compute_s: compute.to_vec(),
        write_bytes: write.to_vec(),
        read_bytes: read.to_vec(),
    }
}

fn app(stages: Vec<StageSpec>) -> AppSpec {
    AppSpec {
        name: "a".into(),
        executors: None,
        placement: Placement::Spread,
        arrival_s: 0.0,
        tail_s: 0.0,
        stages,
    }
}

fn config(topology: TopologySpec, apps: Vec<AppSpec>) -> AppsConfig {
    AppsConfig {
        topology,
        cores_per_host: 1,
        seed: 3,
        recompute: Recompute::Incremental,
        max_reqs_in_flight: unbounded_reqs(),
        max_bytes_in_flight: 1e15,
        initial_window_bytes: 0.0,
        arrival: Arrival::Fixed,
        apps,
        fct_bucket_edges_bytes: default_edges(),
        heatmap_bins: 10,
        tcp: None,
        mode: Mode::Maxmin,
    }
}

#[test]
fn compute_only_stage_runs_in_waves() {
    // 8 one-second tasks on 4 one-core hosts: two waves
    let a = app(vec![stage(&[], &[], &[1.0; 8], &[0.0; 8], &[0.0; 8])]);
    let r = run_apps(&config(leaf_spine(1, 4, 1e9, 1e9), vec![a])).unwrap();
    assert!((r.makespan_s.unwrap() - 2.0).abs() < 1e-12);
    assert_eq!(r.tasks, 8);
    assert_eq!(r.remote_fetches, 0);
}

#[test]
fn shuffle_between_two_hosts_takes_its_transfer_time() {
    // two maps (one per host) write 1e9 B each; two reducers read 1e9 B each: each fetches half
    // from the other host at 1e9 B/s (both directions at once) → 0.5 s after the maps' 1 s
    let a = app(vec![
        stage(&[], &[], &[1.0, 1.0], &[1e9, 1e9], &[0.0, 0.0]),
        stage(&[0], &[0], &[0.25, 0.25], &[0.0, 0.0], &[1e9, 1e9]),
    ]);
    let r = run_apps(&config(leaf_spine(1, 2, 1e9, 1e9), vec![a])).unwrap();
    assert!(
        (r.makespan_s.unwrap() - 1.75).abs() < 1e-9,
        "{:?}",
        r.makespan_s
    );
    assert_eq!(r.remote_fetches, 2);
    assert_eq!(r.local_fetches, 2);
    assert!((r.remote_bytes - 1e9).abs() < 1e-3);
    let st = &r.apps[0].stages;
    assert!((st[0].end_s - 1.0).abs() < 1e-12 && (st[1].ready_s - 1.0).abs() < 1e-12);
    assert!((st[1].remote_bytes - 1e9).abs() < 1e-3);
}

#[test]
fn oversubscription_slows_a_cross_rack_shuffle() {
    let mk = || {
        app(vec![
            stage(&[], &[], &[0.1; 8], &[1e8; 8], &[0.0; 8]),
            stage(&[0], &[0], &[0.1; 8], &[0.0; 8], &[1e8; 8]),
        ])
    };
    let full = run_apps(&config(leaf_spine(2, 4, 1e9, 4e9), vec![mk()])).unwrap();
    let over = run_apps(&config(leaf_spine(2, 4, 1e9, 1e9), vec![mk()])).unwrap();
    // per host 0.875e8 B in at 1e9 B/s (0.0875 s) vs 2e8 B up each leaf at 1e9 B/s (0.2 s)
    let fetch = |r: &AppsResult| r.apps[0].stages[1].end_s - r.apps[0].stages[1].ready_s - 0.1;
    assert!((fetch(&full) - 0.0875).abs() < 1e-9, "{}", fetch(&full));
    assert!((fetch(&over) - 0.2).abs() < 1e-9, "{}", fetch(&over));
    assert!((over.remote_bytes - full.remote_bytes).abs() < 1e-3);
    let up = over
        .tiers
        .iter()
        .find(|t| t.name.starts_with("leaf"))
        .unwrap();
    assert!(up.carried_bytes > 0.0);
}

#[test]
fn later_stage_waits_for_all_its_parents_and_delay() {
    let mut s2 = stage(&[0, 1], &[], &[1.0], &[0.0], &[0.0]);
    s2.delay_s = 0.5;
    let a = app(vec![
        stage(&[], &[], &[1.0], &[0.0], &[0.0]),
        stage(&[], &[], &[3.0], &[0.0], &[0.0]),
        s2,
    ]);
    let mut c = config(leaf_spine(1, 2, 1e9, 1e9), vec![a]);
    c.apps[0].tail_s = 0.25;
    let r = run_apps(&c).unwrap();
    assert!((r.apps[0].stages[2].ready_s - 3.5).abs() < 1e-12);
    assert!((r.makespan_s.unwrap() - 4.75).abs() < 1e-12);
}

#[test]
fn poisson_arrivals_are_seeded_and_apps_share_cores() {
    let one = || app(vec![stage(&[], &[], &[1.0; 2], &[0.0; 2], &[0.0; 2])]);
    let mut c = config(leaf_spine(1, 2, 1e9, 1e9), vec![one(), one(), one()]);
    c.arrival = Arrival::Poisson { mean_gap_s: 0.1 };
    let a = run_apps(&c).unwrap();
    let b = run_apps(&c).unwrap();
    let t: Vec<f64> = a.apps.iter().map(|x| x.arrival_s).collect();
    assert_eq!(t, b.apps.iter().map(|x| x.arrival_s).collect::<Vec<_>>());
    assert!(t[0] == 0.0 && t[1] > 0.0 && t[2] > t[1]);
    // 2 cores, 6 one-second tasks: at least 3 s in all
    assert!(a.makespan_s.unwrap() >= 3.0 - 1e-12);
}

#[test]
fn pack_keeps_an_app_in_one_rack_spread_does_not() {
    let mk = |p: Placement| {
        let mut x = app(vec![
            stage(&[], &[], &[0.1; 4], &[1e8; 4], &[0.0; 4]),
            stage(&[0], &[0], &[0.1; 4], &[0.0; 4], &[1e8; 4]),
        ]);
        x.executors = Some(4);
        x.placement = p;
        x
    };
    let pack = run_apps(&config(
        leaf_spine(2, 4, 1e9, 1e9),
        vec![mk(Placement::Pack)],
    ))
    .unwrap();
    let spread = run_apps(&config(
        leaf_spine(2, 4, 1e9, 1e9),
        vec![mk(Placement::Spread)],
    ))
    .unwrap();
    let up = |r: &AppsResult| {
        r.tiers
            .iter()
            .filter(|t| t.name.contains("spine"))
            .map(|t| t.carried_bytes)
            .sum::<f64>()
    };
    assert_eq!(up(&pack), 0.0);
    assert!(up(&spread) > 0.0);
}

#[test]
fn fetch_window_limits_requests_in_flight() {
    let a = app(vec![
        stage(&[], &[], &[0.0; 4], &[1e8; 4], &[0.0; 4]),
        stage(&[0], &[0], &[0.0], &[0.0], &[4e8]),
    ]);
    let mut c = config(leaf_spine(1, 5, 1e9, 1e9), vec![a]);
    c.apps[0].executors = Some(5);
    let wide = run_apps(&c).unwrap();
    c.max_reqs_in_flight = 1;
    let narrow = run_apps(&c).unwrap();
    // one host link limits both: same time; the narrow window's FCTs are shorter
    assert!((wide.makespan_s.unwrap() - narrow.makespan_s.unwrap()).abs() < 1e-9);
    assert!(
        narrow.fct.iter().map(|b| b.mean_s).sum::<f64>()
            < wide.fct.iter().map(|b| b.mean_s).sum::<f64>()
    );
}

#[test]
fn bad_configs_name_the_field() {
    let mut c = config(
        leaf_spine(1, 2, 1e9, 1e9),
        vec![app(vec![stage(&[1], &[], &[1.0], &[0.0], &[0.0])])],
    );
    assert!(run_apps(&c).unwrap_err().contains("apps[0].stages[0]"));
    c.apps[0].stages[0].after.clear();
    c.apps[0].stages[0].write_bytes.push(1.0);
    assert!(run_apps(&c).unwrap_err().contains("one value per task"));
    c.apps[0].stages[0].write_bytes.pop();
    c.apps[0].executors = Some(3);
    assert!(run_apps(&c).unwrap_err().contains("executors 3 > 2"));
    assert!(run_apps_json("{}")
        .unwrap_err()
        .starts_with("apps configuration"));
}

#[test]
fn blocks_in_the_initial_window_take_one_round_trip() {
    let a = app(vec![
        stage(&[], &[], &[0.0; 2], &[1e4; 2], &[0.0; 2]),
        stage(&[0], &[0], &[0.0; 2], &[0.0; 2], &[2e4; 2]),
    ]);
    let mut c = config(
        TopologySpec::LeafSpine {
            leaves: 1,
            hosts_per_leaf: 2,
            spines: 1,
            host_bytes_per_s: 1e6,
            uplink_bytes_per_s: 1e6,
            host_delay_s: 1e-3,
            uplink_delay_s: 0.0,
        },
        vec![a],
    );
    c.initial_window_bytes = 14480.0;
    let r = run_apps(&c).unwrap();
    // each reducer fetches one 1e4 B block from the other host: 2 × 2 ms + 1e4 / 1e6 s
    assert_eq!(r.initial_window_fetches, 2);
    let host_up = r.tiers.iter().find(|t| t.name == "host→leaf").unwrap();
    assert!((host_up.carried_bytes - 2e4).abs() < 1e-6);
    assert!(
        (r.makespan_s.unwrap() - 0.014).abs() < 1e-12,
        "{:?}",
        r.makespan_s
    );
    c.initial_window_bytes = 0.0;
    let flows = run_apps(&c).unwrap();
    assert_eq!(flows.initial_window_fetches, 0);
    assert!((flows.makespan_s.unwrap() - 0.014).abs() < 1e-12);
}

fn tcp(cc: Cc, discipline: Discipline) -> TcpModel {
    serde_json::from_value(serde_json::json!({"cc": cc, "discipline": discipline})).unwrap()
}

fn two_hosts_with_delay() -> TopologySpec {
    TopologySpec::LeafSpine {
        leaves: 1,
        hosts_per_leaf: 2,
        spines: 1,
        host_bytes_per_s: 1.25e9,
        uplink_bytes_per_s: 1.25e9,
        host_delay_s: 25e-6,
        uplink_delay_s: 0.0,
    }
}

#[test]
fn tcp_model_scales_the_solver_capacity_by_the_probe_efficiency() {
    // the two-host shuffle of 0.5e9 B each way: the transfer takes bytes / (capacity × efficiency)
    let a = || {
        app(vec![
            stage(&[], &[], &[1.0, 1.0], &[1e9, 1e9], &[0.0, 0.0]),
            stage(&[0], &[0], &[0.0, 0.0], &[0.0, 0.0], &[1e9, 1e9]),
        ])
    };
    let mut c = config(two_hosts_with_delay(), vec![a()]);
    let plain = run_apps(&c).unwrap();
    assert!(plain.tcp_links.is_none());
    let prop = 2.0 * 25e-6;
    assert!((plain.makespan_s.unwrap() - (1.0 + 0.5e9 / 1.25e9 + 2.0 * prop)).abs() < 1e-9);
    for (cc, disc) in [
        (Cc::Reno, Discipline::Droptail),
        (Cc::Cubic, Discipline::Droptail),
        (Cc::Dctcp, Discipline::Step),
    ] {
        c.tcp = Some(tcp(cc, disc));
        let r = run_apps(&c).unwrap();
        let links = r.tcp_links.as_ref().unwrap();
        assert_eq!(links.len(), 1, "one link class");
        let k = links[0];
        assert!((k.base_rtt_s - 2.0 * prop).abs() < 1e-12);
        assert!(k.efficiency > 0.5 && k.efficiency <= 1.0, "{cc:?}: {k:?}");
        // the request and the flow start on idle links: no standing queue in their delay
        let want = 1.0 + 0.5e9 / (1.25e9 * k.efficiency) + 2.0 * prop;
        assert!(
            (r.makespan_s.unwrap() - want).abs() < 1e-9,
            "{cc:?}: {:?} vs {want}",
            r.makespan_s
        );
    }
    // reno's halvings with a small buffer leave the link under-filled
    c.tcp = Some(TcpModel {
        queue_packets: 4.0,
        ..tcp(Cc::Reno, Discipline::Droptail)
    });
    let r = run_apps(&c).unwrap();
    assert!(r.tcp_links.unwrap()[0].efficiency < 0.99);
    assert!(r.makespan_s.unwrap() > plain.makespan_s.unwrap() + 1e-3);
}

#[test]
fn tcp_model_adds_the_standing_queue_of_saturated_links_to_small_fetches() {
    // one application shuffles 4e9 B each way between the two hosts (both directions saturated
    // for 3.2 s); a second one, arriving at 1 s, fetches one initial-window block each way: its
    // data meets the standing queues of the sender's uplink and the receiver's downlink
    // (cubic through a droptail FIFO: large; DCTCP through step marking: small)
    let big = AppSpec {
        executors: Some(2),
        ..app(vec![
            stage(&[], &[], &[0.0, 0.0], &[4e9, 4e9], &[0.0, 0.0]),
            stage(&[0], &[0], &[0.0, 0.0], &[0.0, 0.0], &[8e9, 8e9]),
        ])
    };
    let small = AppSpec {
        executors: Some(2),
        arrival_s: 1.0,
        ..app(vec![
            stage(&[], &[], &[0.0, 0.0], &[1e4, 1e4], &[0.0, 0.0]),
            stage(&[0], &[0], &[0.0, 0.0], &[0.0, 0.0], &[2e4, 2e4]),
        ])
    };
    let mut c = config(two_hosts_with_delay(), vec![big, small]);
    c.cores_per_host = 2;
    c.initial_window_bytes = 14480.0;
    let small_time = |c: &AppsConfig| {
        let r = run_apps(c).unwrap();
        assert_eq!(r.initial_window_fetches, 2);
        (r.apps[1].job_time_s.unwrap(), r.tcp_links)
    };
    let (plain, _) = small_time(&c);
    let prop = 2.0 * 25e-6;
    assert!(
        (plain - (2.0 * prop + 1e4 / 1.25e9)).abs() < 1e-9,
        "{plain}"
    );
    c.tcp = Some(tcp(Cc::Cubic, Discipline::Droptail));
    let (cubic, links) = small_time(&c);
    let q = links.unwrap()[0].queue_delay_s;
    assert!(q > 10e-6, "{q}");
    assert!(
        (cubic - (plain + 2.0 * q)).abs() < 1e-9,
        "{cubic} vs {plain} + 2 × {q}"
    );
    c.tcp = Some(tcp(Cc::Dctcp, Discipline::Step));
    let (dctcp, links) = small_time(&c);
    let qd = links.unwrap()[0].queue_delay_s;
    assert!(qd < q / 2.0, "{qd} vs {q}");
    assert!(dctcp < cubic);
}

#[test]
fn tcp_model_errors_name_the_field() {
    let mut c = config(
        two_hosts_with_delay(),
        vec![app(vec![stage(&[], &[], &[1.0], &[0.0], &[0.0])])],
    );
    c.tcp = Some(tcp(Cc::Dctcp, Discipline::Droptail));
    assert!(run_apps(&c).unwrap_err().contains("tcp.discipline"));
    c.tcp = Some(TcpModel {
        queue_packets: 0.0,
        ..tcp(Cc::Cubic, Discipline::Droptail)
    });
    assert!(run_apps(&c).unwrap_err().contains("tcp.queue_packets"));
}
