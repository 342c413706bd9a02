//! The applications engine's packet mode (`mode = "packet"`), on cases the fabric's packet mode
//! was checked on against ns-3 (`packet_tests.rs`, `docs/results/sim-vs-ns3/packet-mode.md`).

use super::run_apps;
use crate::apps::{AppSpec, AppsConfig, AppsResult, Mode, StageSpec};

fn cfg(json: &str) -> AppsConfig {
    serde_json::from_str(json).unwrap()
}

fn run(c: &AppsConfig) -> AppsResult {
    let r = run_apps(c).unwrap();
    assert_eq!(
        r.packet.is_some(),
        c.mode == Mode::Packet,
        "the result says its mode"
    );
    r
}

fn job_times(r: &AppsResult) -> Vec<f64> {
    r.apps.iter().map(|a| a.job_time_s.unwrap()).collect()
}

/// Two applications on disjoint hosts of a 2 x 4 leaf-spine at 1:1 (10 Gbit/s hosts, 1 µs
/// links): two maps writing 10 MB each, two reducers each fetching one remote block; every host
/// link carries one fetch and the uplinks are half used, so nothing is shared.
fn two_apps(mode: &str, cc: &str) -> AppsConfig {
    let discipline = if cc == "dctcp" { "step" } else { "droptail" };
    let app = r#"{"name": "A", "executors": 2, "stages": [
            {"compute_s": [0.05, 0.05], "write_bytes": [1e7, 1e7], "read_bytes": [0, 0]},
            {"after": [0], "reads_from": [0], "compute_s": [0.02, 0.02],
             "write_bytes": [0, 0], "read_bytes": [2e7, 2e7]}]}"#;
    cfg(&format!(
        r#"{{"topology": {{"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 4, "spines": 1,
             "host_bytes_per_s": 1.25e9, "uplink_bytes_per_s": 5e9,
             "host_delay_s": 1e-6, "uplink_delay_s": 1e-6}},
            "apps": [{app}, {app}],
            "tcp": {{"cc": "{cc}", "discipline": "{discipline}", "queue_packets": 100,
                     "mark_packets": 20, "ecn": false}},
            "seed": 1, "mode": "{mode}"}}"#
    ))
}

#[test]
fn uncongested_applications_take_the_max_min_times_in_packet_mode() {
    for cc in ["cubic", "dctcp"] {
        let (fluid, packet) = (run(&two_apps("maxmin", cc)), run(&two_apps("packet", cc)));
        let p = packet.packet.as_ref().unwrap();
        assert_eq!((p.links_simulated, p.timeouts, p.drops), (0, 0, 0), "{p:?}");
        assert_eq!(p.flows, 4);
        // the packet level adds the headers (1514 wire bytes per 1448 of payload: +4.6 % on an
        // 8 ms transfer) and slow start (a few 4-µs round trips): 0.37 ms of a 78 ms job
        for (f, q) in job_times(&fluid).iter().zip(job_times(&packet)) {
            assert!(q >= *f - 1e-9 && (q - f) / f < 0.01, "{cc}: {f} vs {q}");
        }
        assert_eq!(
            (fluid.fct.len(), packet.fct.len(), packet.fct[0].count),
            (1, 1, 4)
        );
        let (mf, mp) = (fluid.fct[0].mean_s, packet.fct[0].mean_s);
        assert!(
            mp >= mf && (mp - mf) / mf < 0.06,
            "{cc}: mean FCT {mf} vs {mp}"
        );
        // the rest of the result is the max-min run's
        assert_eq!(fluid.remote_fetches, packet.remote_fetches);
        assert_eq!(fluid.tiers.len(), packet.tiers.len());
    }
}

/// An incast stage: 33 map tasks of 1 MB on a 5 x 8 leaf-spine (1 Gbit/s hosts, 4 Gbit/s
/// uplinks, 10 µs links, 100-packet ports), one reducer reading all of them at once: 32 remote
/// senders into one host link, the fabric's ns-3-checked incast (`packet_tests.rs`).
fn incast(mode: &str, cc: &str, seed: u64) -> AppsConfig {
    let discipline = if cc == "dctcp" { "step" } else { "droptail" };
    let mut c = cfg(&format!(
        r#"{{"topology": {{"kind": "leaf_spine", "leaves": 5, "hosts_per_leaf": 8, "spines": 1,
             "host_bytes_per_s": 125e6, "uplink_bytes_per_s": 500e6,
             "host_delay_s": 1e-5, "uplink_delay_s": 1e-5}},
            "apps": [],
            "tcp": {{"cc": "{cc}", "discipline": "{discipline}", "queue_packets": 100,
                     "mark_packets": 20, "ecn": false}},
            "max_bytes_in_flight": 1e15, "seed": {seed}, "mode": "{mode}"}}"#
    ));
    let n = 33;
    c.apps.push(AppSpec {
        name: "incast".into(),
        executors: Some(n),
        placement: crate::apps::Placement::Pack,
        arrival_s: 0.0,
        tail_s: 0.0,
        stages: vec![
            StageSpec {
                id: 0,
                after: vec![],
                reads_from: vec![],
                delay_s: 0.0,
                compute_s: vec![0.0; n as usize],
                write_bytes: vec![1e6; n as usize],
                read_bytes: vec![0.0; n as usize],
            },
            StageSpec {
                id: 1,
                after: vec![0],
                reads_from: vec![0],
                delay_s: 0.0,
                compute_s: vec![0.0],
                write_bytes: vec![0.0],
                read_bytes: vec![f64::from(n) * 1e6],
            },
        ],
    });
    c
}

#[test]
fn an_incast_stage_ends_earlier_with_dctcp_than_with_cubic_as_in_ns3() {
    // ns-3 (32 senders x 1 MB into one 1 Gbit/s port): Cubic 0.3255 s mean FCT, DCTCP 0.2336 s;
    // the reducer waits for its last block, so the stage ends with the slowest
    for seed in [1, 2] {
        let (cubic, dctcp) = (
            run(&incast("packet", "cubic", seed)),
            run(&incast("packet", "dctcp", seed)),
        );
        assert_eq!(cubic.remote_fetches, 32);
        let (c, d) = (job_times(&cubic)[0], job_times(&dctcp)[0]);
        assert!(d < c, "seed {seed}: dctcp {d} cubic {c}");
        assert!(cubic.packet.as_ref().unwrap().timeouts > 0);
        // the stage ends with its last fetch's packet-level delivery
        let last = cubic.apps[0].stages[1].end_s;
        assert!((last - c).abs() < 1e-12);
    }
    // max-min cannot tell them apart: 32 MB at the port's rate either way (the [tcp]
    // correction's standing queue differs by well under a millisecond)
    let (c, d) = (
        job_times(&run(&incast("maxmin", "cubic", 1)))[0],
        job_times(&run(&incast("maxmin", "dctcp", 1)))[0],
    );
    assert!((c - d).abs() / d < 0.01, "{c} {d}");
    assert!((d - 0.27).abs() < 0.02, "{d}");
}

#[test]
fn the_packet_mode_needs_a_tcp_model_and_is_deterministic() {
    let mut c = incast("packet", "dctcp", 1);
    c.tcp = None;
    let err = run_apps(&c).unwrap_err();
    assert!(err.starts_with("mode: 'packet' needs a tcp model"), "{err}");
    let c = incast("packet", "cubic", 3);
    let (a, b) = (run(&c), run(&c));
    assert_eq!(job_times(&a), job_times(&b));
    assert_eq!(a.packet.unwrap().events, b.packet.unwrap().events);
}

/// An all-to-all of mostly initial-window blocks on the 2 x 4 leaf-spine at 1:1 (10 Gbit/s
/// hosts, 1 µs links, 100-packet ports): 64 map tasks on 8 one-core hosts, `big` of them
/// writing 1 MB and the rest 8 kB; 8 reducers, one a host, each fetching every map's output
/// (5 requests in flight). The max-min run gives each 8 kB block one round trip whatever the
/// load, so its requests follow each other faster than any link could carry them.
fn iw_all_to_all(mode: &str) -> AppsConfig {
    let mut c = two_apps(mode, "cubic");
    let maps = 64usize;
    let big = 8;
    let write: Vec<f64> = (0..maps)
        .map(|m| if m % (maps / big) == 0 { 1e6 } else { 8e3 })
        .collect();
    let total: f64 = write.iter().sum();
    c.apps = vec![AppSpec {
        name: "iw".into(),
        executors: Some(8),
        placement: crate::apps::Placement::Pack,
        arrival_s: 0.0,
        tail_s: 0.0,
        stages: vec![
            StageSpec {
                id: 0,
                after: vec![],
                reads_from: vec![],
                delay_s: 0.0,
                compute_s: vec![1e-3; maps],
                write_bytes: write,
                read_bytes: vec![0.0; maps],
            },
            StageSpec {
                id: 1,
                after: vec![0],
                reads_from: vec![0],
                delay_s: 0.0,
                compute_s: vec![0.0; 8],
                write_bytes: vec![0.0; 8],
                read_bytes: vec![total; 8],
            },
        ],
    }];
    c.cores_per_host = 1;
    c.max_reqs_in_flight = 5;
    c
}

#[test]
fn initial_window_blocks_are_paced_by_the_links_at_packet_level() {
    // replayed at the max-min run's start times, the blocks' requests reached the map hosts'
    // own links as bursts of initial windows: 1,106 drops and 53 retransmission timeouts there,
    // the job 0.62 s against max-min's 0.053 s. Paced by each reducer's link and queued, not
    // dropped, at the sender, nothing times out there.
    let (fluid, packet) = (run(&iw_all_to_all("maxmin")), run(&iw_all_to_all("packet")));
    assert!(fluid.initial_window_fetches > 300);
    let p = packet.packet.as_ref().unwrap();
    let senders = p.tiers.iter().find(|t| t.tier == "host→leaf").unwrap();
    assert_eq!((senders.drops, senders.timeouts), (0, 0), "{p:?}");
    // a reducer's freed request slots take its next blocks whichever fetch ends first, so the
    // slow 1 MB blocks gather in its slots: four of them in slow start at once fill its link,
    // and an 8 kB block joining them loses its segments and its tail loss probe (one timeout)
    assert!(p.timeouts <= 1, "{p:?}");
    // every reducer's link (the request loop's) is simulated
    let receivers = p.tiers.iter().find(|t| t.tier == "leaf→host").unwrap();
    assert_eq!(receivers.links_simulated, 8, "{p:?}");
    // at 1:1 only the blocks' own links load: the job within 5 % of max-min (0.0529 s) but for
    // that timeout's 200 ms
    let (f, q) = (job_times(&fluid)[0], job_times(&packet)[0]);
    let timer = 0.2 * p.timeouts as f64;
    assert!(
        q >= f - 1e-9 && (q - timer - f) / f < 0.05,
        "max-min {f} s, packet {q} s"
    );
}

/// A shuffle of 100 kB blocks on the 2 x 4 leaf-spine at 4:1 (10 Gbit/s hosts and uplinks, 1 µs
/// links, 100-packet ports): 64 map tasks on 8 one-core hosts, 8 reducers, one a host, each
/// fetching one block of every map (56 over the network, 5 requests in flight). The fetches
/// between the two leaves are held back at the spine, not on their reducers' links.
fn loops_at_4_to_1(cc: &str, passes: Option<u32>) -> AppsResult {
    loops_at_4_to_1_seed(cc, passes, None)
}

/// The configuration of [`loops_at_4_to_1`] under `cc` (the tests' seed).
fn loops_config(cc: &str) -> AppsConfig {
    let mut c = iw_all_to_all("packet");
    c.tcp = two_apps("packet", cc).tcp;
    let maps = c.apps[0].stages[0].write_bytes.len();
    c.apps[0].stages[0].write_bytes = vec![8e5; maps];
    c.apps[0].stages[1].read_bytes = vec![1e5 * maps as f64; 8];
    c.topology = cfg(
        r#"{"topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 4,
             "spines": 1, "host_bytes_per_s": 1.25e9, "uplink_bytes_per_s": 1.25e9,
             "host_delay_s": 1e-6, "uplink_delay_s": 1e-6}, "apps": []}"#,
    )
    .topology;
    c
}

/// [`loops_at_4_to_1`] with the run's seed `seed` (the tests' own when None).
fn loops_at_4_to_1_seed(cc: &str, passes: Option<u32>, seed: Option<u64>) -> AppsResult {
    let mut c = loops_config(cc);
    if let Some(s) = seed {
        c.seed = s;
    }
    crate::packet::PASSES_CAP.with(|p| p.set(passes));
    let r = run(&c);
    crate::packet::PASSES_CAP.with(|p| p.set(None));
    r
}

#[test]
fn a_request_slot_stays_held_while_its_block_waits_at_the_spine_as_in_ns3() {
    // ns-3 (benchmarks/ns3/two_tier.cc --blocks=8 --reqsInFlight=5 --orderSeed=1, Cubic,
    // droptail, its hosts as Linux's and jittered in order, RACK's reordering and PRR as Linux's:
    // benchmarks/sim_vs_ns3_loops.py's arguments as in docs/results/sim-vs-ns3/loops.md, top, at
    // `44e395d`): mean FCT 3.06 ms over the 442 of 448 fetches whose connection's SYN was not lost
    // (ns-3 retries a SYN after 3 s; the model has no handshake), 5 retransmission timeouts (4.37
    // ms and 8 before ns-3 was given Linux's RACK reordering and PRR's floor). This seed: 6.57 ms
    // with the open loop (13 timeouts), 4.13 ms closed (8); 10.5 ms (22) and 2.60 ms (5) before
    // the model's RACK reordering timer: the pass the loops stop at moves it by tens of percent
    // (docs/results/sim-vs-ns3/loops.md)
    let ns3 = 0.00306;
    // the open loop (one pass) releases a reducer's next request when its own link delivers a
    // block, though that block still waits at the spine: the spine's ports get the reducers' rate
    // (no more than each reducer's five requests at once: its request slots, kept there too)
    let open = loops_at_4_to_1("cubic", Some(1));
    let closed = loops_at_4_to_1("cubic", None);
    let (o, c) = (
        open.packet.as_ref().unwrap(),
        closed.packet.as_ref().unwrap(),
    );
    assert_eq!(o.passes, 1);
    assert!(
        c.passes > 1 && c.passes <= crate::packet::LOOP_PASSES,
        "{c:?}"
    );
    let (mo, mc) = (open.fct[0].mean_s, closed.fct[0].mean_s);
    assert!(mo > 2.0 * ns3, "the open loop's mean FCT {mo} s");
    // closed: under 2.5x ns-3's, and at most half the open loop's distance from it
    assert!(
        mc < 2.5 * ns3 && (mc - ns3).abs() < 0.5 * (mo - ns3).abs(),
        "closed over the whole path {mc} s, open {mo} s, ns-3 {ns3} s"
    );
    assert!(
        c.timeouts < o.timeouts,
        "timeouts: open {}, closed {}",
        o.timeouts,
        c.timeouts
    );
}

#[test]
fn every_pass_that_could_have_been_kept_gives_its_job_time() {
    // this seed's loops stop after several passes, every one from the second could be kept
    const SEED: u64 = 1;
    let closed = loops_at_4_to_1_seed("cubic", None, Some(SEED));
    let c = closed.packet.as_ref().unwrap();
    let times = &c.pass_job_times;
    assert!(times.len() > 1, "{c:?}");
    let passes: Vec<u32> = times.iter().map(|t| t.pass).collect();
    assert!(passes.windows(2).all(|w| w[0] < w[1]), "{passes:?}");
    assert_eq!(
        passes,
        (2..=c.passes).collect::<Vec<_>>(),
        "of {}",
        c.passes
    );
    // the kept pass's is the result's own
    let kept = times
        .iter()
        .find(|t| t.pass == c.pass_used)
        .expect("the kept pass");
    let mean = job_times(&closed).iter().sum::<f64>() / closed.apps.len() as f64;
    assert!(
        (kept.mean_job_time_s - mean).abs() < 1e-12,
        "{kept:?} vs {mean}"
    );
    // it is the one whose slots were held nearest, in the mean, what its links found
    assert_eq!(kept.hold_gap_s, c.pass_hold_gap_s);
    assert!(
        times
            .iter()
            .all(|t| kept.hold_gap_s.abs() <= t.hold_gap_s.abs()),
        "{times:?}"
    );
    assert!(
        times.iter().any(|t| t.hold_gap_s != kept.hold_gap_s),
        "{times:?}"
    );
    // each candidate replayed with its own fetches: not every one the kept one's time
    assert!(
        times
            .iter()
            .any(|t| (t.mean_job_time_s - kept.mean_job_time_s).abs() > 1e-9),
        "{times:?}"
    );
    // the open loop is one pass: nothing to choose from
    let open = loops_at_4_to_1("cubic", Some(1));
    assert!(open.packet.as_ref().unwrap().pass_job_times.is_empty());
}

/// The loops with DCTCP and Linux's receivers (as ns-3's `--linuxAcks`: one ACK for two segments,
/// quick ACKs at a flow's start), their TCP model then set by `set`: the mean and p99 FCT.
fn dctcp_loops_linux_acks(set: impl FnOnce(&mut crate::tcpmodel::TcpModel)) -> (f64, f64) {
    let r = loops_linux_acks("dctcp", set);
    (r.fct[0].mean_s, r.fct[0].p99_s)
}

/// The loops under `cc` with Linux's receivers (see [`dctcp_loops_linux_acks`]), their TCP model
/// then set by `set`.
fn loops_linux_acks(cc: &str, set: impl FnOnce(&mut crate::tcpmodel::TcpModel)) -> AppsResult {
    let mut c = loops_config(cc);
    let t = c.tcp.as_mut().unwrap();
    t.delayed_ack = Some(crate::linksim::DelayedAck {
        timeout_s: 0.04,
        quick_acks: 5,
        idle_quick_acks: 16,
    });
    set(t);
    run(&c)
}

#[test]
fn dctcp_s_acks_behind_the_other_uplink_s_data_lengthen_its_loops_tail_short_of_ns3_s() {
    // the loops above with DCTCP: ns-3's mean FCT 1.16 ms and p99 3.7 ms over ten order seeds
    // (docs/results/sim-vs-ns3/loops.md), whose ACKs wait behind the other direction's data at
    // the leaf-spine ports; with them served first (two_tier.cc --ackPrio) 0.96 and 2.2 ms. The
    // model's ACKs crossing no queue: 1.00 and 1.68 ms here; queued behind that data, with
    // Linux's receivers as ns-3's (`--linuxAcks`: one ACK for two segments, quick ACKs at a
    // flow's start), 1.00 and 2.06 ms. (1.11 and 2.64 ms while a host's fetches could each send
    // at its link's rate at once, more than the link carries.)
    let (ns3_mean, ns3_p99) = (1.16e-3, 3.7e-3);
    let free = dctcp_loops_linux_acks(|_| ());
    let queued = dctcp_loops_linux_acks(|t| t.queued_acks = true);
    assert!(
        free.0 < 0.9 * ns3_mean && free.1 < 0.5 * ns3_p99,
        "{free:?}"
    );
    assert!((queued.0 - ns3_mean).abs() < 0.2 * ns3_mean, "{queued:?}");
    assert!(
        queued.1 > 1.15 * free.1 && queued.1 < 0.7 * ns3_p99,
        "{queued:?} {free:?}"
    );
}

#[test]
fn dctcp_s_acks_at_the_queues_of_their_way_back_lengthen_its_loops_tail_toward_ns3_s() {
    // the loops above with DCTCP and Linux's receivers (ns-3: mean 1.16 ms, p99 3.7 ms), each
    // fetch's ACKs waiting at the links of its own way back (the other leaf's uplink among them,
    // where ns-3's wait) behind what their simulations sent, in this pass where simulated before,
    // else in the pass before: 1.06 and 2.74 ms (crossing no queue 0.98 and 1.68 ms; queued at the
    // cable's other direction, the spine's port down to the sending leaf, which builds no queue,
    // 1.00 and 2.06 ms: the test above; over ten seeds the p99 is 9-12 % short of ns-3's:
    // docs/results/sim-vs-ns3/loops.md)
    let (ns3_mean, ns3_p99) = (1.16e-3, 3.7e-3);
    let free = dctcp_loops_linux_acks(|_| ());
    let path = dctcp_loops_linux_acks(|t| t.path_acks = true);
    assert!((path.0 - ns3_mean).abs() < 0.2 * ns3_mean, "{path:?}");
    assert!(
        path.1 > 1.5 * free.1 && path.1 > 0.7 * ns3_p99 && path.1 < 1.1 * ns3_p99,
        "{path:?} {free:?}"
    );
    // one way for the ACKs: not with the cable's twin
    let mut c = loops_config("dctcp");
    let t = c.tcp.as_mut().unwrap();
    (t.path_acks, t.queued_acks) = (true, true);
    let e = run_apps(&c).unwrap_err();
    assert!(e.starts_with("tcp.path_acks"), "{e}");
}

/// The loops check of `benchmarks/sim_vs_ns3_loops.py` (its `sim_config`): 2 leaves x `hosts`,
/// one spine, 10 Gbit/s host links, uplinks of a quarter of a leaf's hosts' (4:1), 8 maps a host, one reducer a host fetching `block` bytes of
/// every map, 5 requests in flight, Linux's receivers (`--sim-delayed-ack 5 16`), its seed `seed`.
fn loops_check(cc: &str, hosts: u32, block: f64, seed: u64) -> AppsConfig {
    let n = 2 * hosts as usize;
    let maps = 8 * n;
    let list = |v: f64, k: usize| format!("[{}]", vec![format!("{v:e}"); k].join(","));
    let discipline = if cc == "dctcp" { "step" } else { "droptail" };
    cfg(&format!(
        r#"{{"topology": {{"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": {hosts},
             "spines": 1, "host_bytes_per_s": 1.25e9, "uplink_bytes_per_s": {up:e},
             "host_delay_s": 1e-6, "uplink_delay_s": 1e-6}},
            "apps": [{{"name": "loops", "executors": {n}, "placement": "pack", "stages": [
              {{"compute_s": {c0}, "write_bytes": {w0}, "read_bytes": {r0}}},
              {{"after": [0], "reads_from": [0], "compute_s": {c1}, "write_bytes": {w1},
                "read_bytes": {r1}}}]}}],
            "cores_per_host": 1, "max_reqs_in_flight": 5, "fct_bucket_edges_bytes": [],
            "tcp": {{"cc": "{cc}", "discipline": "{discipline}", "queue_packets": 100,
                     "mark_packets": 20, "ecn": false,
                     "delayed_ack": {{"timeout_s": 0.04, "quick_acks": 5, "idle_quick_acks": 16}}}},
            "seed": {seed}, "mode": "packet"}}"#,
        up = 1.25e9 * hosts as f64 / 4.0,
        c0 = list(1e-6, maps),
        w0 = list(block * n as f64, maps),
        r0 = list(0.0, maps),
        c1 = list(0.0, n),
        w1 = list(0.0, n),
        r1 = list(block * maps as f64, n),
    ))
}

#[test]
fn with_path_acks_the_loops_cubic_takes_about_ns3_s_timeouts() {
    // the loops check with Cubic at 2 x 8 hosts, 0.1 MB blocks (ns-3: 28.1 timeouts a run over ten
    // order seeds, docs/results/sim-vs-ns3/loops.md), ACKs at their way back: timeouts hold their
    // request slots whole the next pass (as many as the mean of what a pass held and found), then
    // the bisection goes on: 36, 35, 34 timeouts in seeds 1-3 (37 a run over ten seeds: more than
    // ns-3's, the mean FCT +23 %); with the timeout's delay halved in the bisection over the next
    // passes, the slots stayed held long after it: 21, 17, 17 (19 a run, the mean FCT -36 %)
    let ns3 = 28.1;
    let mut timeouts = 0.0;
    for seed in 1..=3 {
        let mut c = loops_check("cubic", 8, 1e5, seed);
        c.tcp.as_mut().unwrap().path_acks = true;
        timeouts += run(&c).packet.unwrap().timeouts as f64 / 3.0;
    }
    assert!(
        timeouts > 0.8 * ns3 && timeouts < 1.6 * ns3,
        "{timeouts} a run"
    );
}
